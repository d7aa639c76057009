//! A session's event feed: what happened in its turns, as the seed's stream events.
//!
//! The session's body publishes each event as a recorded value ([`RecordKind::Published`]), so
//! the session's journal *is* the feed: every event is durable, numbered by the body
//! (`sequence`, from 1, gapless), and published once, never again on replay. A reader asks for the
//! events after a sequence number (a client reconnecting with `Last-Event-ID`): they are read
//! from the journal, then followed live as the session commits more, without loss or duplicates,
//! across restarts of the server too.

use std::collections::VecDeque;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;

use eve_runtime::Runtime;
use eve_runtime::events::RunEvent;
use eve_runtime::journal::{Entry, RecordKind, RunId};

use crate::error::Error;

/// One event of a session's feed, such as `task.started` or `turn.completed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// Its number in the session's feed, from 1, without gaps.
    pub sequence: u64,
    /// Its name, dotted as the seed names stream events: `turn.started`, `task.settled`, …
    #[serde(rename = "type")]
    pub name: String,
    /// Its fields (camelCase), such as `turnId` or `taskId`.
    pub data: Value,
}

impl SessionEvent {
    /// The event a published value holds, if it is one.
    pub(crate) fn from_published(value: &Value) -> Option<SessionEvent> {
        // Read from the borrowed value: only the event's own fields are copied, not the whole map.
        SessionEvent::deserialize(value).ok()
    }

    /// A field of the event's data, as text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.data.get(name).and_then(Value::as_str)
    }
}

/// The events of `run`'s journal with a sequence number above `after`.
pub(crate) fn journaled(entries: &[Entry], after: u64) -> Vec<SessionEvent> {
    let events = entries.iter().filter_map(|entry| match entry {
        Entry::Recorded { kind: RecordKind::Published, value, .. } => value.decode::<SessionEvent>().ok(),
        _ => None,
    });
    events.filter(|event| event.sequence > after).collect()
}

/// Follows a session's feed from `after`: what the journal holds, then what comes live, until
/// the session's run ends.
pub(crate) fn follow(
    runtime: Runtime,
    run: RunId,
    after: u64,
) -> impl Stream<Item = Result<SessionEvent, Error>> + Send + 'static {
    struct Follow {
        runtime: Runtime,
        run: RunId,
        live: broadcast::Receiver<RunEvent>,
        ready: VecDeque<SessionEvent>,
        last: u64,
        caught_up: bool,
        finished: bool,
    }
    // Subscribe before reading the journal, so nothing committed in between is missed; events
    // seen twice (in the journal and live) are told apart by their sequence numbers.
    let live = runtime.events();
    let state = Follow { runtime, run, live, ready: VecDeque::new(), last: after, caught_up: false, finished: false };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                if event.sequence <= state.last {
                    continue;
                }
                state.last = event.sequence;
                return Some((Ok(event), state));
            }
            if !state.caught_up {
                state.caught_up = true;
                match state.runtime.journal(&state.run).await {
                    Ok(record) => {
                        state.finished |= record.summary.status.is_finished();
                        state.ready.extend(journaled(&record.entries, state.last));
                    }
                    Err(error) => return Some((Err(error.into()), state)),
                }
                continue;
            }
            if state.finished {
                return None;
            }
            match state.live.recv().await {
                Ok(RunEvent::Published { run, value }) if run == state.run => {
                    state.ready.extend(SessionEvent::from_published(&value));
                }
                // The run ended: read what the journal holds last, then end.
                Ok(RunEvent::Finished { run, .. }) if run == state.run => state.caught_up = false,
                Ok(_) => {}
                // Fell behind the live channel: read the journal again from the last event sent.
                Err(broadcast::error::RecvError::Lagged(_)) => state.caught_up = false,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}
