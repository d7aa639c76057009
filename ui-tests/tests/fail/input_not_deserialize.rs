// A tool's input implements `Deserialize` and `JsonSchema`: the model fills it in from its schema.

use eve_tools::prelude::*;

#[derive(serde::Deserialize)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn deploy(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

fn main() {}
