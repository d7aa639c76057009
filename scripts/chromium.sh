#!/usr/bin/env bash
# Makes sure a headless browser and its WebDriver are installed, for the inspector's browser tests
# (tests/browser/inspector.rs, which runs this script), and prints their paths:
#
#   scripts/chromium.sh        # prints `CHROMIUM=/usr/bin/chromium` and `CHROMEDRIVER=/usr/bin/chromedriver`
#
# They are Debian's `chromium` and `chromium-driver`: the script installs both with apt-get when
# either is missing (as root, or through sudo without a password). CHROMIUM and CHROMEDRIVER in the
# environment name other binaries instead. It fails, saying why, when they are missing and cannot
# be installed (no apt-get, no root, no reachable Debian mirror): the tests then fail with that
# reason rather than skip.
set -euo pipefail

fail() {
    echo "chromium.sh: $*" >&2
    exit 1
}

found() {
    local chromium="${CHROMIUM:-$(command -v chromium || true)}"
    local driver="${CHROMEDRIVER:-$(command -v chromedriver || true)}"
    if [[ -n "$chromium" && -x "$chromium" && -n "$driver" && -x "$driver" ]]; then
        echo "CHROMIUM=$chromium"
        echo "CHROMEDRIVER=$driver"
        return 0
    fi
    return 1
}

found && exit 0
[[ -z "${CHROMIUM:-}${CHROMEDRIVER:-}" ]] || fail "CHROMIUM=${CHROMIUM:-} or CHROMEDRIVER=${CHROMEDRIVER:-} names no executable"
command -v apt-get >/dev/null || fail "chromium and chromedriver are not installed and there is no apt-get to install them; install a Chromium and its chromedriver, or set CHROMIUM and CHROMEDRIVER"
if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    fail "chromium and chromedriver are not installed, and installing them needs root: run \`sudo apt-get install chromium chromium-driver\`"
fi

# One install at a time: test binaries may run this script at once.
log="${TMPDIR:-/tmp}/eve-chromium-install.log"
exec 9>"${TMPDIR:-/tmp}/eve-chromium-install.lock"
flock 9
found && exit 0
echo "chromium.sh: installing chromium and chromium-driver with apt-get (log: $log)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { "${as_root[@]}" apt-get update -q && "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium chromium-driver; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "apt-get could not install chromium and chromium-driver (is a Debian mirror reachable?); see $log"
fi
found || fail "apt-get installed chromium and chromium-driver, but \`chromium\` or \`chromedriver\` is still not on PATH"
