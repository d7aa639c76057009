//! Measure 2: step throughput on the SQLite store against what the disk can commit.
//!
//! Everything lives in one scratch directory under the target directory (`CARGO_TARGET_TMPDIR`),
//! so the raw SQLite figures and the store's are taken on the same disk in the same run.
//!
//! - `raw/insert_per_txn_{before,after}`: rusqlite (bundled), WAL, `synchronous=FULL`, one `INSERT` of a
//!   journal-entry-sized row per transaction into a small table: the disk's commit rate. Measured
//!   before and after the store benches, since a shared disk drifts.
//! - `raw/100_inserts_per_txn`: the same with 100 inserts per transaction (rows/s).
//! - `store/sequential_1000`: one run of 1,000 sequential trivial steps on `SqliteStore`, from
//!   `Runtime::start` until `RunHandle::outcome` returns.
//! - `store/sequential_1000_warm_log` (a contrast, not a target): the same after 1,100 untimed
//!   steps on the same new store, so its write-ahead log has been through its first automatic
//!   checkpoint, as the log of a store in service has. On this disk a commit that grows the log
//!   costs more than one that rewrites it; the raw connection's log is long past its growth when
//!   the store benches run, and a store fills its own log to its working size at open (see
//!   `store::sqlite::wal`), so both figures rewrite a log rather than grow it.
//! - `store/concurrent_200x10`: 200 runs of 10 steps each started at once; from the first start
//!   until the last outcome (group commit shares each fsync across runs).
//! - `store/concurrent_200x10_aged`: the same on a store that already holds the history of 100,000
//!   finished runs of 10 steps (1,000,000 steps), as a store does after a while in service.
//!
//! Each store iteration first times 200 raw single-insert commits (`…/paired_raw`), so each ratio
//! can also be taken against the disk as it was at that moment (a shared disk drifts by ±20 %
//! within minutes). Each store iteration gets a store of its own (a new file, or a copy of the
//! aged template, synced to disk as a store in service is; opening, copying, syncing and closing
//! are not timed), so every sample starts from the same file: the store's write cost grows with
//! what the file holds. Unsynced, the copy's 100 MB of dirty pages were written back by the first
//! fsync inside the timing, which made the aged figure about a third of what it is.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use eve_benches::{close, heading, micros, multi_thread, record, report, secret_key, size, sync_copy};
use eve_tools::RunOutcome;
use eve_tools::prelude::*;
use eve_tools::store::{SqliteStore, Store};
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

/// A row about as long as the journal entry of one of these steps.
const ROW: &str = r#"{"step_completed":{"op":417,"name":"add_one_step","input_hash":"9c1185a5c5e9fc54","attempt":1,"outcome":{"ok":{"value":418}}}}"#;

fn raw_connection(dir: &Path) -> Connection {
    let conn = Connection::open(dir.join("raw.db")).expect("the raw database opens");
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)).expect("WAL");
    assert!(mode.eq_ignore_ascii_case("wal"), "the scratch directory supports WAL");
    conn.pragma_update(None, "synchronous", "FULL").expect("synchronous=FULL");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, entry TEXT NOT NULL)")
        .expect("the table is created");
    conn
}

fn raw_single(c: &mut Criterion, conn: &Connection, id: &str) {
    let mut group = c.benchmark_group("sqlite/raw");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1));
    let name = format!("sqlite/raw/{id}");
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut insert = conn.prepare_cached("INSERT INTO rows (entry) VALUES (?1)").expect("prepares");
            let start = Instant::now();
            for _ in 0..iters {
                insert.execute([ROW]).expect("inserts");
            }
            record(&name, iters, start.elapsed())
        })
    });
    group.finish();
}

fn raw_batched(c: &mut Criterion, conn: &mut Connection) {
    let mut group = c.benchmark_group("sqlite/raw");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(100));
    group.bench_function("100_inserts_per_txn", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let tx = conn.transaction().expect("begins");
                {
                    let mut insert = tx.prepare_cached("INSERT INTO rows (entry) VALUES (?1)").expect("prepares");
                    for _ in 0..100 {
                        insert.execute([ROW]).expect("inserts");
                    }
                }
                tx.commit().expect("commits");
            }
            record("sqlite/raw/100_inserts_per_txn", iters, start.elapsed())
        })
    });
    group.finish();
}

fn store_benches(c: &mut Criterion, conn: &Connection, dir: &Path) {
    let tokio = multi_thread();
    let (sequential, runs, steps) = (size(1_000, 20), size(200, 4), 10);
    let template = dir.join("aged-template.db");
    tokio.block_on(build_aged(&template, size(AGED_ROUNDS, 1), runs, steps));

    let mut group = c.benchmark_group("sqlite/store");
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    let cases = [
        ("sequential_1000", None, false, 1, sequential),
        ("sequential_1000_warm_log", None, true, 1, sequential),
        ("concurrent_200x10", None, false, runs, steps),
        ("concurrent_200x10_aged", Some(template.as_path()), false, runs, steps),
    ];
    for (id, template, warm_log, runs, steps) in cases {
        let name = format!("sqlite/store/{id}");
        group.throughput(Throughput::Elements(runs * steps));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let (mut total, mut raw) = (Duration::ZERO, Duration::ZERO);
                for _ in 0..iters {
                    raw += raw_burst(conn, RAW_BURST);
                    total += tokio.block_on(on_fresh_store(dir, template, warm_log, runs, steps));
                }
                record(&format!("{name}/paired_raw"), iters * RAW_BURST, raw);
                record(&name, iters, total)
            })
        });
    }
    group.finish();
}

