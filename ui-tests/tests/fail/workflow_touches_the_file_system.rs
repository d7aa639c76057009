// A workflow body does no file I/O: a file may change before the run is replayed.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input) -> Result<String, ToolError> {
    let text = std::fs::read_to_string(&input.path);
    Ok(format!("{text:?}"))
}

fn main() {}
