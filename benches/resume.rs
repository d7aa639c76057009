//! Measures 3 and 4: bringing a parked run back, by replay after a restart and from the warm cache.
//!
//! The workflow `park_after` runs `n` trivial steps, then waits on the hook `park-{run id}` and
//! adds up the payloads it receives until one is 0; the benches send 1, so each payload resumes
//! the run and it parks again.
//!
//! Measure 3, `replay/*`: a history of 1,000 and one of 10,000 steps, each in its own SQLite file,
//! is built once. `replay/open_*` times `SqliteStore::open` of it (it runs `PRAGMA quick_check`).
//! `replay/recover_*` is a restart that replays the run: a copy of the file whose run has lost its
//! parked mark (the mark is a hint the store syncs lazily, so a crash can lose it; a run without
//! it is replayed at start-up, as one that was mid-activation), opened in a new runtime with
//! `warm_cache(0)`; timed are `recover()` and `settle()`: claim, load and replay until the run is
//! parked again. Copying the file, clearing the mark and syncing the copy are not timed; the restart
//! appends nothing. `replay/restart_*` times the same restart whole, from the open: the open reads
//! ahead the recovery and the claim `recover()` then makes, while it fills the write-ahead log, so
//! `recover_*` alone no longer shows what reading the journal costs.
//!
//! Measure 4, `resume/*`: one payload is delivered (`resume_hook`) to a parked run and the run is
//! timed until it is parked again (`settle()`), for runs parked after 10,000, 1,000 and 10 steps,
//! with the warm cache (`warm`) and without it (`cold`, every resume replays), on `SqliteStore`
//! and on `MemoryStore` (which shows CPU costs the two fsyncs of a SQLite resume would hide), on a
//! current-thread Tokio runtime (replay above uses the multi-threaded one). Each
//! payload adds a journal entry, so a run takes at most `n / 20` payloads (at least one) before a
//! fresh one is built outside the timing: every measured run is within 5 % of its nominal length.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};
use eve_benches::{close, current_thread, heading, micros, multi_thread, record, report, secret_key, size, sync_copy};
use eve_tools::prelude::*;
use eve_tools::store::{MemoryStore, SqliteStore, Store};
use eve_tools::{HookDelivery, RunEvent};
use serde_json::json;

/// How many steps to run before parking.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    n: u64,
}

#[step]
async fn add_one_step(x: u64) -> Result<u64, StepError> {
    Ok(x + 1)
}

/// Runs `n` trivial steps, then adds up the payloads of its hook `park-{run id}` until one is 0.
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

fn runtime(store: Arc<dyn Store>, warm_cache: usize) -> Runtime {
    let builder = Runtime::builder().shared_store(store).secret_key(secret_key());
    // Room for every event of a 10,000-step replay: `check_restart` reads them after the fact.
    builder.warm_cache(warm_cache).event_capacity(1 << 15).build().expect("a runtime builds inside Tokio")
}

/// Starts a run parked after `steps` steps and returns its hook token.
async fn parked_run(runtime: &Runtime, steps: u64) -> String {
    let run = runtime.start("park_after", json!({ "n": steps })).await.expect("the tool exists");
    runtime.settle().await;
    format!("park-{}", run.id())
}

// ----- measure 3: replay after a restart -----

/// Builds the history file for `steps` steps: one run, parked on its hook.
fn build_history(tokio: &tokio::runtime::Runtime, dir: &Path, steps: u64) -> PathBuf {
    let path = dir.join(format!("replay-{steps}.db"));
    tokio.block_on(async {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the store opens"));
        let runtime = runtime(store.clone(), 0);
        parked_run(&runtime, steps).await;
        drop(runtime);
        close(store).await;
    });
    path
}

/// A copy of the history at `path` whose run has lost its parked mark, as a crash can leave it,
/// so a restart replays it. Returns the copy's path.
fn unparked_copy(path: &Path, round: u64) -> PathBuf {
    let copy = path.with_file_name(format!("restart-{round}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", copy.display()));
    }
    // The history may still be partly in its write-ahead log: copy both.
    for suffix in ["", "-wal"] {
        let from = format!("{}{suffix}", path.display());
        if Path::new(&from).exists() {
            std::fs::copy(&from, format!("{}{suffix}", copy.display())).expect("the history is copied");
        }
    }
    let conn = rusqlite::Connection::open(&copy).expect("the copy opens");
    let cleared = conn.execute("UPDATE runs SET parked = 0 WHERE status = 'active'", []).expect("the mark clears");
    assert_eq!(cleared, 1, "the copy holds one unfinished run");
    drop(conn);
    for suffix in ["", "-wal"] {
        sync_copy(Path::new(&format!("{}{suffix}", copy.display())));
    }
    copy
}

