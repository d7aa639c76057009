//! The fixture server the official MCP conformance suite runs against
//! (`scripts/mcp-conformance.sh`): the suite's fixture tools written with eve's macros, served
//! at `/mcp` by eve's own HTTP server, on an in-memory store. Prints `listening on http://ADDR`
//! once it accepts connections; `--addr 127.0.0.1:0` (the default) picks a free port.
//!
//! The suite's `test://` resources, prompts and completions have no eve counterpart, so `Fixture`
//! serves them itself (as rmcp's own conformance server does) and hands tools, tasks and eve's own
//! resources (`eve://runs/…`, with their subscriptions) to eve's `McpServer`: every tool here is
//! an eve tool, and its runs are resources beside the suite's, as an application that serves
//! resources of its own would combine them.

// The suite's logging scenarios need rmcp's logging types, which it marks deprecated (SEP-2577).
#![allow(deprecated)]

use std::time::Duration;

use eve_tools::SampleOutcome;
use eve_tools::mcp::McpServer;
use eve_tools::mcp::ToolContent;
use eve_tools::mcp::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams,
    GetTaskResult, ImageContent, InputRequests, InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
    ResourceTemplate, Role, ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use eve_tools::mcp::rmcp::service::{RequestContext, SubscriptionContext};
use eve_tools::mcp::rmcp::{ErrorData, RoleServer, ServerHandler};
use eve_tools::prelude::*;
use eve_tools::sample::Sampling;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// Ask a person for a name and the client's model for a greeting at once: each is sent only to a
/// client that can answer it (SEP-2322 capabilities).
#[workflow_tool]
pub async fn test_input_required_result_capabilities(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let name = ctx.ask(Ask::text("What is your name?"));
    let greeting = ctx.sample(Sampling::user("Generate a greeting", 50));
    let (name, greeting) = futures::join!(name, greeting);
    Ok(format!("{}, {}!", sampled(greeting), name.text().unwrap_or("stranger")))
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

/// What to show the person.
#[derive(Deserialize, JsonSchema)]
pub struct Message {
    /// The message.
    message: String,
}

/// A person's details, asked as a form.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Details {
    /// User's response
    username: String,
    /// User's email address
    email: String,
}

/// What a form's outcome says, as the suite's tools report it.
fn reported<T: Serialize>(outcome: FormOutcome<T>) -> String {
    match outcome {
        FormOutcome::Answered(value) => {
            format!("action=accept, content={}", serde_json::to_value(value).unwrap_or_default())
        }
        FormOutcome::Declined => "action=decline".into(),
        FormOutcome::Cancelled => "action=cancel".into(),
        FormOutcome::Unavailable => "action=unavailable".into(),
    }
}

/// Ask a person for their details in a form.
#[workflow_tool]
pub async fn test_elicitation(input: Message, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.ask_form::<Details>(input.message)?.await;
    Ok(format!("User response: <{}>", reported(outcome)))
}

/// A status with a default (SEP-1034). Its variants have no doc comments: a variant's doc
/// comment becomes its title, and SEP-1034 wants an untitled `enum`.
#[derive(Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Status {
    #[default]
    Active,
    Inactive,
    Pending,
}

/// A profile whose every field has a default (SEP-1034).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Profile {
    /// User name
    name: String,
    /// User age
    age: i64,
    /// User score
    score: f64,
    /// User status
    status: Status,
    /// Verification status
    verified: bool,
}

impl Default for Profile {
    fn default() -> Self {
        Profile { name: "John Doe".into(), age: 30, score: 95.5, status: Status::Active, verified: true }
    }
}

/// Ask for a profile whose fields have defaults (SEP-1034).
#[workflow_tool]
pub async fn test_elicitation_sep1034_defaults(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.ask_form::<Profile>("Please review your profile")?.await;
    Ok(format!("Elicitation completed: {}", reported(outcome)))
}

/// A choice without titles (no doc comments on its variants).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Untitled {
    Option1,
    Option2,
    Option3,
}

