// A workflow body spawns no task: work outside the body's own polling is not journaled or replayed.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input) -> Result<String, ToolError> {
    tokio::spawn(async {});
    Ok(input.path)
}

fn main() {}
