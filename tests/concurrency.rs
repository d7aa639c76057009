//! Concurrency: many steps in flight in one run, and many runs at once.

use eve_tests::{World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::{Entry, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// How wide to fan out.
#[derive(Deserialize, JsonSchema)]
pub struct Widths {
    first: u64,
    second: u64,
}

#[step]
async fn square(ctx: &StepCtx, x: u64) -> Result<u64, StepError> {
    executed(ctx, "square");
    tokio::task::yield_now().await;
    Ok(x * x)
}

/// Squares `first` numbers concurrently, then `second` more.
#[workflow_tool]
pub async fn fan_out(input: Widths, ctx: &WorkflowCtx) -> Result<Vec<u64>, ToolError> {
    let first = futures::future::try_join_all((0..input.first).map(|x| square(ctx, x))).await?;
    let second = futures::future::try_join_all((0..input.second).map(|x| square(ctx, 1_000 + x))).await?;
    Ok(first.into_iter().chain(second).collect())
}

#[tokio::test]
async fn ten_then_a_hundred_concurrent_steps_all_complete_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("fan_out", json!({ "first": 10, "second": 100 })).await.unwrap();
    let RunOutcome::Completed(output) = run.outcome().await.unwrap() else { panic!("the run completes") };
    let expected: Vec<u64> = (0..10).chain(1_000..1_100).map(|x| x * x).collect();
    assert_eq!(output, json!(expected));
    assert_eq!(executions(run.id(), "square").len(), 110, "no step lost or doubled");
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let completed = entries.iter().filter(|entry| matches!(entry, Entry::StepCompleted { .. })).count();
    assert_eq!(completed, 110);
}

#[tokio::test]
async fn a_fan_out_replays_after_a_restart_without_executing_again() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("fan_out", json!({ "first": 10, "second": 100 })).await.unwrap();
    let first = run.outcome().await.unwrap();
    // Rebuild the finished run from scratch in a new process: nothing executes again.
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, eve_tools::RunStatus::Completed);
    drop(runtime);
    let runtime = world.runtime(0);
    assert_eq!(runtime.handle(run.id().clone()).outcome().await.unwrap(), first);
    assert_eq!(executions(run.id(), "square").len(), 110);
}

#[tokio::test]
async fn many_runs_progress_at_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut runs = Vec::new();
    for width in 0..50 {
        runs.push(runtime.start("fan_out", json!({ "first": width % 7, "second": 3 })).await.unwrap());
    }
    for (width, run) in runs.iter().enumerate() {
        let RunOutcome::Completed(output) = run.outcome().await.unwrap() else { panic!("the run completes") };
        assert_eq!(output.as_array().unwrap().len(), width % 7 + 3);
    }
}
