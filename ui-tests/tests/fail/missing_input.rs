// A tool takes an input: the JSON object the model fills in.

use eve_tools::prelude::*;

#[workflow_tool]
async fn deploy(_ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(String::new())
}

#[tool]
async fn ping() -> Result<String, ToolError> {
    Ok("pong".into())
}

fn main() {}
