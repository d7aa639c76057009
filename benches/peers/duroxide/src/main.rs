//! duroxide's side of the peers bench: the shapes of eve's `benches/peers.rs`, on duroxide 0.1.32
//! with its SQLite provider, printed as `RESULT duroxide <shape> <value> <unit>` lines that
//! `scripts/bench-peers.sh` sets beside eve's.
//!
//! - `sequential_1000`: one orchestration of 1,000 sequential activities (`x + 1`), from
//!   `start_orchestration` until its status reads `Completed`.
//! - `concurrent_200x10`: 200 orchestrations of 10 activities started at once, from the first
//!   start until the last reads `Completed`.
//! - `replay_1000`: an orchestration parked on an external event after 1,000 activities, in a
//!   runtime started afresh over a copy of its database (as after a restart); from `raise_event`
//!   until its status reads `Completed` (duroxide replays the whole history for that turn).
//!
//! Each shape runs on a fresh database file (opening, copying and shutting down are not timed),
//! `iterations` times; the median is printed. The runtime is configured as duroxide's docs advise
//! for a local SQLite provider, with the dispatcher's idle poll lowered to 1 ms; completion is
//! polled every millisecond (duroxide's own `wait_for_orchestration` backs off to 100 ms, which
//! would add up to 100 ms to every figure).
//!
//! Usage: `eve-peers-duroxide <scratch dir> [iterations]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use duroxide::providers::sqlite::SqliteProvider;
use duroxide::runtime::registry::ActivityRegistry;
use duroxide::runtime::{Runtime, RuntimeOptions};
use duroxide::{ActivityContext, Client, OrchestrationContext, OrchestrationRegistry, OrchestrationStatus};

const SEQUENTIAL: u64 = 1_000;
const RUNS: u64 = 200;
const STEPS: u64 = 10;
const REPLAYED: u64 = 1_000;

fn number(text: &str) -> Result<u64, String> {
    text.trim_matches('"').parse().map_err(|error| format!("not a number: {text}: {error}"))
}

fn activities() -> ActivityRegistry {
    ActivityRegistry::builder()
        .register("AddOne", |_ctx: ActivityContext, x: String| async move { Ok((number(&x)? + 1).to_string()) })
        .build()
}

/// Runs `n` activities one after another, each adding one.
async fn steps(ctx: &OrchestrationContext, n: u64) -> Result<u64, String> {
    let mut x = 0;
    for _ in 0..n {
        x = number(&ctx.schedule_activity("AddOne", x.to_string()).await?)?;
    }
    Ok(x)
}

fn orchestrations() -> OrchestrationRegistry {
    OrchestrationRegistry::builder()
        .register("Sequential", |ctx: OrchestrationContext, n: String| async move {
            Ok(steps(&ctx, number(&n)?).await?.to_string())
        })
        .register("ParkAfter", |ctx: OrchestrationContext, n: String| async move {
            let x = steps(&ctx, number(&n)?).await?;
            // Committed with the turn that schedules the wait: the bench reads it to know the
            // orchestration is parked.
            ctx.set_kv_value("parked", "yes");
            let payload = ctx.schedule_wait("go").await;
            Ok(format!("{x}:{payload}"))
        })
        .build()
}

fn options() -> RuntimeOptions {
    RuntimeOptions { dispatcher_min_poll_interval: Duration::from_millis(1), ..RuntimeOptions::default() }
}

/// A provider and a runtime over the database file at `path`.
async fn start(path: &Path) -> (Arc<Runtime>, Client, Arc<SqliteProvider>) {
    if !path.exists() {
        std::fs::File::create(path).expect("the database file is created");
    }
    let url = format!("sqlite:{}", path.display());
    let provider = Arc::new(SqliteProvider::new(&url, None).await.expect("the SQLite provider opens"));
    let runtime = Runtime::start_with_options(provider.clone(), activities(), orchestrations(), options()).await;
    (runtime, Client::new(provider.clone()), provider)
}

async fn stop(runtime: Arc<Runtime>, provider: Arc<SqliteProvider>) {
    runtime.shutdown(None).await;
    provider.checkpoint().await.expect("the WAL is checkpointed");
}

