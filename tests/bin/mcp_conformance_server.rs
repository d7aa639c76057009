//! The fixture server the official MCP conformance suite runs against
//! (`scripts/mcp-conformance.sh`): the suite's fixture tools written with eve's macros, served
//! at `/mcp` by eve's own HTTP server, on an in-memory store. Prints `listening on http://ADDR`
//! once it accepts connections; `--addr 127.0.0.1:0` (the default) picks a free port.
//!
//! The suite's resources and prompts have no eve counterpart, so `Fixture` serves them itself
//! and hands tools and tasks to eve's `McpServer`.

use std::time::Duration;

use eve_tools::mcp::McpServer;
use eve_tools::mcp::ToolContent;
use eve_tools::mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ContentBlock, GetTaskParams, GetTaskResult,
    ListToolsResult, PaginatedRequestParams, ResourceContents, ServerConfig, Tool, UpdateTaskParams,
};
use eve_tools::mcp::rmcp::service::RequestContext;
use eve_tools::mcp::rmcp::{ErrorData, RoleServer, ServerHandler};
use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// Who to greet.
#[derive(Deserialize, JsonSchema)]
pub struct Name {
    /// Their name.
    name: String,
}

/// Greet someone (sync only).
#[tool]
pub async fn greet(input: Name) -> Result<String, ToolError> {
    Ok(format!("Hello, {}!", input.name))
}

/// How long to compute.
#[derive(Deserialize, JsonSchema)]
pub struct Compute {
    /// Seconds to take; 0 answers at once.
    seconds: f64,
    /// A label for the result.
    #[serde(default)]
    label: Option<String>,
}

/// Compute for a while (a durable sleep): a task when the client has the tasks extension.
#[workflow_tool]
pub async fn slow_compute(input: Compute, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let duration = Duration::try_from_secs_f64(input.seconds)
        .map_err(|error| ToolError::new(format!("`seconds` must be a duration in seconds: {error}")))?;
    sleep(duration).await?;
    Ok(format!("{} computed in {}s", input.label.unwrap_or_default(), input.seconds))
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Fail with a tool error after a second (task-only).
#[workflow_tool]
pub async fn failing_job(_input: Nothing, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    sleep(Duration::from_secs(1)).await?;
    Err(ToolError::new("failing_job failed, as it always does"))
}

/// Panic after a moment: a failure that is not the tool's own error.
#[workflow_tool]
pub async fn protocol_error_job(_input: Nothing, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    sleep(Duration::from_millis(200)).await?;
    panic!("protocol_error_job panics, as it always does")
}

/// The file to delete.
#[derive(Deserialize, JsonSchema)]
pub struct File {
    /// Its name.
    filename: String,
}

/// Delete a file once a person confirms.
#[workflow_tool]
pub async fn confirm_delete(input: File, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let question = Ask::confirmation(format!("Delete {}?", input.filename))
        .option("delete", "Delete")
        .primary()
        .option("keep", "Keep");
    Ok(match ctx.ask(question).await.chose("delete") {
        true => format!("Deleted {}", input.filename),
        false => format!("Kept {}", input.filename),
    })
}

/// Ask two questions at once.
#[workflow_tool]
pub async fn multi_input(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let first = ctx.ask(Ask::confirmation("Proceed with part one?").option("yes", "Yes").primary().option("no", "No"));
    let second = ctx.ask(Ask::confirmation("Proceed with part two?").option("yes", "Yes").primary().option("no", "No"));
    let (first, second) = futures::join!(first, second);
    Ok(format!("part one: {}, part two: {}", first.status(), second.status()))
}

/// Ask for a name, then greet in a task.
#[workflow_tool]
pub async fn test_tool_with_task(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?")).await;
    Ok(format!("Hello, {}!", name.text().unwrap_or("stranger")))
}

/// Ask for a name (SEP-2322).
#[workflow_tool]
pub async fn test_input_required_result_elicitation(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?")).await;
    Ok(format!("Hello, {}!", name.text().unwrap_or("stranger")))
}

/// Ask for a name; its request state is sealed, so a tampered one is refused (SEP-2322).
#[workflow_tool]
pub async fn test_input_required_result_tampered_state(
    _input: Nothing,
    ctx: &WorkflowCtx,
) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?")).await;
    Ok(format!("Hello, {}!", name.text().unwrap_or("stranger")))
}

