// A step that declares `ctx: &StepCtx` first is called with the body's own context (a workflow's,
// a task's or a plain tool's); the runtime builds a fresh `StepCtx` per attempt, which is never
// part of the journaled arguments.

use std::sync::atomic::{AtomicU32, Ordering};

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    label: String,
}

static CALLS: AtomicU32 = AtomicU32::new(0);

#[step(max_attempts = 3, backoff = "1ms")]
async fn keyed(ctx: &StepCtx, label: String) -> Result<String, StepError> {
    if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(StepError::msg("the first attempt fails"));
    }
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    assert_eq!(ctx.idempotency_key(), format!("{run}:0"));
    Ok(format!("{label} on attempt {}", ctx.attempt()))
}

#[step]
async fn untouched(_: &StepCtx) -> Result<u32, StepError> {
    Ok(7)
}

/// Calls a keyed step.
#[workflow_tool]
async fn workflow(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let keyed = keyed(ctx, input.label).await?;
    Ok(format!("{keyed}, then {}", untouched(ctx).await?))
}

/// Calls a step from a task.
#[task]
async fn background(_input: Input, ctx: &TaskCtx) -> Result<u32, ToolError> {
    Ok(untouched(ctx).await?)
}

/// Calls a step from a plain tool, where it just runs.
#[tool]
async fn plain(_input: Input, ctx: &ToolCtx) -> Result<u32, ToolError> {
    Ok(untouched(ctx).await?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runtime = Runtime::in_memory().unwrap();
    let run = runtime.start("workflow", serde_json::json!({ "label": "deploy" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!("deploy on attempt 2, then 7")));
    let run = runtime.start("background", serde_json::json!({ "label": "x" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(7)));
    let output = runtime.call_tool("plain", serde_json::json!({ "label": "x" })).await.unwrap();
    assert_eq!(output, serde_json::json!(7));
}
