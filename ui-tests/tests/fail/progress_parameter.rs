// A workflow body takes one progress channel, by value, as its last parameter:
// `(input: Input, ctx: &WorkflowCtx, progress: Progress)`; it reports through it, not with `yield`.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn first(input: Input, progress: Progress, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    progress.report(ctx.run_id().to_string()).await?;
    Ok(input.text)
}

#[workflow_tool]
async fn borrowed(input: Input, progress: &Progress) -> Result<String, ToolError> {
    progress.report("borrowed").await?;
    Ok(input.text)
}

#[task]
async fn twice(input: Input, progress: Progress, again: Progress) -> Result<String, ToolError> {
    progress.report(1).await?;
    again.report(2).await?;
    Ok(input.text)
}

#[workflow_tool]
async fn generator(input: Input) -> Result<String, ToolError> {
    yield input.text.len();
    Ok(input.text)
}

fn main() {}
