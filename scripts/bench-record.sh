#!/usr/bin/env bash
# The run of record (benches/RESULTS.md): the step, SQLite, replay/resume and session benches, then
# the peers bench (eve and duroxide back to back), in one sequence, with the time and load average
# before, between and after. Every ratio in RESULTS.md comes from one run of this script.
#
#   scripts/bench-record.sh 2>&1 | tee target/record.log
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
echo "== start $(date -u +%FT%TZ) $(uptime)"
# The in-memory step first: run after the SQLite benches, it shared the machine with their writeback
# and read 0.1-0.2 µs above the alternated rounds taken just before and after (run BM).
cargo bench --locked -p eve-benches --bench steps
cargo bench --locked -p eve-benches --bench sqlite --bench resume --bench sessions
echo "== between $(date -u +%FT%TZ) $(uptime)"
scripts/bench-peers.sh 3
echo "== end $(date -u +%FT%TZ) $(uptime)"
