//! MCP logging: what tools send with `ctx.log` reaches the client that called them as
//! `notifications/message`, at or above the level the client asked for (`logging/setLevel` per
//! session before 2026-07-28, `_meta` per request since), and nothing without a level; and a
//! workflow body's messages are sent once, not again when a replay after a restart repeats them.

// rmcp marks MCP logging deprecated (SEP-2577); these revisions have it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eve_tests::World;
use eve_tools::mcp::McpServer;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{RunId, StartOptions};
use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject, LoggingLevel,
    LoggingMessageNotificationParam, ProtocolVersion, RequestMetaObject, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A mark to tell calls apart in their messages.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Mark {
    /// Put at the start of every message.
    mark: String,
}

/// Logs one message at every level, from the least severe up.
#[tool]
pub async fn log_every_level(input: Mark, ctx: &ToolCtx) -> Result<String, ToolError> {
    for level in LogLevel::ALL {
        ctx.log(level, format!("{} {level}", input.mark));
    }
    Ok(format!("{} logged", input.mark))
}

/// Logs from the body and from a step.
#[step]
async fn log_in_step(ctx: &StepCtx, mark: String) -> Result<(), StepError> {
    ctx.log(LogLevel::Warning, format!("{mark} in the step"));
    Ok(())
}

/// Logs before a step, in it, and after it.
#[workflow_tool]
pub async fn log_around_a_step(input: Mark, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    ctx.log(LogLevel::Notice, format!("{} before", input.mark));
    log_in_step(ctx, input.mark.clone()).await?;
    ctx.log(LogLevel::Error, format!("{} after", input.mark));
    Ok(format!("{} done", input.mark))
}

/// Logs, waits for a payload on its hook, logs again.
#[workflow_tool]
pub async fn log_around_a_hook(input: Mark, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    ctx.log(LogLevel::Info, format!("{} waiting", input.mark));
    let mut hook = create_hook_with_token::<String>(format!("log-{}", ctx.run_id()));
    let payload = hook.recv().await.map_err(|error| ToolError::new(error.to_string()))?;
    ctx.log(LogLevel::Info, format!("{} got {payload}", input.mark));
    Ok(payload)
}

/// A client that keeps the log messages it is sent, as `level logger: text`.
#[derive(Clone, Default)]
struct Listener {
    logs: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("eve-logging-test", "0.0.1"))
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _cx: NotificationContext<RoleClient>) {
        let level = serde_json::to_value(params.level).unwrap();
        let text = params.data.as_str().unwrap_or_default().to_owned();
        self.logs.lock().unwrap().push(format!(
            "{} {}: {text}",
            level.as_str().unwrap(),
            params.logger.unwrap_or_default()
        ));
    }
}

impl Listener {
    /// The messages received so far whose text starts with `mark`.
    fn seen(&self, mark: &str) -> Vec<String> {
        self.logs.lock().unwrap().iter().filter(|log| log.contains(&format!(": {mark} "))).cloned().collect()
    }

    /// The messages received whose text starts with `mark`, once there are `count` of them (at
    /// most 10 s).
    async fn marked(&self, mark: &str, count: usize) -> Vec<String> {
        let started = Instant::now();
        while self.seen(mark).len() < count && started.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.seen(mark)
    }
}

async fn serve(runtime: &Runtime, listener: Listener, modern: bool) -> RunningService<RoleClient, Listener> {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
    if modern {
        let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        listener.serve_with_lifecycle(client_side, mode).await.expect("server/discover succeeds")
    } else {
        listener.serve(client_side).await.expect("initialize succeeds")
    }
}

fn call(tool: &str, mark: &str) -> CallToolRequestParams {
    let arguments: JsonObject = json!({ "mark": mark }).as_object().unwrap().clone();
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    result.content.first().and_then(|block| block.as_text()).map(|text| text.text.clone()).unwrap_or_default()
}

