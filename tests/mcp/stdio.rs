//! The MCP server over stdio, driven by rmcp's client as a user's agent drives it: it spawns the
//! host binary (`bin/mcp_host.rs`, `mcp-host mcp`) on a SQLite data directory, kills it with
//! SIGKILL and starts it again. Each step of the host's tools appends its name to a counts file,
//! so the tests see how often each step ran across processes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eve_tests::faulty::Faulty;
use eve_tools::mcp::McpServer;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    GetTaskParams, Implementation, InputResponses, JsonObject, ProgressNotificationParam, ProtocolVersion, TaskPayload,
    UpdateTaskParams, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceError};
use rmcp::transport::{IntoTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A person at an MCP client: picks `choice` for every question, and notes what the server asked
/// and the progress it reported.
#[derive(Clone)]
struct Person {
    tasks: bool,
    choice: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<String>>>,
}

impl Person {
    fn new(tasks: bool, choice: &'static str) -> Self {
        Person { tasks, choice, asked: Default::default(), progress: Default::default() }
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let elicitation = ElicitationCapability::new()
            .with_form(FormElicitationCapability::new())
            .with_url(UrlElicitationCapability::new());
        let builder = ClientCapabilities::builder().enable_elicitation_with(elicitation);
        let capabilities = if self.tasks { builder.enable_tasks().build() } else { builder.build() };
        ClientConfig::new(capabilities, Implementation::new("eve-mcp-test", "0.0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "choice": self.choice })))
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params.message.unwrap_or_default());
    }
}

/// A host process on `dir`, counting steps into `dir/counts`.
pub(super) fn host(dir: &Path) -> TokioChildProcess {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-host"));
    command.arg("mcp").env("EVE_DATA_DIR", dir).env("EVE_MCP_COUNTS", dir.join("counts"));
    TokioChildProcess::new(command).expect("the host binary starts")
}

/// Connects with the 2026-07-28 lifecycle (`server/discover`), or with `initialize` (legacy).
pub(super) async fn connect<H, T, E, A>(transport: T, client: H, modern: bool) -> RunningService<RoleClient, H>
where
    H: ClientHandler,
    T: IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    if modern {
        let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        client.serve_with_lifecycle(transport, mode).await.expect("server/discover succeeds")
    } else {
        client.serve(transport).await.expect("initialize succeeds")
    }
}

pub(super) fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    let arguments: JsonObject = arguments.as_object().expect("arguments are an object").clone();
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
}

pub(super) fn text(result: &CallToolResult) -> String {
    result.content.first().and_then(|block| block.as_text()).map(|text| text.text.clone()).unwrap_or_default()
}

