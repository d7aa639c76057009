//! The MCP host the `mcp` and `mcp_follow` benches spawn (`mcp-bench-host mcp`): a plain tool to
//! call, a workflow tool that parks on a question, and one that takes many steps. `mcp-bench-host raw` serves the same `echo` with a
//! bare rmcp handler instead, so the bench can tell eve's share of the latency from rmcp's and
//! the pipes'.

use eve_tools::mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities, ServerConfig,
};
use eve_tools::mcp::rmcp::service::RequestContext;
use eve_tools::mcp::rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
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

/// How many steps to take.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Count {
    /// The number of steps.
    pub steps: u32,
}

#[step]
async fn one(n: u32) -> Result<u32, StepError> {
    Ok(n)
}

/// Take `steps` steps, one after another.
#[workflow_tool]
pub async fn count_steps(input: Count, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let _ = ctx;
    for n in 0..input.steps {
        one(n).await?;
    }
    Ok(input.steps)
}

/// `echo` on a bare rmcp handler, for comparison.
struct Raw;

impl ServerHandler for Raw {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request.arguments.and_then(|arguments| arguments.get("text")?.as_str().map(str::to_owned));
        Ok(CallToolResult::success(vec![ContentBlock::text(text.unwrap_or_default())]).into())
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() != Some("raw") {
        return eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await;
    }
    // The same transport eve's `mcp` command uses, so the bench compares handlers, not transports.
    let served = match Raw.serve(eve_tools::mcp::stdio()).await {
        Ok(running) => running.waiting().await.map(drop).map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
