// Each macro takes its own context: `#[workflow_tool]` a `&WorkflowCtx`, `#[task]` a `&TaskCtx`,
// `#[task(serve)]` a `&ServeCtx`, `#[tool]` a `&ToolCtx` and `#[step]` a `&StepCtx`.

use eve_tools::Receive;
use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn deploy(input: Input, _ctx: &TaskCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

#[task]
async fn remind(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

#[task(serve)]
async fn concierge(_calls: Receive<Input>, _ctx: &TaskCtx) -> Result<(), ToolError> {
    Ok(())
}

#[tool]
async fn look_up(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

#[step]
async fn plan(_ctx: &WorkflowCtx, service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
