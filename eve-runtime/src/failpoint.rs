//! Failpoints: named places at durability boundaries where a crash test can stop the process.
//!
//! A store calls [`hit`] at each boundary (for example just before and just after its COMMIT).
//! Without the `failpoints` feature `hit` compiles to nothing. With it, every call is counted, in
//! this process and across all names, starting at 1; if the environment variable
//! `EVE_FAILPOINT_PAUSE=N` is set, the N-th call writes `eve-failpoint: paused at <name> (#N)` to
//! stderr and then blocks its thread forever, so the parent test can SIGKILL the process at
//! exactly that boundary. Nothing is printed otherwise, and a value that is not a number is
//! ignored.
//!
//! The count is deterministic as long as the calls are: the SQLite store calls `hit` only while
//! it holds its one write connection (on its writer thread, or on the thread of a caller that
//! commits at once), twice per committed batch, so the calls never overlap.

/// Marks the durability boundary `name`; see the module documentation.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &'static str) {}

/// Marks the durability boundary `name`; see the module documentation.
#[cfg(feature = "failpoints")]
pub fn hit(name: &'static str) {
    use std::sync::atomic::{AtomicU64, Ordering};

    static HITS: AtomicU64 = AtomicU64::new(0);
    let count = HITS.fetch_add(1, Ordering::SeqCst) + 1;
    if pause_at() == Some(count) {
        pause(name, count);
    }
}

/// The hit number `EVE_FAILPOINT_PAUSE` names, read once per process.
#[cfg(feature = "failpoints")]
fn pause_at() -> Option<u64> {
    static PAUSE_AT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *PAUSE_AT.get_or_init(|| std::env::var("EVE_FAILPOINT_PAUSE").ok()?.trim().parse().ok())
}

/// Announces the pause on stderr and parks this thread for good.
#[cfg(feature = "failpoints")]
fn pause(name: &'static str, count: u64) -> ! {
    use std::io::Write;

    let mut stderr = std::io::stderr().lock();
    // Nothing useful can be done if stderr is gone; the parent then simply never sees the line.
    let _ = writeln!(stderr, "eve-failpoint: paused at {name} (#{count})");
    let _ = stderr.flush();
    drop(stderr);
    loop {
        std::thread::park();
    }
}
