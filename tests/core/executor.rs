//! The executor through the runtime's public API: journals in, outcomes out.
//!
//! The workflows here are registered by hand, the way the macros register them, so the executor
//! is tested without `eve-macros`. Every step counts its executions per run, which is how the
//! tests prove a recorded step is never executed again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eve_runtime::context::WorkflowCtx;
use eve_runtime::error::{FatalError, StepError, ToolError};
use eve_runtime::journal::{Entry, InputHash, Op, OpKind, RunFailure, RunId, StepOutcome};
use eve_runtime::registry::{BodyFuture, EntryPoint, Shape, ToolDescriptor};
use eve_runtime::secret::SecretKey;
use eve_runtime::step::{Backoff, RetryPolicy, StepCall, StepCtx, StepDef};
use eve_runtime::store::{Append, Created, MemoryStore, NewRun, Store, WorkerId};
use eve_runtime::time::{Clock, ManualClock, Timestamp};
use eve_runtime::wait::{HookError, create_hook, create_hook_with_token, sleep};
use eve_runtime::{RunOutcome, Runtime};
use serde_json::{Value, json};

// ---- Bookkeeping shared by the test steps ------------------------------------------------------

static EXECUTIONS: Mutex<Vec<(String, &'static str, u32)>> = Mutex::new(Vec::new());

fn executed(ctx: &StepCtx, step: &'static str) {
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    EXECUTIONS.lock().unwrap().push((run, step, ctx.attempt()));
}

fn executions(run: &RunId, step: &str) -> Vec<u32> {
    let log = EXECUTIONS.lock().unwrap();
    log.iter().filter(|(r, s, _)| r == run.as_str() && *s == step).map(|(_, _, attempt)| *attempt).collect()
}

/// Per-run switches, so one test can change a workflow's "code" between two activations.
static VARIANTS: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);

fn set_variant(run: &RunId, variant: &'static str) {
    VARIANTS.lock().unwrap().get_or_insert_with(HashMap::new).insert(run.to_string(), variant);
}

fn variant(run: &RunId) -> &'static str {
    VARIANTS.lock().unwrap().as_ref().and_then(|variants| variants.get(run.as_str()).copied()).unwrap_or("a")
}

// ---- Steps --------------------------------------------------------------------------------------

static ADD: StepDef = StepDef::new("tests::add", "add", RetryPolicy::DEFAULT);
static DOUBLE: StepDef = StepDef::new("tests::double", "double", RetryPolicy::DEFAULT);
static ALWAYS_FAILS: StepDef = StepDef::new(
    "tests::always_fails",
    "always_fails",
    RetryPolicy { max_attempts: 3, backoff: Backoff::exponential_millis(1_000) },
);
static FATAL: StepDef = StepDef::new("tests::fatal", "fatal", RetryPolicy::DEFAULT);
static NOTE: StepDef = StepDef::new("tests::note", "note", RetryPolicy::DEFAULT);

fn add(x: u64) -> StepCall<u64> {
    StepCall::new(&ADD, (x,), |(x,), ctx: StepCtx| async move {
        executed(&ctx, "add");
        Ok::<_, StepError>(x + 1)
    })
}

fn double(x: u64) -> StepCall<u64> {
    StepCall::new(&DOUBLE, (x,), |(x,), ctx: StepCtx| async move {
        executed(&ctx, "double");
        Ok::<_, StepError>(x * 2)
    })
}

fn always_fails() -> StepCall<u64> {
    StepCall::new(&ALWAYS_FAILS, (), |(), ctx: StepCtx| async move {
        executed(&ctx, "always_fails");
        Err::<u64, _>(StepError::msg(format!("attempt {} failed", ctx.attempt())))
    })
}

fn fatal() -> StepCall<u64> {
    StepCall::new(&FATAL, (), |(), ctx: StepCtx| async move {
        executed(&ctx, "fatal");
        Err::<u64, _>(FatalError::new("declined"))
    })
}

fn note(text: String) -> StepCall<String> {
    StepCall::new(&NOTE, (text,), |(text,), ctx: StepCtx| async move {
        executed(&ctx, "note");
        Ok::<_, StepError>(text)
    })
}

// ---- Workflows ----------------------------------------------------------------------------------

