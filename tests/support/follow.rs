//! Following a run as a slow client does: it starts late, falls behind on purpose while the run
//! goes on, and reconnects from the last position it received. Every store's follower test reads
//! a long run this way and checks that it got the journal exactly.

use std::time::Duration;

use eve_tools::follow::Followed;
use eve_tools::journal::Position;
use eve_tools::{Entry, RunId, Runtime};
use futures::StreamExt;

/// How a slow client follows a run.
#[derive(Clone, Copy, Debug)]
pub struct Slow {
    /// It starts once the journal holds this many entries.
    pub late: u64,
    /// After this many entries it sleeps for `lag` while the run goes on.
    pub lag_after: usize,
    /// How long it sleeps.
    pub lag: Duration,
    /// After this many entries it drops its stream and follows again from the next position.
    pub reconnect_after: usize,
    /// How long the whole run may take to read.
    pub within: Duration,
}

/// Follows `run` as `slow` says, from the start of its journal, until the run ends; checks now and
/// then that the entry just received is in the store already (nothing comes ahead of the
/// journal). Returns what it received.
pub async fn follow_slowly(runtime: &Runtime, run: &RunId, slow: Slow) -> Vec<Followed> {
    crate::within("the run's journal reaches the point the follower starts at", async {
        while runtime
            .store()
            .tail(run)
            .await
            .expect("the store reads")
            .is_none_or(|(summary, _)| summary.entries < slow.late)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let mut received: Vec<Followed> = Vec::new();
    let mut follow = runtime.follow(run, Position::START);
    let mut reconnected = false;
    let read = async {
        while let Some(followed) = follow.next().await {
            let followed = followed.expect("the follower reads");
            if received.len().is_multiple_of(97) || followed.entry.is_terminal() {
                let stored = runtime.store().read(run, followed.position, 1).await.expect("the store reads");
                let stored = stored.expect("the run exists");
                assert_eq!(
                    stored.entries.first(),
                    Some(&followed.entry),
                    "entry {} came before it was in the store",
                    followed.position
                );
            }
            received.push(followed);
            if received.len() == slow.lag_after {
                tokio::time::sleep(slow.lag).await;
            }
            if received.len() == slow.reconnect_after && !reconnected {
                reconnected = true;
                let next = received.last().expect("entries were received").position.next();
                follow = runtime.follow(run, next);
            }
        }
    };
    tokio::time::timeout(slow.within, read)
        .await
        .unwrap_or_else(|_| panic!("the follower did not read the whole run within {:?}", slow.within));
    received
}

/// Checks that `received` is the run's journal exactly: each entry once, in order, at the
/// positions of one history.
pub async fn assert_whole_journal(runtime: &Runtime, run: &RunId, received: &[Followed]) {
    let journal = runtime.journal(run).await.expect("the run exists").entries;
    let positions: Vec<Position> = received.iter().map(|followed| followed.position).collect();
    let expected: Vec<Position> = (0..journal.len() as u64).map(|seq| Position::new(0, seq)).collect();
    if positions != expected {
        let first_wrong = positions.iter().zip(&expected).position(|(got, want)| got != want);
        panic!(
            "received {} positions for a journal of {}; the first out of place is at index {first_wrong:?}",
            positions.len(),
            journal.len()
        );
    }
    let entries: Vec<&Entry> = received.iter().map(|followed| &followed.entry).collect();
    assert!(entries.iter().copied().eq(journal.iter()), "the entries received are the journal's");
    assert!(received.last().is_some_and(|followed| followed.entry.is_terminal()), "the stream ends with the run");
}
