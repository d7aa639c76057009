//! Helpers for the tests of the examples' tools: what a run executed, the events it published, and
//! "processes" over one SQLite directory that stop and start again, as a restarted binary does.

use std::path::Path;

use eve_tools::{Entry, ManualClock, RunEvent, RunId, Runtime};
use tokio::sync::broadcast;

/// The names of the steps a journal records as completed, in order.
pub fn steps_run(entries: &[Entry]) -> Vec<String> {
    let names = entries.iter().filter_map(|entry| match entry {
        Entry::StepCompleted { name, .. } => Some(name.to_string()),
        _ => None,
    });
    names.collect()
}

/// Every event received so far.
pub fn drain(events: &mut broadcast::Receiver<RunEvent>) -> Vec<RunEvent> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

/// The names of the steps whose attempts started for `run`, among `events`.
pub fn steps_started(events: &[RunEvent], run: &RunId) -> Vec<String> {
    let started = events.iter().filter_map(|event| match event {
        RunEvent::StepStarted { run: of, step, .. } if of == run => Some(step.clone()),
        _ => None,
    });
    started.collect()
}

/// The task id `run` published with its questions, if it asked any.
pub fn task_id(events: &[RunEvent], run: &RunId) -> Option<String> {
    events.iter().find_map(|event| match event {
        RunEvent::InputRequested { run: of, task_id, .. } if of == run => task_id.clone(),
        _ => None,
    })
}

/// A runtime over the SQLite store in `dir`, reading `clock`: one "process" of a binary.
pub fn process(dir: &Path, clock: &ManualClock) -> Runtime {
    Runtime::builder().data_dir(dir).clock(clock.clone()).build().expect("the runtime opens its store")
}

/// Ends a process: drops its runtime and waits until the store has closed and released its file
/// lock, so the next process can open it.
pub async fn stop(runtime: Runtime) {
    runtime.shutdown().await;
}

/// Checks that `id` is `{prefix}` followed by `len` characters of `alphabet`.
pub fn has_shape(id: &str, prefix: &str, len: usize, alphabet: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|rest| rest.len() == len && rest.chars().all(|c| alphabet.contains(c)))
}
