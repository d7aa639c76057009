//! Steps: at-least-once attempts, exactly-once recording, retry policies and idempotency keys; a
//! step runs once however long the store refuses its completion, and is reported succeeded only
//! once its result is durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eve_tests::faulty::Faulty;
use eve_tests::{World, executed, executions, within};
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{Entry, RunEvent, RunFailure, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// How many times `flaky` should fail before it succeeds.
#[derive(Deserialize, JsonSchema)]
pub struct Failures {
    failures: u32,
}

#[step]
async fn flaky(ctx: &StepCtx, failures: u32) -> Result<String, StepError> {
    executed(ctx, "flaky");
    if ctx.attempt() <= failures {
        return Err(StepError::msg(format!("attempt {} failed", ctx.attempt())));
    }
    Ok(format!("{} on attempt {}", ctx.idempotency_key(), ctx.attempt()))
}

/// Calls a step that fails a given number of times under the default policy.
#[workflow_tool]
pub async fn default_policy(input: Failures, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(flaky(ctx, input.failures).await?)
}

#[tokio::test]
async fn the_default_policy_tries_three_times_with_doubling_backoff() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("default_policy", json!({ "failures": 2 })).await.unwrap();
    runtime.settle().await;
    assert_eq!(executions(run.id(), "flaky"), [1]);
    world.clock.advance(Duration::from_millis(999));
    runtime.settle().await;
    assert_eq!(executions(run.id(), "flaky"), [1], "the first backoff is 1 s");
    world.clock.advance(Duration::from_millis(1));
    runtime.settle().await;
    let failed_twice = std::iter::from_fn(|| events.try_recv().ok())
        .any(|event| matches!(event, RunEvent::StepFailed { attempt: 2, retry_at: Some(_), .. }));
    assert!(failed_twice);
    world.clock.advance(Duration::from_millis(1_999));
    runtime.settle().await;
    assert_eq!(executions(run.id(), "flaky"), [1, 2], "the second backoff is 2 s");
    world.clock.advance(Duration::from_millis(1));
    let outcome = run.outcome().await.unwrap();
    let key = format!("{}:0", run.id());
    assert_eq!(outcome, RunOutcome::Completed(json!(format!("{key} on attempt 3"))));
    let retries: Vec<_> = runtime
        .journal(run.id())
        .await
        .unwrap()
        .entries
        .into_iter()
        .filter_map(|entry| match entry {
            Entry::StepRetrying { attempt, next_attempt_at, .. } => Some((attempt, next_attempt_at)),
            _ => None,
        })
        .collect();
    let at = |millis| eve_tests::START.saturating_add(Duration::from_millis(millis));
    assert_eq!(retries, [(1, at(1_000)), (2, at(3_000))], "attempts and next-attempt times are journaled");
}

#[tokio::test]
async fn a_step_that_keeps_failing_fails_the_run_after_its_last_attempt() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("default_policy", json!({ "failures": 5 })).await.unwrap();
    for _ in 0..2 {
        runtime.settle().await;
        world.clock.advance(Duration::from_secs(10));
    }
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Failed(RunFailure::Tool { message: "attempt 3 failed".into() }));
    assert_eq!(executions(run.id(), "flaky"), [1, 2, 3]);
}

#[step(max_attempts = 5, backoff = "fixed(10ms)")]
async fn rate_limited(ctx: &StepCtx) -> Result<u32, StepError> {
    executed(ctx, "rate_limited");
    if ctx.attempt() == 1 {
        return Err(RetryableError::new("429 too many requests").retry_after(Duration::from_secs(30)).into());
    }
    Ok(ctx.attempt())
}

#[step(max_attempts = 5)]
async fn declined(ctx: &StepCtx) -> Result<u32, StepError> {
    executed(ctx, "declined");
    Err(FatalError::new("card declined").into())
}

/// Shows `RetryableError::retry_after` and `FatalError`.
#[workflow_tool]
pub async fn policies(_input: Failures, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let attempt = rate_limited(ctx).await?;
    let declined = declined(ctx).await.unwrap_err();
    Ok(json!({ "attempt": attempt, "declined": declined.message(), "fatal": declined.is_fatal() }))
}

#[tokio::test]
async fn retry_after_sets_the_delay_and_a_fatal_error_stops_at_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("policies", json!({ "failures": 0 })).await.unwrap();
    runtime.settle().await;
    world.clock.advance(Duration::from_secs(29));
    runtime.settle().await;
    assert_eq!(executions(run.id(), "rate_limited"), [1], "retry_after overrides the 10 ms backoff");
    world.clock.advance(Duration::from_secs(1));
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "attempt": 2, "declined": "card declined", "fatal": true })));
    assert_eq!(executions(run.id(), "declined"), [1], "a fatal error is not retried");
}

