//! Cancellation with cleanup: the abort signal is journaled, every parked wait resolves at once,
//! cleanup steps run, cleanup cannot undo the cancellation, and 30 s of grace end a body that
//! does not finish unwinding.

use std::time::Duration;

use eve_tests::{START, World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::{Entry, Error, ManualClock, RunOutcome, RunStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn clean_up(ctx: &StepCtx, what: String) -> Result<String, StepError> {
    executed(ctx, "clean_up");
    assert!(ctx.is_cancelled(), "cleanup runs after the cancellation");
    Ok(format!("cleaned up after {what}"))
}

/// Waits on a sleep, a hook and a question at once; cleans up whatever happens.
#[workflow_tool]
pub async fn wait_everywhere(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let mut hook = create_hook_with_token::<String>(format!("hook-{}", ctx.run_id()));
    let (slept, received, answered) = futures::join!(
        sleep(Duration::from_secs(86_400)),
        hook.recv(),
        ctx.ask(Ask::confirmation("Go?").option("go", "Go")),
    );
    let mut report = vec![format!("{slept:?}"), format!("{:?}", received.err()), answered.status().to_owned()];
    if ctx.is_cancelled() {
        report.push(clean_up(ctx, "the waits".into()).await?);
    }
    // Returning normally after a cancellation still ends the run cancelled.
    Ok(report)
}

#[tokio::test]
async fn cancelling_resolves_every_parked_wait_and_runs_cleanup_steps() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("wait_everywhere", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.cancel(run.id(), "the user changed their mind").await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Cancelled);
    assert_eq!(executions(run.id(), "clean_up"), [1]);
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let cancel = entries.iter().position(|entry| matches!(entry, Entry::CancelRequested { .. })).unwrap();
    let cleanup =
        entries.iter().position(|entry| matches!(entry, Entry::StepCompleted { name, .. } if name == "clean_up"));
    assert!(cleanup.unwrap() > cancel, "the cleanup step completed after the journaled cancellation");
    assert!(matches!(entries.last(), Some(Entry::RunCancelled {})));
    let resolved = std::iter::from_fn(|| events.try_recv().ok())
        .any(|event| matches!(event, eve_tools::RunEvent::InputResolved { outcome: AskOutcome::Cancelled, .. }));
    assert!(resolved, "the open question resolved cancelled");
}

#[step]
async fn hang(ctx: &StepCtx) -> Result<(), StepError> {
    executed(ctx, "hang");
    futures::future::pending::<()>().await;
    Ok(())
}

/// Sleeps; on cancellation starts a cleanup that never finishes.
#[workflow_tool]
pub async fn slow_cleanup(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    if sleep(Duration::from_secs(3600)).await.is_err() {
        hang(ctx).await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_body_still_unwinding_after_thirty_seconds_ends_cancelled() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("slow_cleanup", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.cancel(run.id(), "stop").await.unwrap();
    // The hanging cleanup keeps the run active, so wait for it to start rather than to settle.
    wait_until(|| executions(run.id(), "hang").len() == 1).await;
    world.clock.advance(Duration::from_secs(29));
    assert!(!runtime.journal(run.id()).await.unwrap().summary.status.is_finished(), "29 s is within the grace");
    world.clock.advance(Duration::from_secs(1));
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Cancelled);
}

/// The grace is journaled with the cancellation, so a restart does not grant the cleanup a fresh
/// 30 s: a process that takes the run over 20 s in gives it the 10 s that remain, and a process
/// that starts after the grace ended closes the run without starting its cleanup again.
#[tokio::test]
async fn the_grace_counts_from_the_cancellation_across_restarts() {
    let world = World::in_memory();
    let first = world.runtime(0);
    let run = first.start("slow_cleanup", json!({})).await.unwrap();
    run.parked().await.unwrap();
    first.cancel(run.id(), "stop").await.unwrap();
    wait_until(|| executions(run.id(), "hang").len() == 1).await;
    let entries = first.journal(run.id()).await.unwrap().entries;
    let grace_until = entries.iter().find_map(|entry| match entry {
        Entry::CancelRequested { grace_until, .. } => *grace_until,
        _ => None,
    });
    assert_eq!(grace_until, Some(START.saturating_add(Duration::from_secs(30))), "the deadline is journaled");

    // A new process takes the run over 20 s in (the first process's claim is fenced off): the
    // interrupted cleanup step runs again, with the 10 s that remain.
    world.clock.advance(Duration::from_secs(20));
    let second = world.runtime(0);
    second.recover().await.unwrap();
    wait_until(|| executions(run.id(), "hang").len() == 2).await;

    // A third process whose clock reads 31 s after the cancellation takes it over in turn: the
    // grace is over, so the run ends cancelled and no cleanup step starts.
    let late = ManualClock::new(START.saturating_add(Duration::from_secs(31)));
    let third = world.builder(0).clock(late).build().unwrap();
    third.recover().await.unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), third.handle(run.id().clone()).outcome()).await;
    let outcome = outcome.expect("the run ends at once: no fresh grace after a restart");
    assert_eq!(outcome.unwrap(), RunOutcome::Cancelled);
    assert_eq!(executions(run.id(), "hang").len(), 2, "nothing started after the grace");
}

#[tokio::test]
async fn cancelling_a_finished_run_changes_nothing_and_says_so_and_an_unknown_run_is_an_error() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("sleep", json!({ "seconds": 1 })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(1));
    let outcome = run.outcome().await.unwrap();
    let error = runtime.cancel(run.id(), "too late").await.unwrap_err();
    assert!(matches!(&error, Error::RunFinished { status: RunStatus::Completed, .. }), "{error:?}");
    assert_eq!(error.to_string(), format!("run {} has already completed; there is nothing to cancel", run.id()));
    assert_eq!(runtime.handle(run.id().clone()).outcome().await.unwrap(), outcome);
    let error = runtime.cancel(&"run_unknown".parse().unwrap(), "?").await.unwrap_err();
    assert_eq!(error.to_string(), "no run with id run_unknown; list runs to see the ids this store holds");
}

/// Yields to the runtime until `done` holds (a bounded number of times; no sleeping).
async fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the condition never held");
}
