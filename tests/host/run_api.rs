//! The run API and the runtime API as a caller meets them: run ids that name one run of one tool
//! with one input, inputs checked against the tool's JSON Schema before a run starts, refusals
//! that say what was wrong (a finished run's cancel, an option for a text question, a hook
//! payload of the wrong type), errors that name a real field, and one JSON dialect (camelCase,
//! dotted event names, ISO 8601 times) across the event stream, the manifest and the run API.

use std::time::Duration;

use eve_tests::http::{Seen, serve};
use eve_tools::prelude::*;
use eve_tools::sample::Sampling;
use eve_tools::{Answer, AnswerError, Error, FormOutcome, RunId, SampleOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// One line of an order.
#[derive(Deserialize, JsonSchema)]
pub struct Line {
    /// The product.
    #[allow(dead_code, reason = "a field of the schema inputs are checked against; the tool never reads it")]
    pub sku: String,
}

/// An order to reserve.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// How many of each line; at least one.
    #[schemars(range(min = 1))]
    quantity: u32,
    /// What to reserve.
    lines: Vec<Line>,
}

/// Reserves an order after a day.
#[workflow_tool]
pub async fn reserve(order: Order, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    sleep(Duration::from_secs(86_400)).await?;
    Ok(format!("{} x {}", order.quantity, order.lines.len()))
}

/// Prices an order at once.
#[tool]
pub async fn price(order: Order) -> Result<u32, ToolError> {
    Ok(order.quantity * 100)
}

/// Who to greet.
#[derive(Deserialize, JsonSchema)]
pub struct Greeting {
    name: String,
}

/// Greets after a day.
#[workflow_tool]
pub async fn greet_later(input: Greeting, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    sleep(Duration::from_secs(86_400)).await?;
    Ok(format!("hello, {}", input.name))
}

/// Greets at once.
#[workflow_tool]
pub async fn greet_at_once(input: Greeting, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(format!("hello, {}", input.name))
}

/// A payment as the payment provider posts it.
#[derive(Debug, Deserialize)]
pub struct Payment {
    /// Cents paid.
    paid: u64,
}

/// Waits for a payment on the hook `pay-{run id}`.
#[workflow_tool]
pub async fn await_payment(_input: Nothing, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<Payment>(format!("pay-{}", ctx.run_id()));
    Ok(hook.recv().await?.paid)
}

/// Asks for a reason in free text.
#[workflow_tool]
pub async fn ask_why(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    Ok(ctx.ask(Ask::text("Why?")).await)
}

fn run_id(id: &str) -> RunId {
    id.parse().unwrap()
}

#[tokio::test]
async fn an_input_is_checked_against_the_tools_schema_before_anything_starts() {
    let served = serve().await;
    let runtime = &served.runtime;
    // (input, the field at fault, words the message must contain)
    let refusals = [
        (json!({ "quantity": 0, "lines": [] }), "quantity", "minimum of 1"),
        (json!({ "quantity": 2, "lines": [{ "sku": 7 }] }), "lines[0].sku", "not of type \"string\""),
        (json!({ "lines": [] }), "quantity", "required"),
        (json!({ "quantity": 1, "lines": [], "rush": true }), "rush", "a field `rush` that the tool does not take"),
        (json!({ "quantity": 1, "lines": [{ "sku": "a", "size": "L" }] }), "lines[0].size", "remove it"),
    ];
    for (input, field, words) in &refusals {
        let error = runtime.start("reserve", input.clone()).await.unwrap_err();
        let Error::InvalidInput { field: found, .. } = &error else { panic!("{input}: {error:?}") };
        assert_eq!(found.as_deref(), Some(*field), "{input}: {error}");
        assert!(error.to_string().contains(words), "{input}: {error}");
        let error = runtime.call_tool("price", input.clone()).await.unwrap_err();
        assert!(matches!(&error, Error::InvalidInput { field: Some(found), .. } if found == field), "{error:?}");

        let start = served.client.post(served.url("/v1/tools/reserve/runs")).json(&json!({ "input": input }));
        let seen = Seen::of(start.send().await.unwrap()).await;
        let (message, found) = seen.error();
        assert_eq!((seen.status, found), (422, json!(format!("input.{field}"))), "{input}: {message}");
        assert!(message.contains(words), "{input}: {message}");
    }
    assert!(runtime.runs(None, 10).await.unwrap().is_empty(), "no run started");
    let run = runtime.start("reserve", json!({ "quantity": 1, "lines": [{ "sku": "a" }] })).await.unwrap();
    assert_eq!(runtime.runs(None, 10).await.unwrap()[0].id, *run.id());
}

