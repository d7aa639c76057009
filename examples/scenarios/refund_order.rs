//! Ask now, act when answered (the seed's `refund_order`): a background task asks for approval
//! and issues the refund once it is given.
//!
//! The model gets a receipt (`refund_order-xxxxxx`) at once and the conversation continues; the
//! approval card stays open, across restarts, until someone answers it. Approving runs the refund
//! step once; denying, or a run nobody can answer, refunds nothing.

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which order to refund, and how much.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundInput {
    /// The order id.
    pub order_id: String,
    /// The amount, in dollars.
    pub amount: f64,
}

/// What the payment provider returned for a refund.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The refund's id at the payment provider.
    pub refund_id: String,
    /// The order refunded.
    pub order_id: String,
    /// The amount refunded, in dollars.
    pub amount: f64,
    /// The task that asked for it, for the audit trail.
    pub task_id: String,
}

/// What happened.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Refund {
    /// Whether the refund was issued.
    pub refunded: bool,
    /// The payment provider's receipt, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

/// Request approval to refund an order, then issue the refund once approved.
#[task]
pub async fn refund_order(input: RefundInput, ctx: &TaskCtx) -> Result<Refund, ToolError> {
    let question = Ask::confirmation(format!("Refund ${:.2} on order {}?", input.amount, input.order_id))
        .option("approve", "Refund")
        .primary()
        .option("deny", "Deny");
    let decision = ctx.ask(question).await;
    if !decision.chose("approve") {
        return Ok(Refund { refunded: false, receipt: None });
    }
    let receipt = issue_refund(ctx, input.order_id, input.amount, ctx.task_id().to_owned()).await?;
    Ok(Refund { refunded: true, receipt: Some(receipt) })
}

/// Issues the refund. A real payment API deduplicates on the idempotency key, so an attempt
/// repeated after a crash refunds once; here the key is the refund id.
#[step(max_attempts = 5)]
async fn issue_refund(ctx: &StepCtx, order_id: String, amount: f64, task_id: String) -> Result<Receipt, StepError> {
    let refund_id = format!("re_{}", ctx.idempotency_key().replace([':', '_'], ""));
    Ok(Receipt { refund_id, order_id, amount, task_id })
}