/// Polls every millisecond until `instance` is completed, and returns its output.
async fn completed(client: &Client, instance: &str) -> String {
    loop {
        match client.get_orchestration_status(instance).await.expect("the status reads") {
            OrchestrationStatus::Completed { output, .. } => return output,
            OrchestrationStatus::Failed { details, .. } => panic!("{instance} failed: {}", details.display_message()),
            _ => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

fn fresh(dir: &Path, name: &str, round: usize) -> PathBuf {
    dir.join(format!("{name}-{round}.db"))
}

async fn sequential(dir: &Path, round: usize) -> Duration {
    let (runtime, client, provider) = start(&fresh(dir, "sequential", round)).await;
    let start = Instant::now();
    client.start_orchestration("seq", "Sequential", SEQUENTIAL.to_string()).await.expect("starts");
    let output = completed(&client, "seq").await;
    let elapsed = start.elapsed();
    assert_eq!(number(&output), Ok(SEQUENTIAL));
    stop(runtime, provider).await;
    elapsed
}

async fn concurrent(dir: &Path, round: usize) -> Duration {
    let (runtime, client, provider) = start(&fresh(dir, "concurrent", round)).await;
    let start = Instant::now();
    for index in 0..RUNS {
        client.start_orchestration(format!("run-{index}"), "Sequential", STEPS.to_string()).await.expect("starts");
    }
    for index in 0..RUNS {
        assert_eq!(number(&completed(&client, &format!("run-{index}")).await), Ok(STEPS));
    }
    let elapsed = start.elapsed();
    stop(runtime, provider).await;
    elapsed
}

/// Builds the database of one orchestration parked on its event after `REPLAYED` activities.
async fn parked_template(dir: &Path) -> PathBuf {
    let path = dir.join("replay-template.db");
    let (runtime, client, provider) = start(&path).await;
    client.start_orchestration("parked", "ParkAfter", REPLAYED.to_string()).await.expect("starts");
    client.wait_for_kv_value("parked", "parked", Duration::from_secs(600)).await.expect("the orchestration parks");
    stop(runtime, provider).await;
    path
}

fn copy(template: &Path, to: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", template.display()));
        if from.exists() {
            let copied = format!("{}{suffix}", to.display());
            std::fs::copy(&from, &copied).expect("the template is copied");
            // On disk before the timing, as a store is when its process restarts: the copy's dirty
            // pages must not be written back by the first fsync inside the timing.
            std::fs::File::open(&copied).and_then(|file| file.sync_all()).expect("the copy is synced");
        }
    }
}

async fn replay(dir: &Path, template: &Path, round: usize) -> Duration {
    let path = fresh(dir, "replay", round);
    copy(template, &path);
    let (runtime, client, provider) = start(&path).await;
    let start = Instant::now();
    client.raise_event("parked", "go", "1").await.expect("the event is raised");
    let output = completed(&client, "parked").await;
    let elapsed = start.elapsed();
    assert_eq!(output, format!("{REPLAYED}:1"));
    stop(runtime, provider).await;
    elapsed
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: eve-peers-duroxide <scratch dir> [iterations]"));
    let iterations: usize = args.next().map_or(5, |n| n.parse().expect("iterations is a number"));
    std::fs::create_dir_all(&dir).expect("the scratch directory is created");
    let mut times = (Vec::new(), Vec::new(), Vec::new());
    let template = parked_template(&dir).await;
    for round in 0..iterations {
        times.0.push(sequential(&dir, round).await);
        times.1.push(concurrent(&dir, round).await);
        times.2.push(replay(&dir, &template, round).await);
        eprintln!("duroxide round {round}: {:?} / {:?} / {:?}", times.0[round], times.1[round], times.2[round]);
    }
    let rate = |steps: u64, time: Duration| steps as f64 / time.as_secs_f64();
    println!("RESULT duroxide sequential_1000 {:.1} steps/s", rate(SEQUENTIAL, median(times.0)));
    println!("RESULT duroxide concurrent_200x10 {:.1} steps/s", rate(RUNS * STEPS, median(times.1)));
    println!("RESULT duroxide replay_1000 {:.3} ms", median(times.2).as_secs_f64() * 1e3);
}
