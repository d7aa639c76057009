// Macro fns take no `self`: the runtime calls them on their own, with nothing to call them on.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

struct Service;

impl Service {
    #[tool]
    async fn echo(&self, input: Input) -> Result<String, ToolError> {
        Ok(input.text)
    }
}

fn main() {}