#[tokio::test]
async fn a_run_id_names_one_run_of_one_tool_with_one_input() {
    let served = serve().await;
    let runtime = &served.runtime;
    let ada = json!({ "name": "Ada" });
    runtime.start_with_id(run_id("greeting-1"), "greet_later", ada.clone()).await.unwrap();
    let again = runtime.start_with_id(run_id("greeting-1"), "greet_later", ada.clone()).await.unwrap();
    assert_eq!(again.id().as_str(), "greeting-1", "the same call is the same run");

    let other_input = runtime.start_with_id(run_id("greeting-1"), "greet_later", json!({ "name": "Grace" })).await;
    let error = other_input.unwrap_err();
    assert!(matches!(&error, Error::RunIdTaken { .. }), "{error:?}");
    assert!(error.to_string().contains("with another input"), "{error}");
    let other_tool = runtime.start_with_id(run_id("greeting-1"), "greet_at_once", ada.clone()).await;
    let error = other_tool.unwrap_err().to_string();
    assert!(error.contains("`greet_later`") && error.contains("`greet_at_once`"), "{error}");
    assert_eq!(runtime.runs(None, 10).await.unwrap().len(), 1, "nothing else started");

    let start = |tool: &str, input: &Value| {
        let url = served.url(&format!("/v1/tools/{tool}/runs"));
        served.client.post(url).json(&json!({ "input": input, "runId": "greeting-1" }))
    };
    let same = Seen::of(start("greet_later", &ada).send().await.unwrap()).await;
    assert_eq!((same.status, same.json()), (201, json!({ "runId": "greeting-1" })));
    for (tool, input) in [("greet_at_once", &ada), ("greet_later", &json!({ "name": "Grace" }))] {
        let seen = Seen::of(start(tool, input).send().await.unwrap()).await;
        let (message, field) = seen.error();
        assert_eq!((seen.status, field), (409, json!("runId")), "{tool} {input}: {message}");
        assert!(message.contains("`greet_later`") && message.contains(&format!("`{tool}`")), "{message}");
    }
}

#[tokio::test]
async fn cancelling_a_finished_run_is_a_conflict() {
    let served = serve().await;
    let run = served.runtime.start("greet_at_once", json!({ "name": "Ada" })).await.unwrap();
    run.outcome().await.unwrap();
    let cancel = served.client.post(served.url(&format!("/v1/runs/{}/cancel", run.id())));
    let seen = Seen::of(cancel.send().await.unwrap()).await;
    let (message, _) = seen.error();
    assert_eq!(seen.status, 409, "{message}");
    assert!(message.contains("already completed"), "{message}");
}

