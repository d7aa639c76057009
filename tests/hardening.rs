//! Hardening: defects found by reading the core, each shown by a test that failed before its fix.
//!
//! - a payload nested as deep as JSON parsers allow was accepted but could not be read back;
//! - two concurrent activations of one run id could run two executors, and a step twice;
//! - a timer that fell due while an activation failed was lost until the process restarted;
//! - a step taking a `HashMap` diverged from its own journal on every cold replay;
//! - a store error after a step succeeded ran the step again on every retry;
//! - `step.succeeded` was published before the step's result was durable;
//! - (a guard, not a defect) a step's result too deep to journal fails the step for good.

mod http_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eve_tests::faulty::Faulty;
use eve_tests::{World, executed, executions};
use eve_tools::journal::StepOutcome;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{Entry, RunId, RunOutcome, RunStatus};
use http_support::{hand_over, handed_over};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Waits for `future`, failing the test instead of hanging if it takes over 20 s (real time): the
/// defects here made runs stall forever.
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    let limit = Duration::from_secs(20);
    tokio::time::timeout(limit, future).await.unwrap_or_else(|_| panic!("{what} did not happen within {limit:?}"))
}

/// `[[[…]]]`, `depth` arrays deep.
fn nested(depth: usize) -> Value {
    (1..depth).fold(json!([]), |inner, _| json!([inner]))
}

/// Returns the first payload its hook receives.
#[workflow_tool]
pub async fn echo_hook(_input: Nothing, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let mut hook = create_hook_with_token::<Value>(format!("echo-{}", ctx.run_id()));
    Ok(hook.recv().await?)
}

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

static COUNTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[step]
async fn count(ctx: &StepCtx) -> Result<(), StepError> {
    COUNTED.lock().unwrap().push(ctx.run_id().map(ToString::to_string).unwrap_or_default());
    tokio::task::yield_now().await;
    Ok(())
}

/// Runs one counted step, then waits for a hook named after the run.
#[workflow_tool]
pub async fn count_then_wait(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    count(ctx).await?;
    let mut hook = create_hook_with_token::<Value>(format!("go-{}", ctx.run_id()));
    hook.recv().await?;
    Ok(())
}

fn counted(run: &RunId) -> usize {
    COUNTED.lock().unwrap().iter().filter(|counted| *counted == run.as_str()).count()
}

fn recorded_steps(entries: &[Entry]) -> usize {
    entries.iter().filter(|entry| matches!(entry, Entry::StepCompleted { .. })).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_of_one_run_id_execute_its_step_once() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(64);
    for round in 0..200 {
        let id: RunId = format!("twice-{round}").parse().unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let starts: Vec<_> = (0..2)
            .map(|_| {
                let (runtime, barrier, id) = (runtime.clone(), barrier.clone(), id.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    runtime.start_with_id(id, "count_then_wait", json!({})).await.unwrap();
                })
            })
            .collect();
        for start in starts {
            start.await.unwrap();
        }
        within("the run's parking", runtime.handle(id.clone()).parked()).await.unwrap();
        within("the runtime's settling", runtime.settle()).await;
        assert_eq!(counted(&id), 1, "round {round}: the step ran once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_point_that_activates_a_run_races_without_running_a_step_twice() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(64);
    for round in 0..100 {
        let id: RunId = format!("race-{round}").parse().unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(6));
        let mut tasks = Vec::new();
        for entry in 0..6 {
            let (runtime, barrier, id) = (runtime.clone(), barrier.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                match entry {
                    0 | 1 => drop(runtime.start_with_id(id, "count_then_wait", json!({})).await.unwrap()),
                    2 => drop(runtime.recover().await.unwrap()),
                    3 => drop(runtime.cancel(&id, "racing").await),
                    4 => drop(runtime.resume_hook(&format!("go-{id}"), json!("go")).await),
                    _ => drop(runtime.handle(id).parked().await),
                }
            }));
        }
        for task in tasks {
            within("every entry point's return", task).await.unwrap();
        }
        within("the runtime's settling", runtime.settle()).await;
        let entries = runtime.journal(&id).await.unwrap().entries;
        assert_eq!(counted(&id), recorded_steps(&entries), "round {round}: one execution per recorded step");
        assert!(counted(&id) <= 1, "round {round}: the step ran {} times", counted(&id));
    }
}

/// Sleeps ten seconds.
#[workflow_tool]
pub async fn nap(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let _ = ctx;
    sleep(Duration::from_secs(10)).await?;
    Ok("woke".into())
}

