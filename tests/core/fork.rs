//! Forking a run (`Runtime::fork`): a run that failed at op 7 on a bug is forked from op 5 once
//! the bug is fixed; the fork takes ops 0 to 4 from the original's journal without executing them
//! again and runs op 5 on live, and the original stays as it ended. A fork keeps whole ops and
//! nothing that belongs to none, and each refusal says what to do.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use eve_tests::{World, executed, executions};
use eve_tools::journal::{Entry, ForkedFrom, RecordKind, RunFailure};
use eve_tools::prelude::*;
use eve_tools::{Clock, Error, ForkError, Op, RunId, RunOutcome, Runtime};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A job; its key keeps each test's runs apart, and is what a fix is made for.
#[derive(Deserialize, JsonSchema)]
pub struct Job {
    /// The key.
    pub key: String,
}

/// The keys whose sealer has been fixed: `seal` fails fatally for every other key.
static FIXED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn fix(key: &str) {
    FIXED.lock().unwrap().insert(key.to_owned());
}

#[step]
async fn part(ctx: &StepCtx, n: u32) -> Result<u32, StepError> {
    executed(ctx, &format!("part {n}"));
    Ok(n * 10)
}

#[step]
async fn seal(ctx: &StepCtx, key: String) -> Result<String, StepError> {
    executed(ctx, "seal");
    if !FIXED.lock().unwrap().contains(&key) {
        return Err(FatalError::new("the sealer is jammed").into());
    }
    Ok(format!("sealed {key}"))
}

/// Seven parts (ops 0 to 6), then the seal (op 7), which fails until it is fixed.
#[workflow_tool]
pub async fn assemble(job: Job, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let mut parts = Vec::new();
    for n in 0..7 {
        parts.push(part(ctx, n).await?);
    }
    let sealed = seal(ctx, job.key).await?;
    Ok(json!({ "parts": parts, "sealed": sealed }))
}

/// Waits an hour, then assembles nothing.
#[workflow_tool]
pub async fn assemble_later(_job: Job, _ctx: &WorkflowCtx) -> Result<(), ToolError> {
    sleep(Duration::from_secs(3600)).await?;
    Ok(())
}

/// A run of `assemble` with `key`, failed at its seal.
async fn failed_run(runtime: &Runtime, key: &str) -> RunId {
    let run = runtime.start("assemble", json!({ "key": key })).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Failed(RunFailure::Tool { message }) if message.contains("jammed")),
        "{outcome:?}"
    );
    run.id().clone()
}

/// Writes a finished run of `tool` with `entries` after its start into `world`'s store, as a run
/// of another build would have left it.
async fn import(world: &World, tool: &str, input: Value, entries: Vec<Entry>) -> RunId {
    world.import_run(&format!("core::fork::{tool}"), tool, input, entries).await
}

fn failed(message: &str) -> Entry {
    Entry::RunFailed { failure: RunFailure::Tool { message: message.to_owned() } }
}

#[tokio::test]
async fn a_run_failed_at_op_7_forked_from_op_5_runs_ops_5_on_only() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(16);
    let original = failed_run(&runtime, "fork-basic").await;
    let before = runtime.journal(&original).await.unwrap().entries;

    fix("fork-basic");
    let fork = runtime.fork(&original, Op(5)).await.unwrap();
    let outcome = fork.outcome().await.unwrap();
    let parts = json!([0, 10, 20, 30, 40, 50, 60]);
    assert_eq!(outcome, RunOutcome::Completed(json!({ "parts": parts, "sealed": "sealed fork-basic" })));
    for n in 0..5 {
        assert_eq!(executions(fork.id(), &format!("part {n}")), Vec::<u32>::new(), "part {n} is the original's");
    }
    for step in ["part 5", "part 6", "seal"] {
        assert_eq!(executions(fork.id(), step), [1], "{step} ran again, once");
    }

    assert_eq!(runtime.journal(&original).await.unwrap().entries, before, "the original stays as it ended");
    let journal = runtime.journal(fork.id()).await.unwrap().entries;
    let Entry::RunStarted { forked_from: Some(link), build: Some(_), workflow_id, .. } = &journal[0] else {
        panic!("the fork's start names its origin and this build: {:?}", journal[0])
    };
    assert_eq!(**link, ForkedFrom { run: original.clone(), op: Op(5) });
    assert_eq!(&**workflow_id, "core::fork::assemble");
    assert_eq!(journal[1..=5], before[1..=5], "ops 0 to 4 as the original journaled them");
    assert!(matches!(&journal[6], Entry::StepCompleted { op: Op(5), .. }), "{:?}", journal[6]);

    // A new process replays the fork like any run: nothing runs again.
    let restarted = world.runtime(0);
    restarted.recover().await.unwrap();
    assert_eq!(restarted.handle(fork.id().clone()).outcome().await.unwrap(), outcome);
    assert_eq!(executions(fork.id(), "seal"), [1]);
}

