//! The HTTP server, driven over loopback as outside systems and channels drive it: webhooks with
//! their three kinds of response, buffered and deduplicated deliveries (racing ones too), hook
//! resumes, answers to asks and their refusals, sign-in callbacks, the run API, the event stream,
//! and `host serve`.

use std::time::{Duration, Instant};

use eve_tests::http::{Seen, hand_over, handed_over, serve, serve_with};
use eve_tests::oauth_server::{browser, open_sign_in_link};
use eve_tools::http::{AUTH_CALLBACK_PATH, HOOK_PATH, WEBHOOK_PATH};
use eve_tools::prelude::*;
use eve_tools::{AccessToken, AuthError, AuthProvider, Principal, RunEvent, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// How many requests to wait for.
#[derive(Deserialize, JsonSchema)]
pub struct Count {
    count: usize,
}

/// Receives `count` requests on a default webhook and returns them as the body saw them.
#[workflow_tool]
pub async fn collect_requests(input: Count, ctx: &WorkflowCtx) -> Result<Vec<WebhookRequest>, ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    let mut requests = Vec::new();
    for _ in 0..input.count {
        requests.push(webhook.recv().await?);
    }
    Ok(requests)
}

/// Like `collect_requests`, but only starts reading after an hour.
#[workflow_tool]
pub async fn collect_later(input: Count, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    sleep(Duration::from_secs(3600)).await?;
    let mut bodies = Vec::new();
    for _ in 0..input.count {
        bodies.push(webhook.recv().await?.body);
    }
    Ok(bodies)
}

/// Answers every request with the same `201`.
#[workflow_tool]
pub async fn thank_statically(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let thanks = WebhookResponse::status(201).header("x-thanks", "yes").body("thanks ✓");
    let mut webhook = create_webhook_with(Respond::Static(thanks));
    hand_over(ctx, webhook.url()).await?;
    Ok(webhook.recv().await?.body)
}

#[step]
async fn reply(ctx: &StepCtx, request: WebhookRequest) -> Result<bool, StepError> {
    let echo = request.json::<Value>().map_err(StepError::msg)?;
    let response = WebhookResponse::json(&json!({ "echo": echo, "method": request.method })).header("x-step", "reply");
    Ok(ctx.respond(&request, response))
}

/// Answers a request from a step, with what the request carried.
#[workflow_tool]
pub async fn reply_from_a_step(_input: Nothing, ctx: &WorkflowCtx) -> Result<bool, ToolError> {
    let mut webhook = create_webhook_with(Respond::Manual);
    hand_over(ctx, webhook.url()).await?;
    let request = webhook.recv().await?;
    Ok(reply(ctx, request).await?)
}

/// Takes a request on a manual webhook and never answers it.
#[workflow_tool]
pub async fn never_reply(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let mut webhook = create_webhook_with(Respond::Manual);
    hand_over(ctx, webhook.url()).await?;
    webhook.recv().await?;
    sleep(Duration::from_secs(3600)).await?;
    Ok(())
}

/// Waits for two payloads on the hook `order-{run id}`.
#[workflow_tool]
pub async fn await_payments(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<Value>, ToolError> {
    let mut hook = create_hook_with_token::<Value>(format!("order-{}", ctx.run_id()));
    Ok(vec![hook.recv().await?, hook.recv().await?])
}

/// Waits for a webhook request and an answer at once.
#[workflow_tool]
pub async fn webhook_and_question(_input: Nothing, ctx: &WorkflowCtx) -> Result<(String, AskOutcome), ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    let (request, answer) = futures::join!(webhook.recv(), ctx.ask(Ask::text("Why?")));
    Ok((request?.body, answer))
}

/// Waits for one payload on each of two hooks.
#[workflow_tool]
pub async fn two_hooks(_input: Nothing, ctx: &WorkflowCtx) -> Result<(Value, Value), ToolError> {
    let mut first = create_hook_with_token::<Value>(format!("first-{}", ctx.run_id()));
    let mut second = create_hook_with_token::<Value>(format!("second-{}", ctx.run_id()));
    let (first, second) = futures::join!(first.recv(), second.recv());
    Ok((first?, second?))
}

fn deploy_question() -> Ask {
    Ask::confirmation("Deploy api?").option("approve", "Deploy").primary().option("cancel", "Cancel")
}

/// Asks once.
#[workflow_tool]
pub async fn ask_to_deploy(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    Ok(ctx.ask(deploy_question()).await)
}