macro_rules! workflow {
    ($name:literal, $entry:ident) => {
        const _: () = {
            static TOOL: ToolDescriptor = ToolDescriptor {
                name: $name,
                description: "",
                workflow_id: concat!("tests::", $name),
                shape: Shape::WORKFLOW_TOOL,
        input_schema: || json!({ "type": "object" }),
                validate_input: |_| Ok(()),
                output_schema: || None,
                entry: EntryPoint::Workflow($entry),
                fingerprint: "0000000000000000",
                version: "0.0.0",
            };
            eve_tools::__private::register!(TOOL);
        };
    };
}

fn n(input: &Value) -> u64 {
    input["n"].as_u64().unwrap_or(0)
}

workflow!("t.chain", chain);
fn chain(input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let a = add(n(&input)).await?;
        let b = double(a).await?;
        Ok(json!(b))
    })
}

workflow!("t.variant", variant_body);
fn variant_body(input: Value, ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let start = n(&input);
        let result = match variant(ctx.run_id()) {
            "a" => double(add(start).await?).await?,
            "reordered" => add(double(start).await?).await?,
            "removed" => double(start).await?,
            "reargued" => double(add(start + 1).await?).await?,
            "inserted" => double(add(add(start).await?).await?).await?,
            other => return Err(ToolError::new(format!("unknown variant {other}"))),
        };
        let mut hook = create_hook::<u64>();
        let bonus = hook.recv().await?;
        Ok(json!(result + bonus))
    })
}

workflow!("t.select", select_body);
fn select_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let mut hook = create_hook_with_token::<String>("select-token");
        let winner = tokio::select! {
            biased;
            payload = hook.recv() => format!("hook:{}", payload?),
            fired = sleep(Duration::from_secs(60)) => { fired?; "timer".to_owned() }
        };
        let winner = note(winner).await?;
        let mut release = create_hook_with_token::<String>("select-release");
        let later = release.recv().await?;
        Ok(json!({ "winner": winner, "later": later }))
    })
}

workflow!("t.retry", retry_body);
fn retry_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let value = always_fails().await?;
        Ok(json!(value))
    })
}

workflow!("t.fatal", fatal_body);
fn fatal_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let error = fatal().await.unwrap_err();
        Ok(json!({ "fatal": error.is_fatal(), "message": error.message() }))
    })
}

workflow!("t.fanout", fanout_body);
fn fanout_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let ten = futures::future::try_join_all((0..10).map(add)).await?;
        let hundred = futures::future::try_join_all((100..200).map(double)).await?;
        Ok(json!({ "ten": ten, "hundred": hundred }))
    })
}

workflow!("t.cancel", cancel_body);
fn cancel_body(_input: Value, ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let outcome = sleep(Duration::from_secs(3600)).await;
        assert!(ctx.is_cancelled(), "only a cancellation ends the sleep early");
        let cleaned = note(format!("cleanup after {outcome:?}")).await?;
        Ok(json!(cleaned))
    })
}

workflow!("t.sleep", sleep_body);
fn sleep_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        sleep(Duration::from_secs(3600)).await?;
        Ok(json!("woke"))
    })
}

workflow!("t.panic", panic_body);
fn panic_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let value = add(1).await?;
        if value == 2 {
            panic!("the body panicked after add");
        }
        Ok(json!(value))
    })
}

workflow!("t.clock", clock_body);
fn clock_body(_input: Value, ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let now = ctx.now();
        let random = ctx.random();
        let uuid = ctx.uuid();
        let mut hook = create_hook::<u64>();
        hook.recv().await?;
        Ok(json!({ "now": now, "random": random, "uuid": uuid }))
    })
}

workflow!("t.hooks", hooks_body);
fn hooks_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let mut hook = create_hook_with_token::<u64>("hooks-token");
        let first = note("before awaiting".into()).await?;
        let mut sum = 0;
        for _ in 0..3 {
            sum += hook.recv().await?;
        }
        Ok(json!({ "first": first, "sum": sum }))
    })
}

workflow!("t.conflict", conflict_body);
fn conflict_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let mut hook = create_hook_with_token::<u64>("shared-token");
        match hook.recv().await {
            Ok(value) => Ok(json!(value)),
            Err(HookError::TokenInUse) => Ok(json!("in use")),
            Err(error) => Err(error.into()),
        }
    })
}

workflow!("t.contested", contested_body);
fn contested_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let mut hook = create_hook_with_token::<u64>("shared-token");
        // Which branch wins depends on when the body learns that the token is taken.
        let choice = tokio::select! {
            biased;
            received = hook.recv() => format!("hook: {}", received.is_err()),
            () = std::future::ready(()) => "ready".to_owned(),
        };
        let choice = note(choice).await?;
        sleep(Duration::from_secs(1)).await?;
        Ok(json!(choice))
    })
}

