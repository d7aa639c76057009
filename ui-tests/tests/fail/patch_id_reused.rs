// Replay tells a body's patches apart by their ids, so each id names one patch.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    order: String,
}

#[workflow_tool]
async fn ship(input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut steps = Vec::new();
    if ctx.patched("new-carrier") {
        steps.push("pick the new carrier");
    }
    if ctx.patched("new-carrier") {
        steps.push("label for the new carrier");
    }
    Ok(format!("{}: {}", input.order, steps.join(", ")))
}

fn main() {}
