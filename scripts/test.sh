#!/usr/bin/env bash
# Runs every test of the workspace: unit, integration, crash, compile-fail ui tests, doctests and
# the model check of the run core's lending (the README's test command, and what `.ci/run`
# calls). The tests set up what they need themselves: a throwaway PostgreSQL cluster
# (scripts/postgres.sh), the pinned MCP conformance suite with Node 22
# (scripts/mcp-conformance.sh), Chromium for the inspector (scripts/chromium.sh).
#
# With cargo-nextest installed, the test binaries run side by side, each test in a process of its
# own, which takes a third less time on two cores than running the binaries one after another;
# doctests, which nextest does not run, follow with cargo test. Without it, cargo test runs them
# all. Arguments go to the test runner (`scripts/test.sh -E 'binary(core)'` with nextest).
set -euo pipefail
cd "$(dirname "$0")/.."

# The model check of the run core's lending (`eve-runtime/src/run_core/lending.rs`): every
# interleaving of its threads, under loom, in a target directory of its own (the `eve_loom` cfg
# rebuilds everything), which is removed afterwards to spare the disk.
model_check() {
    RUSTFLAGS="--cfg eve_loom" CARGO_TARGET_DIR=target/loom CARGO_PROFILE_DEV_DEBUG=false \
        cargo test --locked -p eve-runtime --lib --no-default-features run_core::lending
    rm -rf target/loom
}

if cargo nextest --version >/dev/null 2>&1; then
    # Of the examples, only the one a test runs (the README's main job) is linked: clippy has
    # checked the others, and linking a dozen of them takes a minute and 750 MB of `target/`.
    cargo build --locked -p eve-examples --example agent
    cargo test --no-run --workspace --locked --tests
    # The model check builds while the tests run, much of which waits on timers, servers and
    # child processes rather than on the CPU; its output follows theirs.
    model_log="$(mktemp)"
    model_check >"$model_log" 2>&1 &
    model=$!
    trap 'kill "$model" 2>/dev/null || true; rm -f "$model_log"' EXIT
    cargo nextest run --workspace --locked --tests "$@"
    cargo test --workspace --doc --locked
    if ! wait "$model"; then
        cat "$model_log" >&2
        echo "test: the model check of the run core's lending failed (above)" >&2
        exit 1
    fi
    cat "$model_log"
else
    echo "test: cargo-nextest is not installed, so cargo test runs the test binaries one after another" \
        "(cargo install cargo-nextest --locked runs them side by side)" >&2
    cargo test --workspace --locked "$@"
    model_check
fi
