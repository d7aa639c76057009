// Unknown macro arguments are errors that list the known ones and suggest the closest.

use eve_tools::prelude::*;

#[step(max_attempt = 5, retires = 2)]
async fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
