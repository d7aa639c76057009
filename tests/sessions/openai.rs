//! The OpenAI-compatible model against a fake chat-completions server on loopback: streamed
//! answers assembled (split at any byte), the request in the form providers accept, refusals
//! mapped to retries or clear failures, and a session driven end to end, retrying a 429 after
//! its `Retry-After` as a durable backoff.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use eve_tests::World;
use eve_tools::prelude::*;
use eve_tools::session::model::collect;
use eve_tools::session::openai::{OpenAiConfig, OpenAiModel};
use eve_tools::session::{Message, Model, ModelError, ModelRequest, SessionEvent, SessionOptions, ToolSpec};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// What the fake server answers to one request.
enum Reply {
    /// A server-sent event stream of these `data:` payloads, cut into pieces of this many bytes.
    Events(Vec<String>, usize),
    /// A status with headers and a body.
    Status(u16, Vec<(&'static str, &'static str)>, &'static str),
    /// These events, then the connection breaks mid-body.
    Broken(Vec<String>),
}

/// A streamed chunk whose first choice has `delta` (and `finish_reason`, if given).
fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
        .to_string()
}

#[derive(Default)]
struct Fake {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<(HeaderMap, Value)>>,
}

impl Fake {
    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.seen.lock().unwrap().clone()
    }
}

async fn completions(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    fake.seen.lock().unwrap().push((headers, serde_json::from_slice(&body).unwrap()));
    let reply = fake.replies.lock().unwrap().pop_front().expect("the test scripted a reply for every request");
    match reply {
        Reply::Events(events, piece) => {
            let text: String = events.iter().map(|data| format!("data: {data}\n\n")).collect();
            let pieces: Vec<Result<Bytes, std::convert::Infallible>> =
                text.as_bytes().chunks(piece).map(|bytes| Ok(Bytes::copy_from_slice(bytes))).collect();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(futures::stream::iter(pieces)))
                .unwrap()
        }
        Reply::Broken(events) => {
            let text: String = events.iter().map(|data| format!("data: {data}\n\n")).collect();
            let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(text))]);
            let broken = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(std::io::Error::other("the connection broke"))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(first.chain(broken)))
                .unwrap()
        }
        Reply::Status(status, headers, body) => {
            let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap());
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
    }
}

/// Starts the fake on a free loopback port with `replies`; returns it and a model aimed at it.
async fn fake(replies: Vec<Reply>) -> (Arc<Fake>, OpenAiModel) {
    let fake = Arc::new(Fake { replies: Mutex::new(replies.into()), ..Fake::default() });
    let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let model = OpenAiModel::new(OpenAiConfig::new(base, "test-model", "sk-CANARY")).unwrap();
    (fake, model)
}

fn request() -> ModelRequest {
    ModelRequest {
        system: "You deploy services.".into(),
        messages: Arc::new(vec![Message::user("Deploy api")]),
        tools: vec![Arc::new(ToolSpec {
            name: "deploy".into(),
            description: "Deploys a service.".into(),
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "service": { "type": "string" },
                    "labels": { "type": "object", "propertyNames": { "minLength": 1 } },
                },
                "required": ["service"],
            }),
        })],
    }
}

async fn answer(model: &OpenAiModel) -> Result<eve_tools::session::ModelResponse, ModelError> {
    collect(model.stream(&request()).await?, |_| {}).await
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_from_pieces_cut_anywhere() {
    let events = vec![
        chunk(json!({ "role": "assistant", "content": "" }), None),
        chunk(json!({ "content": "Deploying " }), None),
        chunk(json!({ "content": "api." }), None),
        chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "call_1", "type": "function",
                                     "function": { "name": "deploy", "arguments": "{\"serv" } }] }),
            None,
        ),
        chunk(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "ice\":\"api\"}" } }] }), None),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_owned(),
    ];
    // Every cut: one byte at a time, a few bytes, whole events.
    for piece in [1, 7, 4096] {
        let (fake, model) = fake(vec![Reply::Events(events.clone(), piece)]).await;
        let response = answer(&model).await.unwrap();
        assert_eq!(response.text, "Deploying api.");
        assert_eq!(response.tool_calls.len(), 1);
        let call = &response.tool_calls[0];
        assert_eq!(
            (call.id.as_str(), call.name.as_str(), &call.arguments),
            ("call_1", "deploy", &json!({"service": "api"}))
        );
        assert_eq!(response.finish_reason, eve_tools::session::model::FinishReason::ToolCalls);

        let (headers, body) = fake.requests().remove(0);
        assert_eq!(headers["authorization"], "Bearer sk-CANARY");
        assert_eq!((body["model"].as_str(), body["stream"].as_bool()), (Some("test-model"), Some(true)));
        assert_eq!(body["messages"][0], json!({ "role": "system", "content": "You deploy services." }));
        assert_eq!(body["messages"][1], json!({ "role": "user", "content": "Deploy api" }));
        let parameters = &body["tools"][0]["function"]["parameters"];
        assert_eq!(body["tools"][0]["type"], "function");
        assert!(parameters.get("$schema").is_none(), "no dialect");
        assert!(!parameters.to_string().contains("propertyNames"), "OpenAI refuses propertyNames");
        assert_eq!(parameters["required"], json!(["service"]));
    }
}