pub(super) fn counts(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("counts")).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn error_code(error: ServiceError) -> i32 {
    match error {
        ServiceError::McpError(error) => error.code.0,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// Polls `tasks/get` until `done` accepts the payload (at most 20 s).
async fn poll(
    client: &RunningService<RoleClient, Person>,
    task: &str,
    done: impl Fn(&TaskPayload) -> bool,
) -> TaskPayload {
    let started = Instant::now();
    loop {
        let got = client.peer().get_task(GetTaskParams::new(task)).await.expect("tasks/get answers");
        if done(&got.task.payload) {
            return got.task.payload;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "task {task} stuck at {:?}", got.task.payload);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether no process holds the store's lock in `dir`.
fn lock_free(dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(dir.join("eve.db.lock")) else { return true };
    file.try_lock().is_ok()
}

/// Waits until process `pid`, a host on `dir`, has exited (it may stay a zombie until reaped)
/// and no longer holds the store's lock.
pub(super) async fn exited(pid: u32, dir: &Path) {
    let started = Instant::now();
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let zombie = status.lines().any(|line| line.starts_with("State:") && line.contains('Z'));
        // The leader turns zombie while its other threads may still hold the open files: gone
        // means the store's lock is free too.
        if (status.is_empty() || zombie) && lock_free(dir) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "process {pid} did not exit");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn task_id(response: CallToolResponse) -> String {
    match response {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn tools_are_listed_from_the_manifest_and_plain_tools_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(host(dir.path()), Person::new(false, "approve"), true).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["announce", "approve_deploy", "ask_question", "greet", "long_job", "migrate", "release", "sleep", "weigh"]
    );
    let greet = tools.iter().find(|tool| tool.name == "greet").unwrap();
    assert_eq!(greet.description.as_deref(), Some("Greet someone, at once."));
    assert_eq!(greet.input_schema.get("required"), Some(&json!(["name"])));
    assert_eq!(greet.input_schema.get("additionalProperties"), Some(&json!(false)), "a made-up field is refused");
    assert!(greet.input_schema.get("$schema").is_none(), "no dialect: MCP defaults to 2020-12");

    let result = client.call_tool(call("greet", json!({"name": "Ada"}))).await.unwrap();
    assert_eq!((text(&result), result.is_error), ("hello, Ada".to_owned(), Some(false)));

    // An object output has an output schema, and its result carries structured content; a
    // string output has neither.
    assert!(greet.output_schema.is_none());
    let weigh = tools.iter().find(|tool| tool.name == "weigh").unwrap();
    let schema = weigh.output_schema.as_ref().expect("`Weight` is an object with a schema");
    assert_eq!(schema.get("type"), Some(&json!("object")));
    assert_eq!(schema["properties"]["kilograms"]["type"], "number");
    assert!(schema.get("$schema").is_none());
    let result = client.call_tool(call("weigh", json!({"grams": 1500}))).await.unwrap();
    assert_eq!(result.structured_content, Some(json!({"kilograms": 1.5})));
    assert_eq!(result.is_error, Some(false));

    // Arguments that do not fit: an isError result naming the field; nothing runs.
    let result = client.call_tool(call("greet", json!({"name": 7}))).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).starts_with("invalid arguments for tool `greet`: field `name`: 7 is not of type"),
        "{}",
        text(&result)
    );
    let result = client.call_tool(call("release", json!({}))).await.unwrap();
    assert_eq!(text(&result), "invalid arguments for tool `release`: field `version` is required");
    let result = client.call_tool(call("greet", json!({"name": "Ada", "title": "Dr"}))).await.unwrap();
    assert_eq!(
        text(&result),
        "invalid arguments for tool `greet`: the input has a field `title` that the tool does not take; remove it \
         (the tool takes `name`)"
    );
    assert!(counts(dir.path()).is_empty(), "a refused call starts nothing");

    // An unknown tool is a protocol error.
    let error = client.call_tool(call("nope", json!({}))).await.unwrap_err();
    assert_eq!(error_code(error), -32602);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_workflow_tool_asks_its_question_and_returns_the_result_once_answered() {
    let dir = tempfile::tempdir().unwrap();
    // 2026-07-28 without the tasks extension: an InputRequiredResult, answered by a second round.
    let person = Person::new(false, "approve");
    let client = connect(host(dir.path()), person.clone(), true).await;
    let first = client.call_tool_once(call("approve_deploy", json!({"service": "api"}))).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else { panic!("expected a question, got {first:?}") };
    let requests = asked.input_requests.clone().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["ask-0"], "keyed by the question's request id");
    let request = serde_json::to_value(&requests["ask-0"]).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Deploy api?");
    let mut responses = InputResponses::new();
    responses.insert("ask-0".into(), json!({"action": "accept", "content": {"choice": "approve"}}));
    let state = asked.request_state.clone().expect("a sealed request state");
    let second = call("approve_deploy", json!({"service": "api"}))
        .with_input_responses(responses)
        .with_request_state(state.clone());
    let CallToolResponse::Complete(result) = client.call_tool_once(second).await.unwrap() else {
        panic!("expected a result")
    };
    assert_eq!(text(&result), "deployed api");

    // A forged state is refused and answers nothing.
    let forged = call("approve_deploy", json!({"service": "api"})).with_request_state(format!("{state}x"));
    assert_eq!(error_code(client.call_tool_once(forged).await.unwrap_err()), -32602);

    // rmcp's client drives the rounds itself, asking the person.
    let result = client.call_tool(call("approve_deploy", json!({"service": "web"}))).await.unwrap();
    assert_eq!(text(&result), "deployed web");
    assert_eq!(person.asked.lock().unwrap().as_slice(), ["Deploy web?"]);
    client.cancel().await.unwrap();

    assert_eq!(counts(dir.path()), ["deploy", "deploy"], "one deploy per approval");

    // An older revision (initialize): the server sends elicitation/create while the call waits.
    let dir = tempfile::tempdir().unwrap();
    for (choice, expected) in [("cancel", "db not deployed"), ("approve", "deployed db")] {
        let person = Person::new(false, choice);
        let transport = host(dir.path());
        let pid = transport.id().expect("the host has a pid");
        let client = connect(transport, person.clone(), false).await;
        let result = client.call_tool(call("approve_deploy", json!({"service": "db"}))).await.unwrap();
        assert_eq!(text(&result), expected);
        assert_eq!(person.asked.lock().unwrap().as_slice(), ["Deploy db?"]);
        client.cancel().await.unwrap();
        exited(pid, dir.path()).await;
    }
    assert_eq!(counts(dir.path()), ["deploy"]);
}

#[tokio::test]
async fn a_task_survives_a_killed_server_and_each_step_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let transport = host(dir.path());
    let pid = transport.id().expect("the host has a pid");
    let client = connect(transport, Person::new(true, "ship"), true).await;
    let task = task_id(client.call_tool_once(call("release", json!({"version": "1.2"}))).await.unwrap());
    let payload = poll(&client, &task, |payload| matches!(payload, TaskPayload::InputRequired { .. })).await;
    let TaskPayload::InputRequired { input_requests } = payload else { unreachable!() };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["ask-1"]);

    // SIGKILL: no shutdown, no flush beyond what the store made durable.
    let killed = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    exited(pid, dir.path()).await;
    drop(client);

    let client = connect(host(dir.path()), Person::new(true, "ship"), true).await;
    let payload = poll(&client, &task, |_| true).await;
    assert!(
        matches!(&payload, TaskPayload::InputRequired { input_requests } if input_requests.contains_key("ask-1")),
        "{payload:?}"
    );
    let mut responses = InputResponses::new();
    responses.insert("ask-1".into(), json!({"action": "accept", "content": {"choice": "ship"}}));
    client.peer().update_task(UpdateTaskParams::new(task.clone(), responses)).await.unwrap();
    let payload =
        poll(&client, &task, |payload| !matches!(payload, TaskPayload::Working | TaskPayload::InputRequired { .. }))
            .await;
    let TaskPayload::Completed { result } = payload else { panic!("expected completed, got {payload:?}") };
    assert_eq!(result["content"][0]["text"], "released 1.2");
    assert_eq!(counts(dir.path()), ["build", "ship", "announce"], "each step ran once across the kill");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_task_runs_its_cleanup_and_ends_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(host(dir.path()), Person::new(true, "approve"), true).await;
    let task = task_id(client.call_tool_once(call("long_job", json!({}))).await.unwrap());
    let working = client.peer().get_task(GetTaskParams::new(task.clone())).await.unwrap();
    assert!(matches!(working.task.payload, TaskPayload::Working), "found at once after creation");
    client.peer().cancel_task(CancelTaskParams::new(task.clone())).await.unwrap();
    let payload = poll(&client, &task, |payload| !matches!(payload, TaskPayload::Working)).await;
    assert!(matches!(payload, TaskPayload::Cancelled), "{payload:?}");
    assert_eq!(counts(dir.path()), ["prepare", "cleanup"]);
    // Cancelling again is an idempotent acknowledgement; an unknown id is -32602.
    client.peer().cancel_task(CancelTaskParams::new(task.clone())).await.unwrap();
    let unknown = client.peer().get_task(GetTaskParams::new("run_unknown")).await.unwrap_err();
    assert_eq!(error_code(unknown), -32602);
    client.cancel().await.unwrap();

    // Without the tasks extension, the tasks methods are refused (-32021).
    let dir = tempfile::tempdir().unwrap();
    let client = connect(host(dir.path()), Person::new(false, "approve"), true).await;
    let refused = client.peer().get_task(GetTaskParams::new(task)).await.unwrap_err();
    assert_eq!(error_code(refused), -32021);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_without_tasks_gets_the_result_with_its_steps_as_progress() {
    let dir = tempfile::tempdir().unwrap();
    let person = Person::new(false, "ship");
    let client = connect(host(dir.path()), person.clone(), true).await;
    let params = call("release", json!({"version": "2.0"}));
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(text(&result), "released 2.0");
    // rmcp runs each notification's handler as a task of its own, which may still be queued when
    // the result arrives: wait for the three (one per step), for a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    while person.progress.lock().unwrap().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let progress = person.progress.lock().unwrap().clone();
    assert_eq!(progress, ["step record: done"; 3], "one notification per step done (build, ship, announce)");
    client.cancel().await.unwrap();
}

/// A workflow tool's progress reports reach the client as progress notifications, after its
/// steps' own, and its last snapshot is the result of a body that returns nothing.
#[tokio::test]
async fn a_workflow_tools_progress_reports_are_progress_notifications() {
    let dir = tempfile::tempdir().unwrap();
    let person = Person::new(false, "ship");
    let client = connect(host(dir.path()), person.clone(), true).await;
    let result = client.call_tool(call("migrate", json!({"tables": ["users", "orders"]}))).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text(&result)).unwrap(), json!({ "migrated": 2, "of": 2 }));
    let progress = person.progress.lock().unwrap().clone();
    let reports: Vec<&String> = progress.iter().filter(|message| message.starts_with('{')).collect();
    assert_eq!(reports, [r#"{"migrated":1,"of":2}"#, r#"{"migrated":2,"of":2}"#], "{progress:?}");
    client.cancel().await.unwrap();
}

/// What to pack and ship, for the tool served in process below.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Parcel {
    /// Its label.
    label: String,
}

