//! A session's feed read by a slow client: the session continues as new every few turns while the
//! client is still reading the turns before, and the client gets every event once, in order.

use std::time::Duration;

use eve_tests::World;
use eve_tools::prelude::*;
use eve_tools::session::{ModelResponse, ScriptedModel, SessionEvent, SessionOptions};
use futures::StreamExt;

/// Twelve turns, paced a turn every 60 ms, in a session that continues as new every six; the
/// client stops reading for 300 ms after the third turn, so it is four turns or so behind when the
/// first history ends. The runtime's event channel holds 16 events, far fewer than the client
/// falls behind by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_feed_reader_gets_every_event_across_compactions() {
    let world = World::in_memory();
    let model = ScriptedModel::new(|request| ModelResponse::text(format!("re: {}", request.last_user().unwrap_or(""))));
    let runtime = world.builder(16).event_capacity(16).model(model).build().unwrap();
    let session = runtime.session(SessionOptions::new().compact_every(6)).await.unwrap();
    let mut feed = session.events(0);
    let reader = tokio::spawn(async move {
        let mut seen: Vec<SessionEvent> = Vec::new();
        while seen.iter().filter(|event| event.name == "turn.completed").count() < 12 {
            let next = tokio::time::timeout(Duration::from_secs(20), feed.next()).await;
            let names: Vec<&str> = seen.iter().map(|event| event.name.as_str()).collect();
            let event = next.unwrap_or_else(|_| panic!("the feed stopped after {names:?}"));
            let event = event.expect("the feed goes on").expect("the feed reads");
            let third = event.name == "turn.completed"
                && seen.iter().filter(|event| event.name == "turn.completed").count() == 2;
            seen.push(event);
            if third {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        seen
    });
    // A second client, reading as fast as it can, paces the turns.
    let mut pace = session.events(0);
    for turn in 0..12 {
        session.send(format!("m{turn}")).await.unwrap();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(20), pace.next()).await;
            let event = event.unwrap_or_else(|_| panic!("turn {turn} did not complete")).unwrap().unwrap();
            if event.name == "turn.completed" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let seen = reader.await.unwrap();
    let sequences: Vec<u64> = seen.iter().map(|event| event.sequence).collect();
    assert_eq!(sequences, (1..=sequences.len() as u64).collect::<Vec<_>>(), "every event once, in order");
    let compactions = seen.iter().filter(|event| event.name == "session.compacted").count();
    assert!(compactions >= 1, "the session continued as new while the client read: {compactions}");
    for turn in 0..12 {
        let answered =
            seen.iter().any(|event| event.name == "message.completed" && event.data["text"] == format!("re: m{turn}"));
        assert!(answered, "turn {turn}'s answer was read");
    }
}
