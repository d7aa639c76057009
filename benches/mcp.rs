//! The MCP server's figures (feature `mcp`).
//!
//! 1. `tools/call` of a plain tool over stdio: an rmcp client calls `echo` on a host process
//!    (`bin/mcp_bench_host.rs`, `mcp-bench-host mcp`) through its stdin and stdout, against the
//!    same tool's fn called directly. The summary gives both medians, the latency MCP adds at
//!    p50 (target ≤ 100 µs) and their ratio.
//! 2. 1,000 tasks parked on questions: a client with the tasks extension starts 1,000 runs of
//!    `ask_once` on one host process (SQLite store), waits until each shows `input_required`,
//!    then reads the host's resident memory (target < 50 MB). The same is done with a server in
//!    this process (over an in-memory pipe) to count the Tokio tasks alive while the tasks are
//!    parked: the server and the runtime hold no task per run.

use std::time::{Duration, Instant};

use criterion::Criterion;
use eve_benches::{SAMPLES, current_thread, heading, micros, multi_thread, record, report, size};
use eve_tools::mcp::McpServer;
use eve_tools::mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
    JsonObject, ProtocolVersion, TaskPayload,
};
use eve_tools::mcp::rmcp::service::RunningService;
use eve_tools::mcp::rmcp::transport::TokioChildProcess;
use eve_tools::mcp::rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use eve_tools::prelude::*;
use serde_json::json;

#[path = "bin/mcp_bench_host.rs"]
#[allow(dead_code)]
mod host;

fn arguments(value: serde_json::Value) -> JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

fn client_config(tasks: bool) -> ClientConfig {
    let builder = ClientCapabilities::builder();
    let capabilities = if tasks { builder.enable_tasks().build() } else { builder.build() };
    ClientConfig::new(capabilities, Implementation::new("eve-bench", "0"))
}

async fn spawn_host(dir: &std::path::Path, tasks: bool) -> (RunningService<RoleClient, ClientConfig>, u32) {
    spawn(dir, tasks, "mcp").await
}

async fn spawn(dir: &std::path::Path, tasks: bool, mode: &str) -> (RunningService<RoleClient, ClientConfig>, u32) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-bench-host"));
    command.arg(mode).env("EVE_DATA_DIR", dir);
    let transport = TokioChildProcess::new(command).expect("the bench host starts");
    let pid = transport.id().expect("the host has a pid");
    let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let client = client_config(tasks).serve_with_lifecycle(transport, mode).await.expect("server/discover succeeds");
    (client, pid)
}

fn latency(criterion: &mut Criterion, dir: &std::path::Path) {
    // The client's own runtime is single-threaded, as an agent's stdio loop often is: no
    // cross-thread wake-ups on its side of the pipes.
    let tokio = current_thread();
    let (client, _) = tokio.block_on(spawn_host(dir, false));
    let (raw, _) = tokio.block_on(spawn(dir, false, "raw"));
    let mut group = criterion.benchmark_group("mcp_stdio");
    group.sample_size(SAMPLES.max(20));
    group.bench_function("direct_fn_call", |b| {
        b.to_async(&tokio).iter_custom(|iters| async move {
            let start = Instant::now();
            for _ in 0..iters {
                let output = host::echo(host::Text { text: "hello".into() }).await;
                std::hint::black_box(output.ok());
            }
            record("direct", iters, start.elapsed())
        })
    });
    group.bench_function("tools_call_over_stdio", |b| {
        b.to_async(&tokio).iter_custom(|iters| {
            let client = &client;
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let params = CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "hello"})));
                    let result = client.call_tool(params).await.expect("echo answers");
                    std::hint::black_box(result);
                }
                record("stdio", iters, start.elapsed())
            }
        })
    });
    group.bench_function("tools_call_over_stdio_bare_rmcp", |b| {
        b.to_async(&tokio).iter_custom(|iters| {
            let raw = &raw;
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let params = CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "hello"})));
                    let result = raw.call_tool(params).await.expect("echo answers");
                    std::hint::black_box(result);
                }
                record("raw", iters, start.elapsed())
            }
        })
    });
    group.finish();
    tokio.block_on(async move {
        let _ = client.cancel().await;
        let _ = raw.cancel().await;
    });
}

