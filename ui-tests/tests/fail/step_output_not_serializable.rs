// A step's output implements `Serialize` and `Deserialize`: it is recorded in the journal and read
// back on replay.

use eve_tools::prelude::*;

struct Plan {
    steps: Vec<String>,
}

#[step]
async fn plan(service: String) -> Result<Plan, StepError> {
    Ok(Plan { steps: vec![service] })
}

fn main() {}
