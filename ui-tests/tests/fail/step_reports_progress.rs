// Progress is reported from the workflow body: a `#[step]` returns its value, and the body
// reports it. A step cannot take `Progress`, nor write `yield`.

use eve_tools::prelude::*;

#[step]
async fn compile(target: String, progress: Progress) -> Result<String, StepError> {
    let _ = progress.report("compiling").await;
    Ok(target)
}

#[step]
async fn link(target: String) -> Result<String, StepError> {
    yield "linking";
    Ok(target)
}

fn main() {}