/// A fork keeps every entry of each op before `from` wherever the journal has it (a retry, or an
/// op that ended after a later op's entry), and nothing that belongs to no op (a cancellation,
/// the end).
#[tokio::test]
async fn a_fork_keeps_whole_ops_and_nothing_that_belongs_to_none() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let recorded = runtime.journal(&failed_run(&runtime, "fork-whole").await).await.unwrap().entries;
    let [_, c0, c1, c2, c3, c4, c5, c6, c7, _end] = &recorded[..] else { panic!("{recorded:?}") };
    let Entry::StepCompleted { name, input_hash, .. } = c4 else { panic!("{c4:?}") };
    let retrying = Entry::StepRetrying {
        op: Op(4),
        name: name.clone(),
        input_hash: *input_hash,
        attempt: 1,
        error: "a loose screw".into(),
        next_attempt_at: world.clock.now(),
    };
    let cancel = Entry::CancelRequested { reason: "changed my mind".into(), keep_output: false, grace_until: None };
    let entries = vec![
        c0.clone(),
        c1.clone(),
        c2.clone(),
        c3.clone(),
        retrying.clone(),
        c5.clone(),
        cancel,
        c4.clone(),
        c6.clone(),
        c7.clone(),
        failed("the sealer is jammed"),
    ];
    let original = import(&world, "assemble", json!({ "key": "fork-whole" }), entries).await;

    fix("fork-whole");
    let fork = runtime.fork(&original, Op(5)).await.unwrap();
    assert!(matches!(fork.outcome().await.unwrap(), RunOutcome::Completed(_)));
    let journal = runtime.journal(fork.id()).await.unwrap().entries;
    let kept = [c0, c1, c2, c3, &retrying, c4].map(Clone::clone);
    assert_eq!(journal[1..=6], kept, "ops 0 to 4 in journal order, the retry and the late end included");
    assert_eq!(executions(fork.id(), "part 4"), Vec::<u32>::new(), "op 4's retry ended in the original");
    assert_eq!(executions(fork.id(), "part 5"), [1], "op 5 ran again though the original journaled it");
    assert!(!journal.iter().any(|entry| matches!(entry, Entry::CancelRequested { .. })), "no cancellation");
}

/// From the number of ops the run recorded, a fork keeps them all: here the failed seal too, so
/// it fails as the original did without executing anything.
#[tokio::test]
async fn a_fork_from_past_the_last_op_keeps_every_op() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let original = failed_run(&runtime, "fork-all").await;
    let fork = runtime.fork(&original, Op(8)).await.unwrap();
    assert!(matches!(fork.outcome().await.unwrap(), RunOutcome::Failed(RunFailure::Tool { .. })));
    assert_eq!(executions(fork.id(), "seal"), Vec::<u32>::new());

    let error = runtime.fork(&original, Op(9)).await.unwrap_err();
    assert!(matches!(&error, Error::Fork(ForkError::PastTheEnd { ops: 8, .. })), "{error:?}");
    assert!(error.to_string().contains("records 8 ops (0 to 7); fork from one of them, or from op 8"), "{error}");
}

#[tokio::test]
async fn an_unknown_or_active_run_is_refused_saying_what_to_do() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let nobody: RunId = "run-nobody".parse().unwrap();
    assert!(matches!(runtime.fork(&nobody, Op(0)).await, Err(Error::RunNotFound(_))));

    let waiting = runtime.start("assemble_later", json!({ "key": "fork-active" })).await.unwrap();
    waiting.parked().await.unwrap();
    let error = runtime.fork(waiting.id(), Op(0)).await.unwrap_err();
    assert!(matches!(&error, Error::Fork(ForkError::Active { .. })), "{error:?}");
    assert!(error.to_string().contains("is still active; cancel it first"), "{error}");
    let runs = runtime.runs(None, 10).await.unwrap().len();

    // Once cancelled, as the refusal advised, it forks: the fork waits its hour afresh.
    runtime.cancel(waiting.id(), "to fork it").await.unwrap();
    assert_eq!(waiting.outcome().await.unwrap(), RunOutcome::Cancelled);
    let fork = runtime.fork(waiting.id(), Op(0)).await.unwrap();
    assert!(matches!(fork.parked().await.unwrap(), eve_tools::Phase::Parked));
    assert_eq!(runtime.runs(None, 10).await.unwrap().len(), runs + 1, "the refusals created nothing");
}

#[tokio::test]
async fn a_tool_this_build_lacks_a_child_run_or_a_divergence_is_refused() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let gone = import(&world, "retired_tool", json!({}), vec![failed("gone")]).await;
    let error = runtime.fork(&gone, Op(0)).await.unwrap_err();
    assert!(matches!(&error, Error::Fork(ForkError::UnknownTool { .. })), "{error:?}");
    assert!(error.to_string().contains("run of `retired_tool`, which this build does not have"), "{error}");

    let child = Entry::Recorded { op: Op(0), kind: RecordKind::Started, value: json!({ "run": "child-1" }).into() };
    let parent = import(&world, "assemble", json!({ "key": "fork-child" }), vec![child, failed("no")]).await;
    let error = runtime.fork(&parent, Op(1)).await.unwrap_err();
    assert!(matches!(&error, Error::Fork(ForkError::StartedChild { op: Op(0), .. })), "{error:?}");
    assert!(error.to_string().contains("started run child-1"), "{error}");
    assert!(error.to_string().contains("fork from op 0 or earlier"), "{error}");

    // A journal whose op 0 is a step this body never calls there: it does not replay.
    let recorded = runtime.journal(&failed_run(&runtime, "fork-diverged").await).await.unwrap().entries;
    let mut welded = recorded[1].clone();
    if let Entry::StepCompleted { name, .. } = &mut welded {
        *name = "weld".into();
    }
    let diverged = import(&world, "assemble", json!({ "key": "fork-diverged" }), vec![welded, failed("no")]).await;
    let error = runtime.fork(&diverged, Op(1)).await.unwrap_err();
    assert!(matches!(&error, Error::Fork(ForkError::Diverges { .. })), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("before op 1 do not replay on this build") && message.contains("`weld`"), "{message}");
    assert!(message.contains("fork from an earlier op"), "{message}");
    // Forked from op 0, nothing is kept, so nothing can diverge.
    fix("fork-diverged");
    let fork = runtime.fork(&diverged, Op(0)).await.unwrap();
    assert!(matches!(fork.outcome().await.unwrap(), RunOutcome::Completed(_)));
    assert_eq!(executions(fork.id(), "part 0"), [1]);
}