// ---- Harness ------------------------------------------------------------------------------------

const START: Timestamp = Timestamp::from_millis(1_000_000);

struct Harness {
    store: Arc<MemoryStore>,
    clock: ManualClock,
    key: SecretKey,
}

impl Harness {
    fn new() -> Self {
        Harness { store: Arc::new(MemoryStore::new()), clock: ManualClock::new(START), key: SecretKey::generate() }
    }

    /// A runtime over the harness's store; `cache` 0 forces every resume to replay.
    fn runtime(&self, cache: usize) -> Runtime {
        Runtime::builder()
            .shared_store(self.store.clone())
            .clock(self.clock.clone())
            .secret_key(self.key.clone())
            .warm_cache(cache)
            .build()
            .unwrap()
    }

    /// Writes a journal for a new run of `tool`, as if an earlier process had run it.
    /// A run of `tool` whose journal is `entries`, written by this build (as if this binary had
    /// started it), so that a journal that does not replay is this build's own nondeterminism and
    /// fails the run; a run of another build's would be held (tests/core/held.rs).
    async fn journal(&self, tool: &str, input: Value, entries: Vec<Entry>) -> RunId {
        let id = RunId::generate();
        let workflow_id = format!("tests::{tool}");
        let build = eve_runtime::registry::workflow(&workflow_id).map(ToolDescriptor::build);
        let new = NewRun {
            id: id.clone(),
            workflow_id,
            tool: tool.into(),
            input,
            created_at: START,
            principal: None,
            interactive: true,
            parent: None,
            traceparent: None,
            build,
            forked_from: None,
        };
        let Created::New(fence) = self.store.create_run(new, &WorkerId::generate()).await.unwrap() else {
            unreachable!("fresh id")
        };
        let mut append = Append { first_seq: 1, entries, consumed: Vec::new(), notices: Vec::new(), runs: Vec::new() };
        self.store.append(&id, fence, &mut append).await.unwrap();
        id
    }

    async fn entries(&self, run: &RunId) -> Vec<Entry> {
        self.store.load(run).await.unwrap().unwrap().entries
    }
}

fn completed(op: u32, name: &str, args: Value, value: Value) -> Entry {
    let input_hash = InputHash::of(serde_json::to_string(&args).unwrap().as_bytes());
    Entry::StepCompleted {
        op: Op(op),
        name: name.to_owned().into(),
        input_hash,
        attempt: 1,
        outcome: StepOutcome::Ok { value: value.into() },
        took_ms: None,
    }
}

fn divergence(outcome: &RunOutcome) -> (u32, Option<String>, Option<String>) {
    let RunOutcome::Failed(RunFailure::NonDeterminism { op, expected, found, .. }) = outcome else {
        panic!("expected a divergence, got {outcome:?}")
    };
    (op.0, expected.as_ref().map(|sig| sig.name.to_string()), found.as_ref().map(|sig| sig.name.to_string()))
}

// ---- Replay from journals -----------------------------------------------------------------------

#[tokio::test]
async fn a_run_completes_and_each_step_executes_once() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.chain", json!({ "n": 4 })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(10)));
    assert_eq!(executions(run.id(), "add"), [1]);
    assert_eq!(executions(run.id(), "double"), [1]);
    let entries = harness.entries(run.id()).await;
    let kinds: Vec<_> = entries.iter().map(|entry| entry.signature().map(|sig| sig.kind)).collect();
    assert_eq!(kinds, [None, Some(OpKind::Step), Some(OpKind::Step), None]);
    // The executor's entries borrow their steps' names (no copy per step), and the memory store
    // keeps them as made.
    for entry in &entries {
        if let Entry::StepCompleted { name, .. } = entry {
            assert!(matches!(name, std::borrow::Cow::Borrowed(_)), "{name:?} was copied");
        }
    }
}

#[tokio::test]
async fn recorded_steps_are_replayed_not_executed() {
    let harness = Harness::new();
    let run = harness.journal("t.chain", json!({ "n": 1 }), vec![completed(0, "add", json!([1]), json!(2))]).await;
    let runtime = harness.runtime(16);
    assert_eq!(runtime.recover().await.unwrap(), 1);
    assert_eq!(runtime.handle(run.clone()).outcome().await.unwrap(), RunOutcome::Completed(json!(4)));
    assert!(executions(&run, "add").is_empty(), "the recorded step was not executed again");
    assert_eq!(executions(&run, "double"), [1]);
}

