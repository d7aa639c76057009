//! Concurrency: many steps in flight in one run, many runs at once, and every entry point that
//! activates a run (two starts under one run id, recovery, a cancel, a hook payload, a wait for
//! it) racing the others without running a step twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use eve_tests::faulty::Faulty;
use eve_tests::{World, executed, executions, within};
use eve_tools::prelude::*;
use eve_tools::{Entry, RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

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

/// How many squares to sum before waiting.
#[derive(Deserialize, JsonSchema)]
pub struct Parked {
    steps: u64,
}

/// Sums the squares below `steps`, one step each, then waits on its hook for one more number
/// and adds its square.
#[workflow_tool]
pub async fn sum_then_wait(input: Parked, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut total = 0;
    for x in 0..input.steps {
        total += square(ctx, x).await?;
    }
    let mut hook = create_hook_with_token::<u64>(format!("more-{}", ctx.run_id()));
    let more = hook.recv().await.map_err(ToolError::new)?;
    Ok(total + square(ctx, more).await?)
}

/// Starts a `sum_then_wait` run of each length on the SQLite store in `dir`, lets them park, and
/// closes the store, as a process that stops with its runs parked: their ids.
async fn parked_before_a_restart(dir: &std::path::Path, lengths: &[u64]) -> Vec<eve_tools::RunId> {
    let world = World::sqlite(dir);
    let runtime = world.runtime(16);
    let runs = parked_runs(&runtime, lengths).await;
    drop(runtime);
    world.close().await;
    runs
}

/// Starts a `sum_then_wait` run of each length on `runtime` and lets them park: their ids.
async fn parked_runs(runtime: &Runtime, lengths: &[u64]) -> Vec<eve_tools::RunId> {
    let mut runs = Vec::new();
    for steps in lengths {
        runs.push(runtime.start("sum_then_wait", json!({ "steps": steps })).await.unwrap().id().clone());
    }
    runtime.settle().await;
    runs
}

/// How `run` ends, failing the test (not hanging it) if that takes more than a minute.
async fn outcome_within_a_minute(runtime: &Runtime, run: &eve_tools::RunId) -> RunOutcome {
    let handle = runtime.handle(run.clone());
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(60), handle.outcome()).await;
    outcome.unwrap_or_else(|_| panic!("run {run} took its delivery")).unwrap()
}

/// A webhook for a run parked on SQLite before a restart reaches it, alone: the delivery is the
/// only thing that wakes the run, and its journal (long enough to be read in two halves) is read
/// while the delivery commits, so the claim must read the inbox after that commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_reaches_a_run_parked_before_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3_u64 {
        let run = parked_before_a_restart(dir.path(), &[600]).await.remove(0);
        let world = World::sqlite(dir.path());
        let runtime = world.runtime(16);
        let delivered = runtime.resume_hook(&format!("more-{run}"), json!(round)).await.unwrap();
        assert_eq!(delivered, eve_tools::HookDelivery::Accepted(run.clone()));
        let sum: u64 = (0..600_u64).map(|x| x * x).sum::<u64>() + round * round;
        assert_eq!(outcome_within_a_minute(&runtime, &run).await, RunOutcome::Completed(json!(sum)), "round {round}");
        assert_eq!(executions(&run, "square").len(), 601, "no step ran twice");
        drop(runtime);
        world.close().await;
    }
}

/// A run the warm cache lets go of is said to the store (`Store::left_memory`), which reads its
/// journal ahead of its next claim when a delivery wakes it: a webhook to a long run that
/// another run's park pushed out of the cache reaches it, and no step runs twice. A run the cache
/// still holds is never said to have left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_reaches_a_run_the_warm_cache_let_go_of() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = eve_tools::store::SqliteStore::open(dir.path().join("eve.db")).unwrap();
    let store = Faulty::new(std::sync::Arc::new(sqlite));
    let world = World::over(store.clone());
    let runtime = world.runtime(1);
    let long = runtime.start("sum_then_wait", json!({ "steps": 600 })).await.unwrap().id().clone();
    runtime.settle().await;
    assert_eq!(store.let_go(), Vec::<eve_tools::RunId>::new(), "the cache holds the one parked run");
    // Slowed, the store's hint shows whether `settle` waits for the park to finish with it.
    store.delay_let_go(std::time::Duration::from_millis(100));
    let short = runtime.start("sum_then_wait", json!({ "steps": 3 })).await.unwrap().id().clone();
    runtime.settle().await;
    assert_eq!(store.let_go(), vec![long.clone()], "the second run's park let the first go before it settled");
    store.delay_let_go(std::time::Duration::ZERO);

    let delivered = runtime.resume_hook(&format!("more-{long}"), json!(7)).await.unwrap();
    assert_eq!(delivered, eve_tools::HookDelivery::Accepted(long.clone()));
    let sum: u64 = (0..600_u64).map(|x| x * x).sum::<u64>() + 49;
    assert_eq!(outcome_within_a_minute(&runtime, &long).await, RunOutcome::Completed(json!(sum)));
    assert_eq!(executions(&long, "square").len(), 601, "no step ran twice");
    runtime.resume_hook(&format!("more-{short}"), json!(2)).await.unwrap();
    assert_eq!(outcome_within_a_minute(&runtime, &short).await, RunOutcome::Completed(json!(1 + 4 + 4)));
    assert_eq!(store.let_go(), vec![long], "the long run ended in memory, and the short one resumed warm");
    drop((runtime, store));
    world.close().await;
}

