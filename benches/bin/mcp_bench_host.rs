//! The MCP host the `mcp` bench spawns (`mcp-bench-host mcp`): a plain tool to call, and a
//! workflow tool that parks on a question.

use eve_tools::prelude::*;

/// Text to echo.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// Echo the text back.
#[tool]
pub async fn echo(input: Text) -> Result<String, ToolError> {
    Ok(input.text)
}

/// Ask a person the text, and return what they chose.
#[workflow_tool]
pub async fn ask_once(input: Text, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let answer = ctx.ask(Ask::confirmation(input.text).option("yes", "Yes").primary().option("no", "No")).await;
    Ok(answer.status().to_owned())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    eve_tools::cli::Host::from_env().main().await
}
