//! Runs as MCP resources, through rmcp's client as an agent reaches them: listed a page at a time,
//! read, templated, and watched. A subscription to a run parked on a hook sends
//! `notifications/resources/updated` once the hook resumes it; after an unsubscribe, or the end of
//! the session, nothing is watched any more (the gauge `eve_mcp_resource_watches` counts the
//! watching tasks still alive). In process over a byte stream (what stdio carries) and over
//! Streamable HTTP, with sessions (`resources/subscribe`, revisions before 2026-07-28) and with
//! `subscriptions/listen` (2026-07-28).

use std::time::{Duration, Instant};

use eve_tools::RunId;
use eve_tools::http::Server;
use eve_tools::mcp::McpServer;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ResourceUpdatedNotificationParam, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// No input.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Quiet {}

/// Waits for a word on the hook `resource-word-{run id}`, then says it in a step.
#[workflow_tool]
pub async fn resource_wait_for_word(_input: Quiet, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut word = create_hook_with_token::<String>(format!("resource-word-{}", ctx.run_id()));
    let word = word.recv().await?;
    Ok(resource_say(word).await?)
}

/// Says a word.
#[step]
async fn resource_say(word: String) -> Result<String, StepError> {
    Ok(format!("said {word}"))
}

/// Ends at once: runs to list.
#[workflow_tool]
pub async fn resource_quick(_input: Quiet, _ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    Ok(1)
}

/// An MCP client that notes each resource the server says changed.
#[derive(Clone)]
struct Watcher {
    updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("eve-resources-test", "0.0.1"))
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }
}

type Client = RunningService<RoleClient, Watcher>;

/// Connects with the 2026-07-28 lifecycle (`server/discover`), or with `initialize` (a session).
async fn connect<T, E, A>(transport: T, modern: bool) -> (Client, mpsc::UnboundedReceiver<String>)
where
    T: IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let (updated, updates) = mpsc::unbounded_channel();
    let watcher = Watcher { updated };
    let client = if modern {
        let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        watcher.serve_with_lifecycle(transport, mode).await.expect("server/discover succeeds")
    } else {
        watcher.serve(transport).await.expect("initialize succeeds")
    };
    (client, updates)
}

/// Serves `runtime`'s MCP server over an in-memory byte stream, as stdio carries it.
async fn in_process(runtime: &Runtime, modern: bool) -> (Client, mpsc::UnboundedReceiver<String>) {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    let server = McpServer::new(runtime.clone());
    tokio::spawn(async move { server.serve_io(read, write).await });
    connect(client_side, modern).await
}

/// A run parked on its hook, and the token that resumes it.
async fn parked(runtime: &Runtime) -> (RunId, String) {
    let run = runtime.start("resource_wait_for_word", json!({})).await.unwrap();
    run.parked().await.unwrap();
    (run.id().clone(), format!("resource-word-{}", run.id()))
}

fn run_uri(run: &RunId) -> String {
    format!("eve://runs/{run}")
}

/// Reads `uri` as the JSON it holds.
async fn read(client: &Client, uri: &str) -> Result<Value, ServiceError> {
    let result = client.peer().read_resource(ReadResourceRequestParams::new(uri)).await?;
    let contents = serde_json::to_value(&result.contents[0]).unwrap();
    assert_eq!((contents["uri"].as_str(), contents["mimeType"].as_str()), (Some(uri), Some("application/json")));
    Ok(serde_json::from_str(contents["text"].as_str().expect("a text resource")).unwrap())
}

fn error_of(error: ServiceError) -> (i32, String, Option<Value>) {
    match error {
        ServiceError::McpError(error) => (error.code.0, error.message.into_owned(), error.data),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The next resource the server says changed (at most 10 s).
async fn next_update(updates: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), updates.recv())
        .await
        .expect("an update within 10 s")
        .expect("the client is still connected")
}

