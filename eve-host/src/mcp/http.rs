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
//! body timeout (`408`), and checked as JSON-RPC (`wire.rs`), so that a malformed message gets
//! the JSON-RPC error the specifications name, with HTTP `400`: `-32700` for a body that is not
//! JSON, `-32600` for JSON that is not a JSON-RPC message (with its id, if it has one), `-32602`
//! for a request whose method is known but whose parameters do not have the method's shape (rmcp
//! alone answers all three with a plain-text `415`). A `DELETE` of a session the server does not
//! have (unknown, or ended) answers `404`, as any other request on it does (rmcp answers `202`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
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
            let sessions = Arc::new(LocalSessionManager::default());
            axum::Router::new()
                .fallback_service(service(handler.clone(), mount, sessions.clone()))
                .layer(middleware::from_fn_with_state(limits, well_formed))
                .layer(middleware::from_fn_with_state(sessions, known_session))
        }))
    }

    /// The service, as a router to nest at `/mcp`.
    pub fn mount(&self, mount: Mount) -> axum::Router {
        (self.0)(mount)
    }
}

/// The `/mcp` service for `handler`, mounted as `mount` says.
fn service<H: ServerHandler + Clone>(
    handler: H,
    mount: Mount,
    sessions: Arc<LocalSessionManager>,
) -> StreamableHttpService<H, LocalSessionManager> {
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
    StreamableHttpService::new(move || Ok(handler.clone()), sessions, config)
}

/// Answers `404` to a `DELETE` of a session this server does not have (unknown, or ended
/// already), as to any other request on one; rmcp answers `202`, as if it had ended one. A
/// `DELETE` under protocol 2026-07-28, which has no sessions, is left to rmcp (`405`).
async fn known_session(State(sessions): State<Arc<LocalSessionManager>>, request: Request, next: Next) -> Response {
    use rmcp::transport::streamable_http_server::session::SessionManager;
    let headers = request.headers();
    let sessionless = headers
        .get("mcp-protocol-version")
        .and_then(|version| version.to_str().ok())
        .is_some_and(|version| version >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
    let session = headers.get("mcp-session-id").and_then(|id| id.to_str().ok());
    if let (&Method::DELETE, false, Some(session)) = (request.method(), sessionless, session) {
        let known = sessions.has_session(&Arc::from(session)).await.unwrap_or(true);
        if !known {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    next.run(request).await
}

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

/// The JSON-RPC error for a body that is not a message rmcp can take (see `wire.rs`).
fn malformed(bytes: &Bytes) -> Option<Response> {
    let refusal = super::wire::check(bytes).err()?;
    let mut response = (StatusCode::BAD_REQUEST, refusal.to_json().to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Some(response)
}
