//! The replay check: would the code in this binary replay a recorded journal? The body is
//! rebuilt and fed the journal's deliveries exactly as a cold activation feeds them, but nothing
//! leaves it: no step runs, no timer is armed, nothing is written or published. So a deployment's
//! CI can replay the journals of the runs in flight against the new build before it ships.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Driver, Finish, start_body, task_of};
use crate::error::NonDeterminismError;
use crate::journal::{Entry, Op, OpSignature, RunId, SourceLocation};
use crate::run_core::{Mode, ReplayIndex, RunCore, Services, Started};
use crate::store::Fence;

/// How a recorded journal replays against the code in this binary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum ReplayVerdict {
    /// The code asks for every recorded operation, in order, with the same names and inputs.
    #[serde(rename_all = "camelCase")]
    Replays {
        /// How many operations the journal records (and the code asked for again).
        ops: u32,
        /// Whether the body finished on the recorded deliveries alone (the run had ended).
        finished: bool,
    },
    /// The code asks for something else at `op`: the run would fail with `NonDeterminism`.
    #[serde(rename_all = "camelCase")]
    Diverges {
        /// The operation number.
        op: Op,
        /// What the journal records there (`None`: the journal ends there).
        expected: Option<OpSignature>,
        /// What the code asks for instead (`None`: nothing more, the body returned or waits).
        found: Option<OpSignature>,
        /// Where in this build's source the body asks for `found`, when that is known.
        #[serde(skip_serializing_if = "Option::is_none")]
        at: Option<SourceLocation>,
        /// The whole story in one sentence.
        message: String,
    },
    /// The journal names a workflow this binary does not have (renamed, moved or removed).
    #[serde(rename_all = "camelCase")]
    UnknownWorkflow {
        /// The workflow id the journal records.
        workflow_id: String,
    },
    /// The body panicked while it replayed.
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// The journal cannot be replayed at all (it does not start with `run_started`).
    Unreadable {
        /// What is wrong with it.
        reason: String,
    },
}

impl ReplayVerdict {
    /// Whether the code replays the journal.
    pub fn replays(&self) -> bool {
        matches!(self, ReplayVerdict::Replays { .. })
    }
}

/// Replays `entries`, the journal of run `run`, against the code in this binary.
pub(crate) fn check(run: &RunId, entries: &[Entry]) -> ReplayVerdict {
    let Some(Entry::RunStarted { workflow_id, input, .. }) = entries.first() else {
        return ReplayVerdict::Unreadable { reason: "the journal does not start with `run_started`".into() };
    };
    let Some(tool) = crate::registry::workflow(workflow_id) else {
        return ReplayVerdict::UnknownWorkflow { workflow_id: workflow_id.to_string() };
    };
    let services = Arc::new(Services::new(
        Arc::new(crate::time::SystemClock),
        crate::secret::SecretKey::generate(),
        HashMap::new(),
        String::new(),
        crate::state::State::default(),
    ));
    crate::registry::learn_step_names();
    let index = ReplayIndex::build(entries, crate::journal::decode::step_name);
    let last = index.last_op();
    let started = Started::of(&entries[0]);
    let task = task_of(tool, run);
    let core = Arc::new(RunCore::new(run.clone(), services, &started, task, index, Mode::Replaying));
    let body = start_body(&core, tool, input.to_value().into_owned());
    let mut driver = Driver::new(core, Some(tool), body, Fence { epoch: 0 }, entries.len() as u64, true);
    driver.feed(&entries[1..], |_, _| {});
    if let Some(divergence) = driver.core.lock().divergence.clone() {
        return diverges(divergence);
    }
    if let Some(Finish::Panicked(message)) = &driver.finish {
        return ReplayVerdict::Panicked { message: message.clone() };
    }
    if let Some(divergence) = driver.unvisited_ops() {
        return diverges(divergence);
    }
    let next = Op(driver.core.lock().next_op);
    if last.is_some_and(|last| next <= last) {
        // Every delivery was fed and the body waits, yet the journal records ops it never asked
        // for: the recorded code asked for them on the same deliveries.
        let state = driver.core.lock();
        let expected = state.index.signatures.get(&next).cloned();
        return diverges(NonDeterminismError { run: run.clone(), op: next, expected, found: None, at: None });
    }
    let ops = last.map_or(0, |last| last.0 + 1);
    ReplayVerdict::Replays { ops, finished: driver.finish.is_some() }
}

fn diverges(error: NonDeterminismError) -> ReplayVerdict {
    let message = error.to_string();
    ReplayVerdict::Diverges { op: error.op, expected: error.expected, found: error.found, at: error.at, message }
}
