//! The timer service: one task that wakes runs when their timers fall due.
//!
//! The durable record of a timer is its journal entry (and the store's timer index derived from
//! it); this service only holds the pending deadlines in memory, loaded from the store on
//! recovery and added to as runs schedule sleeps. A timer that fires while its run is parked
//! activates the run; the run's executor journals `TimerFired` exactly once.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::Either;
use tokio::sync::{mpsc, oneshot};

use crate::journal::{Op, RunId};
use crate::store::TimerKind;
use crate::time::{Clock, Timestamp};

/// A handle to the timer task.
pub(crate) struct TimerService {
    sender: mpsc::UnboundedSender<Command>,
}

enum Command {
    Add(Timer),
    /// Fire every timer due now, then answer.
    Flush(oneshot::Sender<()>),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    due: Timestamp,
    run: RunId,
    op: Op,
    retry: bool,
}

impl TimerService {
    /// Starts the timer task, which calls `fire` for each timer that falls due; `fire` returns
    /// false once nothing is left to wake (the runtime is gone), and the task stops.
    pub fn start(clock: Arc<dyn Clock>, fire: impl Fn(RunId, Op, TimerKind) -> bool + Send + Sync + 'static) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(clock, receiver, Box::new(fire)));
        TimerService { sender }
    }

    /// Calls `fire(run, op, kind)` once the clock reaches `due`.
    pub fn add(&self, run: RunId, op: Op, due: Timestamp, kind: TimerKind) {
        let _ = self.sender.send(Command::Add(Timer { due, run, op, retry: kind == TimerKind::Retry }));
    }

    /// Fires every timer that is due now; resolves once their runs have been woken.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.sender.send(Command::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }
}

/// Called for each timer that falls due; false once nothing is left to wake.
type Fire = Box<dyn Fn(RunId, Op, TimerKind) -> bool + Send + Sync>;

async fn run(clock: Arc<dyn Clock>, mut receiver: mpsc::UnboundedReceiver<Command>, fire: Fire) {
    let mut pending = BTreeSet::new();
    loop {
        let sleep = match pending.first() {
            Some(Timer { due, .. }) => Either::Left(clock.sleep_until(*due)),
            None => Either::Right(futures::future::pending()),
        };
        tokio::select! {
            command = receiver.recv() => match command {
                Some(Command::Add(timer)) => {
                    pending.insert(timer);
                }
                Some(Command::Flush(done)) => {
                    if !fire_due(&*clock, &mut pending, &fire) {
                        return;
                    }
                    let _ = done.send(());
                }
                None => return,
            },
            () = sleep => {
                if !fire_due(&*clock, &mut pending, &fire) {
                    return;
                }
            }
        }
    }
}

/// Fires every timer due now; false if `fire` says nothing is left to wake.
fn fire_due(clock: &dyn Clock, pending: &mut BTreeSet<Timer>, fire: &Fire) -> bool {
    let now = clock.now();
    while let Some(timer) = pending.first() {
        if timer.due > now {
            return true;
        }
        let timer = pending.pop_first().expect("the first element exists");
        let kind = if timer.retry { TimerKind::Retry } else { TimerKind::Sleep };
        tracing::debug!(run = %timer.run, op = timer.op.0, ?kind, "a timer is due");
        if !fire(timer.run, timer.op, kind) {
            return false;
        }
    }
    true
}
