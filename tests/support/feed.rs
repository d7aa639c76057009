//! Reading a session's event feed in tests: until an event of a name, or until what was read
//! satisfies a test, with a deadline that names what was read when it passes.

use std::time::Duration;

use eve_tools::session::{Session, SessionEvent};
use futures::StreamExt;

/// Reads the feed after `after` until an event named `until`; returns what it read.
pub async fn read_until(session: &Session, after: u64, until: &str) -> Vec<SessionEvent> {
    let read = read_while(session, after, |read| read.last().is_none_or(|event| event.name != until)).await;
    assert!(
        read.last().is_some_and(|event| event.name == until),
        "no `{until}` after {after}; read: {:?}",
        names(&read)
    );
    read
}

/// Reads the feed after `after` while `more` says the events read so far are not enough (at most
/// 20 s); returns what it read.
pub async fn read_while(session: &Session, after: u64, more: impl Fn(&[SessionEvent]) -> bool) -> Vec<SessionEvent> {
    let mut events = session.events(after);
    let mut read = Vec::new();
    let deadline = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(deadline);
    while more(&read) {
        tokio::select! {
            event = events.next() => read.push(event.expect("the feed goes on").expect("the feed reads")),
            () = &mut deadline => panic!("the feed stopped short after {after}; read: {:#?}", names(&read)),
        }
    }
    read
}

/// The events' names.
pub fn names(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|event| event.name.as_str()).collect()
}

/// The first event named `name`.
pub fn find<'a>(events: &'a [SessionEvent], name: &str) -> &'a SessionEvent {
    events.iter().find(|event| event.name == name).unwrap_or_else(|| panic!("no {name} in {:?}", names(events)))
}

/// Every event named `name`.
pub fn all<'a>(events: &'a [SessionEvent], name: &str) -> Vec<&'a SessionEvent> {
    events.iter().filter(|event| event.name == name).collect()
}
