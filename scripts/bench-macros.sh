#!/usr/bin/env bash
# The macros' own compile cost (issue 56): generates crates of N tools each, one written with
# eve's macros (`#[workflow_tool]` with two `#[step]`s and a durable sleep), one with the same
# functions, input structs and derives without them (`plain`, the issue's baseline), and `wired`:
# the plain crate with each tool wired by hand into a table entry that decodes its input, runs it
# and encodes its output, and a fn that makes its input schema, as a crate without a framework
# would do to offer its tools. The plain crate compiles its fns' state machines but nothing that
# decodes an input, encodes an output or makes a schema (`cargo llvm-lines`: 58,000 lines of LLVM IR
# for 100 tools, against the wired crate's 218,000); the wired one compiles what any crate that
# runs its tools compiles. They build alternately, round by round.
#
#   scripts/bench-macros.sh [TOOLS] [ROUNDS]    # defaults: 100 tools, 5 rounds
#
# Prints, for each crate, the median of the rounds for a rebuild of the library after `touch`
# (without the incremental cache: every item expanded and compiled again, as in CI or a release
# build) and for an incremental rebuild after a comment is edited, and their ratios; then the lines of each crate's expansion (`-Zunpretty=expanded`, with
# RUSTC_BOOTSTRAP as cargo-expand does) and the lines the macros add per tool. Debug builds; the
# crates depend on the same crates and share one target directory, so only their own code builds.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
tools="${1:-100}"
rounds="${2:-5}"
scratch="$root/target/macro-bench"
export CARGO_TARGET_DIR="$scratch/target"

# generate KIND: writes the crate `KIND` (eve or plain) with $tools tools.
generate() {
    local kind=$1 dir="$scratch/$1"
    # The two crates differ only in these: eve's attributes and durable sleep, or neither.
    local tool_attr="" step_attr="" retried_step_attr="" sleep="tokio::time::sleep(Duration::from_secs(1)).await;"
    if [ "$kind" = eve ]; then
        tool_attr="#[workflow_tool]" step_attr="#[step]" retried_step_attr="#[step(max_attempts = 5)]"
        sleep="sleep(Duration::from_secs(1)).await?;"
    fi
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "tools_$kind"
version = "0.1.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
eve-tools = { path = "$root/eve-tools" }
schemars = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
tokio = { version = "1", features = ["time"] }
EOF
    {
        echo "//! $tools generated tools ($kind)."
        echo "#![allow(dead_code, unused_imports)]"
        echo "use eve_tools::prelude::*;"
        echo "use std::time::Duration;"
        if [ "$kind" = wired ]; then echo "pub type Wired = std::pin::Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, String>> + Send>>;"; fi
        for i in $(seq 1 "$tools"); do
            cat <<EOF

/// What tool $i takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Input$i {
    /// Whom it is for.
    pub name: String,
    /// How many.
    pub count: u32,
}
EOF
            cat <<EOF

/// Tool $i: two steps around a sleep.
$tool_attr
pub async fn tool_$i(input: Input$i) -> Result<String, ToolError> {
    let first = first_$i(input.name.clone()).await?;
    $sleep
    let second = second_$i(first, input.count).await?;
    Ok(second)
}

$step_attr
async fn first_$i(name: String) -> Result<String, StepError> {
    Ok(format!("hello, {name}"))
}

$retried_step_attr
async fn second_$i(greeting: String, count: u32) -> Result<String, StepError> {
    Ok(format!("{greeting} x{count}"))
}
EOF
            if [ "$kind" = wired ]; then cat <<EOF

/// Tool $i wired by hand: JSON in, JSON out.
pub fn wire_$i(input: serde_json::Value) -> Wired {
    Box::pin(async move {
        let input: Input$i = serde_json::from_value(input).map_err(|error| error.to_string())?;
        let output = tool_$i(input).await.map_err(|error| error.to_string())?;
        serde_json::to_value(output).map_err(|error| error.to_string())
    })
}

/// The input schema of tool $i.
pub fn schema_$i() -> schemars::Schema {
    schemars::schema_for!(Input$i)
}
EOF
            fi
        done
    } >"$dir/src/lib.rs"
}

# seconds CMD...: runs CMD quietly and prints how long it took.
seconds() {
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

kinds="eve plain wired"
rm -rf "$scratch/eve" "$scratch/plain" "$scratch/wired"
for kind in $kinds; do generate "$kind"; done
echo "== building each once (dependencies, shared)"
for kind in $kinds; do
    # Both ways the rounds build (path dependencies rebuild when CARGO_INCREMENTAL changes), and
    # the first line as the rounds write it: an edit that changes its length moves every span
    # after it, and rebuilds much more than one that does not.
    CARGO_INCREMENTAL=0 cargo build --quiet --lib --manifest-path "$scratch/$kind/Cargo.toml"
    sed -i "1s|.*|//! $tools generated tools ($kind), round 0.|" "$scratch/$kind/src/lib.rs"
    cargo build --quiet --lib --manifest-path "$scratch/$kind/Cargo.toml"
done
echo "== load before: $(uptime)"
declare -A touched edited
for round in $(seq 1 "$rounds"); do
    # The order turns, so no crate always builds on a warmer machine.
    case $((round % 3)) in
    1) order="eve plain wired" ;;
    2) order="plain wired eve" ;;
    0) order="wired eve plain" ;;
    esac
    for kind in $order; do
        manifest="$scratch/$kind/Cargo.toml"
        touch "$scratch/$kind/src/lib.rs"
        # Without the incremental cache, which would find every item unchanged and reuse it.
        touched[$kind]+="$(CARGO_INCREMENTAL=0 seconds cargo build --lib --manifest-path "$manifest") "
        sed -i "1s|.*|//! $tools generated tools ($kind), round $round.|" "$scratch/$kind/src/lib.rs"
        edited[$kind]+="$(seconds cargo build --lib --manifest-path "$manifest") "
    done
done
echo "== load after: $(uptime)"
for kind in $kinds; do
    t=$(tr ' ' '\n' <<<"${touched[$kind]}" | grep . | median)
    e=$(tr ' ' '\n' <<<"${edited[$kind]}" | grep . | median)
    lines=$(cd "$scratch/$kind" && RUSTC_BOOTSTRAP=1 cargo rustc --quiet --lib --profile check -- -Zunpretty=expanded 2>/dev/null | wc -l)
    printf '%-6s rebuild after touch %6.2f s (rounds: %s)\n' "$kind" "$t" "${touched[$kind]}"
    printf '%-6s rebuild after edit  %6.2f s (rounds: %s)\n' "$kind" "$e" "${edited[$kind]}"
    printf '%-6s expansion           %6d lines\n' "$kind" "$lines"
    declare "t_$kind=$t" "e_$kind=$e" "l_$kind=$lines"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "RESULT tools=$tools rebuild_ratio=$(ratio "$t_eve" "$t_plain") edit_ratio=$(ratio "$e_eve" "$e_plain")" \
    "lines_per_tool=$(( (l_eve - l_plain) / tools ))"
echo "AGAINST WIRED rebuild_ratio=$(ratio "$t_eve" "$t_wired") edit_ratio=$(ratio "$e_eve" "$e_wired")"
