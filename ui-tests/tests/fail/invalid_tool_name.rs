// A tool's name is what the model calls: 1 to 64 ASCII letters, digits, `_` or `-`.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[tool(name = "look up")]
async fn look_up(input: Input) -> Result<String, ToolError> {
    Ok(input.text)
}

fn main() {}