/// Runs parked on SQLite before a restart are woken in the new process all at once, through
/// every entry point (see [`wake_at_once_from_every_entry_point`]). A delivery to a run not in
/// memory reads its journal ahead of its claim: more runs than that read-ahead keeps, two of them
/// long enough to be read in two halves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_parked_before_a_restart_wake_at_once_from_every_entry_point() {
    let dir = tempfile::tempdir().unwrap();
    let lengths = hammered_lengths();
    let runs = parked_before_a_restart(dir.path(), &lengths).await;
    let world = World::sqlite(dir.path());
    wake_at_once_from_every_entry_point(&world.runtime(16), &runs, &lengths).await;
}

/// Runs parked on SQLite, all but two of them let go by the warm cache, are woken all at once
/// through every entry point (see [`wake_at_once_from_every_entry_point`]): the deliveries to the
/// runs let go read their journals ahead of their claims, while the two kept warm resume
/// without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_the_warm_cache_let_go_of_wake_at_once_from_every_entry_point() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let runtime = world.runtime(2);
    let lengths = hammered_lengths();
    let runs = parked_runs(&runtime, &lengths).await;
    wake_at_once_from_every_entry_point(&runtime, &runs, &lengths).await;
}

/// The lengths of the hammered runs: two long enough for a claim to read in two halves, ten short.
fn hammered_lengths() -> Vec<u64> {
    (0..12).map(|index| if index < 2 { 600 } else { 3 + index }).collect()
}

/// Wakes `runs` (parked `sum_then_wait` runs of `lengths` steps) all at once, through every
/// entry point: each run's payload sent twice under one delivery id, its journal read, the
/// recovery run again, and every third run cancelled as well. Every run must end as one of its
/// deliveries says, with no step run twice.
async fn wake_at_once_from_every_entry_point(runtime: &Runtime, runs: &[eve_tools::RunId], lengths: &[u64]) {
    let mut calls = tokio::task::JoinSet::new();
    for (index, run) in runs.iter().enumerate() {
        let token = format!("more-{run}");
        for _ in 0..2 {
            let (runtime, token) = (runtime.clone(), token.clone());
            calls.spawn(async move {
                let delivered = runtime.resume_hook_once(&token, "the-one", json!(index)).await;
                assert!(delivered.is_ok(), "the hook takes the payload once and names a repeat: {delivered:?}");
            });
        }
        let (runtime, run) = (runtime.clone(), run.clone());
        calls.spawn(async move {
            runtime.journal(&run).await.unwrap();
            if index % 3 == 0 {
                // Refused only if the run ended first.
                let _ = runtime.cancel(&run, "hammered").await;
            }
            runtime.recover().await.unwrap();
        });
    }
    while let Some(call) = calls.join_next().await {
        call.unwrap();
    }
    for (index, (run, steps)) in runs.iter().zip(lengths).enumerate() {
        let outcome = outcome_within_a_minute(runtime, run).await;
        let sum: u64 = (0..*steps).map(|x| x * x).sum::<u64>() + (index * index) as u64;
        match outcome {
            RunOutcome::Completed(output) => assert_eq!(output, json!(sum), "run {index}"),
            RunOutcome::Cancelled if index % 3 == 0 => {}
            other => panic!("run {index} ended {other:?}"),
        }
        let executed = executions(run, "square");
        assert!(executed.iter().all(|attempt| *attempt == 1), "no step of run {index} ran twice");
        let completed = runtime
            .journal(run)
            .await
            .unwrap()
            .entries
            .iter()
            .filter(|entry| matches!(entry, Entry::StepCompleted { .. }))
            .count();
        assert!(
            executed.len() == completed || executed.len() == completed + 1,
            "run {index}: {} executed, {completed} journaled",
            executed.len()
        );
    }
}

/// A chain of quick steps, and how many threads watch it.
#[derive(Deserialize, JsonSchema)]
pub struct Watched {
    steps: u64,
    watchers: usize,
}

#[step]
async fn bump(x: u64) -> Result<u64, StepError> {
    Ok(x + 1)
}

