// Macro fns are not generic and take no `impl Trait`: the input schema and the journal need concrete types.

use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[workflow_tool]
async fn echo<T: serde::Serialize>(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(input.text)
}

#[step]
async fn render(value: impl serde::Serialize + Send + 'static) -> Result<String, StepError> {
    Ok(serde_json::to_string(&value)?)
}

fn main() {}
