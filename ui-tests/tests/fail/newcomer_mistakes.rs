// A newcomer's first mistakes are reported in one pass, each spanned and saying what to write
// instead, and nothing else: a fn missing `async` is still emitted as an `async fn`, so the
// `.await`s in its body bring no rustc error of their own (E0728) on top of ours.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Order {
    id: String,
}

#[step(max_atempts = 3)]
async fn reserve(id: &str) -> Result<String, StepError> {
    Ok(id.to_owned())
}

#[workflow_tool]
pub fn checkout(order: Order, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let started = std::time::Instant::now();
    let reserved = reserve(&order.id).await?;
    sleep(std::time::Duration::from_secs(1)).await?;
    Ok(format!("{reserved} for {} after {:?}", ctx.run_id(), started.elapsed()))
}

fn main() {}