#[tokio::test]
async fn a_step_called_outside_any_run_just_runs() {
    let value = rate_limited_free(41).await.unwrap();
    assert_eq!(value, 42);
}

#[step]
async fn rate_limited_free(x: u32) -> Result<u32, StepError> {
    Ok(x + 1)
}

#[tokio::test]
async fn cancelling_a_step_waiting_to_retry_resolves_it_at_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("default_policy", json!({ "failures": 5 })).await.unwrap();
    runtime.settle().await;
    runtime.cancel(run.id(), "stop").await.unwrap();
    // No clock movement: the backoff is not waited out.
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Cancelled);
    assert_eq!(executions(run.id(), "flaky"), [1]);
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn produce_a_lot(ctx: &StepCtx) -> Result<String, StepError> {
    executed(ctx, "produce_a_lot");
    Ok("x".repeat(4_096))
}

/// Calls a step whose result is too large to journal, and reports what it got.
#[workflow_tool]
pub async fn oversized_step(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    match produce_a_lot(ctx).await {
        Ok(text) => Ok(format!("got {} bytes", text.len())),
        Err(error) => Ok(format!("fatal: {}; {error}", error.is_fatal())),
    }
}

/// Returns an output too large to journal.
#[workflow_tool]
pub async fn oversized_output(_input: Nothing, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok("y".repeat(4_096))
}

/// A runtime on SQLite with a 1 KiB limit per journal entry.
fn small_entries(dir: &std::path::Path) -> Runtime {
    let options = eve_tools::store::SqliteOptions { max_entry_bytes: 1_024, ..Default::default() };
    let store = eve_tools::store::SqliteStore::open_with(dir.join("eve.db"), options).unwrap();
    Runtime::builder().store(store).data_dir(dir).build().unwrap()
}

/// Starts `tool` and returns the run with the message it failed with.
async fn tool_failure(runtime: &Runtime, tool: &str) -> (eve_tools::RunHandle, String) {
    let run = runtime.start(tool, json!({})).await.unwrap();
    let phase = run.parked().await.unwrap();
    let eve_tools::Phase::Finished(RunOutcome::Failed(RunFailure::Tool { message })) = phase else {
        panic!("the run fails instead of retrying the append: {phase:?}")
    };
    (run, message)
}

#[tokio::test]
async fn a_step_result_over_the_entry_limit_fails_the_step_once_instead_of_rerunning_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = small_entries(dir.path());
    let run = runtime.start("oversized_step", json!({})).await.unwrap();
    let phase = run.parked().await.unwrap();
    let eve_tools::Phase::Finished(RunOutcome::Completed(output)) = phase else {
        panic!("the run ends instead of retrying the append: {phase:?}")
    };
    assert_eq!(
        output,
        json!(
            "fatal: true; step `produce_a_lot` returned 4098 bytes of JSON, too large for the store's 1024-byte \
             limit on one journal entry; return a smaller value (keep large data elsewhere and return a reference \
             to it)"
        )
    );
    assert_eq!(executions(run.id(), "produce_a_lot"), [1], "the step ran once and is not retried");
    let journal = runtime.journal(run.id()).await.unwrap();
    let recorded = journal.entries.iter().any(|entry| {
        matches!(entry, Entry::StepCompleted { outcome: eve_tools::journal::StepOutcome::Err { fatal: true, .. }, .. })
    });
    assert!(recorded, "the failure is what the journal keeps, so a replay sees it too");
}

#[tokio::test]
async fn a_tool_output_over_the_entry_limit_fails_the_run_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = small_entries(dir.path());
    let (run, message) = tool_failure(&runtime, "oversized_output").await;
    assert_eq!(
        message,
        "the tool's output is 4098 bytes of JSON, too large for the store's 1024-byte limit on one journal \
         entry; return a smaller value (keep large data elsewhere and return a reference to it)"
    );
    let journal = runtime.journal(run.id()).await.unwrap();
    assert!(matches!(journal.entries.last(), Some(Entry::RunFailed { .. })), "the failure is journaled");
}

/// The executor fits every batch to the limit the store declares; a store that keeps a smaller
/// limit than it declares refuses what was fitted, and the run fails naming that as the store's
/// bug, instead of retrying an append the store would refuse forever.
#[tokio::test]
async fn a_store_that_refuses_what_fits_the_limit_it_declares_fails_the_run_naming_its_bug() {
    let dir = tempfile::tempdir().unwrap();
    let options = eve_tools::store::SqliteOptions { max_entry_bytes: 1_024, ..Default::default() };
    let sqlite = eve_tools::store::SqliteStore::open_with(dir.path().join("eve.db"), options).unwrap();
    let lying = Faulty::new(Arc::new(sqlite));
    lying.declare_max_entry_bytes(1 << 20);
    let runtime = World::over(lying).runtime(16);
    let (run, message) = tool_failure(&runtime, "oversized_step").await;
    assert!(
        message.starts_with("the run could not journal what it did next: a bug in the store: it refused as too large"),
        "{message}"
    );
    assert!(message.contains("over the 1024-byte limit"), "{message}");
    assert_eq!(executions(run.id(), "produce_a_lot"), [1], "the step ran once and is not retried");
}

