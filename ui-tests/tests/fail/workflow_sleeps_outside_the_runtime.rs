// A workflow body waits only on durable timers: tokio's and std's sleeps are lost on a restart.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input) -> Result<String, ToolError> {
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    Ok(input.path)
}

#[task]
async fn remind(input: Input) -> Result<String, ToolError> {
    std::thread::sleep(std::time::Duration::from_secs(1));
    Ok(input.path)
}

fn main() {}