#[tokio::test]
async fn a_recorded_result_is_handed_back_even_if_the_step_would_now_return_something_else() {
    let harness = Harness::new();
    // The journal says add(1) returned 40; replay must trust the journal, not re-run the step.
    let run = harness.journal("t.chain", json!({ "n": 1 }), vec![completed(0, "add", json!([1]), json!(40))]).await;
    let runtime = harness.runtime(16);
    runtime.recover().await.unwrap();
    assert_eq!(runtime.handle(run).outcome().await.unwrap(), RunOutcome::Completed(json!(80)));
}

#[tokio::test]
async fn divergent_journals_fail_with_a_typed_error() {
    // (what the journal recorded, expected divergence: op, recorded name, found name)
    type Divergence = (u32, Option<&'static str>, Option<&'static str>);
    let cases: Vec<(Vec<Entry>, Divergence)> = vec![
        // Renamed: the journal's op 0 is a step the code no longer calls.
        (vec![completed(0, "add_v1", json!([1]), json!(2))], (0, Some("add_v1"), Some("add"))),
        // Re-argued: same step, different input hash.
        (vec![completed(0, "add", json!([2]), json!(3))], (0, Some("add"), Some("add"))),
        // Reordered: the journal has double first.
        (vec![completed(0, "double", json!([1]), json!(2))], (0, Some("double"), Some("add"))),
        // Removed: the journal records a third step the code never reaches.
        (
            vec![
                completed(0, "add", json!([1]), json!(2)),
                completed(1, "double", json!([2]), json!(4)),
                completed(2, "add", json!([4]), json!(5)),
            ],
            (2, Some("add"), None),
        ),
    ];
    for (entries, (op, expected, found)) in cases {
        let harness = Harness::new();
        let run = harness.journal("t.chain", json!({ "n": 1 }), entries).await;
        let runtime = harness.runtime(16);
        runtime.recover().await.unwrap();
        let outcome = runtime.handle(run.clone()).outcome().await.unwrap();
        let found_names = divergence(&outcome);
        assert_eq!(found_names, (op, expected.map(str::to_owned), found.map(str::to_owned)), "{outcome:?}");
        assert!(executions(&run, "double").is_empty() && executions(&run, "add").is_empty(), "nothing executed");
    }
}

/// A run of a workflow this binary lacks (renamed, moved or removed) is held, not failed: a build
/// that has the workflow may still finish it.
#[tokio::test]
async fn a_run_of_a_workflow_this_binary_lacks_is_held_naming_it() {
    let harness = Harness::new();
    let run = harness.journal("t.gone", json!({}), Vec::new()).await;
    let runtime = harness.runtime(16);
    runtime.recover().await.unwrap();
    match runtime.handle(run.clone()).outcome().await {
        Err(eve_runtime::Error::Held { run: held, reason }) => {
            assert_eq!(held, run);
            assert!(reason.contains("no workflow `tests::t.gone`"), "{reason}");
        }
        other => panic!("expected the run held, got {other:?}"),
    }
    assert_eq!(harness.entries(&run).await.len(), 1, "nothing is appended to a held run");
}

#[tokio::test]
async fn a_retry_schedule_survives_a_restart() {
    let harness = Harness::new();
    let next = START.saturating_add(Duration::from_secs(2));
    let retrying = Entry::StepRetrying {
        op: Op(0),
        name: "always_fails".into(),
        input_hash: InputHash::of(b"null"),
        attempt: 1,
        error: "attempt 1 failed".into(),
        next_attempt_at: next,
    };
    let run = harness.journal("t.retry", json!({}), vec![retrying]).await;
    let runtime = harness.runtime(16);
    runtime.recover().await.unwrap();
    let handle = runtime.handle(run.clone());
    handle.parked().await.ok();
    assert!(executions(&run, "always_fails").is_empty(), "attempt 2 waits for its journaled time");
    harness.clock.advance(Duration::from_secs(2));
    wait_until(|| executions(&run, "always_fails").len() == 1).await;
    harness.clock.advance(Duration::from_secs(4));
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Failed(RunFailure::Tool { message: "attempt 3 failed".into() }));
    assert_eq!(executions(&run, "always_fails"), [2, 3], "attempts continue from the journal, not from 1");
}

#[tokio::test]
async fn a_fatal_error_stops_at_once() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.fatal", json!({})).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "fatal": true, "message": "declined" })));
    assert_eq!(executions(run.id(), "fatal"), [1]);
}

