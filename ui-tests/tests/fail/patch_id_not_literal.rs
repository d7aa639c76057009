// A patch's id is journaled with its marker and looked for on replay, so it is a string literal.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    feature: String,
}

const ID: &str = "notify-by-email";

#[workflow_tool]
async fn notify(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    if ctx.patched(ID) {
        return Ok(format!("{} by email", input.feature));
    }
    Ok(input.feature)
}

fn main() {}