#[tokio::test]
async fn a_text_question_answered_with_an_option_says_it_takes_text() {
    let served = serve().await;
    let run = served.runtime.start("ask_why", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let error = served.runtime.answer(run.id(), "ask-0", Answer::option("yes")).await.unwrap_err();
    assert!(matches!(error, Error::Answer(AnswerError::TextOnly)), "{error:?}");
    assert!(error.to_string().contains("takes text"), "{error}");
    let url = served.url(&format!("/v1/runs/{}/questions/ask-0", run.id()));
    let seen = Seen::of(served.client.post(url).json(&json!({ "optionId": "yes" })).send().await.unwrap()).await;
    let (message, field) = seen.error();
    assert_eq!((seen.status, field), (422, json!("optionId")), "{message}");
    assert!(message.contains("takes text") && message.contains("`text`") && !message.contains("()"), "{message}");
}

/// A release, asked as a form.
#[derive(Deserialize, JsonSchema)]
pub struct Release {
    /// The version.
    version: String,
    /// How many replicas; one to nine.
    #[schemars(range(min = 1, max = 9))]
    replicas: u8,
}

/// Asks for a release as a form and says what came of it.
#[workflow_tool]
pub async fn ask_release(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(match ctx.ask_form::<Release>("Release what?")?.await {
        FormOutcome::Answered(release) => format!("{} x{}", release.version, release.replicas),
        FormOutcome::Declined => "declined".into(),
        FormOutcome::Cancelled | FormOutcome::Unavailable => "nobody answered".into(),
    })
}

/// Over the run API a form is listed with its schema and answered with `value`; a value that
/// does not fit is a 422 naming the field inside `value`; `action` declines it.
#[tokio::test]
async fn a_form_is_answered_over_the_run_api_with_a_value() {
    let served = serve().await;
    let post = |run: &RunId, body: Value| {
        let url = served.url(&format!("/v1/runs/{run}/questions/ask-0"));
        let request = served.client.post(url).json(&body);
        async move { Seen::of(request.send().await.unwrap()).await }
    };
    let run = served.runtime.start("ask_release", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let listed =
        Seen::of(served.client.get(served.url(&format!("/v1/runs/{}/questions", run.id()))).send().await.unwrap())
            .await;
    let request = &listed.json()["questions"][0]["request"];
    assert_eq!(request["display"], "form");
    assert_eq!(
        request["schema"]["properties"]["replicas"],
        json!({"type": "integer", "minimum": 1, "maximum": 9, "description": "How many replicas; one to nine."})
    );
    let seen = post(run.id(), json!({ "value": { "version": "1.2", "replicas": 12 } })).await;
    let (message, field) = seen.error();
    assert_eq!((seen.status, field), (422, json!("value.replicas")), "{message}");
    assert_eq!(message, "`value` does not fit the form: field `replicas` must be at most 9, not 12");
    let seen = post(run.id(), json!({ "text": "1.2" })).await;
    assert_eq!(seen.status, 422, "a form takes a value: {}", seen.error().0);
    let seen = post(run.id(), json!({ "value": { "version": "1.2", "replicas": 3 } })).await;
    assert_eq!(seen.status, 204);
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!("1.2 x3")));

    let declined = served.runtime.start("ask_release", json!({})).await.unwrap();
    declined.parked().await.unwrap();
    assert_eq!(post(declined.id(), json!({ "action": "decline" })).await.status, 204);
    assert_eq!(declined.outcome().await.unwrap().output(), Some(&json!("declined")));
}

/// Asks the client's model to name a release, and says what came of it.
#[workflow_tool]
pub async fn name_release(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let request = Sampling::user("Name the release.", 20).system("One word.");
    Ok(match ctx.sample(request).await {
        SampleOutcome::Completed(completion) => format!("{} by {}", completion.text().unwrap_or("?"), completion.model),
        SampleOutcome::Declined => "declined".into(),
        SampleOutcome::Cancelled | SampleOutcome::Unavailable => "nobody answered".into(),
    })
}

/// Over the run API a request for the client's model is listed with what it sends the model
/// and answered with a completion as `value`; anything else is a 422 at `value` saying what a
/// completion is; `action` declines it.
#[tokio::test]
async fn a_request_for_the_clients_model_is_answered_over_the_run_api_with_a_completion() {
    let served = serve().await;
    let post = |run: &RunId, body: Value| {
        let url = served.url(&format!("/v1/runs/{run}/questions/ask-0"));
        let request = served.client.post(url).json(&body);
        async move { Seen::of(request.send().await.unwrap()).await }
    };
    let run = served.runtime.start("name_release", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let listed =
        Seen::of(served.client.get(served.url(&format!("/v1/runs/{}/questions", run.id()))).send().await.unwrap())
            .await;
    let request = &listed.json()["questions"][0]["request"];
    assert_eq!(request["display"], "sampling");
    assert_eq!(
        request["sampling"],
        json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "Name the release."}}],
            "systemPrompt": "One word.",
            "maxTokens": 20,
        })
    );
    let seen = post(run.id(), json!({ "text": "Aurora" })).await;
    let (message, field) = seen.error();
    assert_eq!((seen.status, field), (422, json!("value")), "{message}");
    assert!(
        message.starts_with("this request is for the client's model: answer with `value`, its completion"),
        "{message}"
    );
    let seen = post(run.id(), json!({ "value": { "role": "assistant", "content": "Aurora", "model": "m" } })).await;
    let (message, field) = seen.error();
    assert_eq!((seen.status, field), (422, json!("value")), "{message}");
    assert!(message.starts_with("`value` is not a completion at `content`"), "{message}");
    let completion = json!({ "role": "assistant", "content": { "type": "text", "text": "Aurora" }, "model": "ada" });
    assert_eq!(post(run.id(), json!({ "value": completion })).await.status, 204);
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!("Aurora by ada")));

    let declined = served.runtime.start("name_release", json!({})).await.unwrap();
    declined.parked().await.unwrap();
    assert_eq!(post(declined.id(), json!({ "action": "decline" })).await.status, 204);
    assert_eq!(declined.outcome().await.unwrap().output(), Some(&json!("declined")));
}