#[tokio::test]
async fn a_timer_whose_firing_fails_to_append_still_fires() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    faulty.fail_first(1, |entry| matches!(entry, Entry::TimerFired { .. }));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(16);
    let run = runtime.start("nap", json!({})).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    assert_eq!(faulty.failed(), 1, "the injected failure happened");
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, RunStatus::Completed, "journal: {:?}", journal.entries);
}

#[tokio::test]
async fn a_run_rebuilt_after_a_failed_activation_arms_its_due_timers_again() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(0);
    let run = runtime.start("nap", json!({})).await.unwrap();
    run.parked().await.unwrap();
    // The timer's activation (a cold rebuild: no warm cache) cannot claim the run.
    faulty.fail_claims(1);
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    for _ in 0..3 {
        world.clock.advance(Duration::from_secs(10));
        runtime.settle().await;
    }
    assert_eq!(faulty.failed(), 1, "the injected failure happened");
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, RunStatus::Completed, "journal: {:?}", journal.entries);
}

#[tokio::test]
async fn a_run_rebuilt_for_a_delivery_takes_it_from_its_claim_without_reading_the_inbox_again() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let first = world.runtime(0);
    let parked = first.start("echo_hook", json!({})).await.unwrap();
    let restarted = first.start("echo_hook", json!({})).await.unwrap();
    parked.parked().await.unwrap();
    restarted.parked().await.unwrap();
    // Without a warm cache the first is rebuilt by this process; the second by a new one.
    for (runtime, run, payload) in [(first, parked, 7), (world.runtime(0), restarted, 8)] {
        let reads = faulty.inbox_reads();
        runtime.resume_hook(&format!("echo-{}", run.id()), json!(payload)).await.unwrap();
        let outcome = runtime.handle(run.id().clone()).outcome().await.unwrap();
        assert_eq!(outcome, RunOutcome::Completed(json!(payload)));
        assert_eq!(faulty.inbox_reads(), reads, "the claim read the inbox; the wake's message asks for no read");
    }
}

/// Returns the body of the first request its webhook receives.
#[workflow_tool]
pub async fn echo_webhook(_input: Nothing, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    let request = webhook.recv().await?;
    Ok(json!(request.body))
}

#[tokio::test]
async fn a_hook_payload_goes_to_the_store_without_a_lookup_before_it() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(0);
    let run = runtime.start("echo_hook", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let lookups = faulty.hook_lookups();
    runtime.resume_hook(&format!("echo-{}", run.id()), json!(5)).await.unwrap();
    // The store finds the hook as it takes the delivery; a lookup first is one more round trip
    // to it (a reader thread for SQLite, the network for Postgres) on every delivery.
    assert_eq!(faulty.hook_lookups(), lookups, "the delivery looked the hook up before the store did");
    assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(json!(5)));
}

#[tokio::test]
async fn a_token_given_to_the_other_kind_of_delivery_is_refused_and_reaches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for world in [World::in_memory(), World::sqlite(dir.path())] {
        let runtime = world.runtime(0);
        let hooked = runtime.start("echo_hook", json!({})).await.unwrap();
        let webhooked = runtime.start("echo_webhook", json!({})).await.unwrap();
        hooked.parked().await.unwrap();
        webhooked.parked().await.unwrap();
        let url = handed_over(&runtime, webhooked.id()).await;
        let webhook = url.rsplit('/').next().expect("a webhook's URL ends with its token").to_owned();
        let hook = format!("echo-{}", hooked.id());

        let refused = runtime.resume_hook(&webhook, json!("a payload")).await.unwrap_err();
        assert!(matches!(refused, eve_tools::Error::UnknownHook), "a webhook takes HTTP requests only: {refused}");
        let request = WebhookRequest::new("POST", b"a request".as_slice());
        let refused = runtime.deliver_webhook(&hook, None, request).await.unwrap_err();
        assert!(matches!(refused, eve_tools::Error::UnknownHook), "a hook takes payloads only: {refused}");
        runtime.settle().await;
        for run in [&hooked, &webhooked] {
            let journal = runtime.journal(run.id()).await.unwrap();
            assert_eq!(journal.summary.status, RunStatus::Active, "nothing reached {}", run.id());
            assert!(!journal.entries.iter().any(|entry| matches!(entry, Entry::HookReceived { .. })));
        }

        runtime.resume_hook(&hook, json!("right")).await.unwrap();
        let request = WebhookRequest::new("POST", b"right too".as_slice());
        runtime.deliver_webhook(&webhook, None, request).await.unwrap();
        assert_eq!(within("the hook's run", hooked.outcome()).await.unwrap(), RunOutcome::Completed(json!("right")));
        let outcome = within("the webhook's run", webhooked.outcome()).await.unwrap();
        assert_eq!(outcome, RunOutcome::Completed(json!("right too")));
    }
}

