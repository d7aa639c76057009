#!/usr/bin/env bash
# Makes sure some commands a test needs are installed from Debian packages, and prints their
# paths, one `VARIABLE=path` line each:
#
#   scripts/debian-tools.sh WHO "PACKAGE..." VARIABLE=command...
#   scripts/debian-tools.sh prometheus.sh "prometheus" PROMETHEUS=prometheus PROMTOOL=promtool
#
# A variable set in the environment names another binary instead of the command. When a command
# is missing, the packages are installed with apt-get (as root, or through sudo without a
# password), one install at a time. It fails, saying why (as WHO), when they are missing and
# cannot be installed (no apt-get, no root, no reachable Debian mirror): the tests then fail with
# that reason rather than skip. scripts/chromium.sh and scripts/prometheus.sh call it.
set -euo pipefail

who=$1 packages=$2
shift 2
tools=("$@")
variables=() commands=()
for tool in "${tools[@]}"; do
    variables+=("${tool%%=*}")
    commands+=("${tool#*=}")
done

fail() {
    echo "$who: $*" >&2
    exit 1
}

# found: prints every path and succeeds when each tool is there.
found() {
    local lines=() i path
    for i in "${!variables[@]}"; do
        path="${!variables[i]:-$(command -v "${commands[i]}" || true)}"
        [[ -n "$path" && -x "$path" ]] || return 1
        lines+=("${variables[i]}=$path")
    done
    printf '%s\n' "${lines[@]}"
}

names="${commands[*]}"
found && exit 0
for variable in "${variables[@]}"; do
    [[ -z "${!variable:-}" || -x "${!variable}" ]] || fail "$variable=${!variable} names no executable"
done
command -v apt-get >/dev/null ||
    fail "${names// / and } are not installed and there is no apt-get to install them; install the Debian packages \`$packages\`, or set ${variables[*]}"
if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    fail "${names// / and } are not installed, and installing them needs root: run \`sudo apt-get install $packages\`"
fi

# One install at a time: test binaries may run this script at once.
log="${TMPDIR:-/tmp}/eve-${who%.sh}-install.log"
exec 9>"${TMPDIR:-/tmp}/eve-${who%.sh}-install.lock"
flock 9
found && exit 0
echo "$who: installing $packages with apt-get (log: $log)" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # the package names are words
if ! { "${as_root[@]}" apt-get update -q && "${as_root[@]}" apt-get install -y -q --no-install-recommends $packages; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "apt-get could not install $packages (is a Debian mirror reachable?); see $log"
fi
found || fail "apt-get installed $packages, but \`${names// /\` or \`}\` is still not on PATH"
