// A tool's input is a struct that deserializes from a JSON object: not a primitive, string,
// sequence, option, tuple or reference.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn deploy(service: String, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(service)
}

#[task]
async fn sum(numbers: Vec<i64>) -> Result<i64, ToolError> {
    Ok(numbers.iter().sum())
}

#[tool]
async fn pair(pair: (u8, u8)) -> Result<u8, ToolError> {
    Ok(pair.0 + pair.1)
}

#[tool]
async fn borrowed(input: &Input) -> Result<String, ToolError> {
    Ok(input.text.clone())
}

fn main() {}
