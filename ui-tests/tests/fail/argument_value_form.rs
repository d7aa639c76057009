// Each argument value has its form: `name = "…"` a string, `max_attempts = 5` an integer, `serve`
// a bare flag, `crate = "…"` a path in a string.

use eve_tools::Receive;
use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[step(name = plan, max_attempts = "5")]
async fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

#[task(serve = true, crate = "not a path")]
async fn concierge(_calls: Receive<Input>) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
