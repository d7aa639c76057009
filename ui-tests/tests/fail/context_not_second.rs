// A tool's context comes second, after its input: `(input: Input, ctx: &WorkflowCtx)`.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn deploy(_ctx: &WorkflowCtx, input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

fn main() {}
