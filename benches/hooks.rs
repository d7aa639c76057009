//! Issue 3's measures: a hook round trip over HTTP while many other runs are parked, and what
//! 10,000 parked runs cost in memory and tasks.
//!
//! The workflow `echo` creates the hook `echo-{run id}` and loops: each payload resumes it, it
//! records the payload with a step (its next journaled op) and waits again. One iteration is a
//! `POST /.well-known/workflow/v1/hook/{token}` from a real HTTP client on loopback, answered
//! `202` once the payload is durable, then `Runtime::settle()` until the body has journaled the
//! step and parked again. It runs with 1, 1,000 and 10,000 other runs parked on their own hooks
//! in the same SQLite store (the embedded default), so the ratio shows whether the round trip
//! stays flat as parked runs pile up.
//!
//! After the 10,000 runs are parked, the summary reports the process's resident memory (VmRSS, and
//! its growth since before the runs were created) and how many Tokio tasks are alive: a parked run
//! holds no task. Last, a new runtime reopens the store as after a restart and recovers
//! (`recover()` + `settle()`, timed once): recovery arms timers and loads only the runs with
//! something to do, so this is the start-up cost of that many parked runs (target ≤ 100 ms).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use eve_benches::{close, heading, heading_once, micros, multi_thread, record, report, secret_key, size};
use eve_tools::http::Server;
use eve_tools::prelude::*;
use eve_tools::store::{SqliteStore, Store};
use serde_json::json;

/// Nothing.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Nothing {}

#[step]
async fn note(payload: u64) -> Result<u64, StepError> {
    Ok(payload)
}

/// Waits on its hook; records each payload with a step and waits again, until a payload is 0.
#[workflow_tool]
pub async fn echo(_input: Nothing, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<u64>(format!("echo-{}", ctx.run_id()));
    let mut total = 0;
    loop {
        match hook.recv().await? {
            0 => return Ok(total),
            payload => total += note(payload).await?,
        }
    }
}

/// Starts `count` runs of `echo` and waits until every one is parked; returns their hook tokens.
async fn park(runtime: &Runtime, count: u64) -> Vec<String> {
    let mut tokens = Vec::new();
    for _ in 0..count {
        let run = runtime.start("echo", json!({})).await.expect("the tool exists");
        tokens.push(format!("echo-{}", run.id()));
    }
    runtime.settle().await;
    tokens
}

/// The process's resident memory in bytes (Linux `VmRSS`).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// What the memory check found, printed in the summary.
struct Footprint {
    parked: u64,
    rss: u64,
    growth: u64,
    tasks: usize,
}

fn round_trips(c: &mut Criterion, dir: &std::path::Path) -> Footprint {
    let tokio = multi_thread();
    let (runtime, store, server, client) = tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("an address");
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("hooks.db")).expect("the store opens"));
        let runtime = Runtime::builder()
            .shared_store(store.clone())
            .secret_key(secret_key())
            .public_url(format!("http://{address}"))
            .build()
            .expect("a runtime builds");
        let server = Server::new(runtime.clone()).serve(listener).expect("the server starts");
        (runtime, store, server, reqwest::Client::new())
    });
    let base = format!("http://{}", server.local_addr());
    let before = resident_bytes();
    let mut group = c.benchmark_group("hooks");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let mut parked = 0;
    let mut footprint = None;
    for (others, label) in [(1, "1"), (size(1_000, 10), "1000"), (size(10_000, 20), "10000")] {
        tokio.block_on(park(&runtime, others - parked));
        parked = others;
        let token = tokio.block_on(park(&runtime, 1)).remove(0);
        if label == "10000" {
            let tasks = tokio.handle().metrics().num_alive_tasks();
            let rss = resident_bytes();
            footprint = Some(Footprint { parked: others, rss, growth: rss.saturating_sub(before), tasks });
        }
        let url = format!("{base}/.well-known/workflow/v1/hook/{token}");
        let name = format!("hooks/round_trip_with_{label}_parked");
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let response = client.post(&url).json(&json!(1)).send().await.expect("the server answers");
                        assert_eq!(response.status(), 202, "the payload is accepted");
                        runtime.settle().await;
                    }
                    record(&name, iters, start.elapsed())
                })
            });
        });
    }
    group.finish();
    tokio.block_on(async {
        server.shutdown().await;
        drop(runtime);
        close(store).await;
    });
    footprint.expect("the 10,000-run round trip ran")
}

/// What recovering the parked runs after a restart cost.
struct Restart {
    recovered: usize,
    elapsed: Duration,
    tasks: usize,
}

/// Reopens the store the round trips left (10,000 parked runs and more) in a new runtime and times
/// one `recover()` + `settle()`: the parked runs stay in the store until one of their waits resolves.
fn restart(dir: &std::path::Path) -> Restart {
    let tokio = multi_thread();
    tokio.block_on(async {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("hooks.db")).expect("the store reopens"));
        let runtime =
            Runtime::builder().shared_store(store.clone()).secret_key(secret_key()).build().expect("a runtime builds");
        let start = Instant::now();
        let recovered = runtime.recover().await.expect("the runs recover");
        runtime.settle().await;
        let elapsed = start.elapsed();
        let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        drop(runtime);
        close(store).await;
        Restart { recovered, elapsed, tasks }
    })
}

fn summary(footprint: &Footprint, restart: &Restart) {
    heading("issue 3: hook round trip over HTTP (POST → resumed → next op journaled → parked)");
    let (one, thousand, ten_thousand) = (
        micros("hooks/round_trip_with_1_parked"),
        micros("hooks/round_trip_with_1000_parked"),
        micros("hooks/round_trip_with_10000_parked"),
    );
    report("with 1 / 1,000 / 10,000 other runs parked", format!("{one:.0} / {thousand:.0} / {ten_thousand:.0} µs"), "");
    report("  ratio 10,000 / 1", format!("{:.2}", ten_thousand / one), "≤ 1.5");
    report("  ratio 1,000 / 1", format!("{:.2}", thousand / one), "flat");
    heading_once("issue 3: memory and tasks for parked runs");
    let megabytes = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    report(
        &format!("resident memory with {} runs parked", footprint.parked),
        format!("{:.1} MB", megabytes(footprint.rss)),
        "< 100 MB",
    );
    report("  growth since before the runs were created", format!("{:.1} MB", megabytes(footprint.growth)), "");
    report("  Tokio tasks alive while they are parked", footprint.tasks.to_string(), "no task per run");
    heading_once("issue 3: restart with the parked runs (recover + settle)");
    let millis = restart.elapsed.as_secs_f64() * 1e3;
    report(&format!("recover {} parked runs", restart.recovered), format!("{millis:.1} ms"), "≤ 100 ms");
    report("  per run", format!("{:.0} µs", millis * 1e3 / restart.recovered as f64), "");
    report("  Tokio tasks alive after", restart.tasks.to_string(), "no task per run");
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    let footprint = round_trips(&mut criterion, dir.path());
    let restarted = restart(dir.path());
    criterion.final_summary();
    summary(&footprint, &restarted);
}
