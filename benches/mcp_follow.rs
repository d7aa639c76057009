//! MCP's cost to follow a workflow tool's progress (feature `mcp`): a client without the tasks
//! extension calls `count_steps` and waits for the result; the server follows the run's journal
//! and sends each step as a progress notification before it. The total time of a call of 100
//! steps and of 1,000, and their ratio: following grows linearly when the ratio stays near 10
//! (the target is ≤ 12). Twice: on a host process over stdio (`bin/mcp_bench_host.rs`, SQLite
//! store, whose commits to disk dominate and move with the disk's load), and on a server in this
//! process over an in-memory pipe with the in-memory store, where what is left is MCP's own
//! following.

use std::time::Instant;

use criterion::Criterion;
use eve_benches::{SAMPLES, current_thread, heading, micros, record, report, size};
use eve_tools::mcp::McpServer;
use eve_tools::mcp::rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use eve_tools::mcp::rmcp::service::RunningService;
use eve_tools::mcp::rmcp::transport::TokioChildProcess;
use eve_tools::mcp::rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::json;

#[path = "bin/mcp_bench_host.rs"]
#[allow(dead_code)]
mod host;

fn config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::builder().build(), Implementation::new("eve-bench", "0"))
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![eve_tools::mcp::rmcp::model::ProtocolVersion::V_2026_07_28],
    }
}

/// Times calls of `count_steps` with `small` and `large` steps, recorded as `{prefix}_100` and
/// `{prefix}_1000`.
fn calls(
    criterion: &mut Criterion,
    tokio: &tokio::runtime::Runtime,
    client: &RunningService<RoleClient, ClientConfig>,
    prefix: &str,
) {
    let (small, large) = (size(100, 10), size(1_000, 100));
    let mut group = criterion.benchmark_group(format!("mcp_follow_{prefix}"));
    group.sample_size(SAMPLES);
    for (name, steps) in [(format!("{prefix}_100"), small), (format!("{prefix}_1000"), large)] {
        group.bench_function(&name, |b| {
            b.to_async(tokio).iter_custom(|iters| {
                let name = &name;
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
}

fn print(prefix: &str, what: &str) {
    let (small, large) = (size(100, 10), size(1_000, 100));
    let (hundred, thousand) = (micros(&format!("{prefix}_100")) / 1_000.0, micros(&format!("{prefix}_1000")) / 1_000.0);
    report(&format!("{what}: a call of {small} steps"), format!("{hundred:.1} ms"), "");
    report(&format!("{what}: a call of {large} steps"), format!("{thousand:.1} ms"), "");
    report(&format!("{what}: ratio for 10× the steps"), format!("{:.1}", thousand / hundred), "≤ 12");
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    let tokio = current_thread();
    let client = tokio.block_on(async {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-bench-host"));
        command.arg("mcp").env("EVE_DATA_DIR", dir.path());
        let transport = TokioChildProcess::new(command).expect("the bench host starts");
        config().serve_with_lifecycle(transport, lifecycle()).await.expect("server/discover succeeds")
    });
    calls(&mut criterion, &tokio, &client, "stdio");
    tokio.block_on(async move {
        let _ = client.cancel().await;
    });
    let runtime = tokio.block_on(async {
        eve_tools::Runtime::builder().store(eve_tools::store::MemoryStore::new()).build().expect("a runtime builds")
    });
    let client = tokio.block_on(async {
        let (client_side, server_side) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server_side);
        tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
        config().serve_with_lifecycle(client_side, lifecycle()).await.expect("server/discover succeeds")
    });
    calls(&mut criterion, &tokio, &client, "memory");
    tokio.block_on(async move {
        let _ = client.cancel().await;
        runtime.shutdown().await;
    });
    criterion.final_summary();
    heading("MCP: following a workflow tool's steps, a call without the tasks extension, until its result");
    print("stdio", "host process, SQLite");
    print("memory", "in process, in-memory store");
}