/// Returns `what`, as a side effect would.
#[step]
async fn handle(what: String) -> Result<String, StepError> {
    Ok(what)
}

/// Packs a parcel, asks before shipping it, ships it: served in process, on a store whose reads
/// of a run are slow.
#[workflow_tool]
pub async fn pack_and_ship(input: Parcel, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    handle(format!("packed {}", input.label)).await?;
    let question = Ask::confirmation(format!("Ship {}?", input.label)).option("ship", "Ship").option("hold", "Hold");
    if !ctx.ask(question).await.chose("ship") {
        return Ok(format!("{} held", input.label));
    }
    Ok(handle(format!("shipped {}", input.label)).await?)
}

/// The steps a run takes before it asks are reported before the call hands the question to the
/// client, also when the call first reads the run after it asked: here every read of a run
/// takes 300 ms, so the run is always there first. Seen failing: the call returned the question
/// at once and dropped the first step's two notifications, which its events had not reported yet
/// (about one run of this binary in 50 lost them to the same race without the delay).
#[tokio::test]
async fn the_steps_before_a_question_are_reported_when_the_call_reads_the_run_after_it_asked() {
    let store = Faulty::new(Arc::new(MemoryStore::new()));
    store.delay_loads(Duration::from_millis(300));
    let runtime = Runtime::builder().shared_store(store).build().unwrap();
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
    let person = Person::new(false, "ship");
    let client = connect(client_side, person.clone(), true).await;

    let result = client.call_tool(call("pack_and_ship", json!({"label": "p-1"}))).await.unwrap();
    assert_eq!(text(&result), "shipped p-1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while person.progress.lock().unwrap().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let progress = person.progress.lock().unwrap().clone();
    assert_eq!(progress, ["step handle: done"; 2], "both steps, in order, before the question and after it");
    assert_eq!(*person.asked.lock().unwrap(), ["Ship p-1?"]);
    client.cancel().await.unwrap();
    server.await.unwrap().unwrap();
    runtime.shutdown().await;
}

const BADGE: Provider = Provider::new("badge");

/// Whose badge to read.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Badge {
    /// The badge's holder.
    holder: String,
}

