// A `select!` in a workflow body starts with `biased;`, so replay picks the same branch.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn race(input: Input) -> Result<String, ToolError> {
    let first = tokio::select! {
        _ = sleep(std::time::Duration::from_secs(60)) => "timer",
        _ = sleep(std::time::Duration::from_secs(30)) => "other timer",
    };
    Ok(format!("{first} {}", input.text))
}

fn main() {}
