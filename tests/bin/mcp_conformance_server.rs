//! The fixture server the official MCP conformance suite runs against
//! (`scripts/mcp-conformance.sh`): the suite's fixture tools written with eve's macros, served
//! at `/mcp` by eve's own HTTP server, on an in-memory store. Prints `listening on http://ADDR`
//! once it accepts connections; `--addr 127.0.0.1:0` (the default) picks a free port.
//!
//! The suite's resources, prompts and completions have no eve counterpart, so `Fixture` serves
//! them itself (as rmcp's own conformance server does) and hands tools and tasks to eve's
//! `McpServer`: every tool here is an eve tool.

// The suite's logging scenarios need rmcp's logging types, which it marks deprecated (SEP-2577).
#![allow(deprecated)]

use std::time::Duration;

use eve_tools::mcp::McpServer;
use eve_tools::mcp::ToolContent;
use eve_tools::mcp::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams,
    GetTaskResult, ImageContent, InputRequests, InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
    ResourceTemplate, Role, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool, UpdateTaskParams,
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

/// Log three messages at `info`, 50 ms apart (durable sleeps), as the run goes.
#[workflow_tool]
pub async fn test_tool_with_logging(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    ctx.log(LogLevel::Info, "Tool execution started");
    sleep(Duration::from_millis(50)).await?;
    ctx.log(LogLevel::Info, "Tool processing data");
    sleep(Duration::from_millis(50)).await?;
    ctx.log(LogLevel::Info, "Tool execution completed");
    Ok("Logging test completed".into())
}

/// Log a message at every level; a request that asked for no logs gets none (SEP-2575).
#[tool]
pub async fn test_logging_tool(_input: Nothing, ctx: &ToolCtx) -> Result<String, ToolError> {
    for level in LogLevel::ALL {
        ctx.log(level, format!("a message at {level}"));
    }
    Ok("Logged a message at every level".into())
}

/// Tools and tasks from eve; the rest of the suite's fixtures are not eve's concepts.
#[derive(Clone)]
struct Fixture {
    eve: McpServer,
}

/// How long clients may cache the fixture's lists and resources.
const CACHE_TTL_MS: u64 = 60_000;

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .enable_resources()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .build();
        let eve = self.eve.get_info();
        ServerConfig::new(capabilities).with_server_info(eve.server_info)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = vec![
            Resource::new("test://static-text", "Static Text Resource").with_mime_type("text/plain"),
            Resource::new("test://static-binary", "Static Binary Resource").with_mime_type("image/png"),
        ];
        Ok(ListResourcesResult::with_all_items(resources)
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = vec![
            ResourceTemplate::new("test://template/{id}/data", "Dynamic Resource").with_mime_type("application/json"),
        ];
        Ok(ListResourceTemplatesResult::with_all_items(templates)
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let template_id = uri.strip_prefix("test://template/").and_then(|rest| rest.strip_suffix("/data"));
        let contents = match (uri, template_id) {
            ("test://static-text", _) => {
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain")
            }
            ("test://static-binary", _) => ResourceContents::blob(PNG, uri).with_mime_type("image/png"),
            (_, Some(id)) => {
                let data = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
            }
            _ => {
                let data = serde_json::json!({ "uri": uri });
                return Err(ErrorData::resource_not_found(format!("no resource at {uri}"), Some(data)));
            }
        };
        let result =
            ReadResourceResult::new(vec![contents]).with_ttl_ms(CACHE_TTL_MS).with_cache_scope(CacheScope::Public);
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let arguments = vec![
            PromptArgument::new("arg1").with_description("First test argument").with_required(true),
            PromptArgument::new("arg2").with_description("Second test argument").with_required(false),
        ];
        let prompts = vec![
            Prompt::new("test_simple_prompt", Some("A simple test prompt with no arguments"), None),
            Prompt::new("test_prompt_with_arguments", Some("A test prompt that accepts arguments"), Some(arguments)),
            Prompt::new("test_prompt_with_embedded_resource", Some("A prompt with an embedded resource"), None),
            Prompt::new("test_prompt_with_image", Some("A prompt with an image"), None),
            Prompt::new("test_input_required_result_prompt", Some("A prompt that asks for context first"), None),
        ];
        Ok(ListPromptsResult::with_all_items(prompts).with_ttl_ms(CACHE_TTL_MS).with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let text = |text: String| PromptMessage::new_text(Role::User, text);
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![text("This is a simple test prompt.".into())],
            "test_prompt_with_arguments" => {
                let arguments = request.arguments.unwrap_or_default();
                let argument =
                    |name: &str| arguments.get(name).and_then(|value| value.as_str()).unwrap_or("").to_owned();
                vec![text(format!("Prompt with arguments: arg1='{}', arg2='{}'", argument("arg1"), argument("arg2")))]
            }
            "test_prompt_with_embedded_resource" => vec![
                text("Here is a resource:".into()),
                PromptMessage::new_resource(
                    Role::User,
                    "test://static-text".into(),
                    Some("text/plain".into()),
                    Some("Resource content for prompt".into()),
                    None,
                    None,
                    None,
                ),
            ],
            "test_prompt_with_image" => vec![
                text("Here is an image:".into()),
                PromptMessage::new(Role::User, ContentBlock::Image(ImageContent::new(PNG, "image/png"))),
            ],
            "test_input_required_result_prompt" => {
                let answer = request.input_responses.as_ref().and_then(|responses| responses.get("user_context"));
                let Some(answer) = answer else {
                    let schema = serde_json::json!({"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]});
                    let request = serde_json::json!({"method": "elicitation/create", "params": {"mode": "form", "message": "What context should the prompt use?", "requestedSchema": schema}});
                    let mut requests = InputRequests::new();
                    let request = serde_json::from_value(request)
                        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
                    requests.insert("user_context".into(), request);
                    return Ok(InputRequiredResult::from_input_requests(requests).into());
                };
                let context = answer["content"]["context"].as_str().unwrap_or("(no context)");
                vec![text(format!("Prompt with elicited context: {context}"))]
            }
            other => return Err(ErrorData::invalid_params(format!("unknown prompt `{other}`"), None)),
        };
        Ok(GetPromptResult::new(messages).into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Resource(_), "id") => vec!["1".into(), "2".into(), "3".into()],
            (Reference::Prompt(_), "arg1" | "arg2") => vec!["paris".into(), "park".into(), "party".into()],
            (Reference::Prompt(prompt), _) => vec![prompt.name.clone()],
            _ => Vec::new(),
        };
        let completion = CompletionInfo::new(values).map_err(|error| ErrorData::internal_error(error, None))?;
        Ok(CompleteResult::new(completion))
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

    async fn set_level(&self, request: SetLevelRequestParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.eve.set_level(request, cx).await
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
