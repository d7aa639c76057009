//! Sharing runs with other processes: what a runtime on a shared store (Postgres) does besides
//! advancing runs.
//!
//! # Clients and workers
//!
//! A runtime on a shared store starts as a **client**: it starts runs, delivers hook payloads,
//! answers and cancellations, and reads runs, but runs nothing itself. A run it starts is created
//! and its claim given back at once, so a worker takes it. [`Runtime::recover`] makes it a
//! **worker**, which from then on also:
//!
//! - **takes work**: it polls [`Store::claimable`] every poll interval (500 ms by default)
//!   (leaving out the runs it passed over because its build cannot replay them: see
//!   [`pinning`](super::pinning)), and
//!   listens to the store's wake-ups ([`Store::wake_ups`]), activating each run found or heard
//!   of. Activation claims the run; a claim refused as [`StoreError::Leased`] means another worker
//!   holds the run, and the run is left to it. A lost wake-up is made up for by the next poll, so
//!   a delivery, a released claim or a due timer of a run no worker holds reaches a worker within
//!   one poll interval; a wake-up usually brings it within milliseconds. A worker also arms, in
//!   memory, the timers of the runs it loads, so their sleeps end on time while it lives.
//! - **keeps its claims**: every heartbeat (10 s by default) it renews the lease (30 s by
//!   default) of every run it advances. A run that parks gives its claim up, so any worker may
//!   resume it. A renewal refused as [`StoreError::Fenced`] means another worker took the run
//!   over (this one stalled past its lease): the run's executor is told to let go at once
//!   ([`Msg::LeaseLost`]); its appends would be refused anyway.
//!
//! A worker that dies keeps its runs' leases until they expire; then the others' polls find the
//! runs and take them over. Single-process stores (memory, SQLite) have neither clients nor
//! workers: every runtime runs its runs, and nothing here is started.
//!
//! [`Runtime::recover`]: super::Runtime::recover
//! [`Store::claimable`]: crate::store::Store::claimable
//! [`Store::wake_ups`]: crate::store::Store::wake_ups

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::{Shared, lock};
use crate::executor::Msg;
use crate::journal::RunId;
use crate::store::{Fence, StoreError, WakeUp};

/// How many runs one poll of [`Store::claimable`](crate::store::Store::claimable) lists at most.
const CLAIM_BATCH: usize = 64;

/// How many leases a heartbeat renews at once.
const RENEWALS_AT_ONCE: usize = 16;

/// How a worker shares runs: see the module documentation and the [`RuntimeBuilder`] settings.
///
/// [`RuntimeBuilder`]: super::RuntimeBuilder
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// How often the leases of the runs this worker advances are renewed.
    pub heartbeat: Duration,
    /// How often the store is polled for runs to take.
    pub poll: Duration,
}

/// What a runtime on a shared store keeps about sharing.
pub(crate) struct Sharing {
    pub settings: Settings,
    /// Whether this runtime is a worker (see the module documentation).
    working: AtomicBool,
    /// The claim this process holds on each run it advances, for the heartbeat.
    held: Mutex<HashMap<RunId, Fence>>,
}

impl Sharing {
    pub fn new(settings: Settings) -> Self {
        Sharing { settings, working: AtomicBool::new(false), held: Mutex::new(HashMap::new()) }
    }
}

impl Shared {
    /// Whether this runtime leaves runs to the workers: it is on a shared store and not a worker.
    pub(super) fn is_client(&self) -> bool {
        self.store.is_shared() && !self.sharing.working.load(Ordering::Acquire)
    }

    /// Makes this runtime a worker of its shared store, once: starts taking work and renewing
    /// leases. The tasks hold the runtime weakly and stop when it stops or is dropped.
    pub(super) fn start_working(self: &Arc<Self>) {
        if !self.store.is_shared() || self.sharing.working.swap(true, Ordering::AcqRel) {
            return;
        }
        let Settings { heartbeat, poll } = self.sharing.settings;
        tracing::info!(worker = %self.worker.0, ?heartbeat, ?poll, lease = ?self.lease, "working on the shared store");
        tokio::spawn(take_work(Arc::downgrade(self), self.store.wake_ups(), poll));
        tokio::spawn(keep_claims(Arc::downgrade(self), heartbeat));
    }

    /// Notes that this process holds `fence` on `run` (its executor advances it), so the heartbeat
    /// renews it.
    pub(super) fn hold(&self, run: &RunId, fence: Fence) {
        if self.store.is_shared() {
            lock(&self.sharing.held).insert(run.clone(), fence);
        }
    }

    /// Notes that this process no longer holds a claim on `run`.
    pub(super) fn let_go(&self, run: &RunId) {
        if self.store.is_shared() {
            lock(&self.sharing.held).remove(run);
        }
    }

