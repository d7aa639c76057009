//! Streamable HTTP at `/mcp` on [`crate::http::Server`].
//!
//! The route sits behind the same layers as the `/v1` run API, which run first: the `Origin` and
//! `Host` checks (`http/origin.rs`) and the API key. rmcp's own DNS-rebinding guard is configured
//! to agree with them and never to refuse what they let through: without a key, only loopback
//! `Host` names; with a key, any `Host`; and the server's own origins (the public URL's, those
//! given with `Server::allow_origin`, and loopback pages). When the server shuts down, open event
//! streams end.
//!
//! Before rmcp sees a `POST`, its body is read here, held to the server's body limit (`413`) and
//! body timeout (`408`), and checked as JSON-RPC, so that a malformed message gets the JSON-RPC
//! error the specifications name, with HTTP `400`: `-32700` for a body that is not JSON, `-32600`
//! for JSON that is not a JSON-RPC message, `-32602` for a request whose method is known but
//! whose parameters do not have the method's shape (rmcp alone answers all three with a
//! plain-text `415`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use rmcp::ServerHandler;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The names a keyless server answers to, as rmcp writes them (the `/v1` rules' loopback names).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Pages on loopback that may call a server reached on loopback (the `/v1` rules accept
/// `http://{Host}` for a loopback `Host`; they run first and are the stricter check).
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// What `/mcp` needs to know of the HTTP server it is mounted on.
pub(crate) struct Mount {
    /// Whether the server requires an API key (then any `Host` is accepted).
    pub keyed: bool,
    /// The server's own origins, `scheme://host:port`.
    pub origins: Vec<String>,
    /// The largest request body, in bytes.
    pub body_limit: usize,
    /// How long a request body may take to arrive.
    pub body_timeout: Duration,
    /// Becomes `true` when the server shuts down.
    pub stop: watch::Receiver<bool>,
}

/// Builds the `/mcp` service of a handler, whatever its type.
#[derive(Clone)]
pub(crate) struct Mounter(Arc<dyn Fn(Mount) -> axum::Router + Send + Sync>);

impl Mounter {
    pub fn new<H: ServerHandler + Clone>(handler: H) -> Self {
        Mounter(Arc::new(move |mount| {
            let limits = Limits { body: mount.body_limit, timeout: mount.body_timeout };
            axum::Router::new()
                .fallback_service(service(handler.clone(), mount))
                .layer(middleware::from_fn_with_state(limits, well_formed))
        }))
    }

    /// The service, as a router to nest at `/mcp`.
    pub fn mount(&self, mount: Mount) -> axum::Router {
        (self.0)(mount)
    }
}

/// The `/mcp` service for `handler`, mounted as `mount` says.
fn service<H: ServerHandler + Clone>(handler: H, mount: Mount) -> StreamableHttpService<H, LocalSessionManager> {
    let hosts: &[&str] = if mount.keyed { &[] } else { &LOOPBACK_HOSTS };
    let origins = mount.origins.into_iter().chain(LOOPBACK_ORIGINS.map(str::to_owned));
    let stopped = CancellationToken::new();
    let mut stop = mount.stop;
    let on_stop = stopped.clone();
    tokio::spawn(async move {
        let _ = stop.wait_for(|stopping| *stopping).await;
        on_stop.cancel();
    });
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.iter().copied())
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(mount.body_limit)
        .with_cancellation_token(stopped);
    StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(LocalSessionManager::default()), config)
}

/// The protocol's request methods that take parameters. Methods protocol 2026-07-28 removed
/// (`initialize`, `logging/setLevel`, `resources/subscribe`, ...) are left to rmcp, which
/// answers them `-32601` as that revision asks.
const METHODS: [&str; 10] = [
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "prompts/get",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
    "skills/get",
    "resources/directory/read",
];

#[derive(Clone, Copy)]
struct Limits {
    body: usize,
    timeout: Duration,
}

/// Reads a `POST`'s body within the limits and refuses it unless it is a JSON-RPC message rmcp
/// can take; anything else passes through.
async fn well_formed(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(limits.timeout, http_body_util::Limited::new(body, limits.body).collect());
    let bytes = match read.await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            let message = format!("the request body is over the limit of {} bytes", limits.body);
            return (StatusCode::PAYLOAD_TOO_LARGE, message).into_response();
        }
        Ok(Err(error)) => {
            return (StatusCode::BAD_REQUEST, format!("cannot read the request body: {error}")).into_response();
        }
        Err(_) => return (StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time").into_response(),
    };
    if let Some(refusal) = malformed(&bytes) {
        return refusal;
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The JSON-RPC error for a body that is not a message rmcp can take.
fn malformed(bytes: &Bytes) -> Option<Response> {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(error) => return Some(rpc_error(Value::Null, -32700, format!("the body is not JSON: {error}"))),
    };
    let method = value.get("method").and_then(Value::as_str).unwrap_or_default();
    // rmcp takes a request it cannot decode as a custom one (then `-32601`); for the protocol's
    // own methods, that means parameters of the wrong shape.
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(ClientJsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::CustomRequest(_)) && METHODS.contains(&method) => {}
        Ok(_) => return None,
        Err(_) => {}
    }
    let id = value.get("id").filter(|id| id.is_string() || id.is_number()).cloned();
    let is_request = value.get("jsonrpc") == Some(&json!("2.0")) && !method.is_empty();
    Some(match (is_request, id) {
        (true, Some(id)) => {
            rpc_error(id, -32602, format!("the params of `{method}` do not have the shape the method takes"))
        }
        _ => rpc_error(
            Value::Null,
            -32600,
            "the body is not a JSON-RPC 2.0 message: send an object with \"jsonrpc\": \"2.0\", \"method\" and \"id\""
                .to_owned(),
        ),
    })
}

fn rpc_error(id: Value, code: i32, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (StatusCode::BAD_REQUEST, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
