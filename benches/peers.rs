//! eve's side of the peers comparison (issue 8): the three shapes `benches/peers/duroxide` runs on
//! duroxide, on eve's SQLite store, measured the same way, printed as
//! `RESULT eve <shape> <value> <unit>` lines. `scripts/bench-peers.sh` builds and runs both back to
//! back and prints eve's speed-up for each shape.
//!
//! - `sequential_1000`: one run of 1,000 sequential trivial steps, from `Runtime::start` until
//!   `RunHandle::outcome` returns.
//! - `concurrent_200x10`: 200 runs of 10 steps started at once, from the first start until the
//!   last outcome.
//! - `replay_1000`: a run parked on its hook after 1,000 steps, in a runtime built afresh over a
//!   copy of its store (as after a restart; `recover()` does not load a parked run); from
//!   `resume_hook` until the run's outcome: the delivery is committed, the run is claimed, its
//!   journal loaded and replayed, and its end committed.
//!
//! Each shape runs on a fresh store file (opening, copying and closing are not timed), on a
//! 2-worker Tokio runtime, `EVE_PEERS_ITERATIONS` times (default 5); the median is printed. The
//! raw single-insert commit rate of the same disk (rusqlite, WAL, `synchronous=FULL`, its log
//! through its first checkpoint) is measured before and after, as in the `sqlite` bench. eve
//! commits every step with an fsync (`synchronous=FULL`); duroxide's provider runs `synchronous`
//! at SQLite's `NORMAL` level in WAL mode, which does not sync on commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eve_benches::{close, multi_thread, secret_key, size, sync_copy};
use eve_tools::prelude::*;
use eve_tools::store::{SqliteStore, Store};
use eve_tools::{HookDelivery, RunOutcome};
use rusqlite::Connection;
use serde_json::json;

/// How many steps a run takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    n: u64,
}

#[step]
async fn add_one_step(x: u64) -> Result<u64, StepError> {
    Ok(x + 1)
}

/// Runs `n` trivial steps one after another and returns how many ran.
#[workflow_tool]
pub async fn sequential_steps(input: Steps) -> Result<u64, ToolError> {
    let mut x = 0;
    for _ in 0..input.n {
        x = add_one_step(x).await?;
    }
    Ok(x)
}

/// Runs `n` trivial steps, then waits on its hook `park-{run id}` and returns once a payload is 0.
#[workflow_tool]
pub async fn park_after(input: Steps, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut x = 0;
    for _ in 0..input.n {
        x = add_one_step(x).await?;
    }
    let mut hook = create_hook_with_token::<u64>(format!("park-{}", ctx.run_id()));
    loop {
        match hook.recv().await? {
            0 => return Ok(x),
            payload => x += payload,
        }
    }
}

fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder().shared_store(store).secret_key(secret_key()).build().expect("a runtime builds inside Tokio")
}

fn open(path: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(path).expect("the store opens"))
}

async fn sequential(dir: &Path, round: usize, steps: u64) -> Duration {
    let store = open(&dir.join(format!("sequential-{round}.db")));
    let runtime = runtime(store.clone());
    let start = Instant::now();
    let run = runtime.start("sequential_steps", json!({ "n": steps })).await.expect("the tool exists");
    let outcome = run.outcome().await.expect("the run is known");
    let elapsed = start.elapsed();
    assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    drop((run, runtime));
    close(store).await;
    elapsed
}

async fn concurrent(dir: &Path, round: usize, runs: u64, steps: u64) -> Duration {
    let store = open(&dir.join(format!("concurrent-{round}.db")));
    let runtime = runtime(store.clone());
    let start = Instant::now();
    let input = json!({ "n": steps });
    let starts = (0..runs).map(|_| runtime.start("sequential_steps", input.clone()));
    let handles = futures::future::try_join_all(starts).await.expect("the tool exists");
    let outcomes = futures::future::try_join_all(handles.iter().map(|run| run.outcome())).await;
    let elapsed = start.elapsed();
    for outcome in outcomes.expect("every run is known") {
        assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    }
    drop((handles, runtime));
    close(store).await;
    elapsed
}

