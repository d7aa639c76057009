// `max_attempts` counts the first attempt, so it is at least 1.

use eve_tools::prelude::*;

#[step(max_attempts = 0)]
async fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
