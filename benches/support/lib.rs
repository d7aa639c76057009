//! Helpers shared by the eve benches: Tokio runtimes, closing a store so its file can be reopened,
//! and a record of every measurement so each bench binary can print the ratios of its run.
//!
//! Criterion prints its own estimate per benchmark. The ratios the issue asks for compare several
//! benchmarks of one run, so every timed routine also goes through [`record`], and the summary at
//! the end of each binary divides the medians of what it recorded (see [`per_iteration`]).

pub mod counting;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use eve_tools::secret::SecretKey;
use eve_tools::store::Store;

/// How many of the last calls of a routine [`per_iteration`] looks at: the criterion samples,
/// leaving out the warm-up calls that come before them. Every group takes at least this many.
pub const SAMPLES: usize = 10;

/// Whether the binary runs as a test (`cargo test --benches`) rather than as a benchmark
/// (`cargo bench`, which passes `--bench`): then benches use small sizes so the check is quick.
pub fn quick() -> bool {
    !std::env::args().any(|arg| arg == "--bench")
}

/// `full` when benchmarking, `small` when the binary only runs as a quick test.
pub fn size(full: u64, small: u64) -> u64 {
    if quick() { small } else { full }
}

/// A multi-threaded Tokio runtime with one worker per core of the bench machine (2).
pub fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a Tokio runtime builds")
}

/// A single-threaded Tokio runtime: every task runs on the thread that calls `block_on`.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime builds")
}

/// One secret key for every eve runtime of a bench binary (hook tokens here are chosen by the
/// workflows, so the key only has to exist).
pub fn secret_key() -> SecretKey {
    static KEY: LazyLock<SecretKey> = LazyLock::new(SecretKey::generate);
    KEY.clone()
}

/// Drops the last handle to `store` once every other holder (runtime tasks finishing after their
/// run parked) has let go, so its threads stop and its file lock is released before it is reopened.
pub async fn close(store: Arc<dyn Store>) {
    while Arc::strong_count(&store) > 1 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    drop(store);
}

/// Syncs the copy of a store's file at `path` to disk, if there is one. A store in service, or one
/// whose process just died, has its pages on disk; a fresh copy is dirty pages that the first
/// fsync inside a timing would write back, so benches that time a copy sync it first.
pub fn sync_copy(path: &std::path::Path) {
    match std::fs::File::open(path) {
        Ok(file) => file.sync_all().expect("the copy is synced"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => panic!("cannot open the copy {} to sync it: {error}", path.display()),
    }
}

/// Nanoseconds per iteration of each call of each routine, in call order.
static RECORDS: Mutex<BTreeMap<String, Vec<f64>>> = Mutex::new(BTreeMap::new());

/// Records that one call of routine `name` took `elapsed` for `iters` iterations, and returns
/// `elapsed` (what `iter_custom` routines return to criterion).
pub fn record(name: &str, iters: u64, elapsed: Duration) -> Duration {
    let per_iteration = elapsed.as_nanos() as f64 / iters.max(1) as f64;
    let mut records = RECORDS.lock().expect("the records mutex is never poisoned");
    records.entry(name.to_owned()).or_default().push(per_iteration);
    elapsed
}

/// The median time per iteration over the last [`SAMPLES`] calls of routine `name`.
pub fn per_iteration(name: &str) -> Option<Duration> {
    let records = RECORDS.lock().expect("the records mutex is never poisoned");
    let calls = records.get(name)?;
    let mut last: Vec<f64> = calls[calls.len().saturating_sub(SAMPLES)..].to_vec();
    last.sort_by(f64::total_cmp);
    let middle = last.len() / 2;
    let median = if last.len().is_multiple_of(2) { (last[middle - 1] + last[middle]) / 2.0 } else { last[middle] };
    Some(Duration::from_nanos(median as u64))
}

/// [`per_iteration`] in microseconds, or NaN if the routine did not run (filtered out).
pub fn micros(name: &str) -> f64 {
    per_iteration(name).map_or(f64::NAN, |time| time.as_nanos() as f64 / 1_000.0)
}

/// Prints a summary line: what, the figure, and the target it is compared with.
pub fn report(what: &str, figure: String, target: &str) {
    println!("  {what:<58} {figure:>16}   {target}");
}

/// Prints the heading of a binary's summary.
pub fn heading(title: &str) {
    println!();
    println!("== {title} (medians of the last {SAMPLES} criterion samples of this run) ==");
}

/// Prints the heading of figures measured once, outside criterion.
pub fn heading_once(title: &str) {
    println!();
    println!("== {title} (measured once, not a criterion median) ==");
}
