// Step arguments are owned values, because they are recorded in the journal; only a first
// `ctx: &StepCtx` is borrowed.

use eve_tools::prelude::*;

#[step]
async fn plan(service: &str, regions: &[String]) -> Result<String, StepError> {
    Ok(format!("{service} in {}", regions.len()))
}

fn main() {}
