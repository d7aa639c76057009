//! What the store reads ahead: at a start, while the store's open waits on the disk
//! ([`Ahead`]); and on a delivery to a run not in memory, while the delivery's commit waits on it
//! ([`OnDelivery`]).
//!
//! A runtime's first calls after an open are its recovery, then a claim of each run the
//! recovery wakes. The open queues one read of all that ([`start`](super::reads::start)) on a
//! reader thread before it fills the write-ahead log, so the read runs while the fill's sync
//! waits on the disk, and the recovery and the claims are answered from it.
//!
//! What was read at open is what the file holds for as long as nothing is written: the file lock
//! keeps every other process out, and every write of this one goes through the writer
//! ([`Writer::began`](super::writer::Writer::began)). So the recovery takes the read only if no
//! write was made when it has it, and a claim takes its run's part only if no write was made when
//! it takes it: a write made after that comes after the claim's read, as it could have with a
//! read of its own. Once a write is made, what is left is dropped and every call reads afresh.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::readers::{Pending, Queue};
use super::reads::{self, ClaimRead, StartRead};
use eve_runtime::journal::RunId;

/// The read a start made ahead, until it is used or stale.
pub(super) struct Ahead {
    state: Mutex<State>,
    /// Whether any claim is left to take: once none is, claims skip the lock.
    claims_left: AtomicBool,
}

enum State {
    /// Being read, for the recovery to await.
    Reading(Pending<StartRead>),
    /// The recovery was answered; these claims wait for their runs.
    Claims(HashMap<RunId, ClaimRead>),
    /// Used, stale, or never read.
    Gone,
}

impl Ahead {
    /// The read `reading` made as the store opened, if one was queued.
    pub(super) fn new(reading: Option<Pending<StartRead>>) -> Self {
        let state = reading.map_or(State::Gone, State::Reading);
        Ahead { state: Mutex::new(state), claims_left: AtomicBool::new(false) }
    }

    /// The read under way, for the first recovery to await; `None` once taken.
    pub(super) fn reading(&self) -> Option<Pending<StartRead>> {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Gone) {
            State::Reading(reading) => Some(reading),
            other => {
                *state = other;
                None
            }
        }
    }

    /// Keeps the claims read with the recovery for their runs.
    pub(super) fn keep(&self, claims: Vec<(RunId, ClaimRead)>) {
        if claims.is_empty() {
            return;
        }
        *self.lock() = State::Claims(claims.into_iter().collect());
        self.claims_left.store(true, Ordering::SeqCst);
    }

    /// The claim of `run` from its journal's start, read ahead, if one is kept and `began()` (asked
    /// after it is taken) says nothing was written since the open. Once something was, every
    /// claim left is dropped.
    pub(super) fn claim(&self, run: &RunId, from_seq: u64, began: impl Fn() -> bool) -> Option<ClaimRead> {
        if !self.claims_left.load(Ordering::SeqCst) {
            return None;
        }
        let mut state = self.lock();
        let State::Claims(claims) = &mut *state else { return None };
        let claim = claims.remove(run);
        let stale = began();
        if stale || claims.is_empty() {
            *state = State::Gone;
            self.claims_left.store(false, Ordering::SeqCst);
        }
        claim.filter(|_| from_seq == 0 && !stale)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How many journals read ahead of deliveries are kept at once. The claim a delivery leads to
/// takes its read within moments, so a few are plenty; should the runtime not run its runs (a
/// client's), these few are all it holds.
const DELIVERED_KEPT: usize = 8;

/// The longest journal read ahead of a delivery; a longer one is read by its claim.
const DELIVERED_ENTRIES: u64 = reads::START_ENTRIES;

/// The shortest journal read ahead of a delivery, when the store knows its length (a run let go
/// by the runtime since its last claim): a shorter one is read in less time than reading ahead
/// costs, a hand-off to a reader thread and a second read of the run's state and inbox (measured
/// in `benches/RESULTS.md`, run BJ: 10 entries slower by a few percent, 1,000 faster).
///
/// A run parked before the store opened is read ahead whatever its length, though its row keeps
/// it: there, reading ahead was measured faster for 10 entries as well (run BK: 0.92 ms against
/// 0.99 ms a resume), likely because the connections' caches do not hold its pages yet.
const DELIVERED_SHORTEST: u64 = 128;

/// Journals read ahead of the claims that deliveries lead to.
///
/// A delivery to a run that is not in memory (neither created nor claimed since the store opened,
/// or let go by the runtime since its last claim: see [`Epochs::unheld`](super::Epochs::unheld))
/// wakes it, and its claim then reads its journal: after the delivery's commit, which waits on the
/// disk. So the writer queues that read as soon as it knows the delivery's run, and the claim takes
/// it. The journal cannot change meanwhile: only a claim's appends change it, no executor of the
/// run holds a claim, and the run's next claim takes the read (a later claim drops it, as does a
/// claim that does not read the whole journal). The read may have been made before the delivery
/// committed, so the claim reads the run's state and inbox afresh, and reads everything again
/// should the state differ (a journal grown since the read included).
#[derive(Default)]
pub(super) struct OnDelivery {
    reads: Mutex<Vec<(RunId, Pending<Option<ClaimRead>>)>>,
    /// How many claims were answered from a read made ahead.
    #[cfg(test)]
    answered: std::sync::atomic::AtomicUsize,
}

impl OnDelivery {
    /// Queues on `queue` a read of what the claim of `run` will read (its second half on `other`,
    /// if long), unless its journal is known to be shorter than [`DELIVERED_SHORTEST`], or a
    /// read of it is kept already, or [`DELIVERED_KEPT`] are. `length` is the journal's length,
    /// if the store knows it.
    pub(super) fn read(&self, run: &RunId, length: Option<u64>, queue: &Queue, other: Option<Queue>) {
        if length.is_some_and(|length| length < DELIVERED_SHORTEST) {
            return;
        }
        let mut kept = self.lock();
        if kept.len() >= DELIVERED_KEPT || kept.iter().any(|(read, _)| read == run) {
            return;
        }
        let claimed = run.clone();
        let read = queue.queue(move |conn| reads::claimed_ahead(conn, &claimed, other.as_ref(), DELIVERED_ENTRIES));
        kept.push((run.clone(), read));
    }

    /// Takes the read kept for `run`, if any.
    pub(super) fn take(&self, run: &RunId) -> Option<Pending<Option<ClaimRead>>> {
        let mut kept = self.lock();
        let at = kept.iter().position(|(read, _)| read == run)?;
        Some(kept.swap_remove(at).1)
    }

    /// How many reads are kept.
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.lock().len()
    }

    /// Waits until the read kept for `run` (which must be kept) is made, and keeps what it read:
    /// a test that changes the journal after the read must know the read came first.
    #[cfg(test)]
    pub(super) async fn made(&self, run: &RunId) {
        let pending = self.take(run).expect("a read is kept for the run");
        let answer = pending.await.expect("the readers are running");
        let (reply, made) = tokio::sync::oneshot::channel();
        let _ = reply.send(answer);
        self.lock().push((run.clone(), made));
    }

    /// Counts a claim answered from a read made ahead.
    #[cfg(test)]
    pub(super) fn answered_one(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    /// How many claims were answered from a read made ahead.
    #[cfg(test)]
    pub(super) fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(RunId, Pending<Option<ClaimRead>>)>> {
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