/// How many rounds of 200 runs of 10 steps the aged store holds: 100,000 finished runs.
const AGED_ROUNDS: u64 = 500;

/// How many untimed steps take a new store's write-ahead log through its first automatic
/// checkpoint: two WAL frames a step, past SQLite's checkpoint at 1,000 frames.
const WARM_LOG_STEPS: u64 = 1_100;

/// How many raw single-insert commits run just before each store iteration, so that every store
/// figure has a raw commit rate measured on the disk as it was at that moment.
const RAW_BURST: u64 = 200;

/// Times `count` raw single-insert transactions.
fn raw_burst(conn: &Connection, count: u64) -> Duration {
    let mut insert = conn.prepare_cached("INSERT INTO rows (entry) VALUES (?1)").expect("prepares");
    let start = Instant::now();
    for _ in 0..count {
        insert.execute([ROW]).expect("inserts");
    }
    start.elapsed()
}

/// Fills the store at `path` with the history of `rounds` × `runs` finished runs of `steps` steps.
async fn build_aged(path: &Path, rounds: u64, runs: u64, steps: u64) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path).expect("the store opens"));
    let runtime = eve_runtime(store.clone());
    for _ in 0..rounds {
        timed_runs(&runtime, runs, steps).await;
    }
    drop(runtime);
    close(store).await;
}

/// Times `runs` runs of `steps` steps on a store of its own: a new file, or a copy of `template`;
/// with `warm_log`, after [`WARM_LOG_STEPS`] untimed steps. Opening, copying and closing are not
/// timed.
async fn on_fresh_store(dir: &Path, template: Option<&Path>, warm_log: bool, runs: u64, steps: u64) -> Duration {
    static ROUND: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("store-{}.db", ROUND.fetch_add(1, Ordering::Relaxed)));
    if let Some(template) = template {
        std::fs::copy(template, &path).expect("the template is copied");
        sync_copy(&path);
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the store opens"));
    let runtime = eve_runtime(store.clone());
    if warm_log {
        timed_runs(&runtime, 1, size(WARM_LOG_STEPS, 20)).await;
    }
    let elapsed = timed_runs(&runtime, runs, steps).await;
    drop(runtime);
    close(store).await;
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    elapsed
}

fn eve_runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder().shared_store(store).secret_key(secret_key()).build().expect("a runtime builds inside Tokio")
}

/// Starts `runs` runs of `steps` steps at once and times until every one has its outcome.
async fn timed_runs(runtime: &Runtime, runs: u64, steps: u64) -> Duration {
    let start = Instant::now();
    let input = json!({ "n": steps });
    let starts = (0..runs).map(|_| runtime.start("sequential_steps", input.clone()));
    let handles = futures::future::try_join_all(starts).await.expect("the tool exists");
    let outcomes = futures::future::try_join_all(handles.iter().map(|run| run.outcome())).await;
    let elapsed = start.elapsed();
    for outcome in outcomes.expect("every run is known") {
        assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    }
    elapsed
}

fn summary() {
    let rate = |name: &str, per_iteration: f64| per_iteration * 1e6 / micros(name);
    let before = rate("sqlite/raw/insert_per_txn_before", 1.0);
    let after = rate("sqlite/raw/insert_per_txn_after", 1.0);
    let batched = rate("sqlite/raw/100_inserts_per_txn", 100.0);
    heading("measure 2: SQLite commit rates and store throughput, same disk, same run");
    report("raw single-insert txn/s (before / after the store)", format!("{before:.0} / {after:.0}"), "anchor ≈ 5,900");
    report("raw 100 inserts per txn, rows/s", format!("{batched:.0}"), "anchor ≈ 370,000");
    let steps = [size(1_000, 20), size(1_000, 20), size(200, 4) * 10, size(200, 4) * 10];
    let cases = [
        ("sequential_1000", "1 run × 1,000 sequential steps", "≥ 0.8"),
        ("sequential_1000_warm_log", "the same, its write-ahead log at working size", "(contrast)"),
        ("concurrent_200x10", "200 runs × 10 steps at once", "≥ 10"),
        ("concurrent_200x10_aged", "200 × 10 on a store holding 100,000 finished runs", "≥ 10"),
    ];
    for ((id, what, target), steps) in cases.into_iter().zip(steps) {
        let name = format!("sqlite/store/{id}");
        let store = rate(&name, steps as f64);
        let paired = rate(&format!("{name}/paired_raw"), 1.0);
        report(&format!("SqliteStore, {what}, steps/s"), format!("{store:.0}"), "");
        report("  raw single-insert txn/s just before each iteration", format!("{paired:.0}"), "");
        report("  ratio to that raw rate", format!("{:.2}", store / paired), target);
        report("  ratio to the mean of before / after", format!("{:.2}", store / ((before + after) / 2.0)), target);
    }
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    let mut conn = raw_connection(dir.path());
    raw_single(&mut criterion, &conn, "insert_per_txn_before");
    raw_batched(&mut criterion, &mut conn);
    store_benches(&mut criterion, &conn, dir.path());
    raw_single(&mut criterion, &conn, "insert_per_txn_after");
    criterion.final_summary();
    summary();
}