/// Asks two questions at once (`ask-0` and `ask-1`).
#[workflow_tool]
pub async fn ask_twice(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<AskOutcome>, ToolError> {
    let (first, second) = futures::join!(ctx.ask(Ask::text("Name?")), ctx.ask(deploy_question()));
    Ok(vec![first, second])
}

/// Who to greet.
#[derive(Deserialize, JsonSchema)]
pub struct Greeting {
    name: String,
}

/// Greets at once.
#[workflow_tool]
pub async fn greet_now(input: Greeting, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(format!("hello, {}", input.name))
}

/// Greets after a day.
#[workflow_tool]
pub async fn greet_tomorrow(input: Greeting, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    sleep(Duration::from_secs(86_400)).await?;
    Ok(format!("hello, {}", input.name))
}

static RECEIVED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Tells the test that the body has the request.
#[step]
async fn signal_received(_ctx: &StepCtx) -> Result<(), StepError> {
    RECEIVED.notify_one();
    Ok(())
}

/// Takes one request on a manual webhook and answers it once the hook `go-{run id}` is resumed;
/// ends when it is resumed a second time.
#[workflow_tool]
pub async fn reply_when_told(_input: Nothing, ctx: &WorkflowCtx) -> Result<bool, ToolError> {
    let mut webhook = create_webhook_with(Respond::Manual);
    let mut go = create_hook_with_token::<Value>(format!("go-{}", ctx.run_id()));
    hand_over(ctx, webhook.url()).await?;
    let request = webhook.recv().await?;
    signal_received(ctx).await?;
    go.recv().await?;
    let replied = reply(ctx, request).await?;
    go.recv().await?;
    Ok(replied)
}

/// Receives one request on a webhook whose step checks the caller's `Authorization` itself.
#[workflow_tool]
pub async fn collect_with_options(_input: Nothing, ctx: &WorkflowCtx) -> Result<WebhookRequest, ToolError> {
    let options = WebhookOptions::new(Respond::Accepted)
        .keep_header("Authorization")
        .redact_header("X-Partner-Secret")
        .redact_query_param("trace")
        .keep_query_param("code");
    let mut webhook = create_webhook_with(options);
    hand_over(ctx, webhook.url()).await?;
    Ok(webhook.recv().await?)
}

fn bodies(output: &Value) -> Vec<&str> {
    output.as_array().unwrap().iter().map(|request| request["body"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_default_webhook_answers_202_empty_and_the_body_sees_each_request_in_order() {
    let served = serve().await;
    let run = served.runtime.start("collect_requests", json!({ "count": 4 })).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    assert!(url.starts_with(&served.url(WEBHOOK_PATH)), "{url}");
    let client = &served.client;
    let sent = [
        client.post(&url).header("x-seq", "1").body("first"),
        client.put(format!("{url}?page=2&q=a%20b")).header("x-seq", "2").body("second ✓"),
        client.get(&url).header("X-Seq", "3"),
        client.post(&url).header("x-seq", "4").body(vec![0xff, 0x00, 0xfe]),
    ];
    for request in sent {
        let seen = Seen::of(request.send().await.unwrap()).await;
        assert_eq!((seen.status, seen.body.as_slice(), seen.header("content-type")), (202, &b""[..], None));
    }
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    let requests: Vec<WebhookRequest> = serde_json::from_value(output).unwrap();
    let methods: Vec<_> = requests.iter().map(|request| request.method.as_str()).collect();
    assert_eq!(methods, ["POST", "PUT", "GET", "POST"]);
    let seqs: Vec<_> = requests.iter().map(|request| request.header("x-seq").unwrap()).collect();
    assert_eq!(seqs, ["1", "2", "3", "4"], "in order, header names lowercased");
    assert_eq!((requests[0].text(), requests[1].text()), (Some("first"), Some("second ✓")));
    assert_eq!(requests[1].query, "page=2&q=a%20b");
    assert_eq!(requests[2].bytes(), b"");
    assert!(requests[3].binary && requests[3].bytes() == [0xff, 0x00, 0xfe], "binary bodies travel as base64");
    let deliveries: std::collections::HashSet<_> = requests.iter().map(|request| &request.delivery).collect();
    assert_eq!(deliveries.len(), 4, "every request has its own delivery id");
}

#[tokio::test]
async fn a_static_response_answers_the_request() {
    let served = serve().await;
    let run = served.runtime.start("thank_statically", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let seen = Seen::of(served.client.post(&url).body("payload").send().await.unwrap()).await;
    assert_eq!(seen.status, 201);
    assert_eq!(seen.header("x-thanks"), Some("yes"));
    assert_eq!(String::from_utf8(seen.body).unwrap(), "thanks ✓");
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("payload")));
}

#[tokio::test]
async fn a_step_writes_the_response_of_a_manual_webhook() {
    let served = serve().await;
    let run = served.runtime.start("reply_from_a_step", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let response = served.client.patch(&url).json(&json!({ "order": 7 })).send().await.unwrap();
    let seen = Seen::of(response).await;
    assert_eq!(seen.status, 200);
    assert_eq!((seen.header("x-step"), seen.header("content-type")), (Some("reply"), Some("application/json")));
    assert_eq!(seen.json(), json!({ "echo": { "order": 7 }, "method": "PATCH" }));
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(true)), "the request was still waiting");
}

#[tokio::test]
async fn a_manual_webhook_whose_step_never_responds_gets_504_after_the_response_timeout() {
    let timeout = Duration::from_millis(300);
    let served = serve_with(|runtime| runtime, |server| server.response_timeout(timeout)).await;
    let run = served.runtime.start("never_reply", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let started = Instant::now();
    let seen = Seen::of(served.client.post(&url).body("{}").send().await.unwrap()).await;
    let waited = started.elapsed();
    assert_eq!((seen.status, seen.body.len()), (504, 0));
    assert!(waited >= timeout && waited < Duration::from_secs(5), "waited {waited:?}");
}

#[tokio::test]
async fn a_delivery_that_arrives_before_the_body_awaits_it_is_buffered() {
    let served = serve().await;
    let run = served.runtime.start("collect_later", json!({ "count": 2 })).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    for body in ["early", "earlier still"] {
        let seen = Seen::of(served.client.post(&url).body(body).send().await.unwrap()).await;
        assert_eq!(seen.status, 202);
    }
    served.world.clock.advance(Duration::from_secs(3600));
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(["early", "earlier still"])));
}

#[tokio::test]
async fn a_repeated_idempotency_key_is_delivered_once() {
    let served = serve().await;
    let run = served.runtime.start("collect_requests", json!({ "count": 2 })).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let client = &served.client;
    let sent = [
        client.post(&url).header("idempotency-key", "evt_1").body("a"),
        client.post(&url).header("idempotency-key", "evt_1").body("a, retried"),
        client.post(&url).body("b"),
    ];
    for request in sent {
        assert_eq!(Seen::of(request.send().await.unwrap()).await.status, 202, "a repeat is answered the same way");
    }
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(bodies(&output), ["a", "b"]);
    let seen = Seen::of(client.post(&url).header("idempotency-key", "evt_1").send().await.unwrap()).await;
    assert_eq!(seen.status, 404, "the key does not outlive the webhook");
}

#[tokio::test]
async fn a_webhook_token_is_released_when_its_run_ends() {
    let served = serve().await;
    let run = served.runtime.start("collect_requests", json!({ "count": 1 })).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    assert_eq!(Seen::of(served.client.post(&url).send().await.unwrap()).await.status, 202);
    run.outcome().await.unwrap();
    let finished = Seen::of(served.client.post(&url).body("late").send().await.unwrap()).await;
    let unknown = served.url(&format!("{WEBHOOK_PATH}{}", eve_tools::secret::nonce()));
    let unknown = Seen::of(served.client.post(unknown).body("late").send().await.unwrap()).await;
    assert_eq!((finished.status, finished.body.len()), (404, 0));
    assert_eq!(finished, unknown, "a finished token and an unknown one look the same");
}

#[tokio::test]
async fn a_hook_resumes_by_token_over_http_once_per_idempotency_key() {
    let served = serve().await;
    let run = served.runtime.start("await_payments", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let hook = served.url(&format!("{HOOK_PATH}order-{}", run.id()));
    let client = &served.client;
    let sent = [
        client.post(&hook).header("idempotency-key", "pay-1").json(&json!({ "paid": 1 })),
        client.post(&hook).header("idempotency-key", "pay-1").json(&json!({ "paid": "again" })),
        client.post(&hook).json(&json!({ "paid": 2 })),
    ];
    for request in sent {
        let seen = Seen::of(request.send().await.unwrap()).await;
        assert_eq!((seen.status, seen.body.len()), (202, 0));
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!([{ "paid": 1 }, { "paid": 2 }])));
    let after = Seen::of(client.post(&hook).json(&json!({ "paid": 3 })).send().await.unwrap()).await;
    assert_eq!((after.status, after.body.len()), (404, 0), "the hook closed with its run");
}

#[tokio::test]
async fn idempotency_keys_are_scoped_to_the_hook_they_were_sent_to() {
    let served = serve().await;
    let client = &served.client;
    let run = served.runtime.start("webhook_and_question", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let request_id = open_questions(&served, run.id().as_str()).await[0]["requestId"].as_str().unwrap().to_owned();
    let keyed = client.post(&url).header("idempotency-key", request_id.as_str()).body("keyed like the question");
    assert_eq!(keyed.send().await.unwrap().status(), 202);
    let answered = post_answer(&served, run.id().as_str(), &request_id, json!({ "text": "because" })).await;
    assert_eq!(
        answered.status,
        204,
        "a key cannot take the answer's place: {}",
        String::from_utf8_lossy(&answered.body)
    );
    let outcome = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(outcome, json!(["keyed like the question", { "status": "answered", "text": "because" }]));

    let run = served.runtime.start("two_hooks", json!({})).await.unwrap();
    run.parked().await.unwrap();
    for hook in ["first", "second"] {
        let url = served.url(&format!("{HOOK_PATH}{hook}-{}", run.id()));
        let sent = client.post(url).header("idempotency-key", "evt_1").json(&json!(hook)).send().await.unwrap();
        assert_eq!(sent.status(), 202);
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(["first", "second"])), "both delivered");
}

#[tokio::test]
async fn concurrent_deliveries_under_one_key_are_observed_once() {
    let served = serve().await;
    let run = served.runtime.start("await_payments", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let hook = served.url(&format!("{HOOK_PATH}order-{}", run.id()));
    let sends = (0..16).map(|attempt| {
        let request = served.client.post(&hook).header("idempotency-key", "pay-1");
        async move { Seen::of(request.json(&json!({ "paid": attempt })).send().await.unwrap()).await.status }
    });
    let statuses = futures::future::join_all(sends).await;
    assert!(statuses.iter().all(|status| *status == 202), "each repeat is answered alike: {statuses:?}");
    let last = served.client.post(&hook).json(&json!({ "paid": "last" })).send().await.unwrap();
    assert_eq!(last.status(), 202);
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert!(output[0]["paid"].is_u64(), "one of the racing deliveries came first: {output}");
    assert_eq!(output[1], json!({ "paid": "last" }), "and the other fifteen were dropped as repeats");
}

#[tokio::test]
async fn concurrent_answers_to_one_question_accept_exactly_one() {
    let served = serve().await;
    let run = served.runtime.start("ask_to_deploy", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let (served, id) = (&served, run.id().as_str());
    let choices = ["approve", "cancel"].into_iter().cycle().take(16);
    let answers = choices.map(|choice| async move {
        let seen = post_answer(served, id, "ask-0", json!({ "optionId": choice })).await;
        (choice, seen.status)
    });
    let answers = futures::future::join_all(answers).await;
    let accepted: Vec<_> = answers.iter().filter(|(_, status)| *status == 204).collect();
    assert_eq!(accepted.len(), 1, "exactly one answer is accepted: {answers:?}");
    assert!(answers.iter().all(|(_, status)| matches!(status, 204 | 409)), "the rest are refused: {answers:?}");
    let outcome = run.outcome().await.unwrap();
    let expected = json!({ "status": "answered", "optionId": accepted[0].0 });
    assert_eq!(outcome, RunOutcome::Completed(expected), "the run sees the answer that was accepted");
}

async fn post_answer(served: &eve_tests::http::Served, run: &str, request: &str, body: Value) -> Seen {
    let url = served.url(&format!("/v1/runs/{run}/questions/{request}"));
    Seen::of(served.client.post(url).json(&body).send().await.unwrap()).await
}

async fn open_questions(served: &eve_tests::http::Served, run: &str) -> Vec<Value> {
    let response = served.client.get(served.url(&format!("/v1/runs/{run}/questions"))).send().await.unwrap();
    let seen = Seen::of(response).await;
    assert_eq!(seen.status, 200);
    seen.json()["questions"].as_array().unwrap().clone()
}

#[tokio::test]
async fn an_ask_is_answered_over_http_and_answers_that_do_not_fit_are_refused() {
    let served = serve().await;
    let run = served.runtime.start("ask_to_deploy", json!({})).await.unwrap();
    let other = served.runtime.start("ask_twice", json!({})).await.unwrap();
    run.parked().await.unwrap();
    other.parked().await.unwrap();
    let (id, other_id) = (run.id().as_str(), other.id().as_str());
    let questions = open_questions(&served, id).await;
    assert_eq!(questions.len(), 1);
    assert_eq!(questions[0]["requestId"], "ask-0");
    assert_eq!(questions[0]["request"]["prompt"], "Deploy api?");
    assert_eq!(questions[0]["request"]["options"][0]["id"], "approve");
    assert_eq!(open_questions(&served, other_id).await.len(), 2);

    // (request id, body, status, field, words the message must contain)
    let refusals: [(&str, Value, u16, Value, &str); 7] = [
        ("ask-1", json!({ "optionId": "approve" }), 409, Value::Null, "has no open question ask-1"),
        ("ask-99", json!({ "optionId": "approve" }), 409, Value::Null, "has no open question ask-99"),
        ("ask-0", json!({ "optionId": "yes" }), 422, json!("optionId"), "(approve, cancel)"),
        ("ask-0", json!({ "text": "sure" }), 422, json!("text"), "`text` is not accepted"),
        ("ask-0", json!({}), 422, Value::Null, "the answer is empty"),
        ("ask-0", json!({ "optionId": 5 }), 422, json!("optionId"), "invalid type: integer `5`, expected a string"),
        ("ask-0", json!({ "optionID": "approve" }), 422, json!("optionID"), "unknown field `optionID`"),
    ];
    for (request, body, status, field, words) in refusals {
        let seen = post_answer(&served, id, request, body.clone()).await;
        let (message, found) = seen.error();
        assert_eq!((seen.status, &found), (status, &field), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    let unknown_run = post_answer(&served, "run_nobody", "ask-0", json!({ "optionId": "approve" })).await;
    assert_eq!(unknown_run.status, 404);
    assert!(unknown_run.error().0.contains("no run with id run_nobody"));
    assert_eq!(open_questions(&served, id).await, questions, "refusals changed nothing");
    assert_eq!(open_questions(&served, other_id).await.len(), 2, "nor the other run");

    let answered = post_answer(&served, id, "ask-0", json!({ "optionId": "approve" })).await;
    assert_eq!((answered.status, answered.body.len()), (204, 0));
    let twice = post_answer(&served, id, "ask-0", json!({ "optionId": "cancel" })).await;
    assert_eq!(twice.status, 409, "answered once: {:?}", twice.error());
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "status": "answered", "optionId": "approve" })));
}

#[tokio::test]
async fn runs_start_report_their_status_and_cancel_over_http() {
    let served = serve().await;
    let client = &served.client;
    let start = |tool: &str, body: Value| client.post(served.url(&format!("/v1/tools/{tool}/runs"))).json(&body);
    let status = |run: &str| client.get(served.url(&format!("/v1/runs/{run}")));

    let body = json!({ "input": { "name": "Ada" }, "runId": "greeting-1", "principal": "ada@example.com" });
    let created = Seen::of(start("greet_tomorrow", body.clone()).send().await.unwrap()).await;
    assert_eq!((created.status, created.json()), (201, json!({ "runId": "greeting-1" })));
    assert_eq!(created.header("location"), Some("/v1/runs/greeting-1"));
    let again = Seen::of(start("greet_tomorrow", body).send().await.unwrap()).await;
    assert_eq!(again.json(), json!({ "runId": "greeting-1" }), "a run id names one run");
    let handle = served.runtime.handle("greeting-1".parse().unwrap());
    handle.parked().await.unwrap();
    let active = Seen::of(status("greeting-1").send().await.unwrap()).await.json();
    assert_eq!(
        (&active["runId"], &active["tool"], &active["status"]),
        (&json!("greeting-1"), &json!("greet_tomorrow"), &json!("parked")),
        "a run's status is told in the words `host runs` uses"
    );
    assert!(
        active.get("outcome").is_none()
            && active["createdAt"].as_str().is_some_and(|at| at.contains('T') && at.ends_with('Z')),
        "ISO 8601: {active}"
    );

    let cancel = client.post(served.url("/v1/runs/greeting-1/cancel")).json(&json!({ "reason": "changed my mind" }));
    assert_eq!(Seen::of(cancel.send().await.unwrap()).await.status, 202);
    assert_eq!(handle.outcome().await.unwrap(), RunOutcome::Cancelled);
    let cancelled = Seen::of(status("greeting-1").send().await.unwrap()).await.json();
    assert_eq!((&cancelled["status"], &cancelled["outcome"]), (&json!("cancelled"), &json!({ "status": "cancelled" })));

    let created = Seen::of(start("greet_now", json!({ "input": { "name": "Grace" } })).send().await.unwrap()).await;
    let run = created.json()["runId"].as_str().unwrap().to_owned();
    served.runtime.handle(run.parse().unwrap()).outcome().await.unwrap();
    let completed = Seen::of(status(&run).send().await.unwrap()).await.json();
    assert_eq!(completed["outcome"], json!({ "status": "completed", "output": "hello, Grace" }));
    // A finished run has nothing to cancel: a conflict, and it stays as it ended.
    let cancel = Seen::of(client.post(served.url(&format!("/v1/runs/{run}/cancel"))).send().await.unwrap()).await;
    assert_eq!(cancel.status, 409, "{:?}", cancel.error());
    assert_eq!(Seen::of(status(&run).send().await.unwrap()).await.json()["status"], "completed");

    // (tool, body, status, field, words the message must contain)
    let refusals: [(&str, Value, u16, Value, &str); 6] = [
        ("no_such_tool", json!({ "input": {} }), 404, Value::Null, "no tool named `no_such_tool`"),
        ("greet_now", json!({ "input": {} }), 422, json!("input.name"), "field `name` is required"),
        ("greet_now", json!({ "input": { "name": "Ada", "nom": "Ada" } }), 422, json!("input.nom"), "field `nom` that"),
        ("greet_now", json!({ "input": [] }), 422, json!("input"), "[] is not of type \"object\""),
        ("greet_now", json!({ "input": {}, "runId": "no spaces" }), 422, json!("runId"), "`runId` must be"),
        ("greet_now", json!({ "name": "Ada" }), 422, json!("name"), "unknown field `name`"),
    ];
    for (tool, body, status, field, words) in refusals {
        let seen = Seen::of(start(tool, body.clone()).send().await.unwrap()).await;
        let (message, found) = seen.error();
        assert_eq!((seen.status, &found), (status, &field), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    for path in ["/v1/runs/run_nobody", "/v1/runs/not%20a%20run"] {
        let seen = Seen::of(client.get(served.url(path)).send().await.unwrap()).await;
        assert_eq!(seen.status, 404, "{path}");
        assert!(seen.error().0.starts_with("no run with"), "{path}: {:?}", seen.error());
    }
    let cancel_unknown = client.post(served.url("/v1/runs/run_nobody/cancel")).send().await.unwrap();
    assert_eq!(Seen::of(cancel_unknown).await.status, 404);
}

/// A server-sent event stream, read event by event.
struct Events {
    response: reqwest::Response,
    buffer: String,
    /// The data of every event read so far.
    seen: Vec<Value>,
    /// The id of the last event that had one.
    last_id: Option<String>,
}

impl Events {
    /// Reads events until one named `name` arrives, and returns its data.
    async fn next(&mut self, name: &str) -> Value {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |key: &str| block.lines().find_map(|line| line.strip_prefix(key)).map(str::trim);
                let Some(data) = field("data:") else { continue }; // a keep-alive comment
                let data: Value = serde_json::from_str(data).unwrap();
                if let Some(id) = field("id:") {
                    self.last_id = Some(id.to_owned());
                }
                self.seen.push(data.clone());
                if field("event:") == Some(name) {
                    return data;
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk()).await;
            let chunk = chunk.expect("an event arrives").unwrap().expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test]
async fn the_event_stream_carries_input_requested_then_input_resolved() {
    let served = serve().await;
    let response = served.client.get(served.url("/v1/events?run=deploy-7")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = Events { response, buffer: String::new(), seen: Vec::new(), last_id: None };
    let other = served.runtime.start("ask_to_deploy", json!({})).await.unwrap();
    other.parked().await.unwrap();
    let start = served.client.post(served.url("/v1/tools/ask_to_deploy/runs"));
    let created = start.json(&json!({ "input": {}, "runId": "deploy-7" })).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let requested = events.next("input.requested").await;
    assert_eq!(requested["runId"], "deploy-7");
    assert_eq!(requested["requestId"], "ask-0");
    assert_eq!(requested["request"]["prompt"], "Deploy api?");
    let answered = post_answer(&served, "deploy-7", "ask-0", json!({ "optionId": "cancel" })).await;
    assert_eq!(answered.status, 204);
    let resolved = events.next("input.resolved").await;
    assert_eq!(resolved["outcome"], json!({ "status": "answered", "optionId": "cancel" }));
    let finished = events.next("run.finished").await;
    assert_eq!((&finished["runId"], &finished["status"]), (&json!("deploy-7"), &json!("completed")));
    assert!(events.seen.iter().all(|event| event["runId"] == "deploy-7"), "only the run asked for: {:?}", events.seen);
    assert!(events.seen.len() > 3, "the other events of the run came too: {:?}", events.seen);
}

/// How many steps to take.
#[derive(Deserialize, JsonSchema)]
pub struct Steps {
    steps: u32,
}

#[step]
async fn numbered(_ctx: &StepCtx, n: u32) -> Result<u32, StepError> {
    Ok(n)
}

/// Takes `steps` steps.
#[workflow_tool]
pub async fn many_steps(input: Steps, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    for n in 0..input.steps {
        numbered(ctx, n).await?;
    }
    Ok(input.steps)
}

/// A client of one run's event stream that reads nothing while the run takes 2,000 steps (far
/// more events than the runtime's event channel holds), then reads half, leaves, and comes back
/// with `Last-Event-ID`, gets each step's event once, in order, and the stream ends with the run.
#[tokio::test]
async fn a_run_event_stream_misses_nothing_however_slow_its_client_and_resumes_from_its_last_id() {
    let served = serve_with(|runtime| runtime.event_capacity(16), |server| server).await;
    let handle = served.runtime.start("many_steps", json!({ "steps": 2_000 })).await.unwrap();
    let url = served.url(&format!("/v1/events?run={}", handle.id()));
    let response = served.client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    handle.outcome().await.unwrap();
    let mut events = Events { response, buffer: String::new(), seen: Vec::new(), last_id: None };
    let mut steps = Vec::new();
    while steps.len() < 1_000 {
        steps.push(events.next("step.succeeded").await["op"].as_u64().unwrap());
    }
    let last_id = events.last_id.clone().expect("each event has an id");
    drop(events);
    let response = served.client.get(&url).header("Last-Event-ID", &last_id).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = Events { response, buffer: String::new(), seen: Vec::new(), last_id: None };
    events.next("run.finished").await;
    let after: Vec<u64> = events
        .seen
        .iter()
        .filter(|event| event["event"] == "step.succeeded")
        .map(|event| event["op"].as_u64().unwrap())
        .collect();
    steps.extend(after);
    assert_eq!(steps, (0..2_000).collect::<Vec<u64>>(), "each step once, in order");
    let rest = tokio::time::timeout(Duration::from_secs(10), events.response.chunk()).await;
    assert!(matches!(rest, Ok(Ok(None))), "the stream ends after the run does: {rest:?}");
}

#[tokio::test]
async fn shutting_down_ends_event_streams_and_stops_accepting() {
    let served = serve().await;
    let mut stream = served.client.get(served.url("/v1/events")).send().await.unwrap();
    let addr = served.server.local_addr();
    tokio::time::timeout(Duration::from_secs(10), served.server.shutdown()).await.expect("shutdown finishes");
    let rest = tokio::time::timeout(Duration::from_secs(10), async { while let Ok(Some(_)) = stream.chunk().await {} });
    rest.await.expect("the stream ends");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "nothing listens any more");
}

/// A provider that signs people in with the code `good` and refuses any other code, quoting it
/// (as a careless provider might).
struct Careless {
    signed_in: std::sync::Mutex<bool>,
}

#[async_trait::async_trait]
impl AuthProvider for Careless {
    async fn token(&self, _principal: &Principal) -> Result<Option<AccessToken>, AuthError> {
        Ok(self.signed_in.lock().unwrap().then(|| AccessToken::new("access")))
    }

    async fn forget(&self, _principal: &Principal) -> Result<(), AuthError> {
        *self.signed_in.lock().unwrap() = false;
        Ok(())
    }

    fn authorization_url(&self, _principal: &Principal, state: &str, redirect: &str) -> Result<String, AuthError> {
        Ok(format!("https://sign-in.example/authorize?state={state}&redirect_uri={redirect}"))
    }

    async fn exchange(&self, _principal: &Principal, code: &str, _redirect: &str) -> Result<(), AuthError> {
        if code != "good" {
            let reason = format!("the code {code} is not valid");
            return Err(AuthError::Refused { provider: "careless".into(), reason });
        }
        *self.signed_in.lock().unwrap() = true;
        Ok(())
    }
}

const CARELESS: Provider = Provider::new("careless");

#[step]
async fn read_profile(ctx: &StepCtx) -> Result<String, StepError> {
    let token = ctx.get_token(&CARELESS).await?;
    Ok(format!("profile read with a {}-byte token", token.expose_secret().len()))
}

/// Reads a profile, which needs a sign-in.
#[workflow_tool]
pub async fn read_my_profile(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(read_profile(ctx).await?)
}

#[tokio::test]
async fn a_sign_in_callback_completes_once_and_never_echoes_its_code() {
    let careless = Careless { signed_in: std::sync::Mutex::new(false) };
    let served = serve_with(|runtime| runtime.auth_provider("careless", careless), |server| server).await;
    let mut events = served.runtime.events();
    let run = served.runtime.start("read_my_profile", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let url = std::iter::from_fn(|| events.try_recv().ok())
        .find_map(|event| match event {
            RunEvent::AuthorizationRequired { url, .. } => Some(url),
            _ => None,
        })
        .expect("the run asks for a sign-in");
    assert!(url.starts_with(&served.url(&format!("{AUTH_CALLBACK_PATH}careless/start?state="))), "{url}");
    // The callback is accepted from the browser that opened the sign-in link, with its cookie.
    let client = &browser();
    let at_provider = open_sign_in_link(client, &url).await;
    let state = at_provider.split("state=").nth(1).unwrap().split('&').next().unwrap().to_owned();
    let redirect = at_provider.split("redirect_uri=").nth(1).unwrap().to_owned();
    assert_eq!(redirect, served.url(&format!("{AUTH_CALLBACK_PATH}careless/callback")));
    let callback = |query: String| client.get(format!("{redirect}?{query}"));

    let canary = "c0de-canary-8d1f3";
    let refused = Seen::of(callback(format!("code={canary}&state={state}")).send().await.unwrap()).await;
    assert_eq!(refused.status, 502);
    let (message, _) = refused.error();
    assert!(message.contains("careless refused the sign-in"), "{message}");
    assert!(!String::from_utf8_lossy(&refused.body).contains(canary), "the code is redacted: {message}");
    assert!(!String::from_utf8_lossy(&refused.body).contains(&state), "and so is the state");

    for (query, field) in [(format!("state={state}"), "code"), ("code=good".to_owned(), "state")] {
        let missing = Seen::of(callback(query).send().await.unwrap()).await;
        assert_eq!((missing.status, missing.error().1), (400, json!(field)));
    }
    let elsewhere = served.url(&format!("{AUTH_CALLBACK_PATH}other/callback?code=good&state={state}"));
    let other_provider = Seen::of(client.get(elsewhere).send().await.unwrap()).await;
    let unknown_state = Seen::of(callback("code=good&state=forged".into()).send().await.unwrap()).await;

    let signed_in = Seen::of(callback(format!("code=good&state={state}")).send().await.unwrap()).await;
    assert_eq!(signed_in.status, 200);
    assert!(signed_in.header("content-type").unwrap().starts_with("text/html"));
    assert!(String::from_utf8_lossy(&signed_in.body).contains("Signed in; you can close this tab"));
    assert_eq!(signed_in.header("referrer-policy"), Some("no-referrer"));
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(output, json!("profile read with a 6-byte token"));

    let repeated = Seen::of(callback(format!("code=good&state={state}")).send().await.unwrap()).await;
    assert_eq!((repeated.status, repeated.body.len()), (404, 0));
    assert_eq!(other_provider, repeated, "another provider's callback gets the same 404");
    assert_eq!(unknown_state, repeated, "and so does an unknown state");
}

#[tokio::test]
async fn the_host_serves_http_on_the_address_it_is_given_until_interrupted() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let mut host = tokio::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("EVE_DATA_DIR", dir.path())
        .env("EVE_API_KEY", "host-test-key")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(host.stdout.take().unwrap()).lines();
    let mut banner = Vec::new();
    while banner.last().is_none_or(|line: &String| !line.contains("Ctrl-C")) {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
        banner.push(line);
    }
    let serving = banner.iter().find_map(|line| line.strip_prefix("serving ")).expect("the banner says where");
    let base = serving.to_owned();
    let key_rule = "the run API (/v1) requires `Authorization: Bearer <key>` with the key in EVE_API_KEY";
    assert!(banner.iter().any(|line| line == key_rule), "{banner:?}");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let start = client.post(format!("{base}/v1/tools/greet_durably/runs")).json(&json!({ "input": { "name": "Ada" } }));
    let refused = Seen::of(start.try_clone().unwrap().send().await.unwrap()).await;
    assert_eq!(refused.status, 401, "without the key the run API refuses");
    let created = Seen::of(start.bearer_auth("host-test-key").send().await.unwrap()).await;
    assert_eq!(created.status, 201, "{:?}", String::from_utf8_lossy(&created.body));
    let unknown = client.get(format!("{base}/v1/runs/run_nobody")).bearer_auth("host-test-key");
    assert_eq!(Seen::of(unknown.send().await.unwrap()).await.status, 404);

    let pid = host.id().unwrap().to_string();
    let interrupted = std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(interrupted.success());
    let status = tokio::time::timeout(Duration::from_secs(30), host.wait()).await.unwrap().unwrap();
    assert!(status.success(), "the host shuts down cleanly on Ctrl-C: {status}");
}

#[test]
fn the_host_will_not_serve_an_open_run_api_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["serve", "--addr", "0.0.0.0:0"])
        .env("EVE_DATA_DIR", dir.path())
        .env_remove("EVE_API_KEY")
        .output()
        .unwrap();
    assert!(!output.status.success(), "the host refuses to start");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: refusing to serve the run API on 0.0.0.0:"), "{stderr}");
    assert!(stderr.contains("set EVE_API_KEY, or listen on a loopback address"), "it says what to do: {stderr}");
}

#[tokio::test]
async fn a_repeated_idempotency_key_on_a_manual_webhook_gets_the_first_response_or_409_until_there_is_one() {
    let served = serve_with(|runtime| runtime, |server| server.response_timeout(Duration::from_secs(10))).await;
    let run = served.runtime.start("reply_when_told", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let go = served.url(&format!("{HOOK_PATH}go-{}", run.id()));
    let client = &served.client;
    let send = |order: u32| client.patch(&url).header("idempotency-key", "evt_7").json(&json!({ "order": order }));
    let first = tokio::spawn(send(7).send());
    RECEIVED.notified().await;

    let started = Instant::now();
    let early = Seen::of(send(8).send().await.unwrap()).await;
    let waited = started.elapsed();
    assert_eq!(
        (early.status, waited < Duration::from_secs(5)),
        (409, true),
        "a repeat while the first waits for its step, after {waited:?}"
    );
    let (message, _) = early.error();
    assert!(message.contains("`Idempotency-Key`") && message.contains("retry"), "{message}");

    assert_eq!(client.post(&go).json(&json!("reply")).send().await.unwrap().status(), 202);
    let first = Seen::of(first.await.unwrap().unwrap()).await;
    assert_eq!((first.status, first.json()), (200, json!({ "echo": { "order": 7 }, "method": "PATCH" })));
    let late = Seen::of(send(9).send().await.unwrap()).await;
    assert_eq!(late, first, "a repeat after the step responded gets the first request's response");

    assert_eq!(client.post(&go).json(&json!("finish")).send().await.unwrap().status(), 202);
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(true)));
    let entries = served.runtime.journal(run.id()).await.unwrap().entries;
    let received =
        entries.iter().filter(|entry| matches!(entry, eve_tools::Entry::HookReceived { op, .. } if op.0 == 0));
    assert_eq!(received.count(), 1, "the request was delivered once");
}

#[tokio::test]
async fn a_webhook_request_is_journaled_with_its_credentials_and_secret_query_values_redacted() {
    let served = serve().await;
    let run = served.runtime.start("collect_requests", json!({ "count": 2 })).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    // (name, value, whether it is kept): query parameters, then headers
    let query = [
        ("page", "2", true),
        ("token", "s3cr3t-token", false),
        ("code", "s3cr3t-code", false),
        ("key", "s3cr3t-key", false),
        ("api_key", "s3cr3t-api-key", false),
        ("apiKey", "s3cr3t-camel", false),
        ("access_token", "s3cr3t-access", false),
        ("client_secret", "s3cr3t-client", false),
        ("password", "s3cr3t-password", false),
        ("X-Amz-Signature", "s3cr3t-amz", false),
        ("sig", "s3cr3t-sig", false),
        ("hub.secret", "s3cr3t-hub", false),
        ("to%6Ben", "s3cr3t-encoded", false),
        ("keyword", "kept-keyword", true),
        ("q", "kept%20query", true),
    ];
    let query_string: Vec<_> = query.iter().map(|(name, value, _)| format!("{name}={value}")).collect();
    let headers = [
        ("authorization", "Bearer s3cr3t-bearer", false),
        ("proxy-authorization", "Basic s3cr3t-proxy", false),
        ("cookie", "session=s3cr3t-cookie", false),
        ("set-cookie", "id=s3cr3t-set-cookie", false),
        ("x-request-id", "kept-request-id", true),
    ];
    let mut request = served.client.post(format!("{url}?{}", query_string.join("&"))).body("over HTTP");
    for (name, value, _) in headers {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status(), 202);
    // The same through the runtime's own API, as an adapter in front of another server calls it.
    let mut direct = WebhookRequest::new("POST", b"through the runtime");
    direct.query = query_string.join("&");
    direct.headers = headers.iter().map(|(name, value, _)| (name.to_string(), value.to_string())).collect();
    let token = url.rsplit('/').next().unwrap();
    served.runtime.deliver_webhook(token, None, direct).await.unwrap();

    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    let requests: Vec<WebhookRequest> = serde_json::from_value(output).unwrap();
    let expected: Vec<_> = query
        .iter()
        .map(|(name, value, kept)| format!("{name}={}", if *kept { value } else { "[redacted]" }))
        .collect();
    for request in &requests {
        assert_eq!(request.query, expected.join("&"), "only the values of secret-looking parameters are redacted");
        for (name, value, kept) in headers {
            let expected = if kept { value } else { "[redacted]" };
            assert_eq!(request.header(name), Some(expected), "{name}");
        }
    }
    let journal = serde_json::to_string(&served.runtime.journal(run.id()).await.unwrap().entries).unwrap();
    assert!(journal.contains("kept-request-id") && journal.contains("[redacted]"), "{journal}");
    assert!(!journal.contains("s3cr3t"), "a secret reached the journal: {journal}");
}

#[tokio::test]
async fn a_webhook_keeps_the_headers_it_names_and_redacts_more_when_told() {
    let served = serve().await;
    let run = served.runtime.start("collect_with_options", json!({})).await.unwrap();
    let url = handed_over(&served.runtime, run.id()).await;
    let sent = served
        .client
        .post(format!("{url}?trace=s3cr3t-trace&code=kept-code&token=s3cr3t-token"))
        .header("authorization", "Bearer kept-bearer")
        .header("cookie", "session=s3cr3t-cookie")
        .header("x-partner-secret", "s3cr3t-partner");
    assert_eq!(sent.send().await.unwrap().status(), 202);
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    let request: WebhookRequest = serde_json::from_value(output).unwrap();
    assert_eq!(request.header("authorization"), Some("Bearer kept-bearer"), "kept, as the webhook asked");
    assert_eq!(request.header("cookie"), Some("[redacted]"), "the other defaults still apply");
    assert_eq!(request.header("x-partner-secret"), Some("[redacted]"), "redacted, as the webhook asked");
    assert_eq!(request.query, "trace=[redacted]&code=kept-code&token=[redacted]");
    let journal = serde_json::to_string(&served.runtime.journal(run.id()).await.unwrap().entries).unwrap();
    assert!(!journal.contains("s3cr3t"), "a secret reached the journal: {journal}");
}
