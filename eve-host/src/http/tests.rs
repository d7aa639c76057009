//! Router-level tests of the HTTP server: refusals, body decoding and the pieces that keep secrets
//! out of responses. The end-to-end tests over real connections live in `tests/http*.rs`.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use serde_json::{Value, json};
use tokio::sync::watch;
use tower::ServiceExt;

use super::errors::{redact, shorten};
use super::path::segment;
use super::routes::router;
use super::state::{AppState, Limits, Shared};
use super::{body, webhook};
use eve_runtime::Runtime;
use eve_runtime::webhook::WebhookResponse;

const LIMITS: Limits = Limits {
    body: 1024,
    body_timeout: Duration::from_secs(5),
    response_timeout: Duration::from_secs(5),
    connections: 16,
};

fn app() -> (Router, watch::Sender<bool>) {
    let (stop, stopped) = watch::channel(false);
    let runtime = Runtime::in_memory().expect("an in-memory runtime builds");
    let shared = Shared {
        runtime,
        limits: LIMITS,
        api_key: None,
        origins: Default::default(),
        sign_ins: Default::default(),
        sign_in_key: eve_runtime::secret::SecretKey::generate(),
        stop: stopped,
        #[cfg(feature = "metrics")]
        metrics: None,
        #[cfg(feature = "mcp")]
        mcp: None,
    };
    (router(AppState(std::sync::Arc::new(shared))), stop)
}

/// What came back: status, headers but `date`, and the body.
async fn call(app: &Router, method: &str, uri: &str, content_type: Option<&str>, body: &[u8]) -> Reply {
    // Addressed to loopback, as the keyless run API requires.
    let mut request = Request::builder().method(method).uri(uri).header("host", "localhost");
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let request = request.body(Body::from(body.to_vec())).expect("a valid request");
    let response = app.clone().oneshot(request).await.expect("the router is infallible");
    let status = response.status();
    let mut headers: Vec<_> = response
        .headers()
        .iter()
        .filter(|(name, _)| *name != "date")
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("").to_owned()))
        .collect();
    headers.sort();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("the body is read").to_vec();
    Reply { status, headers, body }
}

#[derive(Debug, PartialEq)]
struct Reply {
    status: StatusCode,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn error(&self) -> Value {
        let json: Value = serde_json::from_slice(&self.body).expect("a JSON error");
        json["error"].clone()
    }
}

