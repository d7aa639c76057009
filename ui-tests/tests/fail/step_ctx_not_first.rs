// A step's `&StepCtx` is its first parameter, so callers pass the body's context first.

use eve_tools::prelude::*;

#[step]
async fn read_repository(repository: String, ctx: &StepCtx) -> Result<String, StepError> {
    Ok(format!("{repository}@{}", ctx.attempt()))
}

fn main() {}
