//! Wall-clock time as the runtime sees it.
//!
//! Every deadline the runtime journals is a [`Timestamp`] read from a [`Clock`]. Production uses
//! [`SystemClock`]; tests use [`ManualClock`] and move time forward by hand, so a test of a
//! four-hour deadline runs in microseconds and never sleeps to synchronise.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// A point in time: milliseconds since the Unix epoch, as journaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp `millis` milliseconds after the Unix epoch.
    ///
    /// ```
    /// # use eve_tools::Timestamp;
    /// assert_eq!(Timestamp::from_millis(1_500).as_millis(), 1_500);
    /// ```
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The timestamp `duration` later, saturating at the end of time.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// How long after `earlier` this timestamp is, or zero if it is not later.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// The same instant as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0)
    }

    /// The instant `time` names, rounded down to the millisecond.
    pub fn from_system_time(time: SystemTime) -> Self {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T18:54:03.120Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_rfc3339_millis(self.to_system_time()).fmt(f)
    }
}

/// Serializes a timestamp as ISO 8601 (`2026-11-29T18:54:03.120Z`), as public JSON writes times;
/// the journal keeps milliseconds.
pub fn iso<S: serde::Serializer>(time: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(time)
}

/// [`iso`] for an optional timestamp.
pub fn iso_opt<S: serde::Serializer>(time: &Option<Timestamp>, serializer: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => serializer.collect_str(time),
        None => serializer.serialize_none(),
    }
}

/// The source of time for a runtime.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// A future that completes once [`now`](Clock::now) has reached `deadline`.
    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, ()>;
}

/// The operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system_time(SystemTime::now())
    }

    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, ()> {
        let wait = deadline.duration_since(self.now());
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            // Timer wheels may wake a little early relative to the wall clock; a deadline must
            // never fire before it is due, so wait out any remainder.
            let remaining = deadline.duration_since(SystemClock.now());
            if !remaining.is_zero() {
                tokio::time::sleep(remaining + Duration::from_millis(1)).await;
            }
        })
    }
}

/// A clock that moves only when told to, for tests.
///
/// ```
/// # use eve_tools::{Clock, ManualClock, Timestamp};
/// # use std::time::Duration;
/// let clock = ManualClock::new(Timestamp::from_millis(1_000));
/// clock.advance(Duration::from_secs(4 * 3600));
/// assert_eq!(clock.now().as_millis(), 1_000 + 4 * 3_600_000);
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    state: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    now: Timestamp,
    next_id: u64,
    sleepers: BTreeMap<(Timestamp, u64), oneshot::Sender<()>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        let state = ManualState { now: start, next_id: 0, sleepers: BTreeMap::new() };
        ManualClock { state: Arc::new(Mutex::new(state)) }
    }

    /// Moves the clock forward by `by`, waking every sleeper whose deadline has been reached.
    pub fn advance(&self, by: Duration) {
        let mut state = self.lock();
        state.now = state.now.saturating_add(by);
        let now = state.now;
        let later = state.sleepers.split_off(&(now.saturating_add(Duration::from_millis(1)), 0));
        for (_, wake) in std::mem::replace(&mut state.sleepers, later) {
            let _ = wake.send(());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        self.state.lock().expect("manual clock mutex is never poisoned: no code panics while holding it")
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.lock().now
    }

    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, ()> {
        let mut state = self.lock();
        if deadline <= state.now {
            return Box::pin(std::future::ready(()));
        }
        let (wake, woken) = oneshot::channel();
        let id = state.next_id;
        state.next_id += 1;
        state.sleepers.insert((deadline, id), wake);
        Box::pin(async move {
            let _ = woken.await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_wakes_sleepers_only_when_due() {
        let clock = ManualClock::new(Timestamp::from_millis(0));
        let mut due = clock.sleep_until(Timestamp::from_millis(10));
        clock.advance(Duration::from_millis(9));
        assert!(futures::poll!(&mut due).is_pending());
        clock.advance(Duration::from_millis(1));
        assert!(futures::poll!(&mut due).is_ready());
    }

    #[test]
    fn timestamps_print_as_rfc3339() {
        assert_eq!(Timestamp::from_millis(1_500).to_string(), "1970-01-01T00:00:01.500Z");
    }
}
