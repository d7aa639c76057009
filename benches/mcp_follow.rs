//! MCP's cost to follow a workflow tool's progress (feature `mcp`): a client without the tasks
//! extension calls `count_steps` on a host process over stdio (`bin/mcp_bench_host.rs`, SQLite
//! store) and waits for the result; the server follows the run's journal and sends each step as
//! a progress notification before it. The total time of a call of 100 steps and of 1,000, and
//! their ratio: following grows linearly when the ratio stays near 10 (the target is ≤ 12).

use std::time::Instant;

use criterion::Criterion;
use eve_benches::{SAMPLES, current_thread, heading, micros, record, report, size};
use eve_tools::mcp::rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use eve_tools::mcp::rmcp::transport::TokioChildProcess;
use eve_tools::mcp::rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    let tokio = current_thread();
    let client = tokio.block_on(async {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-bench-host"));
        command.arg("mcp").env("EVE_DATA_DIR", dir.path());
        let transport = TokioChildProcess::new(command).expect("the bench host starts");
        let config = ClientConfig::new(ClientCapabilities::builder().build(), Implementation::new("eve-bench", "0"));
        let mode = ClientLifecycleMode::Discover {
            preferred_versions: vec![eve_tools::mcp::rmcp::model::ProtocolVersion::V_2026_07_28],
        };
        config.serve_with_lifecycle(transport, mode).await.expect("server/discover succeeds")
    });
    let (small, large) = (size(100, 10), size(1_000, 100));
    let mut group = criterion.benchmark_group("mcp_follow");
    group.sample_size(SAMPLES);
    for (name, steps) in [("steps_100", small), ("steps_1000", large)] {
        group.bench_function(name, |b| {
            b.to_async(&tokio).iter_custom(|iters| {
                let client = &client;
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let arguments = json!({ "steps": steps }).as_object().cloned();
                        let params = CallToolRequestParams::new("count_steps").with_arguments(arguments.unwrap());
                        let result = client.call_tool(params).await.expect("count_steps answers");
                        assert_ne!(result.is_error, Some(true), "{result:?}");
                    }
                    record(name, iters, start.elapsed())
                }
            })
        });
    }
    group.finish();
    tokio.block_on(async move {
        let _ = client.cancel().await;
    });
    criterion.final_summary();
    heading("MCP: following a workflow tool's steps over stdio, a call without the tasks extension");
    let (hundred, thousand) = (micros("steps_100") / 1_000.0, micros("steps_1000") / 1_000.0);
    report(&format!("a call of {small} steps, until its result"), format!("{hundred:.1} ms"), "");
    report(&format!("a call of {large} steps, until its result"), format!("{thousand:.1} ms"), "");
    report("ratio for 10× the steps", format!("{:.1}", thousand / hundred), "≤ 12");
}
