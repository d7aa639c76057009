// Step arguments implement `Serialize` and `Deserialize`: they are hashed into the journal and
// read back for retries.

use eve_tools::prelude::*;

struct Plan {
    steps: Vec<String>,
}

#[step]
async fn apply(plan: Plan) -> Result<usize, StepError> {
    Ok(plan.steps.len())
}

fn main() {}
