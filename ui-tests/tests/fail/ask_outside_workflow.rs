// `ask`, `agent` and `agents` exist only in workflow bodies (`#[workflow_tool]`, `#[task]`), which
// can park durably; a step or a plain tool returns what the body needs instead.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[step]
async fn approve(ctx: &StepCtx, plan: String) -> Result<bool, StepError> {
    let answer = ctx.ask(plan).await;
    Ok(answer.is_ok())
}

#[tool]
async fn delegate(input: Input, ctx: &ToolCtx) -> Result<String, ToolError> {
    let _agents = ctx.agents;
    Ok(input.text)
}

fn main() {}