#[tokio::test]
async fn parallel_tool_calls_are_told_apart_by_index() {
    let events = vec![
        chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "a", "function": { "name": "deploy", "arguments": "" } }] }),
            None,
        ),
        chunk(
            json!({ "tool_calls": [{ "index": 1, "id": "b", "function": { "name": "deploy", "arguments": "{\"service\":" } }] }),
            None,
        ),
        chunk(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "{\"service\":\"api\"}" } }] }), None),
        chunk(json!({ "tool_calls": [{ "index": 1, "function": { "arguments": "\"web\"}" } }] }), None),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_owned(),
    ];
    let (_fake, model) = fake(vec![Reply::Events(events, 9)]).await;
    let response = answer(&model).await.unwrap();
    let calls: Vec<_> = response.tool_calls.iter().map(|call| (call.id.as_str(), call.arguments.clone())).collect();
    assert_eq!(calls, [("a", json!({"service": "api"})), ("b", json!({"service": "web"}))]);
}

#[tokio::test]
async fn refusals_are_retried_or_fail_clearly_and_broken_answers_are_kept_from_the_journal() {
    let cut = vec![chunk(json!({ "content": "half an ans" }), None)];
    let not_json = vec![chunk(json!({ "content": "fine" }), None), "{not json".to_owned()];
    let bad_arguments = vec![
        chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "c", "function": { "name": "deploy", "arguments": "{\"a\":" } }] }),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_owned(),
    ];
    let (_fake, model) = fake(vec![
        Reply::Status(429, vec![("retry-after", "2")], r#"{"error":{"message":"Rate limit reached"}}"#),
        Reply::Status(503, vec![], "upstream down"),
        Reply::Status(401, vec![], r#"{"error":{"message":"Incorrect API key provided"}}"#),
        Reply::Status(404, vec![], r#"{"error":{"message":"The model `nope` does not exist"}}"#),
        Reply::Events(cut, 5),
        Reply::Events(not_json, 5),
        Reply::Events(bad_arguments, 5),
        Reply::Broken(vec![chunk(json!({ "content": "so far" }), None)]),
    ])
    .await;
    match answer(&model).await.unwrap_err() {
        ModelError::Unavailable { message, retry_after } => {
            assert_eq!(retry_after, Some(Duration::from_secs(2)));
            assert!(message.contains("429") && message.contains("Rate limit reached"), "{message}");
        }
        other => panic!("a 429 is retried: {other:?}"),
    }
    assert!(matches!(answer(&model).await.unwrap_err(), ModelError::Unavailable { retry_after: None, .. }));
    let key = answer(&model).await.unwrap_err().to_string();
    assert!(key.contains("Incorrect API key provided") && key.contains("check OPENAI_API_KEY"), "{key}");
    assert!(!key.contains("CANARY"), "the key is never quoted");
    let missing = answer(&model).await.unwrap_err().to_string();
    assert!(missing.contains("check OPENAI_BASE_URL and EVE_MODEL"), "{missing}");
    let cut = answer(&model).await.unwrap_err();
    assert!(matches!(&cut, ModelError::Malformed(message) if message.contains("cut off")), "{cut:?}");
    assert!(matches!(answer(&model).await.unwrap_err(), ModelError::Malformed(_)));
    let arguments = answer(&model).await.unwrap_err().to_string();
    assert!(arguments.contains("tool call 0 (`deploy`) are not JSON"), "{arguments}");
    // A connection closed mid-answer may go better next time: retried, not failed.
    let broken = answer(&model).await.unwrap_err();
    assert!(matches!(&broken, ModelError::Unavailable { message, .. } if message.contains("broke")), "{broken:?}");

    // Nothing listens: unavailable, naming the endpoint.
    let nobody = OpenAiModel::new(OpenAiConfig::new("http://127.0.0.1:9/v1", "m", "k")).unwrap();
    let error = answer(&nobody).await.unwrap_err();
    assert!(matches!(&error, ModelError::Unavailable { message, .. } if message.contains("127.0.0.1:9")), "{error:?}");
}

/// A service's name.
#[derive(Deserialize, JsonSchema)]
pub struct Service {
    /// The service.
    pub service: String,
}

/// Says how a service is, at once.
#[tool]
pub async fn health(input: Service) -> Result<String, ToolError> {
    Ok(format!("{} is healthy", input.service))
}

async fn read_until(
    events: &mut futures::stream::BoxStream<'static, Result<SessionEvent, eve_tools::session::Error>>,
    name: &str,
) -> Vec<SessionEvent> {
    let mut read = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap_or_else(|_| {
                panic!("no {name}; read {:?}", read.iter().map(|e: &SessionEvent| e.name.clone()).collect::<Vec<_>>())
            })
            .unwrap()
            .unwrap();
        let done = event.name == name;
        read.push(event);
        if done {
            return read;
        }
    }
}

/// A session on the real adapter: the first answer is a 429 that asks for 3 s, so the model step
/// waits on the runtime's clock (durably) and tries again; the model calls a tool, reads its
/// result under the call's id, and answers.
#[tokio::test]
async fn a_session_talks_to_an_openai_compatible_server_and_waits_out_a_rate_limit() {
    let call = vec![
        chunk(
            json!({ "tool_calls": [{ "index": 0, "id": "call_h", "function": { "name": "health", "arguments": "{\"service\":\"api\"}" } }] }),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_owned(),
    ];
    let answer = vec![chunk(json!({ "content": "api is healthy." }), Some("stop")), "[DONE]".to_owned()];
    let (fake, model) = fake(vec![
        Reply::Status(429, vec![("retry-after", "3")], r#"{"error":{"message":"slow down"}}"#),
        Reply::Events(call, 3),
        Reply::Events(answer, 3),
    ])
    .await;
    let world = World::in_memory();
    let runtime = world.builder(16).model(model).build().unwrap();
    let session = runtime.session(SessionOptions::new().system("You watch services.").tools(["health"])).await.unwrap();
    let mut events = session.events(0);
    session.send("How is api?").await.unwrap();

    // Only the 429 so far: the retry waits for the clock.
    read_until(&mut events, "turn.started").await;
    for _ in 0..50 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fake.requests().len(), 1, "no second request before Retry-After has passed");
    world.clock.advance(Duration::from_secs(3));

    let read = read_until(&mut events, "turn.completed").await;
    let completed = read.last().unwrap();
    assert_eq!(completed.field("status"), Some("completed"), "{completed:?}");
    let said = read.iter().rev().find(|event| event.name == "message.completed").unwrap();
    assert_eq!(said.field("text"), Some("api is healthy."));

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2].1["messages"].as_array().unwrap().clone();
    let assistant = messages.iter().find(|message| message["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "health");
    let id = assistant["tool_calls"][0]["id"].as_str().unwrap();
    let tool = messages.iter().find(|message| message["role"] == "tool").unwrap();
    assert_eq!((tool["tool_call_id"].as_str(), tool["content"].as_str()), (Some(id), Some("api is healthy")));
}

/// A 500 retries the model step after the step's backoff (1 s, on the runtime's clock); the
/// second answer goes through.
#[tokio::test]
async fn a_server_error_then_success_completes_the_turn() {
    let answer = vec![chunk(json!({ "content": "All good." }), Some("stop")), "[DONE]".to_owned()];
    let (fake, model) = fake(vec![Reply::Status(500, vec![], "oops"), Reply::Events(answer, 64)]).await;
    let world = World::in_memory();
    let runtime = world.builder(16).model(model).build().unwrap();
    let session = runtime.session(SessionOptions::new()).await.unwrap();
    let mut events = session.events(0);
    session.send("Status?").await.unwrap();
    read_until(&mut events, "turn.started").await;
    while fake.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    world.clock.advance(Duration::from_secs(1));
    let read = read_until(&mut events, "turn.completed").await;
    assert_eq!(read.last().unwrap().field("status"), Some("completed"));
    assert_eq!(read.iter().rev().find(|e| e.name == "message.completed").unwrap().field("text"), Some("All good."));
    assert_eq!(fake.requests().len(), 2);
}

/// A cut-off answer fails the turn with the reason, and the model step journals no result: the
/// journal holds the step's failure, not half an answer.
#[tokio::test]
async fn a_cut_off_answer_fails_the_turn_and_journals_no_result() {
    let cut = vec![chunk(json!({ "content": "The deploy of api is " }), None)];
    let (_fake, model) = fake(vec![Reply::Events(cut, 4)]).await;
    let world = World::in_memory();
    let runtime = world.builder(16).model(model).build().unwrap();
    let session = runtime.session(SessionOptions::new().tools(["health"])).await.unwrap();
    let mut events = session.events(0);
    session.send("How is api?").await.unwrap();
    let read = read_until(&mut events, "turn.completed").await;
    let completed = read.last().unwrap();
    assert_eq!(completed.field("status"), Some("failed"));
    assert!(completed.field("error").unwrap().contains("the answer was cut off"), "{completed:?}");
    assert!(read.iter().all(|event| event.name != "message.completed"), "no half answer reached the feed");
    let journal = serde_json::to_string(&runtime.journal(session.id()).await.unwrap().entries).unwrap();
    assert!(!journal.contains("The deploy of api is"), "half an answer was journaled");
}
