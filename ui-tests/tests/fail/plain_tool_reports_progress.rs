// A plain `#[tool]` runs inside the model step and answers at once, so it cannot report progress;
// a `#[workflow_tool]` can.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[tool]
async fn shout(input: Input, progress: Progress) -> Result<String, ToolError> {
    progress.report("shouting").await?;
    Ok(input.text.to_uppercase())
}

fn main() {}
