// A tool's output implements `Serialize`: the model receives it as JSON.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

struct Deployed {
    url: String,
}

#[workflow_tool]
async fn deploy(input: Input, _ctx: &WorkflowCtx) -> Result<Deployed, ToolError> {
    Ok(Deployed { url: input.text })
}

fn main() {}
