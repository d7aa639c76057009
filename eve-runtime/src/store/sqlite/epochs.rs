//! The current claim epoch of each run, in memory, and whether the run is known not to be marked
//! parked.
//!
//! Only one process uses a store file at a time (it holds the file lock), so fences need only
//! hold within this process. A run absent from the map was not claimed since the store opened, or
//! has finished: its current epoch is 0, which no fence handed out by this store carries.
//!
//! An append clears its run's parked mark (see `Store::park`), which costs a statement on the
//! writer thread even when there is no mark to clear, as for every step of a run that does not
//! park. So the map also says when a run is known to be unmarked: from its creation, or from an
//! append of the current claim that committed, until a park of it is asked for or it is claimed
//! again. Anything else, a run read from the file after a start included, counts as marked, and
//! its next append clears the mark in the file.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::journal::RunId;

/// Shared by the store (claims) and the write connection's users (fence checks inside each append).
/// Every append looks its run up twice (its fence on the writer, its commit on the run's thread),
/// so run ids are hashed with foldhash, as in the memory store.
#[derive(Clone, Debug, Default)]
pub(super) struct Epochs(Arc<Mutex<foldhash::HashMap<RunId, Claim>>>);

/// What the map keeps of a run.
#[derive(Clone, Copy, Debug)]
struct Claim {
    epoch: u64,
    /// The run is known to have no parked mark in the file (see the module documentation).
    unmarked: bool,
}

impl Epochs {
    fn lock(&self) -> MutexGuard<'_, foldhash::HashMap<RunId, Claim>> {
        self.0.lock().expect("the epochs mutex is never poisoned: no code panics while holding it")
    }

    /// Records the epoch a creator holds; a new run has no parked mark.
    pub fn created(&self, run: &RunId) {
        self.lock().insert(run.clone(), Claim { epoch: 1, unmarked: true });
    }

    /// Starts a new claim of `run`, superseding any earlier one, and returns its epoch.
    pub fn bump(&self, run: &RunId) -> u64 {
        let mut epochs = self.lock();
        let claim = epochs.entry(run.clone()).or_insert(Claim { epoch: 1, unmarked: false });
        claim.epoch += 1;
        claim.unmarked = false;
        claim.epoch
    }

    /// Records that an append of `run` under `epoch` committed, so the run has no parked mark,
    /// unless a newer claim of it has begun since (the append's writer may be a stale one).
    pub fn appended(&self, run: &RunId, epoch: u64) {
        if let Some(claim) = self.lock().get_mut(run)
            && claim.epoch == epoch
        {
            claim.unmarked = true;
        }
    }

    /// Records that a park of `run` was asked for: until an append commits, the run may be marked.
    pub fn parking(&self, run: &RunId) {
        if let Some(claim) = self.lock().get_mut(run) {
            claim.unmarked = false;
        }
    }

    /// Forgets the epoch of a run that finished.
    pub fn forget(&self, run: &RunId) {
        self.lock().remove(run);
    }

    /// Undoes a claim of a run that turned out not to exist.
    pub fn forget_if(&self, run: &RunId, epoch: u64) {
        let mut epochs = self.lock();
        if epochs.get(run).is_some_and(|claim| claim.epoch == epoch) {
            epochs.remove(run);
        }
    }

    /// How many runs have an epoch.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// The current epoch of `run` (0 if it was not claimed since the store opened).
    pub fn current(&self, run: &RunId) -> u64 {
        self.current_and_unmarked(run).0
    }

    /// The current epoch of `run`, and whether it is known to have no parked mark.
    pub fn current_and_unmarked(&self, run: &RunId) -> (u64, bool) {
        self.lock().get(run).map_or((0, false), |claim| (claim.epoch, claim.unmarked))
    }
}
