//! Requests for the client's model (`ctx.sample`) and forms (`ctx.ask_form`), answered by rmcp's
//! client as a user's agent answers them: its `create_message` handler is the model, its
//! `create_elicitation` handler the person. The host binary (`bin/mcp_host.rs`, tool `announce`)
//! is SIGKILLed while each wait is open and started again on the same data directory; the call
//! goes on in the new process, over stdio and over Streamable HTTP, as rounds of a multi
//! round-trip call (the request state sealed by the killed process) and as a task, and each step
//! runs once. A client that refuses to sample gets a body that sees the refusal.

// Sampling is deprecated by SEP-2577, and still what clients answer: this file tests it.
#![allow(deprecated)]

use std::io::BufRead as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, GetTaskParams, Implementation, InputRequest, InputRequests, InputResponses,
    NumberOrString, SamplingMessage, TaskPayload, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use super::stdio::{call, connect, counts, exited, host, text};

/// What the client's model says to every request.
const DRAFT: &str = "Eve 1.0 is out: durable tools for agents.";

/// A client whose model drafts [`DRAFT`] (or refuses to sample) and whose person fills in every
/// form with `form`; it notes the requests it answered.
#[derive(Clone)]
struct Writer {
    tasks: bool,
    /// Refuse every sampling request, as a person who rejects it in the client does.
    refuse: bool,
    form: Value,
    sampled: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Writer {
    fn new(tasks: bool) -> Self {
        let form = json!({"channel": "releases", "copies": 2});
        Writer { tasks, refuse: false, form, sampled: Default::default(), asked: Default::default() }
    }
}

impl ClientHandler for Writer {
    fn get_info(&self) -> ClientConfig {
        let elicitation = ElicitationCapability::new().with_form(FormElicitationCapability::new());
        let builder = ClientCapabilities::builder().enable_elicitation_with(elicitation).enable_sampling();
        let capabilities = if self.tasks { builder.enable_tasks().build() } else { builder.build() };
        ClientConfig::new(capabilities, Implementation::new("eve-sampling-test", "0.0.1"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sampled.lock().unwrap().push(params);
        if self.refuse {
            return Err(ErrorData::invalid_request("the user rejected the sampling request", None));
        }
        let message = SamplingMessage::assistant_text(DRAFT);
        Ok(CreateMessageResult::new(message, "test-model-1".into())
            .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(self.form.clone()))
    }
}

type Client = RunningService<RoleClient, Writer>;

/// The surface a host process serves its tools on.
#[derive(Clone, Copy, Debug)]
enum Surface {
    Stdio,
    Http,
}

/// A host process on `dir` and a client connected to it (2026-07-28, `server/discover`).
struct Process {
    client: Client,
    pid: u32,
    /// The `serve` child (HTTP only).
    _serving: Option<Serving>,
}

/// A `serve` child, killed and reaped when dropped, so a failed test leaves no process behind.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    async fn start(surface: Surface, dir: &Path, writer: Writer) -> Process {
        match surface {
            Surface::Stdio => {
                let transport = host(dir);
                let pid = transport.id().expect("the host has a pid");
                Process { client: connect(transport, writer, true).await, pid, _serving: None }
            }
            Surface::Http => {
                let (child, url) = serve(dir);
                let transport = StreamableHttpClientTransport::from_uri(format!("{url}/mcp"));
                let (pid, serving) = (child.id(), Serving(child));
                Process { client: connect(transport, writer, true).await, pid, _serving: Some(serving) }
            }
        }
    }

    /// SIGKILLs the host: no shutdown, no flush beyond what the store made durable.
    async fn kill(self, dir: &Path) {
        let killed = std::process::Command::new("kill").args(["-9", &self.pid.to_string()]).status().unwrap();
        assert!(killed.success());
        exited(self.pid, dir).await;
    }
}

/// `mcp-host serve` on a loopback port of its choosing, and its URL.
fn serve(dir: &Path) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-host"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("EVE_DATA_DIR", dir)
        .env("EVE_MCP_COUNTS", dir.join("counts"))
        .env_remove("EVE_API_KEY")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the host binary starts");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    // What recovery did comes first, then the banner.
    let url = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the host ended before its banner");
        if let Some(url) = line.trim().strip_prefix("serving ") {
            break url.to_owned();
        }
    };
    // The rest of the banner, and the lines each finished run prints, read so the child never
    // blocks on a full pipe.
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(drop));
    (child, url)
}

/// How the client follows its call: rounds of a multi round-trip call, or a task.
enum Call {
    Rounds { state: Option<String> },
    Task { id: String },
}