/// Ask for a name, if the client can be asked (SEP-2322 capabilities).
#[workflow_tool]
pub async fn test_input_required_result_capabilities(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?")).await;
    Ok(format!("Hello, {}!", name.text().unwrap_or("stranger")))
}

/// Ask for a confirmation (SEP-2322 request state).
#[workflow_tool]
pub async fn test_input_required_result_request_state(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let question = Ask::confirmation("Please confirm").option("ok", "OK").primary().option("cancel", "Cancel");
    Ok(format!("state-ok: {}", ctx.ask(question).await.status()))
}

/// Ask two questions, one after the other (SEP-2322 multi round).
#[workflow_tool]
pub async fn test_input_required_result_multi_round(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?")).await;
    let color = ctx.ask(Ask::text("What is your favorite color?")).await;
    Ok(format!("Hello, {}! You like {}.", name.text().unwrap_or("stranger"), color.text().unwrap_or("nothing")))
}

/// Return simple text.
#[tool]
pub async fn test_simple_text(_input: Nothing) -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".into())
}

/// Return an image.
#[tool]
pub async fn test_image_content(_input: Nothing) -> Result<ToolContent, ToolError> {
    Ok(ToolContent::new(vec![ContentBlock::image(PNG, "image/png")]))
}

/// Return audio.
#[tool]
pub async fn test_audio_content(_input: Nothing) -> Result<ToolContent, ToolError> {
    Ok(ToolContent::new(vec![ContentBlock::audio(WAV, "audio/wav")]))
}

/// Return an embedded resource.
#[tool]
pub async fn test_embedded_resource(_input: Nothing) -> Result<ToolContent, ToolError> {
    let resource = ResourceContents::text("This is an embedded resource content.", "test://embedded-resource")
        .with_mime_type("text/plain");
    Ok(ToolContent::new(vec![ContentBlock::resource(resource)]))
}

/// Return text, an image and a resource.
#[tool]
pub async fn test_multiple_content_types(_input: Nothing) -> Result<ToolContent, ToolError> {
    let resource = ResourceContents::text(r#"{"test":"data","value":123}"#, "test://mixed-content-resource")
        .with_mime_type("application/json");
    Ok(ToolContent::new(vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::image(PNG, "image/png"),
        ContentBlock::resource(resource),
    ]))
}

/// Fail on purpose.
#[tool]
pub async fn test_error_handling(_input: Nothing) -> Result<String, ToolError> {
    Err(ToolError::new("This tool intentionally returns an error for testing"))
}

/// Work through three steps, reported as progress.
#[workflow_tool]
pub async fn test_tool_with_progress(_input: Nothing, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    for part in 1..=3 {
        work(part).await?;
    }
    Ok("Progress test completed".into())
}

#[step]
async fn work(part: u32) -> Result<u32, StepError> {
    tokio::time::sleep(Duration::from_millis(30)).await;
    Ok(part)
}

/// Tools and tasks from eve; the rest of the suite's fixtures are not eve's concepts.
#[derive(Clone)]
struct Fixture {
    eve: McpServer,
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        self.eve.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.eve.list_tools(request, cx).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.eve.get_tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.eve.call_tool(request, cx).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.eve.get_task(request, cx).await
    }

    async fn update_task(&self, request: UpdateTaskParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.eve.update_task(request, cx).await
    }

    async fn cancel_task(&self, request: CancelTaskParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.eve.cancel_task(request, cx).await
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let addr = match (args.next().as_deref(), args.next()) {
        (Some("--addr"), Some(addr)) => addr,
        (None, _) => "127.0.0.1:0".to_owned(),
        _ => return Err("usage: mcp-conformance-server [--addr 127.0.0.1:0]".to_owned()),
    };
    let listener =
        tokio::net::TcpListener::bind(&addr).await.map_err(|error| format!("cannot listen on {addr}: {error}"))?;
    let local = listener.local_addr().map_err(|error| error.to_string())?;
    let runtime = Runtime::builder()
        .store(eve_tools::store::MemoryStore::new())
        .public_url(format!("http://{local}"))
        .build()
        .map_err(|error| error.to_string())?;
    let eve = McpServer::new(runtime.clone()).require_task("failing_job");
    let server = eve_tools::http::Server::new(runtime)
        .mcp(Fixture { eve })
        .serve(listener)
        .map_err(|error| error.to_string())?;
    println!("listening on http://{local}");
    tokio::signal::ctrl_c().await.map_err(|error| error.to_string())?;
    server.shutdown().await;
    Ok(())
}