#[tokio::test]
async fn every_token_callback_and_path_that_opens_nothing_gets_the_same_empty_404() {
    let (app, _stop) = app();
    let long = "x".repeat(300);
    let json = Some("application/json");
    let cases: [(&str, String, Option<&str>, &[u8]); 9] = [
        ("POST", "/.well-known/workflow/v1/webhook/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into(), None, b"x"),
        ("DELETE", "/.well-known/workflow/v1/webhook/%FF%FE".into(), None, b""),
        ("GET", format!("/.well-known/workflow/v1/webhook/{long}"), None, b""),
        ("POST", "/.well-known/workflow/v1/webhook/".into(), None, b""),
        ("POST", "/.well-known/workflow/v1/hook/order-1".into(), json, b"{}"),
        ("POST", format!("/.well-known/workflow/v1/hook/{long}"), json, b"1"),
        ("GET", "/.well-known/workflow/v1/auth/github/callback?code=c&state=s".into(), None, b""),
        ("GET", format!("/.well-known/workflow/v1/auth/{long}/callback?code=c&state=s"), None, b""),
        ("GET", "/no/such/path".into(), None, b""),
    ];
    let mut replies = Vec::new();
    for (method, uri, content_type, body) in cases {
        replies.push((uri.clone(), call(&app, method, &uri, content_type, body).await));
    }
    let (_, first) = &replies[0];
    assert_eq!((first.status, first.body.as_slice()), (StatusCode::NOT_FOUND, &b""[..]));
    for (uri, reply) in &replies {
        assert_eq!(reply, first, "{uri}");
    }
}

#[tokio::test]
async fn json_routes_name_the_field_at_fault() {
    let (app, _stop) = app();
    let answer = "/v1/runs/run_1/questions/ask-0";
    let start = "/v1/tools/deploy/runs";
    let json = Some("application/json");
    // (uri, body, status, field, message)
    let cases: [(&str, &str, u16, Value, &str); 10] = [
        (answer, "{\"optionId\": tru}", 400, json!("optionId"), "the request body is not valid JSON (in `optionId`): "),
        (answer, "{\"a\":1}{", 400, Value::Null, "the request body is not valid JSON: trailing characters"),
        (answer, "", 400, Value::Null, "the request body is not valid JSON: EOF while parsing a value"),
        (
            answer,
            "{\"optionId\": 5}",
            422,
            json!("optionId"),
            "`optionId`: invalid type: integer `5`, expected a string",
        ),
        (
            answer,
            "{\"optionid\": \"a\"}",
            422,
            json!("optionid"),
            "unknown field `optionid`, expected one of `optionId`, `text`, `value`, `action`",
        ),
        (answer, "[]", 422, Value::Null, "the request body must be a JSON object, not an array"),
        (start, "{}", 422, json!("input"), "missing field `input`"),
        (start, "{\"input\": {}, \"principal\": [1]}", 422, json!("principal"), "`principal`: invalid type: sequence"),
        (start, "{\"input\": {}, \"runId\": \"a b\"}", 422, json!("runId"), "`runId` must be 1 to 128 ASCII letters"),
        ("/v1/runs/run_1/cancel", "{\"reason\": 1}", 422, json!("reason"), "`reason`: invalid type: integer `1`"),
    ];
    for (uri, body, status, field, message) in cases {
        let reply = call(&app, "POST", uri, json, body.as_bytes()).await;
        let error = reply.error();
        assert_eq!((reply.status.as_u16(), &error["field"]), (status, &field), "{body}: {error}");
        assert!(error["message"].as_str().unwrap().starts_with(message), "{body}: {error}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_or_not_json_are_refused_before_anything_else() {
    let (app, _stop) = app();
    let big = vec![b' '; 1025];
    for uri in ["/v1/tools/deploy/runs", "/.well-known/workflow/v1/webhook/nope", "/.well-known/workflow/v1/hook/x"] {
        let reply = call(&app, "POST", uri, Some("application/json"), &big).await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
        assert_eq!(reply.error(), json!({ "message": "the request body is over the 1024-byte limit", "field": null }));
        assert!(reply.headers.contains(&("connection".into(), "close".into())), "{uri}");
    }
    let cases = [(Some("text/json"), "found `text/json`"), (None, "the request has no content type")];
    for (content_type, words) in cases {
        let reply = call(&app, "POST", "/v1/runs/run_1/questions/ask-0", content_type, b"{}").await;
        assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(reply.error()["message"].as_str().unwrap().contains(words), "{:?}", reply.error());
    }
    let unknown = call(&app, "POST", "/v1/runs/run_1/cancel", None, b"").await;
    assert_eq!(
        (unknown.status, unknown.error()["message"].as_str().unwrap()),
        (StatusCode::NOT_FOUND, "no run with id run_1; list runs to see the ids this store holds")
    );
    let wrong_method = call(&app, "GET", "/v1/tools/deploy/runs", None, b"").await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn callbacks_without_their_parameters_are_refused_without_echoing_them() {
    let (app, _stop) = app();
    let path = "/.well-known/workflow/v1/auth/github/callback";
    let cases = [("?state=secret-state", "code"), ("?code=secret-code", "state"), ("?code=&state=s", "code")];
    for (query, field) in cases {
        let reply = call(&app, "GET", &format!("{path}{query}"), None, b"").await;
        assert_eq!((reply.status, &reply.error()["field"]), (StatusCode::BAD_REQUEST, &json!(field)));
        assert!(!String::from_utf8_lossy(&reply.body).contains("secret"));
    }
    let twice = call(&app, "GET", &format!("{path}?code=secret-1&code=secret-2&state=s"), None, b"").await;
    assert_eq!(twice.status, StatusCode::BAD_REQUEST);
    assert!(!String::from_utf8_lossy(&twice.body).contains("secret"));
}

#[test]
fn path_segments_are_decoded_and_bounded() {
    let uri = |path: &str| path.parse::<axum::http::Uri>().unwrap();
    assert_eq!(segment(&uri("/a/b%20c/d"), 1).as_deref(), Some("b c"));
    assert_eq!(segment(&uri("/a/%2F..%2F/d"), 1).as_deref(), Some("/../"));
    assert_eq!(segment(&uri("/a/%FF/d"), 1), None, "not UTF-8");
    assert_eq!(segment(&uri("/a//d"), 1), None, "empty");
    assert_eq!(segment(&uri("/a"), 1), None, "missing");
    assert_eq!(segment(&uri(&format!("/a/{}", "x".repeat(256))), 1).map(|s| s.len()), Some(256));
    assert_eq!(segment(&uri(&format!("/a/{}", "x".repeat(257))), 1), None, "too long");
    assert_eq!(segment(&uri(&format!("/a/{}", "%41".repeat(257))), 1), None, "too long once decoded");
}

#[test]
fn secrets_are_redacted_and_echoes_shortened() {
    let message = "code abc123 for state s-9 was refused; abc123 is spent";
    assert_eq!(
        redact(message, &["abc123", "s-9", ""]),
        "code [redacted] for state [redacted] was refused; [redacted] is spent"
    );
    assert_eq!(shorten("short", 64), "short");
    assert_eq!(shorten(&"é".repeat(100), 64).chars().count(), 65);
}

#[test]
fn content_types_and_idempotency_keys_are_checked() {
    let headers = |name: &str, value: &[u8]| {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
        headers
    };
    for accepted in ["application/json", "Application/JSON; charset=utf-8", "application/merge-patch+json"] {
        assert!(body::require_json(&headers("content-type", accepted.as_bytes())).is_ok(), "{accepted}");
    }
    for refused in ["text/plain", "application/jsonp", "json", "application/x-www-form-urlencoded"] {
        let error = body::require_json(&headers("content-type", refused.as_bytes())).unwrap_err();
        assert_eq!(error.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{refused}");
    }
    assert_eq!(body::idempotency_key(&HeaderMap::new()).unwrap(), None);
    assert_eq!(body::idempotency_key(&headers("idempotency-key", b"evt_1")).unwrap().as_deref(), Some("evt_1"));
    for refused in [&b"two words"[..], b"\xffkey", &[b'k'; 257]] {
        assert!(body::idempotency_key(&headers("idempotency-key", refused)).is_err());
    }
}

#[tokio::test]
async fn webhook_responses_keep_their_headers_but_not_framing() {
    let response = WebhookResponse::status(201)
        .header("x-thanks", "yes")
        .header("content-length", "999")
        .header("transfer-encoding", "chunked")
        .header("bad header", "x")
        .body("thanks");
    let response = webhook::into_response(response);
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(response.headers().get("x-thanks").unwrap(), "yes");
    assert!(response.headers().get("transfer-encoding").is_none() && response.headers().get("content-type").is_none());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    assert_eq!(&body[..], b"thanks");
    assert_eq!(webhook::into_response(WebhookResponse::status(42)).status(), StatusCode::BAD_GATEWAY);
    assert_eq!(webhook::into_response(WebhookResponse::status(202)).headers().len(), 0);
}
