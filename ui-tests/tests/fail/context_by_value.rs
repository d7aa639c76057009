// A context is taken by shared reference: `ctx: &WorkflowCtx`, not by value or `&mut`.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn deploy(input: Input, _ctx: WorkflowCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

#[step]
async fn plan(_ctx: &mut StepCtx, service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
