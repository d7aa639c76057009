//! The MCP server's figures (feature `mcp`).
//!
//! 1. `tools/call` of a plain tool over stdio: an rmcp client calls `echo` on a host process
//!    (`bin/mcp_bench_host.rs`, `mcp-bench-host mcp`) through its stdin and stdout, against the
//!    same tool's fn called directly (criterion medians of sample means, and their ratio). Then
//!    each call is timed on its own, 5,000 of them, for true percentiles, from two clients: the
//!    rmcp client, and the thinnest client there is (one thread writing a request line to the
//!    pipe and parsing the answer line). The second is the figure held to the target (≤ 100 µs
//!    added at p50; the direct call takes nanoseconds): what the server and the pipes add,
//!    without any client library's share. Both against eve's server and a bare rmcp handler on
//!    the same transport.
//! 2. 1,000 tasks parked on questions: a client with the tasks extension starts 1,000 runs of
//!    `ask_once` on one host process (SQLite store), waits until each shows `input_required`,
//!    then reads the host's resident memory (target < 50 MB). The same is done with a server in
//!    this process (over an in-memory pipe) to count the Tokio tasks alive while the tasks are
//!    parked: the server and the runtime hold no task per run.

use std::time::{Duration, Instant};

use criterion::Criterion;
use eve_benches::{SAMPLES, current_thread, heading, heading_once, micros, multi_thread, record, report, size};
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

fn latency(criterion: &mut Criterion, dir: &std::path::Path) -> Singles {
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
    let rmcp = (rmcp_calls(&tokio, &client), rmcp_calls(&tokio, &raw));
    tokio.block_on(async move {
        let _ = client.cancel().await;
        let _ = raw.cancel().await;
    });
    let line = (line_calls(&dir.join("line"), "mcp"), line_calls(&dir.join("line-raw"), "raw"));
    Singles { rmcp, line }
}

/// Percentiles of single `tools/call` round trips, in µs: p50 and p90.
struct Percentiles {
    p50: f64,
    p90: f64,
}

impl Percentiles {
    fn of(mut calls: Vec<Duration>) -> Percentiles {
        calls.sort();
        let at = |q: f64| calls[((calls.len() - 1) as f64 * q) as usize].as_nanos() as f64 / 1_000.0;
        Percentiles { p50: at(0.5), p90: at(0.9) }
    }
}

/// How many single calls each percentile figure times, after a tenth as many untimed.
fn single_calls() -> usize {
    size(5_000, 50) as usize
}

/// Times single `tools/call`s of `echo` from the rmcp client, one at a time.
fn rmcp_calls(tokio: &tokio::runtime::Runtime, client: &RunningService<RoleClient, ClientConfig>) -> Percentiles {
    tokio.block_on(async {
        let mut calls = Vec::with_capacity(single_calls());
        for index in 0..single_calls() + single_calls() / 10 {
            let params = CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "hello"})));
            let start = Instant::now();
            let result = client.call_tool(params).await.expect("echo answers");
            let took = start.elapsed();
            std::hint::black_box(result);
            if index >= single_calls() / 10 {
                calls.push(took);
            }
        }
        Percentiles::of(calls)
    })
}

/// Times single `tools/call`s of `echo` from the thinnest client: blocking writes of one JSON-RPC
/// line to the host's stdin and blocking reads of the answer line from its stdout, on this thread.
fn line_calls(dir: &std::path::Path, mode: &str) -> Percentiles {
    use std::io::{BufRead, BufReader, Write};
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-bench-host"))
        .arg(mode)
        .env("EVE_DATA_DIR", dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the bench host starts");
    let mut input = host.stdin.take().expect("the host's stdin is piped");
    let mut output = BufReader::new(host.stdout.take().expect("the host's stdout is piped"));
    let mut line = String::new();
    let mut call = |request: &serde_json::Value, answer: bool| {
        let mut text = request.to_string();
        text.push('\n');
        input.write_all(text.as_bytes()).expect("the host reads its stdin");
        if answer {
            line.clear();
            output.read_line(&mut line).expect("the host answers");
            // Parsed, as any client must before it can use the answer.
            let answer: serde_json::Value = serde_json::from_str(&line).expect("the answer is JSON");
            assert!(answer.get("result").is_some(), "{line}");
        }
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "eve-bench", "version": "0"}}});
    call(&initialize, true);
    call(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), false);
    let mut calls = Vec::with_capacity(single_calls());
    for index in 0..single_calls() + single_calls() / 10 {
        let request = json!({"jsonrpc": "2.0", "id": index + 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}}});
        let start = Instant::now();
        call(&request, true);
        if index >= single_calls() / 10 {
            calls.push(start.elapsed());
        }
    }
    drop(input);
    let _ = host.wait();
    Percentiles::of(calls)
}

/// The single-call percentiles: (rmcp client → eve, → bare rmcp), (line client → eve, → bare rmcp).
struct Singles {
    rmcp: (Percentiles, Percentiles),
    line: (Percentiles, Percentiles),
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

fn summary(singles: &Singles, parked: &Parked) {
    heading("MCP: tools/call of a plain tool over stdio");
    let (direct, stdio) = (micros("direct"), micros("stdio"));
    report("direct fn call, median", format!("{:.2} µs", direct), "");
    report("tools/call over stdio, rmcp client, median of sample means", format!("{:.1} µs", stdio), "");
    report("  added over the direct call", format!("{:.1} µs", stdio - direct), "");
    report("ratio stdio / direct", format!("{:.0}×", stdio / direct.max(0.001)), "");
    let raw = micros("raw");
    report("the same echo on a bare rmcp handler, median", format!("{raw:.1} µs"), "");
    report("  eve's share (eve − bare rmcp)", format!("{:.1} µs", stdio - raw), "");
    heading_once("MCP: single tools/call round trips, 5,000 timed one by one (p50 / p90)");
    let both = |percentiles: &Percentiles| format!("{:.1} / {:.1} µs", percentiles.p50, percentiles.p90);
    report("rmcp client → eve's server", both(&singles.rmcp.0), "");
    report("rmcp client → bare rmcp handler", both(&singles.rmcp.1), "");
    report("line client → eve's server: what the server and pipes add", both(&singles.line.0), "≤ 100 µs at p50");
    report("line client → bare rmcp handler", both(&singles.line.1), "");
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
    let singles = latency(&mut criterion, &dir.path().join("latency"));
    let parked = parked(dir.path());
    criterion.final_summary();
    summary(&singles, &parked);
}