#[tokio::test]
async fn a_hook_payload_of_the_wrong_type_is_refused_at_delivery() {
    let served = serve().await;
    let run = served.runtime.start("await_payment", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let token = format!("pay-{}", run.id());
    let error = served.runtime.resume_hook(&token, json!({ "paid": "all of it" })).await.unwrap_err();
    assert!(matches!(&error, Error::InvalidPayload { field: Some(field), .. } if field == "paid"), "{error:?}");
    assert!(error.to_string().contains("expected u64"), "{error}");

    let url = served.url(&format!("{}{token}", eve_tools::http::HOOK_PATH));
    let seen = Seen::of(served.client.post(&url).json(&json!({ "amount": 5 })).send().await.unwrap()).await;
    let (message, field) = seen.error();
    assert_eq!((seen.status, field), (422, json!("paid")), "{message}");
    assert!(message.contains("missing field `paid`"), "{message}");

    let accepted = Seen::of(served.client.post(&url).json(&json!({ "paid": 500 })).send().await.unwrap()).await;
    assert_eq!(accepted.status, 202);
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!(500)), "the refusals changed nothing");
}

/// Every key of a public JSON value is camelCase, except inside the values users write (inputs,
/// outputs, payloads, JSON Schemas): those are theirs.
fn assert_camel_case(value: &Value, at: &str) {
    const USERS: [&str; 5] = ["input", "inputSchema", "output", "payload", "value"];
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let camel = key.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && key.chars().all(|c| c.is_ascii_alphanumeric());
                assert!(camel, "`{at}.{key}` is not camelCase");
                if !USERS.contains(&key.as_str()) {
                    assert_camel_case(inner, &format!("{at}.{key}"));
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| assert_camel_case(item, at)),
        _ => {}
    }
}

fn assert_iso(value: &Value, what: &str) {
    let text = value.as_str().unwrap_or_else(|| panic!("{what} is not a string: {value}"));
    assert!(humantime_like(text), "{what} is not ISO 8601: {text}");
}

/// `2023-11-14T22:13:20.000Z`.
fn humantime_like(text: &str) -> bool {
    let bytes = text.as_bytes();
    text.len() == 24 && bytes[4] == b'-' && bytes[10] == b'T' && text.ends_with('Z')
}