/// What the parked-tasks check found.
struct Parked {
    tasks: u64,
    host_rss: u64,
    in_process_tasks_before: usize,
    in_process_tasks_after: usize,
    elapsed: Duration,
}

async fn park(client: &RunningService<RoleClient, ClientConfig>, count: u64) {
    let mut ids = Vec::new();
    for index in 0..count {
        let params = CallToolRequestParams::new("ask_once")
            .with_arguments(arguments(json!({"text": format!("Question {index}?")})));
        match client.call_tool_once(params).await.expect("ask_once starts") {
            CallToolResponse::Task(created) => ids.push(created.task.task_id),
            other => panic!("expected a task, got {other:?}"),
        }
    }
    for id in ids {
        loop {
            let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.expect("tasks/get answers");
            if matches!(got.task.payload, TaskPayload::InputRequired { .. }) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).unwrap_or(0) * 1024
}

fn parked(dir: &std::path::Path) -> Parked {
    let count = size(1_000, 20);
    let tokio = multi_thread();
    let started = Instant::now();
    let host_rss = tokio.block_on(async {
        let (client, pid) = spawn_host(&dir.join("host"), true).await;
        park(&client, count).await;
        let rss = rss_of(pid);
        let _ = client.cancel().await;
        rss
    });
    let elapsed = started.elapsed();
    let (in_process_tasks_before, in_process_tasks_after) = tokio.block_on(async {
        let store = eve_tools::store::SqliteStore::open(dir.join("in-process.db")).expect("the store opens");
        let runtime =
            Runtime::builder().store(store).secret_key(eve_benches::secret_key()).build().expect("the runtime builds");
        let server = McpServer::new(runtime.clone());
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server_io);
        tokio::spawn(server.serve_io(server_read, server_write));
        let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        let client = client_config(true).serve_with_lifecycle(client_io, mode).await.expect("server/discover succeeds");
        runtime.settle().await;
        let before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        park(&client, count).await;
        runtime.settle().await;
        let after = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let _ = client.cancel().await;
        (before, after)
    });
    Parked { tasks: count, host_rss, in_process_tasks_before, in_process_tasks_after, elapsed }
}

fn summary(parked: &Parked) {
    heading("MCP: tools/call of a plain tool over stdio");
    let (direct, stdio) = (micros("direct"), micros("stdio"));
    report("direct fn call, median", format!("{:.2} µs", direct), "");
    report("tools/call over stdio, median (p50)", format!("{:.1} µs", stdio), "");
    report("added latency at p50", format!("{:.1} µs", stdio - direct), "≤ 100 µs");
    report("ratio stdio / direct", format!("{:.0}×", stdio / direct.max(0.001)), "");
    let raw = micros("raw");
    report("the same echo on a bare rmcp handler, median", format!("{raw:.1} µs"), "");
    report("  eve's share (eve − bare rmcp)", format!("{:.1} µs", stdio - raw), "");
    heading("MCP: tasks parked on questions, one server");
    let megabytes = parked.host_rss as f64 / (1024.0 * 1024.0);
    report(
        &format!("host resident memory with {} tasks input_required", parked.tasks),
        format!("{megabytes:.1} MB"),
        "< 50 MB",
    );
    report("  time to create them and see each parked", format!("{:.2} s", parked.elapsed.as_secs_f64()), "");
    let (before, after) = (parked.in_process_tasks_before, parked.in_process_tasks_after);
    report("Tokio tasks alive in process, before → after parking", format!("{before} → {after}"), "no task per run");
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    latency(&mut criterion, &dir.path().join("latency"));
    let parked = parked(dir.path());
    criterion.final_summary();
    summary(&parked);
}
