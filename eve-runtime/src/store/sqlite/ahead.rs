//! What a start reads ahead, while the store's open waits on the disk.
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

use super::readers::Pending;
use super::reads::{ClaimRead, StartRead};
use crate::journal::RunId;

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
