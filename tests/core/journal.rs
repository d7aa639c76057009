//! What the journal keeps: a value nested as deep as JSON parsers allow is accepted, journaled and
//! read back, through SQLite and a cold replay too; an input or payload nested deeper than the
//! journal keeps is refused with a clear error before anything is written, and a step's result
//! that deep fails the step for good.

use std::time::Duration;

use eve_tests::{World, within};
use eve_tools::journal::StepOutcome;
use eve_tools::prelude::*;
use eve_tools::{Entry, RunOutcome, RunStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// `[[[…]]]`, `depth` arrays deep.
fn nested(depth: usize) -> Value {
    (1..depth).fold(json!([]), |inner, _| json!([inner]))
}

// `echo_hook` (it returns the first payload its hook receives) is the hook tool of `hooks.rs`.

#[tokio::test]
async fn a_payload_nested_as_deep_as_json_allows_is_delivered_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(0);
    let run = runtime.start("echo_hook", json!({})).await.unwrap();
    run.parked().await.unwrap();
    // serde_json, and so the HTTP server, parses values nested up to 128 levels.
    let payload = nested(127);
    runtime.resume_hook(&format!("echo-{}", run.id()), payload.clone()).await.unwrap();
    within("the run's settling", runtime.settle()).await;
    assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(payload));
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, RunStatus::Completed);
}

/// What [`deep_echo`] keeps.
#[derive(Deserialize, JsonSchema)]
pub struct Deep {
    value: Value,
}

#[step]
async fn keep(value: Value) -> Result<Value, StepError> {
    Ok(value)
}

/// Keeps a deep value in a step, sleeps, and returns it.
#[workflow_tool]
pub async fn deep_echo(input: Deep, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let _ = ctx;
    let kept = keep(input.value).await?;
    sleep(Duration::from_secs(1)).await?;
    Ok(kept)
}

#[tokio::test]
async fn a_deep_input_and_step_result_survive_a_cold_replay() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(0);
    let value = nested(127);
    let run = runtime.start("deep_echo", json!({ "value": value })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(1));
    within("the run's settling", runtime.settle()).await;
    assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(value));
}

#[tokio::test]
async fn a_value_nested_deeper_than_the_journal_keeps_is_refused_with_a_clear_error() {
    let runtime = World::in_memory().runtime(0);
    let error = runtime.start("deep_echo", json!({ "value": nested(200) })).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("nested") && message.contains("128"), "{message}");
    let run = runtime.start("echo_hook", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let error = runtime.resume_hook(&format!("echo-{}", run.id()), nested(200)).await.unwrap_err();
    assert!(error.to_string().contains("128"), "{error}");
    assert!(runtime.journal(run.id()).await.unwrap().entries.len() < 3, "nothing was delivered");
}

/// Returns a value nested `depth` arrays deep: made inside the step, not given to it.
#[step]
async fn make_deep(depth: u32) -> Result<Value, StepError> {
    Ok(nested(depth as usize))
}

/// Asks [`make_deep`] for a value too deep to journal and returns how the step failed.
#[workflow_tool]
pub async fn deep_result(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let _ = ctx;
    match make_deep(200).await {
        Ok(_) => Err(ToolError::new("a value the journal cannot keep was handed to the body")),
        Err(error) => Ok(error.to_string()),
    }
}

/// A step's first attempt that ends at once is journaled without joining the driver's table of
/// started steps; one whose result the journal cannot keep must still fail the step, once and for
/// good, rather than reach the body or be retried.
#[tokio::test]
async fn a_step_result_nested_deeper_than_the_journal_keeps_fails_the_step_for_good() {
    let runtime = World::in_memory().runtime(0);
    let run = runtime.start("deep_result", json!({})).await.unwrap();
    let RunOutcome::Completed(message) = within("the run's end", run.outcome()).await.unwrap() else {
        panic!("the body handles the step's failure and completes")
    };
    let message = message.as_str().expect("the body returns the step's error").to_owned();
    assert!(message.contains("nested") && message.contains("128"), "{message}");
    let journal = runtime.journal(run.id()).await.unwrap();
    let completions: Vec<_> = journal
        .entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::StepCompleted { attempt, outcome, .. } => Some((*attempt, outcome.clone())),
            Entry::StepRetrying { .. } => panic!("a result too deep to keep is not retried"),
            _ => None,
        })
        .collect();
    assert_eq!(completions.len(), 1, "{completions:?}");
    assert!(matches!(&completions[0], (1, StepOutcome::Err { fatal: true, .. })), "{completions:?}");
}