/// What the call is at: requests open for the client, or its result.
enum At {
    Asked(InputRequests),
    Done(CallToolResult),
}

impl Call {
    /// Calls `announce`, and says what it waits for first.
    async fn begin(client: &Client, tasks: bool) -> (Call, At) {
        let response = client.call_tool_once(announce()).await.unwrap();
        let mut call = match (tasks, &response) {
            (true, CallToolResponse::Task(created)) => Call::Task { id: created.task.task_id.clone() },
            (false, _) => Call::Rounds { state: None },
            (true, other) => panic!("expected a task, got {other:?}"),
        };
        let at = call.at(client, Some(response), &[]).await;
        (call, at)
    }

    /// Sends `responses` (keyed as the requests), and says what the call waits for next.
    async fn answer(&mut self, client: &Client, responses: InputResponses) -> At {
        let answered: Vec<String> = responses.keys().cloned().collect();
        match self {
            Call::Rounds { state } => {
                let round = announce().with_input_responses(responses);
                let round = match state.clone() {
                    Some(state) => round.with_request_state(state),
                    None => round,
                };
                let response = client.call_tool_once(round).await.unwrap();
                self.at(client, Some(response), &answered).await
            }
            Call::Task { id } => {
                client.peer().update_task(UpdateTaskParams::new(id.clone(), responses)).await.unwrap();
                self.at(client, None, &answered).await
            }
        }
    }

    /// What the call waits for, read again from a new process: a task's requests as the task
    /// shows them; a round's are those the client already `holds`.
    async fn reread(&mut self, client: &Client, holds: Value) -> Value {
        match self {
            Call::Rounds { .. } => holds,
            Call::Task { .. } => {
                let shown = asked(self.at(client, None, &[]).await);
                assert_eq!(shown, holds, "the new process shows the same open requests");
                shown
            }
        }
    }

    /// What the call waits for: from a round's `response`, or by polling the task until it asks
    /// something other than the `answered` requests, or ends.
    async fn at(&mut self, client: &Client, response: Option<CallToolResponse>, answered: &[String]) -> At {
        match (self, response) {
            (Call::Rounds { state }, Some(CallToolResponse::InputRequired(asked))) => {
                *state = asked.request_state;
                At::Asked(asked.input_requests.expect("a round that asks has input requests"))
            }
            (Call::Rounds { .. }, Some(CallToolResponse::Complete(result))) => At::Done(result),
            (Call::Task { id }, _) => {
                let started = Instant::now();
                loop {
                    let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.expect("tasks/get answers");
                    match got.task.payload {
                        TaskPayload::InputRequired { input_requests }
                            if !input_requests.keys().any(|key| answered.contains(key)) =>
                        {
                            return At::Asked(input_requests);
                        }
                        TaskPayload::Completed { result } => {
                            return At::Done(serde_json::from_value(Value::Object(result)).expect("a tool's result"));
                        }
                        TaskPayload::Working | TaskPayload::InputRequired { .. } => {}
                        other => panic!("task {id} ended {other:?}"),
                    }
                    assert!(started.elapsed() < Duration::from_secs(20), "task {id} stuck");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            (_, other) => panic!("expected a question or a result, got {other:?}"),
        }
    }
}

fn announce() -> rmcp::model::CallToolRequestParams {
    call("announce", json!({"topic": "eve 1.0"}))
}

/// The client's handlers' responses to `requests`, as rmcp's client makes them for a round.
async fn respond(client: &Client, requests: InputRequests) -> InputResponses {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let cx = RequestContext::new(NumberOrString::String(key.clone().into()), client.peer().clone());
        let response = match request {
            InputRequest::CreateMessage(sampling) => {
                serde_json::to_value(client.service().create_message(sampling.params, cx).await.unwrap())
            }
            InputRequest::Elicitation(elicit) => {
                serde_json::to_value(client.service().create_elicitation(elicit.params, cx).await.unwrap())
            }
            other => panic!("unexpected input request {other:?}"),
        };
        responses.insert(key, response.unwrap());
    }
    responses
}

/// `at` as the requests it asks, keyed, as JSON.
fn asked(at: At) -> Value {
    match at {
        At::Asked(requests) => serde_json::to_value(requests).unwrap(),
        At::Done(result) => panic!("expected a question, got the result {result:?}"),
    }
}

/// The heart of issue 52's "done when": a workflow tool samples the client's model, then asks a
/// person for a form; its server is SIGKILLed while the sampling request is open and again while
/// the form is open; the call goes on with each new process and completes with the model's
/// completion and the person's values, each step having run exactly once.
async fn survives_kills(surface: Surface, tasks: bool) {
    let dir = tempfile::tempdir().unwrap();
    let writer = Writer::new(tasks);
    let process = Process::start(surface, dir.path(), writer.clone()).await;
    let (mut call, at) = Call::begin(&process.client, tasks).await;
    let requests = asked(at);
    assert_eq!(requests.as_object().unwrap().keys().collect::<Vec<_>>(), ["ask-1"], "{requests}");
    let sampling = &requests["ask-1"];
    assert_eq!(sampling["method"], "sampling/createMessage", "{sampling}");
    let params = &sampling["params"];
    assert_eq!(
        params["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Write one line announcing eve 1.0."}}])
    );
    assert_eq!(
        (params["systemPrompt"].as_str(), params["maxTokens"].as_u64()),
        (Some("You write short release announcements."), Some(64))
    );
    process.kill(dir.path()).await;

    // A new process: the request is still open, and the client's model answers it.
    let process = Process::start(surface, dir.path(), writer.clone()).await;
    let requests = call.reread(&process.client, requests).await;
    let requests: InputRequests = serde_json::from_value(requests).unwrap();
    let responses = respond(&process.client, requests).await;
    assert_eq!(writer.sampled.lock().unwrap().len(), 1, "the model was asked once");
    let form = asked(call.answer(&process.client, responses).await);
    assert_eq!(form.as_object().unwrap().keys().collect::<Vec<_>>(), ["ask-3"], "{form}");
    assert_eq!(form["ask-3"]["params"]["message"], format!("Publish {DRAFT:?} where?"), "the body got the draft");
    assert_eq!(form["ask-3"]["params"]["requestedSchema"]["required"], json!(["channel", "copies"]), "{form}");
    process.kill(dir.path()).await;

    // Another new process: the form is still open, and the person fills it in.
    let process = Process::start(surface, dir.path(), writer.clone()).await;
    let form = call.reread(&process.client, form).await;
    let responses = respond(&process.client, serde_json::from_value(form).unwrap()).await;
    let At::Done(result) = call.answer(&process.client, responses).await else { panic!("expected the result") };
    assert_eq!(text(&result), format!("published {DRAFT:?} in releases (2 copies)"), "{result:?}");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(writer.asked.lock().unwrap().len(), 1, "the person was asked once");
    assert_eq!(
        counts(dir.path()),
        ["outline".to_owned(), format!("draft {DRAFT}"), "publish releases x2".to_owned()],
        "each step ran once across two kills"
    );
    process.client.cancel().await.unwrap();
}