/// The gauge is the process's: under `cargo test`, which runs these tests in one process, the
/// tests that read it take turns (`cargo nextest` gives each a process anyway).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The watches alive in this process, as the gauge counts them, once it reads `expected` (or
/// after 10 s): an aborted task leaves when the runtime next gets to it.
async fn watches_settle_at(metrics: &eve_tools::metrics::Metrics, expected: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics.render();
        let watches =
            text.lines().find_map(|line| line.strip_prefix("eve_mcp_resource_watches ")?.parse().ok()).unwrap_or(0.0);
        if watches == expected || Instant::now() > deadline {
            return watches;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn runs_are_listed_a_page_at_a_time_read_and_templated() {
    let runtime = Runtime::builder().store(MemoryStore::new()).build().unwrap();
    for _ in 0..55 {
        runtime.start("resource_quick", json!({})).await.unwrap().outcome().await.unwrap();
    }
    let (waiting, _) = parked(&runtime).await;
    let (client, _updates) = in_process(&runtime, true).await;

    // Newest first, fifty a page; the cursor is the store's.
    let first = client.peer().list_resources(None).await.unwrap();
    assert_eq!(first.resources.len(), 50);
    assert_eq!(first.resources[0].uri, run_uri(&waiting), "the newest run first");
    assert_eq!(first.resources[0].name, waiting.to_string());
    assert_eq!(first.resources[0].mime_type.as_deref(), Some("application/json"));
    let cursor = first.next_cursor.clone().expect("a next page");
    let second =
        client.peer().list_resources(Some(PaginatedRequestParams::default().with_cursor(Some(cursor)))).await.unwrap();
    assert_eq!((second.resources.len(), second.next_cursor.as_deref()), (6, None));
    let all = client.list_all_resources().await.unwrap();
    let mut uris: Vec<&str> = all.iter().map(|resource| resource.uri.as_str()).collect();
    uris.dedup();
    assert_eq!(uris.len(), 56, "every run once");
    assert!(uris.iter().all(|uri| uri.starts_with("eve://runs/run")), "{uris:?}");
    let refused = client
        .peer()
        .list_resources(Some(PaginatedRequestParams::default().with_cursor(Some("page-two".into()))))
        .await
        .unwrap_err();
    let (code, message, _) = error_of(refused);
    assert_eq!(code, -32602);
    assert!(message.contains("list again without a cursor"), "{message}");

    let templates = client.list_all_resource_templates().await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|template| template.uri_template.as_str()).collect();
    assert_eq!(templates, ["eve://runs/{runId}", "eve://runs/{runId}/timeline"]);

    // The run, parked on its hook; then its timeline.
    let run = read(&client, &run_uri(&waiting)).await.unwrap();
    assert_eq!(run["runId"], waiting.to_string());
    assert_eq!((run["tool"].as_str(), run["status"].as_str()), (Some("resource_wait_for_word"), Some("parked")));
    assert_eq!(run["waitingFor"], json!(["op 0: a hook delivery"]));
    assert!(run.get("outcome").is_none(), "{run}");
    let timeline = read(&client, &format!("{}/timeline", run_uri(&waiting))).await.unwrap();
    assert_eq!(timeline["ops"][0]["kind"], "hook", "{timeline}");
    assert_eq!(timeline["status"], "parked");
    let done = all.last().unwrap().uri.clone();
    let ended = read(&client, &done).await.unwrap();
    assert_eq!(ended["outcome"], json!({"status": "completed", "output": 1}), "{ended}");

    // A missing resource: -32602 on 2026-07-28 (SEP-2164), with the URI as `data.uri`.
    let (code, message, data) = error_of(read(&client, "eve://runs/run_nope").await.unwrap_err());
    assert_eq!((code, data), (-32602, Some(json!({"uri": "eve://runs/run_nope"}))));
    assert_eq!(message, "no resource at `eve://runs/run_nope`: no run has this id");
    let (code, message, _) = error_of(read(&client, "eve://jobs/1").await.unwrap_err());
    assert_eq!(code, -32602);
    assert!(message.contains("eve serves `eve://runs/{runId}` and `eve://runs/{runId}/timeline`"), "{message}");
    client.cancel().await.unwrap();

    // Before 2026-07-28, the code of a missing resource was -32002.
    let (client, _updates) = in_process(&runtime, false).await;
    let (code, _, data) = error_of(read(&client, "eve://runs/run_nope").await.unwrap_err());
    assert_eq!((code, data), (-32002, Some(json!({"uri": "eve://runs/run_nope"}))));
    client.cancel().await.unwrap();
    runtime.shutdown().await;
}

#[tokio::test]
#[expect(deprecated, reason = "clients before revision 2026-07-28 subscribe with `resources/subscribe`")]
async fn a_subscription_sends_updates_as_its_run_moves_until_unsubscribed_or_the_session_ends() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let metrics = eve_tools::metrics::install().unwrap();
    let runtime = Runtime::builder().store(MemoryStore::new()).build().unwrap();
    let (first, first_hook) = parked(&runtime).await;
    let (second, second_hook) = parked(&runtime).await;
    let (third, third_hook) = parked(&runtime).await;
    let (client, mut updates) = in_process(&runtime, false).await;
    let subscribe = |uri: String| client.peer().subscribe(SubscribeRequestParams::new(uri));

    // A subscription to a run: updates until it completes; then its watch ends by itself.
    subscribe(run_uri(&first)).await.unwrap();
    subscribe(format!("{}/timeline", run_uri(&second))).await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 2.0).await, 2.0, "one watch a subscription");
    runtime.resume_hook(&first_hook, json!("hello")).await.unwrap();
    loop {
        assert_eq!(next_update(&mut updates).await, run_uri(&first));
        let run = read(&client, &run_uri(&first)).await.unwrap();
        if run["status"] == "completed" {
            assert_eq!(run["outcome"], json!({"status": "completed", "output": "said hello"}));
            break;
        }
    }
    assert_eq!(watches_settle_at(&metrics, 1.0).await, 1.0, "the watch of a run that ended ends");

    // After an unsubscribe, the run moves and nothing is said of it.
    client.peer().unsubscribe(UnsubscribeRequestParams::new(format!("{}/timeline", run_uri(&second)))).await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 0.0).await, 0.0, "unsubscribing ends the watch");
    runtime.resume_hook(&second_hook, json!("unheard")).await.unwrap();
    runtime.handle(second.clone()).outcome().await.unwrap();
    subscribe(format!("{}/timeline", run_uri(&third))).await.unwrap();
    runtime.resume_hook(&third_hook, json!("heard")).await.unwrap();
    assert_eq!(next_update(&mut updates).await, format!("{}/timeline", run_uri(&third)), "not the second's");

    // An unknown run cannot be subscribed to (-32002 before 2026-07-28).
    let (code, _, data) = error_of(subscribe(run_uri(&"run_nope".parse().unwrap())).await.unwrap_err());
    assert_eq!((code, data), (-32002, Some(json!({"uri": "eve://runs/run_nope"}))));

    // The session's end ends its watches: none is left behind.
    let (fourth, _) = parked(&runtime).await;
    subscribe(run_uri(&fourth)).await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 1.0).await, 1.0);
    client.cancel().await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 0.0).await, 0.0, "the session ended, and so did its watch");
    runtime.shutdown().await;
}

