#!/usr/bin/env bash
# Checks that the parts compile on their own, without warnings: the durable core alone (no HTTP,
# SQL, CLI, model or protocol crate in its build), and the facade with each feature alone, so a
# feature that needs another without enabling it fails here rather than in a user's build.
# `.ci/run` calls this before the tests; it compiles in check mode only, and packages the
# published crates.
set -euo pipefail
cd "$(dirname "$0")/.."

features=(sqlite postgres postgres-tls schema-validation sessions openai oauth2 cli http mcp metrics otel otel-grpc testkit failpoints)

check() {
    echo "check-parts: $1"
    shift
    local output
    if ! output=$(cargo check --locked --message-format short "$@" 2>&1); then
        echo "$output" >&2
        exit 1
    fi
    if grep -E '^[^ ]+: warning' <<<"$output" >&2; then
        echo "check-parts: the build above has warnings" >&2
        exit 1
    fi
}

check "eve-runtime alone" -p eve-runtime --no-default-features
for feature in "${features[@]}"; do
    check "eve-tools with \`$feature\` alone" -p eve-tools --no-default-features --features "$feature"
done

# The crates a user depends on package as they would be published: metadata, license files, no
# dependency that only a path names (dev-dependencies on eve-tools are path-only for that reason).
# Without verification, which builds every crate again from its archive (three minutes here);
# `cargo package` without `--no-verify` does that.
echo "check-parts: the published crates package"
published=(eve-macros eve-runtime eve-sqlite eve-postgres eve-sessions eve-host eve-auth eve-tools)
cargo package --locked --no-verify --allow-dirty "${published[@]/#/-p=}" >/dev/null 2>&1 || {
    cargo package --locked --no-verify --allow-dirty "${published[@]/#/-p=}" >&2
    exit 1
}
rm -rf target/package
