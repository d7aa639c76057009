#!/usr/bin/env bash
# Makes sure a headless browser and its WebDriver are installed, for the inspector's browser tests
# (tests/browser/inspector.rs, which runs this script), and prints their paths:
#
#   scripts/chromium.sh        # prints `CHROMIUM=/usr/bin/chromium` and `CHROMEDRIVER=/usr/bin/chromedriver`
#
# They are Debian's `chromium` and `chromium-driver`, installed when missing; CHROMIUM and
# CHROMEDRIVER in the environment name other binaries instead (see scripts/debian-tools.sh).
exec bash "$(dirname "$0")/debian-tools.sh" chromium.sh "chromium chromium-driver" \
    CHROMIUM=chromium CHROMEDRIVER=chromedriver
