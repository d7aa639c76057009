//! The current claim epoch of each run, in memory.
//!
//! Only one process uses a store file at a time (it holds the file lock), so fences need only
//! hold within this process. A run absent from the map was not claimed since the store opened, or
//! has finished: its current epoch is 0, which no fence handed out by this store carries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::journal::RunId;

/// Shared by the store (claims) and the write connection's users (fence checks inside each append).
#[derive(Clone, Debug, Default)]
pub(super) struct Epochs(Arc<Mutex<HashMap<RunId, u64>>>);

impl Epochs {
    fn lock(&self) -> MutexGuard<'_, HashMap<RunId, u64>> {
        self.0.lock().expect("the epochs mutex is never poisoned: no code panics while holding it")
    }

    /// Records the epoch a creator holds.
    pub fn created(&self, run: &RunId) {
        self.lock().insert(run.clone(), 1);
    }

    /// Starts a new claim of `run`, superseding any earlier one, and returns its epoch.
    pub fn bump(&self, run: &RunId) -> u64 {
        let mut epochs = self.lock();
        let epoch = epochs.entry(run.clone()).or_insert(1);
        *epoch += 1;
        *epoch
    }

    /// Forgets the epoch of a run that finished.
    pub fn forget(&self, run: &RunId) {
        self.lock().remove(run);
    }

    /// Undoes a claim of a run that turned out not to exist.
    pub fn forget_if(&self, run: &RunId, epoch: u64) {
        let mut epochs = self.lock();
        if epochs.get(run) == Some(&epoch) {
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
        self.lock().get(run).copied().unwrap_or(0)
    }
}
