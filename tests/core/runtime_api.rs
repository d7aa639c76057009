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
