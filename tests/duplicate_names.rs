//! Two tools with one name make calls ambiguous, so the runtime refuses to build and says which.

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// An empty input.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

mod billing {
    use super::*;

    /// Refund an order.
    #[workflow_tool(name = "refund")]
    pub async fn refund_order(_input: Nothing) -> Result<(), ToolError> {
        Ok(())
    }
}

mod support {
    use super::*;

    /// Refund a ticket.
    #[workflow_tool(name = "refund")]
    pub async fn refund_ticket(_input: Nothing) -> Result<(), ToolError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_runtime_refuses_tools_that_share_a_name() {
    let Err(error) = Runtime::in_memory() else { panic!("the runtime must refuse ambiguous names") };
    assert_eq!(
        error.to_string(),
        "2 tools are named `refund` (duplicate_names::billing::refund_order, duplicate_names::support::refund_ticket); \
         give all but one another name with `name = \"…\"`"
    );
}
