// Macro fns are not `unsafe`, `const` or `extern`.

use eve_tools::prelude::*;

#[step]
async unsafe fn plan(service: String) -> Result<String, StepError> {
    Ok(service)
}

fn main() {}
