// Every eve macro goes on an `async fn`: the body awaits steps and durable waits.

use eve_tools::prelude::*;

#[step]
fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

#[workflow_tool]
struct Deploy;

fn main() {}
