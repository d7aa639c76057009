#!/usr/bin/env bash
# Makes sure a Prometheus server and its promtool are installed, for the metrics tests
# (tests/metrics/, which run this script), and prints their paths:
#
#   scripts/prometheus.sh      # prints `PROMETHEUS=/usr/bin/prometheus` and `PROMTOOL=/usr/bin/promtool`
#
# They are Debian's `prometheus` package: the script installs it with apt-get when either is
# missing (as root, or through sudo without a password). The tests start a server of their own on
# a free loopback port with a data directory of their own, so the package's service, running or
# not, does not matter. PROMETHEUS and PROMTOOL in the environment name other binaries instead. It
# fails, saying why, when they are missing and cannot be installed (no apt-get, no root, no
# reachable Debian mirror): the tests then fail with that reason rather than skip.
set -euo pipefail

fail() {
    echo "prometheus.sh: $*" >&2
    exit 1
}

found() {
    local prometheus="${PROMETHEUS:-$(command -v prometheus || true)}"
    local promtool="${PROMTOOL:-$(command -v promtool || true)}"
    if [[ -n "$prometheus" && -x "$prometheus" && -n "$promtool" && -x "$promtool" ]]; then
        echo "PROMETHEUS=$prometheus"
        echo "PROMTOOL=$promtool"
        return 0
    fi
    return 1
}

found && exit 0
[[ -z "${PROMETHEUS:-}${PROMTOOL:-}" ]] || fail "PROMETHEUS=${PROMETHEUS:-} or PROMTOOL=${PROMTOOL:-} names no executable"
command -v apt-get >/dev/null || fail "prometheus and promtool are not installed and there is no apt-get to install them; install Prometheus, or set PROMETHEUS and PROMTOOL"
if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    fail "prometheus and promtool are not installed, and installing them needs root: run \`sudo apt-get install prometheus\`"
fi

# One install at a time: test binaries may run this script at once.
log="${TMPDIR:-/tmp}/eve-prometheus-install.log"
exec 9>"${TMPDIR:-/tmp}/eve-prometheus-install.lock"
flock 9
found && exit 0
echo "prometheus.sh: installing prometheus with apt-get (log: $log)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { "${as_root[@]}" apt-get update -q && "${as_root[@]}" apt-get install -y -q --no-install-recommends prometheus; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "apt-get could not install prometheus (is a Debian mirror reachable?); see $log"
fi
found || fail "apt-get installed prometheus, but \`prometheus\` or \`promtool\` is still not on PATH"