/// Yields to the runtime until `done` holds; the steps under test run on other tasks.
async fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("condition not reached");
}

// ---- Live runs, parking and replay --------------------------------------------------------------

#[tokio::test]
async fn select_replays_to_the_same_winner_when_the_delivery_came_after_the_timer() {
    let harness = Harness::new();
    let runtime = harness.runtime(0);
    let run = runtime.start("t.select", json!({})).await.unwrap();
    run.parked().await.unwrap();
    harness.clock.advance(Duration::from_secs(61));
    wait_until(|| executions(run.id(), "note").len() == 1).await;
    run.parked().await.unwrap();
    // The hook's payload arrives after the timer fired: both are now in the journal.
    runtime.resume_hook("select-token", json!("late")).await.unwrap();
    run.parked().await.unwrap();
    drop(runtime);

    // A new process replays the run from scratch (the warm cache is off) and must pick the timer.
    let runtime = harness.runtime(0);
    runtime.recover().await.unwrap();
    runtime.resume_hook("select-release", json!("done")).await.unwrap();
    let outcome = runtime.handle(run.id().clone()).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "winner": "timer", "later": "done" })));
    assert_eq!(executions(run.id(), "note"), [1], "the note step was recorded once and replayed after");
}

#[tokio::test]
async fn code_changes_between_activations_are_caught() {
    for (changed, op, expected, found) in [
        ("reordered", 0, Some("add"), Some("double")),
        ("removed", 0, Some("add"), Some("double")),
        ("reargued", 0, Some("add"), Some("add")),
        ("inserted", 1, Some("double"), Some("add")),
    ] {
        let harness = Harness::new();
        let runtime = harness.runtime(0);
        let run = runtime.start("t.variant", json!({ "n": 3 })).await.unwrap();
        run.parked().await.unwrap();
        set_variant(run.id(), changed);
        harness.resume_only_hook(&runtime, run.id(), json!(1)).await;
        let outcome = run.outcome().await.unwrap();
        let expected = (op, expected.map(str::to_owned), found.map(str::to_owned));
        assert_eq!(divergence(&outcome), expected, "{changed}: {outcome:?}");
    }
}

#[tokio::test]
async fn concurrent_steps_all_complete_once() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.fanout", json!({})).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    let output = outcome.output().unwrap();
    assert_eq!(output["ten"], json!((1..=10).collect::<Vec<u64>>()));
    assert_eq!(output["hundred"], json!((100..200).map(|x| x * 2).collect::<Vec<u64>>()));
    assert_eq!(executions(run.id(), "add").len(), 10);
    assert_eq!(executions(run.id(), "double").len(), 100);
    let completions =
        harness.entries(run.id()).await.iter().filter(|e| matches!(e, Entry::StepCompleted { .. })).count();
    assert_eq!(completions, 110, "each result recorded exactly once");
}

#[tokio::test]
async fn cancellation_resolves_the_wait_runs_cleanup_and_ends_cancelled() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.cancel", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.cancel(run.id(), "the user changed their mind").await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Cancelled);
    assert_eq!(executions(run.id(), "note"), [1], "the cleanup step ran after the cancellation");
    let entries = harness.entries(run.id()).await;
    assert!(matches!(entries.last(), Some(Entry::RunCancelled {})), "cleanup cannot undo the cancellation");
}

#[tokio::test]
async fn recorded_clock_and_randomness_replay_identically() {
    let harness = Harness::new();
    let runtime = harness.runtime(0);
    let run = runtime.start("t.clock", json!({})).await.unwrap();
    run.parked().await.unwrap();
    harness.clock.advance(Duration::from_secs(3600));
    harness.resume_only_hook(&runtime, run.id(), json!(1)).await;
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(output["now"], json!(START.as_millis()), "now() is the value recorded before the clock moved");
    let recorded: Vec<_> = harness
        .entries(run.id())
        .await
        .into_iter()
        .filter_map(|entry| match entry {
            Entry::Recorded { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, [output["now"].clone(), output["random"].clone(), output["uuid"].clone()]);
}

#[tokio::test]
async fn early_deliveries_are_buffered_and_duplicates_observed_once() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.hooks", json!({})).await.unwrap();
    // Deliver as soon as the hook exists, whether or not the body awaits it yet.
    let mut delivered = 0;
    while delivered == 0 {
        delivered += runtime.resume_hook_once("hooks-token", "d1", json!(1)).await.is_ok() as u32;
        tokio::task::yield_now().await;
    }
    let duplicate = runtime.resume_hook_once("hooks-token", "d1", json!(1)).await.unwrap();
    assert_eq!(duplicate, eve_runtime::HookDelivery::Duplicate(run.id().clone()));
    runtime.resume_hook_once("hooks-token", "d2", json!(10)).await.unwrap();
    runtime.resume_hook("hooks-token", json!(100)).await.unwrap();
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(output, json!({ "first": "before awaiting", "sum": 111 }));
    let error = runtime.resume_hook("hooks-token", json!(1)).await.unwrap_err();
    assert!(matches!(error, eve_runtime::Error::UnknownHook), "the token is released when the run ends");
}

#[tokio::test]
async fn a_chosen_token_held_by_another_run_is_refused() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let first = runtime.start("t.conflict", json!({})).await.unwrap();
    first.parked().await.unwrap();
    let second = runtime.start("t.conflict", json!({})).await.unwrap();
    assert_eq!(second.outcome().await.unwrap(), RunOutcome::Completed(json!("in use")));
    runtime.resume_hook("shared-token", json!(7)).await.unwrap();
    assert_eq!(first.outcome().await.unwrap(), RunOutcome::Completed(json!(7)));
}

