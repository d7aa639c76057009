// The expansions are warning-free: `#![deny(warnings)]` and `#![deny(missing_docs)]` accept a crate
// of public tools and steps, with and without contexts, as long as the user's own items are documented.

#![deny(warnings)]
#![deny(missing_docs)]
//! A documented crate of tools.

use eve_tools::prelude::*;
use eve_tools::{Receive, ServeCtx};
use serde::{Deserialize, Serialize};

/// What the model fills in.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct Order {
    /// The order's id.
    pub id: String,
}

/// What a step records.
#[derive(Serialize, Deserialize)]
pub struct Receipt {
    /// The receipt number.
    pub number: u64,
}

/// Issues a receipt.
#[step(name = "issue", max_attempts = 4, backoff = "10ms")]
pub async fn issue_receipt(ctx: &StepCtx, mut id: String) -> Result<Receipt, StepError> {
    id.push('!');
    Ok(Receipt { number: id.len() as u64 + u64::from(ctx.attempt()) })
}

/// Counts an order's characters.
#[step]
pub async fn count((id, extra): (String, u64)) -> Result<u64, StepError> {
    Ok(id.len() as u64 + extra)
}

/// Takes an order.
#[workflow_tool]
pub async fn take_order(order: Order, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let receipt = issue_receipt(ctx, order.id.clone()).await?;
    Ok(count((order.id, receipt.number)).await?)
}

/// Takes an order in the background.
#[task(name = "take-order-later")]
pub async fn take_order_later(order: Order) -> Result<String, ToolError> {
    Ok(order.id)
}

/// Serves orders.
#[task(serve)]
pub async fn serve_orders(_orders: Receive<Order>, _ctx: &ServeCtx) -> Result<(), ToolError> {
    Ok(())
}

/// Packs an order, reporting progress; it returns nothing, so its last report is its output.
#[workflow_tool]
pub async fn pack_order(order: Order, progress: Progress) -> Result<(), ToolError> {
    progress.report(serde_json::json!({ "packed": order.id })).await?;
    Ok(())
}

/// Ships an order in the background, reporting progress nobody sees.
#[task]
pub async fn ship_order(order: Order, _ctx: &TaskCtx, progress: Progress) -> Result<String, ToolError> {
    progress.report("shipping").await?;
    Ok(order.id)
}

/// Looks an order up.
#[tool]
pub async fn look_up(order: Order, ctx: &ToolCtx) -> Result<String, ToolError> {
    Ok(format!("{} via {}", order.id, ctx.tool_name()))
}

/// Compiled out, together with its registration.
#[cfg(any())]
#[tool]
pub async fn compiled_out(order: Order) -> Result<String, ToolError> {
    Ok(order.id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runtime = Runtime::in_memory().unwrap();
    let run = runtime.start("take_order", serde_json::json!({ "id": "abc" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(8)));
    let found = runtime.call_tool("look_up", serde_json::json!({ "id": "abc" })).await.unwrap();
    assert_eq!(found, serde_json::json!("abc via look_up"));
    assert!(eve_tools::manifest().tools.iter().all(|tool| tool.name != "compiled_out"));
    let run = runtime.start("pack_order", serde_json::json!({ "id": "abc" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!({ "packed": "abc" })));
    let run = runtime.start("ship_order", serde_json::json!({ "id": "abc" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!("abc")));
}
