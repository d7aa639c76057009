// A workflow body reads no environment variable: it may differ when the run is replayed.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input) -> Result<String, ToolError> {
    let home = std::env::var("HOME");
    Ok(format!("{} {home:?}", input.path))
}

fn main() {}
