// An argument that belongs to another macro says which one: `serve` is `#[task(serve)]`, a
// background workflow is a `#[task]`, and the description is the doc comment.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool(serve)]
async fn concierge(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

#[workflow_tool(execution = "background")]
async fn remind(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

#[tool(description = "Looks things up.")]
async fn look_up(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

fn main() {}