#[tokio::test]
async fn events_the_manifest_and_the_run_api_speak_one_json_dialect() {
    let served = serve().await;
    let runtime = &served.runtime;
    let mut events = runtime.events();
    let run = runtime.start("ask_why", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.answer(run.id(), "ask-0", Answer::text("because")).await.unwrap();
    run.outcome().await.unwrap();
    let later = runtime.start("greet_later", json!({ "name": "Ada" })).await.unwrap();
    later.parked().await.unwrap();
    runtime.cancel(later.id(), "changed my mind").await.unwrap();
    later.outcome().await.unwrap();

    let seen: Vec<Value> =
        std::iter::from_fn(|| events.try_recv().ok()).map(|event| serde_json::to_value(event).unwrap()).collect();
    let names: Vec<&str> = seen.iter().map(|event| event["event"].as_str().unwrap()).collect();
    for expected in ["run.started", "input.requested", "input.resolved", "timer.scheduled", "cancel.requested"] {
        assert!(names.contains(&expected), "no {expected} in {names:?}");
    }
    for (event, name) in seen.iter().zip(&names) {
        let (kind, what) = name.split_once('.').unwrap_or_else(|| panic!("`{name}` is not dotted"));
        assert!(!kind.is_empty() && what.chars().all(|c| c.is_ascii_alphabetic()), "`{name}`");
        assert_camel_case(event, name);
        assert!(event["runId"].is_string(), "{name} names its run as `runId`: {event}");
    }
    let resolved = &seen[names.iter().position(|name| *name == "input.resolved").unwrap()];
    assert_eq!(resolved["outcome"], json!({ "status": "answered", "text": "because" }));
    let scheduled = &seen[names.iter().position(|name| *name == "timer.scheduled").unwrap()];
    assert_iso(&scheduled["deadline"], "timer.scheduled's deadline");
    let finished = seen.iter().filter(|event| event["event"] == "run.finished").count();
    assert_eq!(finished, 2, "{names:?}");

    let manifest = serde_json::to_value(eve_tools::manifest()).unwrap();
    assert_camel_case(&manifest, "manifest");
    let tool = manifest["tools"].as_array().unwrap().iter().find(|tool| tool["name"] == "reserve").unwrap();
    assert!(tool["workflowId"].as_str().unwrap().ends_with("::reserve"), "{tool}");
    assert_eq!(tool["inputSchema"]["properties"]["quantity"]["minimum"], 1);

    let status = served.client.get(served.url(&format!("/v1/runs/{}", run.id()))).send().await.unwrap();
    let view = Seen::of(status).await.json();
    assert_camel_case(&view, "GET /v1/runs/{run}");
    assert_iso(&view["createdAt"], "createdAt");
    assert_eq!(view["outcome"]["output"], json!({ "status": "answered", "text": "because" }));
}

/// A tool that fails, so its failure shows in the run API.
#[workflow_tool]
pub async fn fail_on_purpose(_input: Nothing, _ctx: &WorkflowCtx) -> Result<(), ToolError> {
    Err(ToolError::new("the warehouse is closed"))
}

#[tokio::test]
async fn a_failure_reads_as_camel_case_and_refusals_always_name_a_real_field() {
    let served = serve().await;
    let run = served.runtime.start("fail_on_purpose", json!({})).await.unwrap();
    run.outcome().await.unwrap();
    let status = served.client.get(served.url(&format!("/v1/runs/{}", run.id()))).send().await.unwrap();
    let view = Seen::of(status).await.json();
    assert_eq!(view["outcome"]["failure"], json!({ "kind": "tool", "message": "the warehouse is closed" }));

    // Bodies broken in every way the decoder reports: a field is named by its path, or is null.
    let bodies = [
        r#"{"input": {"name": "Ada"}, "runId": 7}"#,
        r#"{"input": {"name": "Ada"}, "principal": ["a"]}"#,
        r#"{"input": {"name": [tru]}}"#,
        r#"{"input": {"name": "Ada"}"#,
        r#"[1, 2"#,
        r#"{"input": {"name": "Ada"}} trailing"#,
        r#"{"inputs": {}}"#,
    ];
    for body in bodies {
        let start = served.client.post(served.url("/v1/tools/greet_at_once/runs"));
        let seen = Seen::of(start.header("content-type", "application/json").body(body).send().await.unwrap()).await;
        let (message, field) = seen.error();
        assert!(matches!(seen.status, 400 | 422), "{body}: {message}");
        if let Some(field) = field.as_str() {
            assert!(!field.contains('?') && !field.is_empty(), "{body}: field {field:?} ({message})");
        }
    }
}

#[tokio::test]
async fn an_event_name_is_dotted_over_server_sent_events_too() {
    let served = serve().await;
    let mut response = served.client.get(served.url("/v1/events")).send().await.unwrap();
    served.runtime.start("greet_at_once", json!({ "name": "Ada" })).await.unwrap().outcome().await.unwrap();
    let mut text = String::new();
    while !text.contains("event: run.finished") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk()).await.unwrap().unwrap();
        text.push_str(std::str::from_utf8(&chunk.expect("the stream stays open")).unwrap());
    }
    for line in text.lines().filter_map(|line| line.strip_prefix("event: ")) {
        assert!(line.contains('.'), "`{line}` is not dotted: {text}");
    }
    assert!(text.contains("event: run.started") && text.contains("\"runId\""), "{text}");
}