/// A choice whose options have titles, from their doc comments (SEP-1330).
#[derive(Serialize, Deserialize, JsonSchema)]
pub enum TitledSingle {
    /// First Option
    #[serde(rename = "value1")]
    First,
    /// Second Option
    #[serde(rename = "value2")]
    Second,
    /// Third Option
    #[serde(rename = "value3")]
    Third,
}

/// A choice of several, titled (SEP-1330).
#[derive(Serialize, Deserialize, JsonSchema)]
pub enum TitledMulti {
    /// First Choice
    #[serde(rename = "value1")]
    First,
    /// Second Choice
    #[serde(rename = "value2")]
    Second,
    /// Third Choice
    #[serde(rename = "value3")]
    Third,
}

/// The older titled choice: `enumNames` beside `enum`.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(extend("enumNames" = ["Option One", "Option Two", "Option Three"]))]
#[allow(missing_docs)]
pub enum Legacy {
    Opt1,
    Opt2,
    Opt3,
}

/// Every kind of choice a form has (SEP-1330).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Choices {
    /// Pick one.
    untitled_single: Untitled,
    /// Pick one.
    titled_single: TitledSingle,
    /// Pick one.
    legacy_enum: Legacy,
    /// Pick any.
    untitled_multi: Vec<Untitled>,
    /// Pick any.
    titled_multi: Vec<TitledMulti>,
}

/// Ask for every kind of choice (SEP-1330).
#[workflow_tool]
pub async fn test_elicitation_sep1330_enums(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.ask_form::<Choices>("Please choose")?.await;
    Ok(format!("Elicitation completed: {}", reported(outcome)))
}

/// What to ask the client's model.
#[derive(Deserialize, JsonSchema)]
pub struct SamplePrompt {
    /// The prompt.
    prompt: String,
}

/// What a sampling outcome says, as the suite's tools report it.
fn sampled(outcome: SampleOutcome) -> String {
    match outcome {
        SampleOutcome::Completed(completion) => completion.text().unwrap_or("(not text)").to_owned(),
        other => format!("{other:?}"),
    }
}

/// Ask the client's model to complete a prompt.
#[workflow_tool]
pub async fn test_sampling(input: SamplePrompt, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.sample(Sampling::user(input.prompt, 100)).await;
    Ok(format!("LLM response: {}", sampled(outcome)))
}

/// Ask the client's model a question (SEP-2322).
#[workflow_tool]
pub async fn test_input_required_result_sampling(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.sample(Sampling::user("What is the capital of France?", 100)).await;
    Ok(format!("The model says: {}", sampled(outcome)))
}

/// Ask the client's model, which only a client with sampling can answer: served with
/// `require_sampling`, so a call from a client without it is refused (SEP-2575).
#[workflow_tool]
pub async fn test_missing_capability(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let outcome = ctx.sample(Sampling::user("Say something.", 50)).await;
    Ok(format!("The model says: {}", sampled(outcome)))
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

/// Tools, tasks and runs as resources from eve; the rest of the suite's fixtures are not eve's
/// concepts. Cloned once per session, as eve's `McpServer` is, so a session's subscriptions to
/// eve's resources end with it.
#[derive(Clone)]
struct Fixture {
    eve: McpServer,
}

/// The suite's own resources: the two static ones, and the one its subscription scenarios
/// subscribe to.
const FIXTURE_RESOURCES: [(&str, &str, &str); 3] = [
    ("test://static-text", "Static Text Resource", "text/plain"),
    ("test://static-binary", "Static Binary Resource", "image/png"),
    ("test://watched-resource", "Watched Resource", "text/plain"),
];

/// The id in a URI of the suite's template, `test://template/{id}/data`.
fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix("test://template/").and_then(|rest| rest.strip_suffix("/data"))
}

/// Whether `uri` is one of the suite's resources.
fn is_fixture_resource(uri: &str) -> bool {
    FIXTURE_RESOURCES.iter().any(|(known, ..)| *known == uri) || template_id(uri).is_some()
}

