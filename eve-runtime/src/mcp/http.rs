//! Streamable HTTP at `/mcp` on [`crate::http::Server`].
//!
//! The route sits behind the same layers as the `/v1` run API, which run first: the `Origin` and
//! `Host` checks (`http/origin.rs`) and the API key. rmcp's own DNS-rebinding guard is configured
//! to agree with them and never to refuse what they let through: without a key, only loopback
//! `Host` names; with a key, any `Host`; and the server's own origins (the public URL's, those
//! given with `Server::allow_origin`, and loopback pages). Request bodies are held to the
//! server's body limit (`413` over it). When the server shuts down, open event streams end.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use rmcp::ServerHandler;

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
    /// Becomes `true` when the server shuts down.
    pub stop: watch::Receiver<bool>,
}

/// Builds the `/mcp` service of a handler, whatever its type.
#[derive(Clone)]
pub(crate) struct Mounter(Arc<dyn Fn(Mount) -> axum::Router + Send + Sync>);

impl Mounter {
    pub fn new<H: ServerHandler + Clone>(handler: H) -> Self {
        Mounter(Arc::new(move |mount| axum::Router::new().fallback_service(service(handler.clone(), mount))))
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