/// Reads a badge with a token from the `badge` provider, which no one has signed in to.
#[step]
async fn read_badge(ctx: &StepCtx, holder: String) -> Result<String, StepError> {
    let token = ctx.get_token(&BADGE).await?;
    Ok(format!("{holder}'s badge, read with a token of {} characters", token.expose_secret().len()))
}

/// Reads a badge: its step waits for a sign-in.
#[workflow_tool]
pub async fn show_badge(input: Badge, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(read_badge(ctx, input.holder).await?)
}

/// The sign-in a task waits for is an input request carrying its link, which a server reads from
/// the journal: a server made after a restart, after recovery, with nothing published since, shows
/// the same link the run published when it asked. (It used to keep the links it heard on the
/// event bus, so such a server showed the task `working` with no way to sign in.)
#[tokio::test]
async fn a_sign_in_is_an_input_request_with_its_link_also_after_a_restart() {
    let world = eve_tests::World::in_memory();
    let fake = eve_tests::oauth_server::FakeOAuth::start("CANARYbadge").await;
    let runtime_of = |world: &eve_tests::World| {
        let provider = fake.provider("badge", world.clock.clone()).build().unwrap();
        world.builder(16).auth_provider("badge", provider).public_url("https://agent.example").build().unwrap()
    };
    let runtime = runtime_of(&world);
    let mut events = runtime.events();
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
    let client = connect(client_side, Person::new(true, "ship"), true).await;
    let task = task_id(client.call_tool_once(call("show_badge", json!({"holder": "ada"}))).await.unwrap());
    let link = loop {
        match events.recv().await.unwrap() {
            eve_tools::RunEvent::AuthorizationRequired { run, url, .. } if run.to_string() == task => break url,
            _ => {}
        }
    };
    let sign_in = |payload: &TaskPayload| match payload {
        TaskPayload::InputRequired { input_requests } => serde_json::to_value(input_requests).ok(),
        _ => None,
    };
    let payload = poll(&client, &task, |payload| sign_in(payload).is_some()).await;
    let requests = sign_in(&payload).unwrap();
    let (key, request) = requests.as_object().unwrap().iter().next().unwrap();
    assert!(key.starts_with("sign-in-"), "{requests}");
    assert_eq!(request["params"]["url"], link, "the link the run published: {requests}");
    client.cancel().await.unwrap();
    server.await.unwrap().unwrap();
    runtime.shutdown().await;

    // A new process: recovery first, the server after it.
    let runtime = runtime_of(&world);
    runtime.recover().await.unwrap();
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
    let client = connect(client_side, Person::new(true, "ship"), true).await;
    let got = client.peer().get_task(GetTaskParams::new(task.as_str())).await.unwrap();
    let again = sign_in(&got.task.payload).unwrap_or_else(|| panic!("input_required: {:?}", got.task.payload));
    assert_eq!(again, requests, "the same sign-in, with the same link");
    client.cancel().await.unwrap();
    server.await.unwrap().unwrap();
    runtime.shutdown().await;
}