    /// Looks at every run the store lists as claimable now, and activates those it can take.
    async fn take_claimable(self: &Arc<Self>) {
        let now = self.services.clock.now();
        let passed_over = self.passed_over();
        match self.store.claimable_except(now, CLAIM_BATCH, &passed_over).await {
            Ok(mut runs) => {
                // Workers polling at once would all try the same run first; each starts elsewhere.
                shuffle(&mut runs);
                for run in runs {
                    // Listed although passed over when the list was asked for: its build changed
                    // since (an upgrade). A run passed over while the list was read is not looked
                    // at again: `wake` leaves it alone.
                    if passed_over.iter().any(|passed| passed.run == run) {
                        self.look_again(&run);
                    }
                    self.wake(&run, Msg::Inbox);
                }
            }
            Err(error) if self.is_stopping() => tracing::debug!("stopped polling the store: {error}"),
            Err(error) => tracing::warn!("cannot list the runs to take; polling again soon: {error}"),
        }
    }

    /// Renews the lease of every run this process advances; tells the executor of a run another
    /// worker took over to let it go.
    async fn renew_claims(self: &Arc<Self>) {
        let held: Vec<(RunId, Fence)> =
            lock(&self.sharing.held).iter().map(|(run, fence)| (run.clone(), *fence)).collect();
        let now = self.services.clock.now();
        let renewals = futures::stream::iter(held).map(|(run, fence)| async move {
            let renewed = self.store.renew(&run, fence, self.lease, now).await;
            (run, fence, renewed)
        });
        let mut renewals = renewals.buffer_unordered(RENEWALS_AT_ONCE);
        while let Some((run, fence, renewed)) = renewals.next().await {
            match renewed {
                Ok(()) => {}
                Err(StoreError::Fenced { current, .. }) => self.lease_lost(&run, fence, current),
                Err(error) => {
                    tracing::warn!(%run, "cannot renew the run's lease; trying again at the next heartbeat: {error}")
                }
            }
        }
    }

    /// Tells the executor holding `fence` on `run` that another worker's claim took over.
    fn lease_lost(&self, run: &RunId, fence: Fence, current: u64) {
        let runs = lock(&self.runs);
        if lock(&self.sharing.held).get(run) != Some(&fence) {
            return;
        }
        tracing::info!(%run, held = fence.epoch, current, "another worker took the run over; letting it go");
        if let Some(mailbox) = runs.get(run) {
            let _ = mailbox.send(Msg::LeaseLost { fence, current });
        }
    }
}

/// Takes work until the runtime stops: polls the store every `poll`, and activates the runs that
/// wake-ups name as they come.
async fn take_work(runtime: Weak<Shared>, mut wake_ups: Option<broadcast::Receiver<WakeUp>>, poll: Duration) {
    let Some(mut stopping) = runtime.upgrade().map(|shared| shared.stopping.subscribe()) else { return };
    let mut next_poll = tokio::time::Instant::now();
    loop {
        let heard = tokio::select! {
            biased;
            _ = stopping.wait_for(|stopping| *stopping) => return,
            heard = next_wake_up(&mut wake_ups) => heard,
            () = tokio::time::sleep_until(next_poll) => WakeUp::Missed,
        };
        let Some(shared) = runtime.upgrade() else { return };
        match heard {
            WakeUp::Run(run) => shared.wake(&run, Msg::Inbox),
            WakeUp::Missed => {
                shared.take_claimable().await;
                next_poll = tokio::time::Instant::now() + poll;
            }
        }
    }
}

/// The next wake-up; [`WakeUp::Missed`] if this subscriber fell behind; never, without wake-ups.
async fn next_wake_up(wake_ups: &mut Option<broadcast::Receiver<WakeUp>>) -> WakeUp {
    let Some(receiver) = wake_ups else { return std::future::pending().await };
    match receiver.recv().await {
        Ok(wake_up) => wake_up,
        Err(RecvError::Lagged(_)) => WakeUp::Missed,
        Err(RecvError::Closed) => {
            *wake_ups = None;
            WakeUp::Missed
        }
    }
}

/// Renews this worker's leases every `heartbeat` until the runtime stops.
async fn keep_claims(runtime: Weak<Shared>, heartbeat: Duration) {
    let Some(mut stopping) = runtime.upgrade().map(|shared| shared.stopping.subscribe()) else { return };
    loop {
        tokio::select! {
            biased;
            _ = stopping.wait_for(|stopping| *stopping) => return,
            () = tokio::time::sleep(heartbeat) => {}
        }
        let Some(shared) = runtime.upgrade() else { return };
        shared.renew_claims().await;
    }
}

/// Puts `runs` in a random order.
fn shuffle(runs: &mut [RunId]) {
    for index in (1..runs.len()).rev() {
        let mut bytes = [0u8; 8];
        crate::random::fill_random(&mut bytes);
        let other = (u64::from_le_bytes(bytes) % (index as u64 + 1)) as usize;
        runs.swap(index, other);
    }
}
