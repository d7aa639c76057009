//! A session's event feed: what happened in its turns, as the seed's stream events.
//!
//! The session's body publishes each event as a recorded value ([`RecordKind::Published`]), so
//! the session's journal *is* the feed: every event is durable, numbered by the body
//! (`sequence`, from 1, gapless), and published once, never again on replay. A reader asks for the
//! events after a sequence number (a client reconnecting with `Last-Event-ID`): they are read
//! from the journal, then followed live as the session commits more, without loss or duplicates,
//! across restarts of the server too.

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use eve_runtime::Runtime;
use eve_runtime::follow::Followed;
use eve_runtime::journal::{Entry, Position, RecordKind, RunId};

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
/// the session's run ends. The run's journal is followed ([`Runtime::follow`]), so nothing is
/// missed however slowly the feed is read; the events are told apart by their sequence numbers,
/// which go on across the histories of a session that continues as new.
pub(crate) fn follow(
    runtime: Runtime,
    run: RunId,
    after: u64,
) -> impl Stream<Item = Result<SessionEvent, Error>> + Send + 'static {
    let mut last = after;
    runtime.follow(&run, Position::START).filter_map(move |followed| {
        let event = match followed {
            Err(error) => Some(Err(error.into())),
            Ok(Followed { entry: Entry::Recorded { kind: RecordKind::Published, value, .. }, .. }) => {
                let event = value.decode::<SessionEvent>().ok().filter(|event| event.sequence > last);
                event.map(|event| {
                    last = event.sequence;
                    Ok(event)
                })
            }
            Ok(_) => None,
        };
        std::future::ready(event)
    })
}