/// Writes `line` and a newline to the server, and reads the next line it writes.
async fn exchange(
    write: &mut (impl tokio::io::AsyncWrite + Unpin),
    read: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &[u8],
) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    write.write_all(line).await.unwrap();
    write.write_all(b"\n").await.unwrap();
    write.flush().await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), read.read_line(&mut answer))
        .await
        .unwrap_or_else(|_| panic!("no answer to {:?}", String::from_utf8_lossy(&line[..line.len().min(80)])))
        .unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|error| panic!("{error}: {answer}"))
}

/// A clean wire: a line that is not JSON, is nested too deep, is over the size limit or is not
/// UTF-8 gets `-32700` with id null; JSON that is not a JSON-RPC 2.0 message gets `-32600` with
/// its id when it has one; and the server goes on, answering the next request. Seen failing:
/// rmcp ignored the first four without a word and answered `"jsonrpc": "1.0"` with no id.
#[tokio::test]
async fn malformed_lines_get_their_errors_and_the_server_goes_on() {
    let runtime = Runtime::builder().store(MemoryStore::new()).build().unwrap();
    let (client_side, server_side) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(McpServer::new(runtime.clone()).serve_io(read, write));
    let (read, mut write) = tokio::io::split(client_side);
    let mut read = tokio::io::BufReader::new(read);

    let parse_error = |answer: &Value, what: &str| {
        assert_eq!(answer["error"]["code"], -32700, "{what}: {answer}");
        assert_eq!(answer["id"], Value::Null, "{what}: {answer}");
        assert!(answer.as_object().unwrap().contains_key("id"), "{what}: id is null, not missing: {answer}");
    };
    // Before the handshake, and after it.
    parse_error(&exchange(&mut write, &mut read, b"{not json").await, "not JSON, first");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let answer = exchange(&mut write, &mut read, initialize.to_string().as_bytes()).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
    {
        use tokio::io::AsyncWriteExt;
        write.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.unwrap();
    }
    parse_error(&exchange(&mut write, &mut read, b"{not json").await, "not JSON");
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    parse_error(&exchange(&mut write, &mut read, deep.as_bytes()).await, "too deep");
    let long =
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(5 << 20));
    let answer = exchange(&mut write, &mut read, long.as_bytes()).await;
    parse_error(&answer, "too long");
    assert!(answer["error"]["message"].as_str().unwrap().contains("4194304 bytes"), "names the limit: {answer}");
    let answer = exchange(&mut write, &mut read, b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/\xff\"}").await;
    parse_error(&answer, "not UTF-8");
    assert!(answer["error"]["message"].as_str().unwrap().contains("UTF-8"), "{answer}");

    let old = json!({"jsonrpc": "1.0", "id": 7, "method": "tools/list"});
    let answer = exchange(&mut write, &mut read, old.to_string().as_bytes()).await;
    assert_eq!((answer["error"]["code"].clone(), answer["id"].clone()), (json!(-32600), json!(7)), "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("\"jsonrpc\": \"2.0\""),
        "says what to send: {answer}"
    );
    let answer = exchange(&mut write, &mut read, br#"{"hello": "world"}"#).await;
    assert_eq!((answer["error"]["code"].clone(), answer["id"].clone()), (json!(-32600), Value::Null), "{answer}");

    let list = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
    let answer = exchange(&mut write, &mut read, list.to_string().as_bytes()).await;
    assert_eq!(answer["id"], 8, "{answer}");
    assert!(answer["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{answer}");

    drop(write);
    drop(read);
    server.await.unwrap().unwrap();
    runtime.shutdown().await;
}

/// `host mcp` logs to standard error, filtered by `RUST_LOG`, and keeps standard output for the
/// protocol: a refused line is answered on stdout and logged on stderr.
#[tokio::test]
async fn host_mcp_logs_to_stderr_under_rust_log() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-host"))
        .arg("mcp")
        .env("EVE_DATA_DIR", dir.path())
        .env("RUST_LOG", "eve_host=debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the host binary starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"{not json\n").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut answer)).await.unwrap().unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(20), child.wait()).await.unwrap().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    assert!(stderr.contains("refused an MCP message") && stderr.contains("not JSON"), "stderr: {stderr}");
    assert!(!stderr.contains("{not json"), "the refused line itself is not logged: {stderr}");
}