/// Asks a question whose prompt is too large to journal.
#[workflow_tool]
pub async fn oversized_question(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let answer = ctx.ask(Ask::text("?".repeat(4_096))).await;
    Ok(format!("{answer:?}"))
}

#[tokio::test]
async fn a_record_too_large_to_journal_fails_the_run_instead_of_retrying_forever() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = small_entries(dir.path());
    let (run, message) = tool_failure(&runtime, "oversized_question").await;
    assert!(message.starts_with("the run could not journal what it did next: a journal entry"), "{message}");
    assert!(message.contains("over the 1024-byte limit"), "{message}");
    let journal = runtime.journal(run.id()).await.unwrap();
    assert!(matches!(journal.entries.last(), Some(Entry::RunFailed { .. })), "the failure is journaled");
}

#[step(max_attempts = 2, backoff = "fixed(10ms)")]
async fn panics_once(ctx: &StepCtx, x: u64) -> Result<u64, StepError> {
    executed(ctx, "panics_once");
    if ctx.attempt() == 1 {
        panic!("attempt 1 of step {x} panicked");
    }
    Ok(x + 1)
}

/// Quick steps around one whose first attempt panics.
#[workflow_tool]
pub async fn panic_in_a_chain(input: Failures, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut x = u64::from(input.failures);
    for _ in 0..3 {
        x = panics_once(ctx, x).await?;
    }
    Ok(x)
}

/// A step's first attempt is polled while the driver lends the run's state to its thread; one
/// that panics there fails as an attempt (journaled, retried after its backoff), and the run's
/// state is whole afterwards: the chain goes on and every later step completes.
#[tokio::test]
async fn a_step_that_panics_on_its_first_poll_is_retried_and_the_chain_goes_on() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("panic_in_a_chain", json!({ "failures": 0 })).await.unwrap();
    for _ in 0..3 {
        runtime.settle().await;
        world.clock.advance(Duration::from_millis(10));
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(3)));
    assert_eq!(executions(run.id(), "panics_once"), [1, 2, 1, 2, 1, 2]);
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let panicked = entries.iter().filter(|entry| {
        matches!(entry, Entry::StepRetrying { error, .. } if error.contains("the step panicked: attempt 1 of step"))
    });
    assert_eq!(panicked.count(), 3, "each panic is journaled as a failed attempt");
}

static SENT: AtomicUsize = AtomicUsize::new(0);

#[step]
async fn send_email() -> Result<(), StepError> {
    SENT.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Sends one email.
#[workflow_tool]
pub async fn email_once(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let _ = ctx;
    Ok(send_email().await?)
}

#[tokio::test]
async fn a_step_whose_completion_the_store_refuses_for_a_while_runs_once() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    faulty.fail_first(3, |entry| matches!(entry, Entry::StepCompleted { .. }));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(16);
    let run = runtime.start("email_once", json!({})).await.unwrap();
    for _ in 0..10 {
        runtime.settle().await;
        if runtime.journal(run.id()).await.unwrap().summary.status.is_finished() {
            break;
        }
        // Before the fix, a refused completion was retried by rebuilding the run 5 s later.
        world.clock.advance(Duration::from_secs(5));
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(null)));
    assert_eq!(faulty.failed(), 3, "the injected failures happened");
    assert_eq!(SENT.load(Ordering::SeqCst), 1, "the email was sent once");
}

static NOTED: AtomicUsize = AtomicUsize::new(0);

#[step]
async fn note_once() -> Result<(), StepError> {
    NOTED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Runs one step.
#[workflow_tool]
pub async fn one_step(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let _ = ctx;
    Ok(note_once().await?)
}

#[tokio::test]
async fn a_step_is_reported_succeeded_only_once_its_result_is_durable() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    faulty.fail_first(2, |entry| matches!(entry, Entry::StepCompleted { .. }));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("one_step", json!({})).await.unwrap();
    let journaled_when_reported = loop {
        match within("step.succeeded", events.recv()).await.unwrap() {
            eve_tools::RunEvent::StepSucceeded { run: of, .. } if &of == run.id() => {
                let entries = runtime.journal(run.id()).await.unwrap().entries;
                break entries.iter().any(|entry| matches!(entry, Entry::StepCompleted { .. }));
            }
            _ => continue,
        }
    };
    assert!(journaled_when_reported, "step.succeeded came before the result was journaled");
    within("the run's end", run.outcome()).await.unwrap();
}