/// One restart, checked: the run is replayed (every entry, no step executed again), parks, and
/// the restart appends nothing.
fn check_restart(tokio: &tokio::runtime::Runtime, path: &Path, steps: u64) {
    let copy = unparked_copy(path, u64::MAX);
    tokio.block_on(async {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&copy).expect("the store opens"));
        let runtime = runtime(store.clone(), 0);
        let mut events = runtime.events();
        assert_eq!(runtime.recover().await.expect("recovers"), 1);
        runtime.settle().await;
        let (mut replayed, mut started) = (None, 0);
        while let Ok(event) = events.try_recv() {
            match event {
                RunEvent::Resumed { replayed: entries, .. } => replayed = Some(entries),
                RunEvent::StepStarted { .. } => started += 1,
                _ => {}
            }
        }
        // run_started, one step_completed per step, hook_created.
        assert_eq!(replayed, Some(steps as usize + 2), "the restart replays the whole history");
        assert_eq!(started, 0, "replay executes no step again");
        let run = runtime.runs(None, 1).await.expect("lists")[0].clone();
        assert_eq!(run.entries, steps + 2, "a restart appends nothing");
        assert!(run.parked, "the run is parked again");
        drop((events, runtime));
        close(store).await;
    });
}

fn replay(c: &mut Criterion, dir: &Path) {
    let tokio = multi_thread();
    let mut group = c.benchmark_group("replay");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for (steps, label) in [(size(1_000, 20), "1000"), (size(10_000, 40), "10000")] {
        let path = build_history(&tokio, dir, steps);
        check_restart(&tokio, &path, steps);
        let name = format!("replay/open_{label}");
        group.bench_function(format!("open_{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let store = SqliteStore::open(&path).expect("the store opens");
                    total += start.elapsed();
                    drop(store);
                }
                record(&name, iters, total)
            })
        });
        let name = format!("replay/recover_{label}");
        group.bench_function(format!("recover_{label}"), |b| {
            b.iter_custom(|iters| tokio.block_on(async { record(&name, iters, restarts(&path, iters, false).await) }))
        });
        let name = format!("replay/restart_{label}");
        group.bench_function(format!("restart_{label}"), |b| {
            b.iter_custom(|iters| tokio.block_on(async { record(&name, iters, restarts(&path, iters, true).await) }))
        });
    }
    group.finish();
}

/// `iters` restarts, each over an unparked copy of the file at `path`, timing `recover()` +
/// `settle()` only, or with `from_open` the whole of each: the open and the runtime's build as
/// well (the open reads ahead what `recover()` asks first; see `SqliteStore::open_with`).
async fn restarts(path: &Path, iters: u64, from_open: bool) -> Duration {
    let mut total = Duration::ZERO;
    for round in 0..iters {
        let copy = unparked_copy(path, round);
        let opened = Instant::now();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&copy).expect("the store opens"));
        let runtime = runtime(store.clone(), 0);
        let start = if from_open { opened } else { Instant::now() };
        runtime.recover().await.expect("recovers");
        runtime.settle().await;
        total += start.elapsed();
        drop(runtime);
        close(store).await;
    }
    total
}

// ----- measure 4: resuming a parked run -----

/// Parked runs of one length, replaced once they have taken their share of payloads.
struct Pool {
    steps: u64,
    budget: u64,
    current: Option<(String, u64)>,
}

impl Pool {
    fn new(steps: u64) -> Self {
        Pool { steps, budget: (steps / 20).max(1), current: None }
    }

    /// The token of a parked run that may take one more payload, building one if needed.
    async fn token(&mut self, runtime: &Runtime) -> String {
        match &mut self.current {
            Some((token, used)) if *used < self.budget => {
                *used += 1;
                token.clone()
            }
            _ => {
                let token = parked_run(runtime, self.steps).await;
                self.current = Some((token.clone(), 1));
                token
            }
        }
    }
}

/// Delivers one payload per iteration and times until the run is parked again.
async fn resumes(runtime: &Runtime, pool: &mut Pool, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let token = pool.token(runtime).await;
        let start = Instant::now();
        let delivery = runtime.resume_hook(&token, json!(1)).await.expect("the hook is open");
        runtime.settle().await;
        total += start.elapsed();
        assert!(matches!(delivery, HookDelivery::Accepted(_)));
    }
    total
}