/// What the threads watching one run share with the test.
#[derive(Default)]
struct Watch {
    stop: AtomicBool,
    /// Looks at the run's core the watchers took, all together.
    looks: AtomicU64,
    /// Looks taken while the chain ran, as the body counted them.
    during_chain: AtomicU64,
    threads: Mutex<Vec<std::thread::JoinHandle<bool>>>,
}

/// Each run's watch, by run id (the tests of this file run at once).
static WATCHES: LazyLock<Mutex<HashMap<String, Arc<Watch>>>> = LazyLock::new(Default::default);

fn watch_of(run: &eve_tools::RunId) -> Arc<Watch> {
    WATCHES.lock().unwrap().entry(run.to_string()).or_default().clone()
}

/// Until told to stop or the run is cancelled, polls the run's abort future (which locks its
/// core) and reads its signal, from a thread of its own. Returns whether it saw the abort.
fn watch(signal: eve_tools::AbortSignal, watch: &Watch) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    while !watch.stop.load(Ordering::Acquire) {
        let fired = std::pin::pin!(signal.aborted()).poll(&mut cx).is_ready();
        watch.looks.fetch_add(1, Ordering::AcqRel);
        if fired || signal.is_aborted() {
            return true;
        }
    }
    signal.is_aborted()
}

/// Starts the run's watchers, once, and waits until each has looked at its core.
fn start_watching(ctx: &WorkflowCtx, watchers: usize) -> Arc<Watch> {
    let watching = watch_of(ctx.run_id());
    if watching.threads.lock().unwrap().is_empty() {
        for _ in 0..watchers {
            let (signal, shared) = (ctx.abort_signal(), watching.clone());
            watching.threads.lock().unwrap().push(std::thread::spawn(move || watch(signal, &shared)));
        }
        while watching.looks.load(Ordering::Acquire) < watchers as u64 {
            std::thread::yield_now();
        }
    }
    watching
}

/// Runs `steps` quick steps one after another, stopping early if cancelled, while `watchers`
/// threads outside the run look at its core the whole time (the body waits, on its first poll,
/// until each has looked once).
#[workflow_tool]
pub async fn watched_chain(input: Watched, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let watching = start_watching(ctx, input.watchers);
    let before = watching.looks.load(Ordering::Acquire);
    let mut x = 0;
    for _ in 0..input.steps {
        if ctx.is_cancelled() {
            break;
        }
        x = bump(x).await?;
    }
    watching.during_chain.store(watching.looks.load(Ordering::Acquire) - before, Ordering::Release);
    Ok(x)
}

/// Stops the run's watchers and returns whether each saw the abort.
fn stop_watching(run: &eve_tools::RunId) -> Vec<bool> {
    let watching = watch_of(run);
    watching.stop.store(true, Ordering::Release);
    let threads = std::mem::take(&mut *watching.threads.lock().unwrap());
    threads.into_iter().map(|thread| thread.join().expect("a watcher does not panic")).collect()
}

/// The driver lends a run's state to its own thread while a step starts and the body takes its
/// outcome; threads outside the run that lock its core meanwhile wait for the lending to end,
/// and nothing deadlocks or goes missing: a long chain of quick steps with three threads polling
/// its abort future the whole time completes with every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_locking_a_run_core_while_its_chain_of_steps_runs_neither_block_it_nor_miss_anything() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("watched_chain", json!({ "steps": 5_000, "watchers": 3 })).await.unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(120), run.outcome()).await;
    let outcome = outcome.expect("the chain ends while threads lock its core").unwrap();
    let saw_abort = stop_watching(run.id());
    assert_eq!(outcome, RunOutcome::Completed(json!(5_000)));
    assert_eq!(saw_abort, [false, false, false], "nobody cancelled the run");
    let during_chain = watch_of(run.id()).during_chain.load(Ordering::Acquire);
    assert!(during_chain > 0, "the watchers locked the core while the chain ran");
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let completed = entries.iter().filter(|entry| matches!(entry, Entry::StepCompleted { .. })).count();
    assert_eq!(completed, 5_000, "every step's completion is journaled once");
}

/// The same with a cancellation arriving through the runtime in the middle of the chain: the
/// body sees it between two steps, every watcher sees the abort, and the run ends cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_reaches_a_chain_of_steps_and_the_threads_watching_its_abort_signal() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("watched_chain", json!({ "steps": 1_000_000, "watchers": 3 })).await.unwrap();
    while watch_of(run.id()).looks.load(Ordering::Acquire) < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    runtime.cancel(run.id(), "enough").await.unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(120), run.outcome()).await;
    assert_eq!(outcome.expect("the cancelled chain ends").unwrap(), RunOutcome::Cancelled);
    assert_eq!(stop_watching(run.id()), [true, true, true], "every watcher saw the abort");
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let completed = entries.iter().filter(|entry| matches!(entry, Entry::StepCompleted { .. })).count();
    assert!(completed < 1_000_000, "the body stopped at the cancellation, after {completed} steps");
}

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

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
