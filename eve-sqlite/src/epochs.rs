//! The current claim epoch of each run, in memory, whether the run is known not to be marked
//! parked, the length of its journal when this process knows it, and whether the runtime let go
//! of it since its last claim.
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
//!
//! An append must start where the journal ends, and only in an unfinished run. The file says both
//! (the run's status, and the journal's last `seq`), but reading them on every append cost as much
//! as the row that kept the length before schema version 4. So the map also keeps the length of
//! an unfinished run's journal, as this process last read it (a claim) or made it (a creation, an
//! append or a continue-as-new that committed) under the current claim. It is never longer than
//! the file's: it grows only after a commit, and a claim's read is a snapshot. An append that
//! starts at the known length needs no read; any other, and any append of a run whose length is
//! not known, is checked against the file. Should the file have grown past the known length (an
//! append under an older claim that passed its fence check just before the claim began), the
//! append's first `INSERT` meets the entry already there and is checked against the file then.

use std::sync::{Arc, Mutex, MutexGuard};

use eve_runtime::journal::RunId;

/// Shared by the store (claims) and the write connection's users (fence checks inside each append).
/// Every append looks its run up twice (its fence on the writer, its commit on the run's thread),
/// so run ids are hashed with foldhash, as in the memory store.
#[derive(Clone, Debug, Default)]
pub(super) struct Epochs(Arc<Mutex<foldhash::HashMap<RunId, Claim>>>);

/// What the map keeps of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Claim {
    /// The current epoch (0 if the run was not claimed since the store opened, or finished).
    pub epoch: u64,
    /// The run is known to have no parked mark in the file (see the module documentation).
    pub unmarked: bool,
    /// The journal's length, if the run is known to be unfinished and its length known (see the
    /// module documentation).
    pub length: Option<u64>,
    /// The runtime let go of the run's executor since the run's last claim
    /// (`Store::left_memory`), so its next claim reads the whole journal.
    pub left: bool,
}

impl Epochs {
    fn lock(&self) -> MutexGuard<'_, foldhash::HashMap<RunId, Claim>> {
        self.0.lock().expect("the epochs mutex is never poisoned: no code panics while holding it")
    }

    /// Records the epoch a creator holds; a new run has no parked mark and one entry.
    pub fn created(&self, run: &RunId) {
        self.lock().insert(run.clone(), Claim { epoch: 1, unmarked: true, length: Some(1), left: false });
    }

    /// Starts a new claim of `run`, superseding any earlier one, and returns its epoch, and
    /// whether the run was [`unheld`](Epochs::unheld) until now.
    pub fn bump(&self, run: &RunId) -> (u64, bool) {
        let mut epochs = self.lock();
        let unheld = epochs.get(run).is_none_or(|claim| claim.left);
        let claim = epochs.entry(run.clone()).or_insert(Claim { epoch: 1, unmarked: false, length: None, left: false });
        claim.epoch += 1;
        claim.unmarked = false;
        claim.length = None;
        claim.left = false;
        (claim.epoch, unheld)
    }

    /// Records that the runtime let go of `run` (see `Store::left_memory`); a run with no claim
    /// is unheld already.
    pub fn left_memory(&self, run: &RunId) {
        if let Some(claim) = self.lock().get_mut(run) {
            claim.left = true;
        }
    }

    /// Whether no executor of `run` is in memory as far as the store knows, with its journal's
    /// length if known: `Some` if the run was neither created nor claimed since the store opened
    /// (or it finished since; its length is not known), or the runtime let go of it since its
    /// last claim. Its next claim reads its whole journal.
    pub fn unheld(&self, run: &RunId) -> Option<Option<u64>> {
        match self.lock().get(run) {
            None => Some(None),
            Some(claim) => claim.left.then_some(claim.length),
        }
    }

    /// Records what the read of the claim at `epoch` found: the journal's length, if the run is
    /// unfinished. Ignored if a newer claim has begun since.
    pub fn claimed(&self, run: &RunId, epoch: u64, length: Option<u64>) {
        self.update(run, epoch, |claim| claim.length = length);
    }

    /// Records that an append of `run` under `epoch` committed, leaving the journal `length`
    /// entries long, so the run has no parked mark, unless a newer claim of it has begun since
    /// (the append's writer may be a stale one).
    pub fn appended(&self, run: &RunId, epoch: u64, length: u64) {
        self.update(run, epoch, |claim| {
            claim.unmarked = true;
            claim.length = Some(length);
        });
    }

    /// Records that a continue-as-new of `run` under `epoch` committed: a new journal of one entry.
    pub fn continued(&self, run: &RunId, epoch: u64) {
        self.update(run, epoch, |claim| claim.length = Some(1));
    }

    /// Applies `change` to the run's claim if its epoch is still `epoch`.
    fn update(&self, run: &RunId, epoch: u64, change: impl FnOnce(&mut Claim)) {
        if let Some(claim) = self.lock().get_mut(run)
            && claim.epoch == epoch
        {
            change(claim);
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
        self.known(run).epoch
    }

    /// What the map knows of `run`.
    pub fn known(&self, run: &RunId) -> Claim {
        self.lock().get(run).copied().unwrap_or(Claim { epoch: 0, unmarked: false, length: None, left: false })
    }
}
