//! Following a run on each single-process store: a run of 10,000 entries read by a follower that
//! starts late, falls behind on purpose and reconnects gets every entry exactly once, in order,
//! and none before it is durable; a follower of a run that continues as new goes on with each new
//! history; a follower of a finished run reads it and ends; a follower knows when it has caught
//! up with the journal.

use std::time::Duration;

use eve_tests::World;
use eve_tests::follow::{Slow, assert_whole_journal, follow_slowly};
use eve_tools::journal::Position;
use eve_tools::prelude::*;
use eve_tools::{Entry, Runtime};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// How many steps to take, resting a moment every so often so the run lasts a while.
#[derive(Deserialize, JsonSchema)]
pub struct Ticks {
    steps: u32,
    rest_every: u32,
}

#[step]
async fn tick(_ctx: &StepCtx, n: u32, rest: bool) -> Result<u32, StepError> {
    if rest {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(n)
}

/// Takes `steps` steps, one journal entry each.
#[workflow_tool]
pub async fn ticks(input: Ticks, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    for n in 0..input.steps {
        tick(ctx, n, n.is_multiple_of(input.rest_every)).await?;
    }
    Ok(input.steps)
}

/// The slow client of the long-run tests: it starts 2,000 entries in, sleeps 150 ms after 3,000,
/// and reconnects after 6,000.
const SLOW: Slow = Slow {
    late: 2_000,
    lag_after: 3_000,
    lag: Duration::from_millis(150),
    reconnect_after: 6_000,
    within: Duration::from_secs(20),
};

async fn a_slow_follower_reads_ten_thousand_entries_exactly(runtime: Runtime) {
    let handle = runtime.start("ticks", json!({ "steps": 10_000, "rest_every": 40 })).await.unwrap();
    let received = follow_slowly(&runtime, handle.id(), SLOW).await;
    assert_eq!(received.len(), 10_002, "RunStarted, 10,000 steps and RunCompleted");
    assert_whole_journal(&runtime, handle.id(), &received).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_slow_follower_reads_ten_thousand_entries_exactly() {
    a_slow_follower_reads_ten_thousand_entries_exactly(World::in_memory().runtime(16)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_slow_follower_reads_ten_thousand_entries_exactly() {
    let dir = tempfile::tempdir().unwrap();
    a_slow_follower_reads_ten_thousand_entries_exactly(World::sqlite(dir.path()).runtime(16)).await;
}

/// Where a counting loop stands.
#[derive(serde::Serialize, Deserialize, JsonSchema)]
pub struct Laps {
    lap: u32,
    laps: u32,
}

/// One step and a minute's sleep per history, continuing as new until the last lap.
#[workflow_tool]
pub async fn laps(input: Laps, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    tick(ctx, input.lap, false).await?;
    sleep(Duration::from_secs(60)).await?;
    if input.lap == input.laps {
        return Ok(input.lap);
    }
    ctx.continue_as_new(Laps { lap: input.lap + 1, ..input })
}

#[tokio::test]
async fn a_follower_goes_on_with_each_new_history() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(16);
    let handle = runtime.start("laps", json!({ "lap": 1, "laps": 3 })).await.unwrap();
    let mut follow = runtime.follow(handle.id(), Position::START);
    let mut received = Vec::new();
    for lap in 0..3u32 {
        // Each history: RunStarted, the step, the sleep's record; then the sleep holds it.
        for _ in 0..3 {
            received.push(eve_tests::within("an entry", follow.next()).await.unwrap().unwrap());
        }
        assert_eq!(received.last().unwrap().position, Position::new(lap, 2), "history {lap} read to its end");
        world.clock.advance(Duration::from_secs(60));
    }
    while let Some(followed) = eve_tests::within("the rest", follow.next()).await {
        received.push(followed.unwrap());
    }
    let starts: Vec<Position> = received
        .iter()
        .filter(|followed| matches!(followed.entry, Entry::RunStarted { .. }))
        .map(|followed| followed.position)
        .collect();
    assert_eq!(starts, [Position::new(0, 0), Position::new(1, 0), Position::new(2, 0)], "each history from its start");
    assert!(received.last().unwrap().entry.is_terminal(), "the stream ends with the run");
}

#[tokio::test]
async fn a_follower_of_a_finished_run_reads_it_and_ends_and_a_bad_position_is_refused() {
    let runtime = World::in_memory().runtime(16);
    let handle = runtime.start("ticks", json!({ "steps": 3, "rest_every": 1 })).await.unwrap();
    handle.outcome().await.unwrap();
    let whole: Vec<_> = runtime.follow(handle.id(), Position::START).collect().await;
    assert_eq!(whole.len(), 5, "RunStarted, three steps, RunCompleted: {whole:?}");
    let mut past_the_end = runtime.follow(handle.id(), Position::new(0, 5));
    assert!(past_the_end.next().await.is_none(), "following after the last entry of a finished run ends at once");
    assert!(past_the_end.next().await.is_none(), "and stays ended when polled again");
    let ahead: Vec<_> = runtime.follow(handle.id(), Position::new(3, 0)).collect().await;
    let error = ahead.into_iter().next().expect("an error").unwrap_err();
    assert!(error.to_string().contains("is past run"), "{error}");
    let unknown = "no-such-run".parse().unwrap();
    let error = runtime.follow(&unknown, Position::START).next().await.expect("an error").unwrap_err();
    assert!(matches!(error, eve_tools::Error::RunNotFound(_)), "{error}");
}

/// How many steps to take before waiting a minute.
#[derive(Deserialize, JsonSchema)]
pub struct Steps {
    steps: u32,
}

/// Takes `steps` steps, then sleeps a minute.
#[workflow_tool]
pub async fn steps_then_sleep(input: Steps, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    for n in 0..input.steps {
        tick(ctx, n, false).await?;
    }
    sleep(Duration::from_secs(60)).await?;
    Ok(input.steps)
}

/// A follower says it is caught up only with the last entry of the journal, also when that entry
/// ends a page of the store's reads exactly (the run's 256 entries here, a page being 256); with
/// a run that goes on, it is not caught up until it has read what was added.
#[tokio::test]
async fn a_follower_is_caught_up_with_the_last_entry_only() {
    for steps in [3u32, 254, 300] {
        let dir = tempfile::tempdir().unwrap();
        let world = World::sqlite(dir.path());
        let runtime = world.runtime(16);
        let handle = runtime.start("steps_then_sleep", json!({ "steps": steps })).await.unwrap();
        let entries = u64::from(steps) + 2;
        eve_tests::within("the run's sleep", async {
            while runtime.journal(handle.id()).await.unwrap().entries.len() as u64 != entries {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        let mut follow = runtime.follow(handle.id(), Position::START);
        assert!(!follow.is_caught_up(), "nothing read yet");
        for seq in 0..entries {
            let followed = eve_tests::within("an entry", follow.next()).await.unwrap().unwrap();
            assert_eq!(followed.position, Position::new(0, seq));
            let last = seq + 1 == entries;
            assert_eq!(follow.is_caught_up(), last, "{steps} steps: caught up after entry {seq}");
        }
        world.clock.advance(Duration::from_secs(60));
        let fired = eve_tests::within("the timer's entry", follow.next()).await.unwrap().unwrap();
        assert!(matches!(fired.entry, Entry::TimerFired { .. }), "{fired:?}");
        let end = eve_tests::within("the end", follow.next()).await.unwrap().unwrap();
        assert!(end.entry.is_terminal(), "{end:?}");
    }
}
