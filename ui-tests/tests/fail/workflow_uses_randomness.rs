// A workflow body is replayed, so it draws no randomness; `ctx.random()` and `ctx.uuid()` are recorded.

use eve_tools::prelude::*;

// Stand-ins for crates a workflow body might reach for.
mod rand {
    pub fn random<T: Default>() -> T {
        T::default()
    }
}
mod uuid {
    pub struct Uuid;
    impl Uuid {
        pub fn new_v4() -> u128 {
            4
        }
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    path: String,
}

#[workflow_tool]
async fn audit(input: Input) -> Result<String, ToolError> {
    let nonce: u64 = rand::random();
    let id = uuid::Uuid::new_v4();
    Ok(format!("{} {nonce} {id}", input.path))
}

fn main() {}
