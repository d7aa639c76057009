//! Remind me later: the `remind` example's task fires exactly at its deadline on a manual clock,
//! once, across restarts, and refuses delays it cannot read before any run starts.

use std::time::Duration;

use eve_examples::remind::Reminder;
use eve_tests::{START, World};
use eve_tools::{Entry, ManualClock, Phase, RunId, RunOutcome, Runtime};
use serde_json::json;

use super::support::{process, stop};

async fn start(runtime: &Runtime, delay: &str) -> RunId {
    let run = runtime.start("remind", json!({ "note": "stand up", "delay": delay })).await.unwrap();
    assert_eq!(run.parked().await.unwrap(), Phase::Parked);
    run.id().clone()
}

/// The deadline the run journaled, as an offset from the start of the test clock.
async fn deadline(runtime: &Runtime, run: &RunId) -> Duration {
    let entries = runtime.journal(run).await.unwrap().entries;
    let scheduled = entries.iter().find_map(|entry| match entry {
        Entry::TimerScheduled { deadline, .. } => Some(*deadline),
        _ => None,
    });
    scheduled.expect("the sleep journaled its deadline").duration_since(START)
}

async fn timers_fired(runtime: &Runtime, run: &RunId) -> usize {
    let entries = runtime.journal(run).await.unwrap().entries;
    entries.iter().filter(|entry| matches!(entry, Entry::TimerFired { .. })).count()
}

fn reminded() -> RunOutcome {
    RunOutcome::Completed(serde_json::to_value(Reminder { reminder: "stand up".into() }).unwrap())
}

#[tokio::test]
async fn nothing_happens_before_the_deadline_and_the_reminder_comes_exactly_at_it() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = start(&runtime, "90s").await;
    assert_eq!(deadline(&runtime, &run).await, Duration::from_secs(90));

    world.clock.advance(Duration::from_millis(89_999));
    runtime.settle().await;
    assert!(!runtime.journal(&run).await.unwrap().summary.status.is_finished(), "1 ms early: still waiting");
    assert_eq!(timers_fired(&runtime, &run).await, 0);

    world.clock.advance(Duration::from_millis(1));
    runtime.settle().await;
    assert_eq!(runtime.handle(run.clone()).outcome().await.unwrap(), reminded());
    assert_eq!(timers_fired(&runtime, &run).await, 1);
}

#[tokio::test]
async fn delays_are_read_as_people_write_them_and_unreadable_ones_are_refused_before_a_run_starts() {
    let runtime = World::in_memory().runtime(16);
    for (delay, seconds) in [("90s", 90), ("2h", 7200), ("1h 30m", 5400), ("45min", 2700), ("1day", 86_400)] {
        let run = start(&runtime, delay).await;
        assert_eq!(deadline(&runtime, &run).await, Duration::from_secs(seconds), "{delay}");
    }
    for (delay, words) in [("soon", "is not a duration"), ("0s", "is zero"), ("", "is not a duration")] {
        let error = runtime.start("remind", json!({ "note": "n", "delay": delay })).await.unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("invalid input for tool `remind`: "), "{message}");
        assert!(message.contains(words), "{delay:?}: {message}");
    }
    assert_eq!(runtime.runs(None, 100).await.unwrap().len(), 5, "no run started for a refused delay");
}

#[tokio::test]
async fn a_reminder_survives_a_restart_and_fires_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let first = process(dir.path(), &clock);
    let run = start(&first, "2h").await;
    clock.advance(Duration::from_secs(3600));
    first.settle().await;
    stop(first).await;

    let second = process(dir.path(), &clock);
    assert_eq!(second.recover().await.unwrap(), 1);
    second.settle().await;
    assert!(!second.journal(&run).await.unwrap().summary.status.is_finished(), "an hour still to go");
    clock.advance(Duration::from_secs(3600));
    second.settle().await;
    assert_eq!(second.handle(run.clone()).outcome().await.unwrap(), reminded());
    stop(second).await;

    let third = process(dir.path(), &clock);
    assert_eq!(third.recover().await.unwrap(), 0, "nothing left to resume");
    clock.advance(Duration::from_secs(3600));
    third.settle().await;
    assert_eq!(timers_fired(&third, &run).await, 1, "the timer fired once in all");
}

#[tokio::test]
async fn a_reminder_that_fell_due_while_the_process_was_down_fires_once_on_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let first = process(dir.path(), &clock);
    let run = start(&first, "90s").await;
    stop(first).await;

    clock.advance(Duration::from_secs(600));
    let second = process(dir.path(), &clock);
    second.recover().await.unwrap();
    second.settle().await;
    assert_eq!(second.handle(run.clone()).outcome().await.unwrap(), reminded());
    assert_eq!(timers_fired(&second, &run).await, 1);
}
