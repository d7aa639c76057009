#!/usr/bin/env bash
# Makes sure a Prometheus server and its promtool are installed, for the metrics tests
# (tests/metrics/, which run this script), and prints their paths:
#
#   scripts/prometheus.sh      # prints `PROMETHEUS=/usr/bin/prometheus` and `PROMTOOL=/usr/bin/promtool`
#
# They are Debian's `prometheus` package, installed when missing; PROMETHEUS and PROMTOOL in the
# environment name other binaries instead (see scripts/debian-tools.sh). The tests start a server
# of their own on a free loopback port with a data directory of their own, so the package's
# service, running or not, does not matter.
exec bash "$(dirname "$0")/debian-tools.sh" prometheus.sh "prometheus" PROMETHEUS=prometheus PROMTOOL=promtool
