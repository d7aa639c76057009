#!/usr/bin/env bash
# Runs every test of the workspace: unit, integration, crash, compile-fail ui tests and doctests
# (the README's test command, and what `.ci/run` calls). The tests set up what they need
# themselves: a throwaway PostgreSQL cluster (scripts/postgres.sh), the pinned MCP conformance
# suite with Node 22 (scripts/mcp-conformance.sh), Chromium for the inspector (scripts/chromium.sh).
#
# With cargo-nextest installed, the test binaries run side by side, each test in a process of its
# own, which takes a third less time on two cores than running the binaries one after another;
# doctests, which nextest does not run, follow with cargo test. Without it, cargo test runs them
# all. Arguments go to the test runner (`scripts/test.sh -E 'binary(core)'` with nextest).
set -euo pipefail
cd "$(dirname "$0")/.."

if cargo nextest --version >/dev/null 2>&1; then
    # Of the examples, only the one a test runs (the README's main job) is linked: clippy has
    # checked the others, and linking a dozen of them takes a minute and 750 MB of `target/`.
    cargo build --locked -p eve-examples --example agent
    cargo nextest run --workspace --locked --tests "$@"
    cargo test --workspace --doc --locked
else
    echo "test: cargo-nextest is not installed, so cargo test runs the test binaries one after another" \
        "(cargo install cargo-nextest --locked runs them side by side)" >&2
    cargo test --workspace --locked "$@"
fi