/// Builds the store of one run parked on its hook after `steps` steps; returns its path and the
/// hook's token.
async fn parked_template(dir: &Path, steps: u64) -> (PathBuf, String) {
    let path = dir.join("replay-template.db");
    let store = open(&path);
    let runtime = runtime(store.clone());
    let run = runtime.start("park_after", json!({ "n": steps })).await.expect("the tool exists");
    runtime.settle().await;
    let token = format!("park-{}", run.id());
    drop((run, runtime));
    close(store).await;
    (path, token)
}

fn copy(template: &Path, to: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", template.display()));
        if from.exists() {
            let copied = PathBuf::from(format!("{}{suffix}", to.display()));
            std::fs::copy(&from, &copied).expect("the template is copied");
            sync_copy(&copied);
        }
    }
}

async fn replay(dir: &Path, template: &Path, token: &str, round: usize, steps: u64) -> Duration {
    let path = dir.join(format!("replay-{round}.db"));
    copy(template, &path);
    let store = open(&path);
    let runtime = runtime(store.clone());
    assert_eq!(runtime.recover().await.expect("recovers"), 1, "one unfinished run");
    runtime.settle().await;
    let start = Instant::now();
    let delivered = runtime.resume_hook(token, json!(0)).await.expect("the hook is open");
    let HookDelivery::Accepted(run) = delivered else { panic!("the payload is new") };
    let outcome = runtime.handle(run).outcome().await.expect("the run is known");
    let elapsed = start.elapsed();
    assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    drop(runtime);
    close(store).await;
    elapsed
}

/// How many untimed commits take a new raw log through SQLite's first automatic checkpoint (one
/// frame a commit, checkpoint at 1,000 frames).
const WARM_LOG_COMMITS: u64 = 1_100;

/// Single-insert commits per second on the disk of `dir` (rusqlite, WAL, `synchronous=FULL`),
/// timed once the log has been through its first automatic checkpoint. Until then a new log grows
/// with every commit, and on this kind of disk a commit that grows the file costs about twice one
/// that rewrites it. eve's store fills its log to its working size as it opens, and the `sqlite`
/// bench's raw connection is past that point when it is timed: a raw rate taken on a growing log
/// would describe a slower disk than either side writes to.
fn raw_rate(dir: &Path, commits: u64) -> f64 {
    let conn = Connection::open(dir.join("raw.db")).expect("the raw database opens");
    let _: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)).expect("WAL");
    conn.pragma_update(None, "synchronous", "FULL").expect("synchronous=FULL");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, entry TEXT NOT NULL)")
        .expect("the table is created");
    let mut insert = conn.prepare("INSERT INTO rows (entry) VALUES (?1)").expect("prepares");
    let row = "x".repeat(130);
    let mut commit = |count: u64| {
        for _ in 0..count {
            insert.execute([&row]).expect("inserts");
        }
    };
    commit(size(WARM_LOG_COMMITS, 20));
    let start = Instant::now();
    commit(commits);
    commits as f64 / start.elapsed().as_secs_f64()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let iterations: usize = std::env::var("EVE_PEERS_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(5);
    let iterations = if eve_benches::quick() { 1 } else { iterations.max(1) };
    let (sequential_steps, runs, steps, replayed) = (size(1_000, 20), size(200, 4), 10, size(1_000, 20));
    let tokio = multi_thread();
    let raw_before = raw_rate(dir.path(), size(1_000, 20));
    let (template, token) = tokio.block_on(parked_template(dir.path(), replayed));
    let mut times = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..iterations {
        times.0.push(tokio.block_on(sequential(dir.path(), round, sequential_steps)));
        times.1.push(tokio.block_on(concurrent(dir.path(), round, runs, steps)));
        times.2.push(tokio.block_on(replay(dir.path(), &template, &token, round, replayed)));
        eprintln!("eve round {round}: {:?} / {:?} / {:?}", times.0[round], times.1[round], times.2[round]);
    }
    let raw_after = raw_rate(dir.path(), size(1_000, 20));
    let rate = |steps: u64, time: Duration| steps as f64 / time.as_secs_f64();
    println!("RESULT eve raw_single_insert {:.1} txn/s", (raw_before + raw_after) / 2.0);
    println!("RESULT eve sequential_1000 {:.1} steps/s", rate(sequential_steps, median(times.0)));
    println!("RESULT eve concurrent_200x10 {:.1} steps/s", rate(runs * steps, median(times.1)));
    println!("RESULT eve replay_1000 {:.3} ms", median(times.2).as_secs_f64() * 1e3);
}