/// Over Streamable HTTP: a session's subscription (`initialize`), and a 2026-07-28
/// `subscriptions/listen` stream, each told when the run it watches moves.
#[tokio::test]
#[expect(deprecated, reason = "clients before revision 2026-07-28 subscribe with `resources/subscribe`")]
async fn over_streamable_http_a_session_and_a_listen_stream_are_told_when_a_run_moves() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let metrics = eve_tools::metrics::install().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let runtime = Runtime::builder().store(MemoryStore::new()).public_url(&url).build().unwrap();
    let server = Server::new(runtime.clone()).serve(listener).unwrap();
    let transport = || StreamableHttpClientTransport::from_uri(format!("{url}/mcp"));
    let (still, _) = parked(&runtime).await;

    // A session: told of the run it subscribed to; its end ends the watch of the one that stays.
    let (run, hook) = parked(&runtime).await;
    let (client, mut updates) = connect(transport(), false).await;
    client.peer().subscribe(SubscribeRequestParams::new(run_uri(&run))).await.unwrap();
    client.peer().subscribe(SubscribeRequestParams::new(run_uri(&still))).await.unwrap();
    runtime.resume_hook(&hook, json!("over http")).await.unwrap();
    assert_eq!(next_update(&mut updates).await, run_uri(&run));
    client.cancel().await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 0.0).await, 0.0, "the session ended, and so did its watches");

    // A stream: accepts eve's URIs only, tells of the run that moves, and its cancellation ends
    // the watch of the one that stays.
    let (run, hook) = parked(&runtime).await;
    let (client, _updates) = connect(transport(), true).await;
    let timeline = format!("{}/timeline", run_uri(&run));
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions([timeline.clone(), run_uri(&still), "file:///etc/passwd".to_owned()])
        .tools_list_changed()
        .build();
    let mut stream = client.peer().listen(filter).await.unwrap();
    let accepted = stream.acknowledged().clone();
    assert_eq!(accepted.resource_subscriptions, Some(vec![timeline.clone(), run_uri(&still)]));
    assert_eq!(accepted.tools_list_changed, None, "nothing eve does not send");
    runtime.resume_hook(&hook, json!("streamed")).await.unwrap();
    let notification = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.unwrap().unwrap();
    match notification {
        Some(ServerNotification::ResourceUpdatedNotification(updated)) => assert_eq!(updated.params.uri, timeline),
        other => panic!("expected notifications/resources/updated, got {other:?}"),
    }
    runtime.handle(run).outcome().await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 1.0).await, 1.0, "the watch of the run that stays");
    stream.cancel().await.unwrap();
    assert_eq!(watches_settle_at(&metrics, 0.0).await, 0.0, "a cancelled stream leaves no watch behind");
    client.cancel().await.unwrap();
    server.shutdown().await;
    runtime.shutdown().await;
}

