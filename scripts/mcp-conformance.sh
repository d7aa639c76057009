#!/usr/bin/env bash
# Runs the official MCP conformance suite, in server mode, against eve's fixture server
# (tests/bin/mcp_conformance_server.rs): every scenario the 2026-07-28 revision requires, the
# whole active suite, then each scenario of the tasks extension. Fails on any failure that is not
# in the baseline (scripts/mcp-conformance/baseline.yaml, a reason on each line), and on a
# baseline entry that now passes. Called by `cargo test` (tests/mcp/conformance.rs), which passes the server binary:
#
#   scripts/mcp-conformance.sh target/debug/mcp-conformance-server
#
# The suite (`@modelcontextprotocol/conformance`) and the Node.js it needs (>= 22, the npm package
# `node`) are pinned in scripts/mcp-conformance/package.json and its lock file, and installed into
# scripts/mcp-conformance/node_modules (ignored by git). The install needs the npm registry; if it
# cannot be reached, this script fails and says so.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
suite="$root/scripts/mcp-conformance"
server_bin="${1:?usage: scripts/mcp-conformance.sh <path to the mcp-conformance-server binary>}"

if ! command -v npm >/dev/null; then
    echo "mcp-conformance: npm is not installed; install Node.js and npm (apt-get install npm) to run the MCP conformance suite" >&2
    exit 1
fi
if ! (cd "$suite" && npm install --no-audit --no-fund --loglevel=error >"$suite/npm-install.log" 2>&1); then
    echo "mcp-conformance: cannot install the pinned conformance suite from the npm registry (is it reachable?):" >&2
    tail -n 20 "$suite/npm-install.log" >&2
    exit 1
fi
export PATH="$suite/node_modules/.bin:$PATH"
echo "mcp-conformance: suite $(conformance --version) on node $(node --version)"

results="$suite/results"
rm -rf "$results"
mkdir -p "$results"

"$server_bin" --addr 127.0.0.1:0 >"$results/server.out" 2>"$results/server.err" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 100); do
    url="$(sed -n 's/^listening on \(http:.*\)$/\1/p' "$results/server.out")"
    [ -n "$url" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "mcp-conformance: the fixture server exited:" >&2
        cat "$results/server.err" >&2
        exit 1
    fi
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "mcp-conformance: the fixture server did not start listening within 10 s" >&2
    exit 1
fi
echo "mcp-conformance: fixture server at $url/mcp"

status=0
run() {
    local name="$1"
    shift
    if conformance server --url "$url/mcp" --expected-failures "$suite/baseline.yaml" -o "$results/$name" "$@" \
        >"$results/$name.log" 2>&1; then
        local counts
        counts="$(grep -E '^(Total: |Passed: )' "$results/$name.log" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g')"
        echo "mcp-conformance: $name: ok, failures as in the baseline ($counts checks)"
    else
        echo "mcp-conformance: $name: FAILED"
        sed -n '/=== SUMMARY ===/,$p' "$results/$name.log"
        status=1
    fi
}

run requirements-2026-07-28 --requirements 2026-07-28
# The active suite (every scenario that is neither pending nor draft, of every revision): logging,
# sampling, forms and resource subscriptions from the revisions before 2026-07-28 among them.
run active --suite active
for scenario in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal \
    tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications \
    tasks-required-task-error tasks-mrtr-composition; do
    run "$scenario" --scenario "$scenario"
done
exit "$status"