fn resume_group(group: &mut BenchmarkGroup<'_, WallTime>, tokio: &tokio::runtime::Runtime, store_name: &str) {
    for (mode, cache) in [("warm", 4096), ("cold", 0)] {
        // The scratch directory outlives the store: it is removed after the store is closed below.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
        let store: Arc<dyn Store> = match store_name {
            "sqlite" => Arc::new(SqliteStore::open(dir.path().join("resume.db")).expect("the store opens")),
            _ => Arc::new(MemoryStore::new()),
        };
        let runtime = tokio.block_on(async { runtime(store.clone(), cache) });
        for (steps, label) in [(size(10_000, 40), "10000"), (size(1_000, 20), "1000"), (10, "10")] {
            let mut pool = Pool::new(steps);
            let id = format!("{store_name}_{mode}_{label}");
            let name = format!("resume/{id}");
            group.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    tokio.block_on(async { record(&name, iters, resumes(&runtime, &mut pool, iters).await) })
                })
            });
        }
        tokio.block_on(async {
            drop(runtime);
            close(store).await;
        });
        drop(dir);
    }
}

fn resume(c: &mut Criterion) {
    // One thread: the figure is the work of a resume plus the store's I/O, without the latency of
    // waking idle Tokio workers, which depends on what ran just before (building a fresh run or not).
    let tokio = current_thread();
    let mut group = c.benchmark_group("resume");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    resume_group(&mut group, &tokio, "sqlite");
    resume_group(&mut group, &tokio, "memory");
    group.finish();
}

fn summary() {
    let (small, large) = (size(1_000, 20) as f64, size(10_000, 40) as f64);
    heading("measure 3: replay after a restart, SQLite, warm_cache(0)");
    let (open_small, open_large) = (micros("replay/open_1000"), micros("replay/open_10000"));
    let (replay_small, replay_large) = (micros("replay/recover_1000"), micros("replay/recover_10000"));
    report("SqliteStore::open (quick_check), 1,000-step file", format!("{:.2} ms", open_small / 1e3), "excluded below");
    report(
        "SqliteStore::open (quick_check), 10,000-step file",
        format!("{:.2} ms", open_large / 1e3),
        "excluded below",
    );
    report("recover + settle, 1,000 steps", format!("{:.2} ms", replay_small / 1e3), "≤ 1.0 ms");
    report("recover + settle, 10,000 steps", format!("{:.2} ms", replay_large / 1e3), "≤ 8 ms");
    let (whole_small, whole_large) = (micros("replay/restart_1000"), micros("replay/restart_10000"));
    report("the whole restart, open to parked, 1,000 steps", format!("{:.2} ms", whole_small / 1e3), "");
    report("the whole restart, open to parked, 10,000 steps", format!("{:.2} ms", whole_large / 1e3), "");
    report("  per step, 1,000 (total / n)", format!("{:.2} µs", replay_small / small), "duroxide ≈ 6 µs");
    report("  per step, 10,000 (total / n)", format!("{:.2} µs", replay_large / large), "duroxide ≈ 6 µs");
    let marginal = (replay_large - replay_small) / (large - small);
    report("  marginal per step (t_10000 − t_1000) / 9000", format!("{marginal:.2} µs"), "");
    report("  ratio t_10000 / t_1000", format!("{:.1}", replay_large / replay_small), "linear: ≈ 10");

    heading("measure 4: resume after one hook payload, until parked again");
    for store in ["sqlite", "memory"] {
        let time = |mode: &str, label: &str| micros(&format!("resume/{store}_{mode}_{label}"));
        let (warm_huge, warm_large, warm_small) = (time("warm", "10000"), time("warm", "1000"), time("warm", "10"));
        let (cold_large, cold_small) = (time("cold", "1000"), time("cold", "10"));
        println!("  [{store}]");
        report(
            "warm, parked after 10,000 / 1,000 / 10 steps",
            format!("{warm_huge:.0} / {warm_large:.0} / {warm_small:.0} µs"),
            "",
        );
        report("  warm ratio 10,000 / 10", format!("{:.2}", warm_huge / warm_small), "≤ 1.2");
        report("  warm ratio 1,000 / 10", format!("{:.2}", warm_large / warm_small), "≈ 1");
        report("cold, parked after 1,000 / after 10 steps", format!("{cold_large:.0} / {cold_small:.0} µs"), "");
        report("  cold ratio 1,000 / 10", format!("{:.2}", cold_large / cold_small), "(contrast)");
        report("  cold / warm at 1,000 steps", format!("{:.1}", cold_large / warm_large), "(contrast)");
        report("cold, parked after 10,000 steps", format!("{:.0} µs", time("cold", "10000")), "(contrast)");
    }
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    replay(&mut criterion, dir.path());
    resume(&mut criterion);
    criterion.final_summary();
    summary();
}
