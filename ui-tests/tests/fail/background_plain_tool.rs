// The background plain tool (task / none) was removed: work that outlives the model step is a `#[task]`.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[tool(background)]
async fn index(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

#[tool(execution = "background")]
async fn reindex(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

fn main() {}