#[tokio::test]
async fn sampling_and_a_form_survive_killed_servers_over_stdio_in_rounds() {
    survives_kills(Surface::Stdio, false).await;
}

#[tokio::test]
async fn sampling_and_a_form_survive_killed_servers_over_stdio_as_a_task() {
    survives_kills(Surface::Stdio, true).await;
}

#[tokio::test]
async fn sampling_and_a_form_survive_killed_servers_over_http_in_rounds() {
    survives_kills(Surface::Http, false).await;
}

#[tokio::test]
async fn sampling_and_a_form_survive_killed_servers_over_http_as_a_task() {
    survives_kills(Surface::Http, true).await;
}

/// A client of a revision before 2026-07-28 is sent `sampling/createMessage` while its call
/// waits. One whose model answers gets the body's result; one that answers with an error (its
/// user rejected the request) declines it, and the body sees `Declined`. Seen failing: the call
/// failed with "the client did not answer the request `ask-1`", and the run stayed parked.
#[tokio::test]
async fn a_client_that_refuses_to_sample_declines_and_the_body_sees_it() {
    let published = format!("published {DRAFT:?} in releases (2 copies)");
    for (refuse, expected) in [(true, "not announced: the client declined to draft it"), (false, published.as_str())] {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer { refuse, ..Writer::new(false) };
        let transport = host(dir.path());
        let pid = transport.id().expect("the host has a pid");
        let client = connect(transport, writer.clone(), false).await;
        let result = client.call_tool(announce()).await.unwrap();
        assert_eq!((text(&result).as_str(), result.is_error), (expected, Some(false)), "refuse: {refuse}");
        let sampled = writer.sampled.lock().unwrap().clone();
        assert_eq!(sampled.len(), 1, "asked once: {sampled:?}");
        assert_eq!(sampled[0].system_prompt.as_deref(), Some("You write short release announcements."));
        let steps = match refuse {
            true => vec!["outline".to_owned()],
            false => vec!["outline".to_owned(), format!("draft {DRAFT}"), "publish releases x2".to_owned()],
        };
        assert_eq!(counts(dir.path()), steps);
        client.cancel().await.unwrap();
        exited(pid, dir.path()).await;
    }
}
