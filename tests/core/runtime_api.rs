//! The host-facing runtime API: state handed to steps and plain tools, task ids on run handles,
//! and shutting a runtime down so its store can be opened again.

use std::sync::Arc;

use eve_tools::prelude::*;
use eve_tools::store::{RunQuery, SqliteStore, Store};
use eve_tools::{RunFailure, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Configuration a host gives its steps.
pub struct Billing {
    base_url: String,
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn invoice_url(ctx: &StepCtx, number: u32) -> Result<String, StepError> {
    let billing = ctx.state::<Billing>()?;
    Ok(format!("{}/invoices/{number}", billing.base_url))
}

/// Builds an invoice URL from the host's billing configuration.
#[workflow_tool]
pub async fn invoice(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(invoice_url(ctx, 7).await?)
}

/// Reads the billing configuration from a plain tool.
#[tool]
pub async fn billing_base(_input: Nothing, ctx: &ToolCtx) -> Result<String, ToolError> {
    Ok(ctx.state::<Billing>()?.base_url.clone())
}

/// Returns its own task id.
#[task]
pub async fn whoami(_input: Nothing, ctx: &TaskCtx) -> Result<String, ToolError> {
    Ok(ctx.task_id().to_owned())
}

/// Waits on a hook.
#[workflow_tool]
pub async fn wait_forever(_input: Nothing, _ctx: &WorkflowCtx) -> Result<(), ToolError> {
    create_hook::<bool>().recv().await?;
    Ok(())
}

#[tokio::test]
async fn steps_and_plain_tools_read_the_state_the_host_gave() {
    let runtime = Runtime::builder()
        .store(eve_tools::store::MemoryStore::new())
        .state(Billing { base_url: "https://billing.example".into() })
        .build()
        .unwrap();
    let run = runtime.start("invoice", json!({})).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("https://billing.example/invoices/7")));
    let base = runtime.call_tool("billing_base", json!({})).await.unwrap();
    assert_eq!(base, json!("https://billing.example"));
}

#[tokio::test]
async fn missing_state_fails_the_step_saying_how_to_provide_it() {
    let runtime = Runtime::in_memory().unwrap();
    let run = runtime.start("invoice", json!({})).await.unwrap();
    let RunOutcome::Failed(RunFailure::Tool { message }) = run.outcome().await.unwrap() else { panic!("fails") };
    assert_eq!(
        message,
        "the runtime has no state of type `core::runtime_api::Billing`; give it with Runtime::builder().state(..)"
    );
}

#[tokio::test]
async fn a_task_run_handle_knows_the_task_id_the_body_sees() {
    let runtime = Runtime::in_memory().unwrap();
    let run = runtime.start("whoami", json!({})).await.unwrap();
    let task_id = run.task_id().expect("a task has a task id").to_owned();
    assert!(task_id.starts_with("whoami-") && task_id.len() == "whoami-".len() + 6, "{task_id}");
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(task_id)));
    let other = runtime.start("invoice", json!({})).await.unwrap();
    assert_eq!(other.task_id(), None, "a workflow tool's run is not a task");
}

#[tokio::test]
async fn shutting_down_releases_the_store_for_another_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eve.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let runtime = Runtime::builder().shared_store(store.clone()).data_dir(dir.path()).build().unwrap();
    let run = runtime.start("wait_forever", json!({})).await.unwrap();
    run.parked().await.unwrap();
    drop(run);
    runtime.shutdown().await;
    assert_eq!(Arc::strong_count(&store), 1, "nothing inside the runtime holds the store any more");
    drop(store);
    let reopened = SqliteStore::open(&path).expect("the file lock was released");
    assert_eq!(reopened.list_runs(&RunQuery::newest(10)).await.unwrap().runs.len(), 1);
}

/// Refuses every call, as a tool whose own work failed.
#[tool]
pub async fn always_refuses(_input: Nothing) -> Result<String, ToolError> {
    Err(ToolError::new("the warehouse is closed"))
}

/// A plain tool's own failure is reported as the tool's failure, not as bad input: the caller
/// did nothing wrong, and retrying with other input would not help.
#[tokio::test]
async fn a_plain_tools_own_error_is_a_tool_failure_not_invalid_input() {
    let runtime = Runtime::in_memory().unwrap();
    let error = runtime.call_tool("always_refuses", json!({})).await.unwrap_err();
    assert!(matches!(error, eve_tools::Error::ToolFailed { .. }), "{error:?}");
    assert_eq!(error.to_string(), "tool `always_refuses` failed: the warehouse is closed");
    let refused = runtime.call_tool("always_refuses", json!([])).await.unwrap_err();
    assert!(matches!(refused, eve_tools::Error::InvalidInput { .. }), "{refused:?}");
}

/// The data folder a runtime makes carries a `.gitignore` that keeps it (and its secret key) out
/// of the user's repository; a folder that existed before is left as it was.
#[tokio::test]
async fn a_new_data_folder_keeps_itself_out_of_git() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join(".eve");
    let runtime = Runtime::builder().data_dir(&fresh).build().unwrap();
    assert!(fresh.join("eve.key").exists(), "the key is made in the new folder");
    let ignore = std::fs::read_to_string(fresh.join(".gitignore")).expect("the folder has a .gitignore");
    assert!(ignore.lines().any(|line| line == "*"), "it ignores everything in the folder: {ignore}");
    drop(runtime);

    let existing = dir.path().join("mine");
    std::fs::create_dir(&existing).unwrap();
    let runtime = Runtime::builder().data_dir(&existing).build().unwrap();
    assert!(existing.join("eve.key").exists());
    assert!(!existing.join(".gitignore").exists(), "a folder the user made is theirs");
    drop(runtime);
}