#[tokio::test]
async fn a_session_gets_the_messages_at_or_above_the_level_it_set_and_none_before() {
    let runtime = Runtime::builder().store(MemoryStore::new()).build().unwrap();
    let listener = Listener::default();
    let client = serve(&runtime, listener.clone(), false).await;

    let result = client.call_tool(call("log_every_level", "unasked")).await.unwrap();
    assert_eq!(text(&result), "unasked logged");
    client.set_level(SetLevelRequestParams::new(LoggingLevel::Warning)).await.unwrap();
    let result = client.call_tool(call("log_every_level", "plain")).await.unwrap();
    assert_eq!(text(&result), "plain logged");
    let plain = listener.marked("plain", 5).await;
    let expected = ["warning", "error", "critical", "alert", "emergency"]
        .map(|level| format!("{level} log_every_level: plain {level}"));
    assert_eq!(plain, expected, "warning and above, in order, named for the tool");

    client.set_level(SetLevelRequestParams::new(LoggingLevel::Notice)).await.unwrap();
    let result = client.call_tool(call("log_around_a_step", "durable")).await.unwrap();
    assert_eq!(text(&result), "durable done");
    let durable = listener.marked("durable", 3).await;
    assert_eq!(
        durable,
        [
            "notice log_around_a_step: durable before",
            "warning log_in_step: durable in the step",
            "error log_around_a_step: durable after"
        ],
        "the body's and its step's, in order"
    );
    // The server sends a call's messages before its result, and the client reads them in order.
    assert!(listener.seen("unasked").is_empty(), "nothing before the session set a level");
    client.cancel().await.unwrap();
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_2026_request_gets_messages_only_at_the_level_in_its_meta() {
    let runtime = Runtime::builder().store(MemoryStore::new()).build().unwrap();
    let listener = Listener::default();
    let client = serve(&runtime, listener.clone(), true).await;

    let result = client.call_tool(call("log_every_level", "bare")).await.unwrap();
    assert_eq!(text(&result), "bare logged");
    let mut meta = RequestMetaObject::default();
    meta.set_log_level(LoggingLevel::Critical);
    let mut asked = call("log_every_level", "asked");
    asked.meta = Some(meta);
    client.call_tool(asked).await.unwrap();
    let asked = listener.marked("asked", 3).await;
    assert_eq!(
        asked,
        ["critical", "alert", "emergency"].map(|level| format!("{level} log_every_level: asked {level}"))
    );
    assert!(listener.seen("bare").is_empty(), "a request without a level gets no messages");

    let refused = client.set_level(SetLevelRequestParams::new(LoggingLevel::Debug)).await.unwrap_err();
    assert!(format!("{refused:?}").contains("-32601"), "logging/setLevel is gone from 2026-07-28: {refused:?}");
    client.cancel().await.unwrap();
    runtime.shutdown().await;
}

/// A body's message is sent when the body first makes it; the replay after a restart makes it
/// again and sends nothing, and the messages after the restart point are sent as usual.
#[tokio::test]
async fn a_workflow_message_is_sent_once_and_not_again_when_a_restart_replays_it() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = RunId::generate();
    let logs = runtime.logs(run.as_str());
    let options = StartOptions::new().id(run.clone());
    let handle = runtime.start_with("log_around_a_hook", json!({"mark": "once"}), options).await.unwrap();
    handle.parked().await.unwrap();
    let first = logs.close();
    assert_eq!(first.iter().map(|log| log.message.as_str()).collect::<Vec<_>>(), ["once waiting"]);
    runtime.shutdown().await;

    // Another process: the delivery replays the run from its journal.
    let runtime = world.runtime(16);
    let mut logs = runtime.logs(run.as_str());
    runtime.resume_hook(&format!("log-{run}"), json!("the payload")).await.unwrap();
    let outcome = runtime.handle(run.clone()).outcome().await.unwrap();
    assert_eq!(outcome, eve_tools::RunOutcome::Completed(Value::from("the payload")));
    let after = tokio::time::timeout(Duration::from_secs(10), logs.next()).await.unwrap().unwrap();
    assert_eq!(
        (after.level, after.tool, after.message.as_str()),
        (LogLevel::Info, "log_around_a_hook", "once got the payload")
    );
    assert!(logs.close().is_empty(), "nothing else: the message before the restart is not sent again");
    let journal = runtime.journal(&run).await.unwrap().entries;
    assert!(
        journal.iter().all(|entry| !format!("{entry:?}").contains("once waiting")),
        "a message is never journaled: {journal:?}"
    );
    runtime.shutdown().await;
}
