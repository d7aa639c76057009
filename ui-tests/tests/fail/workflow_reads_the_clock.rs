// A workflow body is replayed, so it reads no clock; `ctx.now()` is recorded in the journal instead.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let started = std::time::SystemTime::now();
    let elapsed = std::time::Instant::now();
    Ok(format!("{} {started:?} {elapsed:?} {}", input.path, ctx.now()))
}

fn main() {}