#[step]
async fn after_the_sleep(ctx: &StepCtx) -> Result<(), StepError> {
    eve_tests::executed(ctx, "after_the_sleep");
    Ok(())
}

/// Sleeps a minute, then runs a step.
#[workflow_tool]
pub async fn sleep_then_step(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    sleep(std::time::Duration::from_secs(60)).await?;
    after_the_sleep(ctx).await?;
    Ok(())
}

/// After `shutdown`, nothing in the runtime runs a step again, though a clone of it and a run
/// handle live on and the run's timer comes due: the run stays parked in the store for the next
/// runtime, which runs the step once.
#[tokio::test]
async fn a_shut_down_runtime_runs_nothing_though_its_clones_and_handles_live_on() {
    let world = eve_tests::World::in_memory();
    let runtime = world.runtime(16);
    let clone = runtime.clone();
    let run = runtime.start("sleep_then_step", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.shutdown().await;

    world.clock.advance(std::time::Duration::from_secs(120));
    clone.settle().await;
    assert_eq!(eve_tests::executions(run.id(), "after_the_sleep"), Vec::<u32>::new(), "no step runs");
    let refused = clone.start("sleep_then_step", json!({})).await.map(|run| run.id().clone());
    assert!(matches!(refused, Err(eve_tools::Error::ShuttingDown)), "{refused:?}");
    let listed = world.store.list_runs(&RunQuery::newest(10)).await.unwrap().runs;
    assert_eq!(listed.len(), 1, "the refused start made no run");
    drop((clone, run.clone()));

    let next = world.runtime(16);
    next.recover().await.unwrap();
    assert_eq!(next.handle(run.id().clone()).outcome().await.unwrap(), RunOutcome::Completed(json!(null)));
    assert_eq!(eve_tests::executions(run.id(), "after_the_sleep"), vec![1], "the next runtime runs it once");
}

/// Step attempts begun anywhere in this test binary by the tools below.
static ATTEMPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[step]
async fn counted() -> Result<(), StepError> {
    ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

/// What `wait_then_step` waits for.
#[derive(Deserialize, JsonSchema)]
pub struct Key {
    key: u32,
}

/// Runs a step, waits for a delivery to its hook or ten seconds, runs another.
#[workflow_tool]
pub async fn wait_then_step(input: Key, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    counted().await?;
    let mut hook = create_hook_with_token::<bool>(format!("shutdown-{}-{}", input.key, ctx.run_id()));
    let timer = sleep(std::time::Duration::from_secs(10));
    futures::pin_mut!(timer);
    tokio::select! {
        biased;
        _ = hook.recv() => {}
        _ = &mut timer => {}
    }
    counted().await?;
    Ok(())
}

/// Starts, deliveries, cancels and due timers hammer a runtime from other tasks while it shuts
/// down: once `shutdown` has returned, no step attempt begins, whichever entry point asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn once_shut_down_no_entry_point_runs_a_step() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let world = Arc::new(eve_tests::World::in_memory());
    let runtime = world.runtime(4);
    let mut runs = Vec::new();
    for key in 0..16 {
        runs.push(runtime.start("wait_then_step", json!({ "key": key })).await.unwrap());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut hammers = tokio::task::JoinSet::new();
    for worker in 0..4_u32 {
        let (runtime, world, stop) = (runtime.clone(), world.clone(), stop.clone());
        let ids: Vec<_> = runs.iter().map(|run| run.id().clone()).collect();
        hammers.spawn(async move {
            let mut round = 0_u32;
            while !stop.load(Ordering::SeqCst) {
                round += 1;
                let _ = runtime.start("wait_then_step", json!({ "key": 100 + worker * 1000 + round })).await;
                let id = &ids[(round as usize + worker as usize) % ids.len()];
                let key = ids.iter().position(|other| other == id).unwrap();
                let _ = runtime.resume_hook(&format!("shutdown-{key}-{id}"), json!(true)).await;
                if round.is_multiple_of(3) {
                    let _ = runtime.cancel(id, "hammered").await;
                }
                world.clock.advance(std::time::Duration::from_secs(5));
                tokio::task::yield_now().await;
            }
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let clone = runtime.clone();
    runtime.shutdown().await;
    let at_shutdown = ATTEMPTS.load(Ordering::SeqCst);
    // The hammers go on for a while against the stopped runtime, then stop.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    stop.store(true, Ordering::SeqCst);
    while hammers.join_next().await.is_some() {}
    world.clock.advance(std::time::Duration::from_secs(60));
    clone.settle().await;
    assert!(at_shutdown > 0, "the hammers ran steps before the shutdown");
    assert_eq!(ATTEMPTS.load(Ordering::SeqCst), at_shutdown, "no step attempt began after shutdown returned");
}
