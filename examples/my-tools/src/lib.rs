//! The tools of `my-tools`: each `#[workflow_tool]`, `#[task]` and `#[tool]` here is in the
//! manifest of the binary in `main.rs`.

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// What to check out.
#[derive(Deserialize, JsonSchema)]
pub struct Cart {
    /// Who is buying.
    pub customer: String,
    /// How many items; at least one.
    #[schemars(range(min = 1))]
    pub items: u32,
}

/// Check out a cart: reserve the items, then charge the customer.
#[workflow_tool]
pub async fn checkout(cart: Cart, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let reservation = reserve(cart.items).await?;
    let receipt = charge(ctx, cart.customer, cart.items * 1_250).await?;
    Ok(format!("{reservation}; {receipt}"))
}

#[step]
async fn reserve(items: u32) -> Result<String, StepError> {
    Ok(format!("reserved {items} items"))
}

#[step(max_attempts = 5)]
async fn charge(ctx: &StepCtx, customer: String, cents: u32) -> Result<String, StepError> {
    // A payment API called with this key charges once, however often the attempt runs.
    let _key = ctx.idempotency_key();
    Ok(format!("charged {customer} {cents} cents"))
}