/// What the hook `paid-{key}` takes.
#[derive(Deserialize, JsonSchema)]
pub struct Paid {
    /// The key of the hook.
    key: String,
}

/// A payment.
#[derive(Debug, Deserialize)]
pub struct Payment {
    /// Cents paid.
    paid: u64,
}

/// A note, which another tool waits for on the same token as a payment.
#[derive(Debug, Deserialize)]
pub struct Note {
    /// The text.
    note: String,
}

/// Waits for a payment on the hook `paid-{key}`.
#[workflow_tool]
pub async fn await_paid(input: Paid, _ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<Payment>(format!("paid-{}", input.key));
    Ok(hook.recv().await?.paid)
}

/// Waits for a note on the hook `paid-{key}`, which a payment's run may hold already.
#[workflow_tool]
pub async fn await_note(input: Paid, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut hook = create_hook_with_token::<Note>(format!("paid-{}", input.key));
    Ok(hook.recv().await?.note)
}

#[tokio::test]
async fn a_run_refused_a_token_another_run_holds_does_not_refuse_the_holders_payloads() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let holder = runtime.start("await_paid", json!({ "key": "a" })).await.unwrap();
    holder.parked().await.unwrap();
    // The second hook asks for the held token, so it never receives anything; its type is not
    // the one a delivery to the token must have.
    let refused = runtime.start("await_note", json!({ "key": "a" })).await.unwrap();
    let outcome = within("the refused hook's run", refused.outcome()).await.unwrap();
    assert!(matches!(outcome, RunOutcome::Failed(_)), "the token is taken: {outcome:?}");

    let delivered = runtime.resume_hook("paid-a", json!({ "paid": 5 })).await;
    assert!(delivered.is_ok(), "a payment for the holder was refused: {delivered:?}");
    assert_eq!(within("the holder's end", holder.outcome()).await.unwrap(), RunOutcome::Completed(json!(5)));
}

#[tokio::test]
async fn a_payload_for_a_hook_that_has_closed_is_refused_as_unknown_whatever_its_type() {
    let dir = tempfile::tempdir().unwrap();
    for world in [World::in_memory(), World::sqlite(dir.path())] {
        let runtime = world.runtime(0);
        let run = runtime.start("await_paid", json!({ "key": "b" })).await.unwrap();
        run.parked().await.unwrap();
        let wrong = runtime.resume_hook("paid-b", json!({ "paid": "all" })).await.unwrap_err();
        assert!(matches!(wrong, eve_tools::Error::InvalidPayload { .. }), "the hook is open: {wrong}");
        runtime.resume_hook("paid-b", json!({ "paid": 7 })).await.unwrap();
        assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(json!(7)));

        // The hook has closed with its run: whatever is sent to it now, there is nothing to send
        // it to, and the caller must hear that rather than how to fix the payload.
        for payload in [json!({ "paid": "all" }), json!({ "paid": 8 })] {
            let refused = runtime.resume_hook("paid-b", payload.clone()).await.unwrap_err();
            assert!(matches!(refused, eve_tools::Error::UnknownHook), "{payload} to a closed hook: {refused}");
        }
    }
}

/// How many of each thing to tally.
#[derive(Deserialize, JsonSchema)]
pub struct Counts {
    counts: HashMap<String, u32>,
}

#[step]
async fn tally(ctx: &StepCtx, counts: HashMap<String, u32>) -> Result<u32, StepError> {
    executed(ctx, "tally");
    Ok(counts.values().sum())
}

/// Tallies a map in a step, then sleeps.
#[workflow_tool]
pub async fn tally_then_nap(input: Counts, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let total = tally(ctx, input.counts).await?;
    sleep(Duration::from_secs(10)).await?;
    Ok(total)
}

#[tokio::test]
async fn a_step_taking_a_hash_map_replays_without_divergence() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let counts: HashMap<String, u32> = (0..16).map(|n| (format!("item-{n}"), n)).collect();
    let run = runtime.start("tally_then_nap", json!({ "counts": counts })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(120)));
    assert_eq!(executions(run.id(), "tally"), [1]);
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