fn no_resource(uri: &str) -> ErrorData {
    let data = serde_json::json!({ "uri": uri });
    ErrorData::resource_not_found(
        format!(
            "no resource at {uri}; this server has test://static-text, test://static-binary, test://watched-resource, test://template/{{id}}/data and eve://runs/{{runId}}[/timeline]"
        ),
        Some(data),
    )
}

/// How long clients may cache the fixture's lists and resources.
const CACHE_TTL_MS: u64 = 60_000;

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .build();
        let eve = self.eve.get_info();
        ServerConfig::new(capabilities).with_server_info(eve.server_info)
    }

    /// The suite's resources on the first page, then eve's runs, a page at a time: a cursor is
    /// always eve's.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let first = request.as_ref().is_none_or(|request| request.cursor.is_none());
        let mut page = self.eve.list_resources(request, cx).await?;
        if first {
            let own =
                FIXTURE_RESOURCES.iter().map(|(uri, name, mime)| Resource::new(*uri, *name).with_mime_type(*mime));
            page.resources.splice(0..0, own);
        }
        Ok(page)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut templates = vec![
            ResourceTemplate::new("test://template/{id}/data", "Dynamic Resource").with_mime_type("application/json"),
        ];
        templates.extend(self.eve.list_resource_templates(request, cx).await?.resource_templates);
        Ok(ListResourceTemplatesResult::with_all_items(templates)
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if self.eve.serves_uri(&request.uri) {
            return self.eve.read_resource(request, cx).await;
        }
        let uri = request.uri.as_str();
        let contents = match (uri, template_id(uri)) {
            ("test://static-text", _) => {
                ResourceContents::text("This is the content of the static text resource.", uri)
                    .with_mime_type("text/plain")
            }
            ("test://static-binary", _) => ResourceContents::blob(PNG, uri).with_mime_type("image/png"),
            ("test://watched-resource", _) => {
                ResourceContents::text("This resource never changes; subscribing to it is allowed.", uri)
                    .with_mime_type("text/plain")
            }
            (_, Some(id)) => {
                let data = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
            }
            _ => return Err(no_resource(uri)),
        };
        let result =
            ReadResourceResult::new(vec![contents]).with_ttl_ms(CACHE_TTL_MS).with_cache_scope(CacheScope::Public);
        Ok(result.into())
    }

    /// eve's resources are eve's to watch; the suite's never change, so a subscription to one
    /// has nothing to send.
    #[expect(deprecated, reason = "clients before revision 2026-07-28 subscribe with `resources/subscribe`")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.eve.serves_uri(&request.uri) {
            return self.eve.subscribe(request, cx).await;
        }
        if is_fixture_resource(&request.uri) { Ok(()) } else { Err(no_resource(&request.uri)) }
    }

    #[expect(deprecated, reason = "clients before revision 2026-07-28 unsubscribe with `resources/unsubscribe`")]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.eve.serves_uri(&request.uri) {
            return self.eve.unsubscribe(request, cx).await;
        }
        Ok(())
    }

    /// eve's URIs as eve accepts them, and the suite's (which never change).
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let eve = self.eve.accepted_subscription_filter(requested).and_then(|filter| filter.resource_subscriptions);
        let own = requested.resource_subscriptions.iter().flatten().filter(|uri| is_fixture_resource(uri));
        let uris: Vec<String> = eve.into_iter().flatten().chain(own.cloned()).collect();
        Some(SubscriptionFilter::builder().resource_subscriptions(uris).build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.eve.listen(context).await
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
    let eve = McpServer::new(runtime.clone()).require_task("failing_job").require_sampling("test_missing_capability");
    let server = eve_tools::http::Server::new(runtime)
        .mcp(Fixture { eve })
        .serve(listener)
        .map_err(|error| error.to_string())?;
    println!("listening on http://{local}");
    tokio::signal::ctrl_c().await.map_err(|error| error.to_string())?;
    server.shutdown().await;
    Ok(())
}
