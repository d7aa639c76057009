//! Two tools with one name, for `core::duplicate_names`: this binary's runtime must refuse to
//! build, and prints why. The tools live in a binary of their own because the refusal holds for
//! every runtime of the binary that links them.

use std::process::ExitCode;

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

/// Prints the runtime's refusal and fails; succeeds, printing nothing, if the runtime builds.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match Runtime::in_memory() {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            print!("{error}");
            ExitCode::FAILURE
        }
    }
}