/// The body learns that a chosen token is taken when the conflict is journaled, as a delivery, both
/// live and on replay; a replay that knew it at creation picked the other `select!` branch.
#[tokio::test]
async fn a_taken_token_is_seen_at_the_same_point_live_and_on_replay() {
    let harness = Harness::new();
    let runtime = harness.runtime(0);
    let holder = runtime.start("t.conflict", json!({})).await.unwrap();
    holder.parked().await.unwrap();
    let run = runtime.start("t.contested", json!({})).await.unwrap();
    run.parked().await.unwrap();
    harness.clock.advance(Duration::from_secs(1));
    runtime.settle().await;
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("ready")));
}

#[tokio::test]
async fn a_timer_fires_exactly_once_across_a_restart() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.sleep", json!({})).await.unwrap();
    run.parked().await.unwrap();
    drop(runtime);
    let runtime = harness.runtime(16);
    runtime.recover().await.unwrap();
    harness.clock.advance(Duration::from_secs(3599));
    let handle = runtime.handle(run.id().clone());
    assert!(!matches!(handle.parked().await.unwrap(), eve_runtime::Phase::Finished(_)));
    harness.clock.advance(Duration::from_secs(1));
    assert_eq!(handle.outcome().await.unwrap(), RunOutcome::Completed(json!("woke")));
    let fired = harness.entries(run.id()).await.iter().filter(|e| matches!(e, Entry::TimerFired { .. })).count();
    assert_eq!(fired, 1);
    assert!(harness.clock.now() >= START.saturating_add(Duration::from_secs(3600)));
}

#[tokio::test]
async fn a_panicking_body_fails_the_run_with_the_panic_message() {
    let harness = Harness::new();
    let runtime = harness.runtime(16);
    let run = runtime.start("t.panic", json!({})).await.unwrap();
    let message = "the body panicked after add".to_owned();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Failed(RunFailure::Panicked { message }));
}

#[tokio::test]
async fn warm_resumes_skip_replay_and_cold_resumes_replay() {
    for (cache, from_cache) in [(16, true), (0, false)] {
        let harness = Harness::new();
        let runtime = harness.runtime(cache);
        let mut events = runtime.events();
        let run = runtime.start("t.variant", json!({ "n": 1 })).await.unwrap();
        run.parked().await.unwrap();
        harness.resume_only_hook(&runtime, run.id(), json!(5)).await;
        assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(9)));
        let resumed = std::iter::from_fn(|| events.try_recv().ok())
            .find_map(|event| match event {
                eve_runtime::RunEvent::Resumed { from_cache, .. } => Some(from_cache),
                _ => None,
            })
            .unwrap();
        assert_eq!(resumed, from_cache);
    }
}

impl Harness {
    /// Delivers to the only hook of `run` (test workflows create generated tokens).
    async fn resume_only_hook(&self, runtime: &Runtime, run: &RunId, payload: Value) {
        let entries = runtime.journal(run).await.unwrap().entries;
        let hook = entries
            .iter()
            .find_map(|entry| match entry {
                Entry::HookCreated { op, nonce: Some(nonce), .. } => Some((*op, nonce.clone())),
                _ => None,
            })
            .expect("the run created a hook");
        let token = self.key.derive_token(run, hook.0, &hook.1);
        runtime.resume_hook(token.expose(), payload).await.unwrap();
    }
}