#[step]
async fn resource_stamp() -> Result<u32, StepError> {
    Ok(7)
}

/// A step (op 0), then a day's wait (op 1).
#[workflow_tool]
pub async fn resource_stamp_then_wait(_input: Quiet, _ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let stamped = resource_stamp().await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(stamped)
}

/// A day's wait (op 0), then a step: a journal of `resource_stamp_then_wait` diverges at op 0.
#[workflow_tool]
pub async fn resource_wait_then_stamp(_input: Quiet, _ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    sleep(Duration::from_secs(86_400)).await?;
    Ok(resource_stamp().await?)
}

/// A run this build holds (another build's journal that does not replay here) reads as `held`,
/// with where it diverges, and is listed as held; what it waits for is its journal's.
#[tokio::test]
async fn a_held_run_reads_and_lists_as_held_saying_where_it_diverges() {
    let history = {
        let world = eve_tests::World::in_memory();
        let runtime = world.runtime(0);
        let run = runtime.start("resource_stamp_then_wait", json!({})).await.unwrap();
        run.parked().await.unwrap();
        runtime.journal(run.id()).await.unwrap().entries[1..].to_vec()
    };
    let world = eve_tests::World::in_memory();
    let workflow_id = eve_tools::manifest()
        .tools
        .into_iter()
        .find(|tool| tool.name == "resource_wait_then_stamp")
        .expect("the tool is registered")
        .workflow_id;
    let held = world.import_run(&workflow_id, "resource_wait_then_stamp", json!({}), history).await;
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    assert_eq!(runtime.held_runs().len(), 1, "the runtime holds the imported run");
    let (client, _updates) = in_process(&runtime, true).await;

    let run = read(&client, &run_uri(&held)).await.unwrap();
    assert_eq!(run["status"], "held", "{run}");
    assert_eq!(run["held"]["verdict"], "diverges", "{run}");
    assert_eq!(run["held"]["op"], 0, "{run}");
    let listed = client.list_all_resources().await.unwrap();
    let resource = listed.iter().find(|resource| resource.uri == run_uri(&held)).expect("listed");
    let description = resource.description.as_deref().unwrap_or_default();
    assert!(description.contains(", held,"), "{description}");
}
