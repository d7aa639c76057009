// Each macro argument is given at most once.

use eve_tools::prelude::*;

#[step(name = "plan", max_attempts = 2, name = "plan_again")]
async fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
