// `backoff` is a duration the macro reads at compile time: a whole number and a unit (`ms`, `s`,
// `m` or `h`), optionally `fixed(…)`.

use eve_tools::prelude::*;

#[step(backoff = "1sec")]
async fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

#[step(backoff = "1.5s")]
async fn apply(service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
