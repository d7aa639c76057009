// `get_token` and `require_auth` run inside a `#[step]` that takes `ctx: &StepCtx`, so a token never
// enters a workflow's journal.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    repository: String,
}

#[workflow_tool]
async fn read_repository(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let _token = ctx.get_token("github").await?;
    Ok(input.repository)
}

fn main() {}
