#!/usr/bin/env bash
# Runs eve's peers bench: the same three shapes on eve's SQLite store and on duroxide 0.1.32 with its
# SQLite provider, back to back, and prints eve's speed-up over duroxide for each.
#
#   scripts/bench-peers.sh [ITERATIONS]    # default 5 iterations per shape and side; medians compared
#
# Shapes: 1,000 sequential steps (steps/s), 200 runs x 10 steps at once (steps/s), and a run parked
# after 1,000 steps, resumed by an event in a freshly started runtime over a copy of its database:
# from the event to the run's end, which replays its history (ms).
#
# eve's side is the `peers` bench of eve-benches (benches/peers.rs); duroxide's is the crate in
# benches/peers/duroxide, a workspace of its own with its own Cargo.lock, because duroxide's sqlx
# bundles a SQLite that cannot link beside rusqlite's in one build. Both use a 2-worker Tokio runtime
# and a fresh database file per iteration on the same disk (under target/). The script prints the
# load average before and after, and the raw single-insert commit rate eve's side measured.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
iterations="${1:-5}"
scratch="$root/target/peers-scratch"

echo "== building both sides (release)"
# Its own target directory, whatever CARGO_TARGET_DIR says: the binary is run from there below.
cargo build --release --locked --manifest-path "$root/benches/peers/duroxide/Cargo.toml" \
    --target-dir "$root/benches/peers/duroxide/target"
(cd "$root" && cargo bench --locked -p eve-benches --bench peers --no-run)

rm -rf "$scratch"
mkdir -p "$scratch"
echo "== load before: $(uptime)"
echo "== eve (SQLite store, synchronous=FULL)"
eve=$(cd "$root" && EVE_PEERS_ITERATIONS="$iterations" cargo bench --locked -p eve-benches --bench peers | grep '^RESULT ')
echo "$eve"
echo "== duroxide 0.1.32 (SQLite provider, dispatcher_min_poll_interval = 1 ms)"
duroxide=$("$root/benches/peers/duroxide/target/release/eve-peers-duroxide" "$scratch/duroxide" "$iterations" | grep '^RESULT ')
echo "$duroxide"
echo "== load after: $(uptime)"
rm -rf "$scratch"

value() { # value SIDE SHAPE: the figure a side printed for a shape
    printf '%s\n%s\n' "$eve" "$duroxide" | awk -v side="$1" -v shape="$2" '$2 == side && $3 == shape { print $4 }'
}

echo "== eve's speed-up over duroxide, same run"
printf '%-20s %14s %14s %10s\n' shape eve duroxide speed-up
for shape in sequential_1000 concurrent_200x10; do
    e=$(value eve "$shape")
    d=$(value duroxide "$shape")
    printf '%-20s %10.0f st/s %10.0f st/s %9.1fx\n' "$shape" "$e" "$d" "$(awk -v e="$e" -v d="$d" 'BEGIN { print e / d }')"
done
e=$(value eve replay_1000)
d=$(value duroxide replay_1000)
printf '%-20s %11.2f ms %11.2f ms %9.1fx\n' replay_1000 "$e" "$d" "$(awk -v e="$e" -v d="$d" 'BEGIN { print d / e }')"
echo "raw single-insert commit rate on this disk (eve's side, before/after mean): $(value eve raw_single_insert) txn/s"
