//! The HTTP server: how people and systems reach a [`Runtime`] from outside.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use eve_tools::{Runtime, http::Server, store::MemoryStore};
//! // Bind first, so the runtime's webhook and callback URLs carry the real port.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let runtime = Runtime::builder().store(MemoryStore::new()).public_url(format!("http://{addr}")).build()?;
//! let server = Server::new(runtime).serve(listener)?;
//! assert_eq!(server.local_addr(), addr);
//! // ... webhooks, answers and sign-in callbacks now reach the runtime ...
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Routes
//!
//! | Route | Runtime call | Reply |
//! | --- | --- | --- |
//! | `ANY /.well-known/workflow/v1/webhook/{token}` | [`Runtime::deliver_webhook`] | the webhook's response (default `202`), or `504` |
//! | `POST /.well-known/workflow/v1/hook/{token}` (JSON) | [`Runtime::resume_hook`] | `202` |
//! | `GET /.well-known/workflow/v1/auth/{provider}/start?state=…` | [`Runtime::begin_authorization`] | `303` to the provider, with a cookie for the callback |
//! | `GET /.well-known/workflow/v1/auth/{provider}/callback` | [`Runtime::complete_authorization`] | `200` HTML |
//! | `POST /v1/tools/{tool}/runs` | [`Runtime::start_with`] | `201 {"runId"}` |
//! | `GET /v1/tools` | the manifest | `{tools: [{name, description, shape}]}` |
//! | `GET /v1/runs[?status&tool&before&limit]` | [`Runtime::list_runs`] | `{runs: [...], next}` |
//! | `GET /v1/runs/{run}` | [`Runtime::journal`] | `{runId, tool, status, outcome?}` |
//! | `GET /v1/runs/{run}/timeline[?at=SEQ]` | [`Inspection::of`](crate::timeline::Inspection::of) | `{run, timeline, journal, pending}` |
//! | `POST /v1/runs/{run}/cancel` | [`Runtime::cancel`] | `202` |
//! | `GET /v1/runs/{run}/questions` | [`Runtime::open_questions`] | `{questions: [...]}` |
//! | `POST /v1/runs/{run}/questions/{request}` | [`Runtime::answer`] | `204` |
//! | `GET /v1/events` | [`Runtime::events`], or [`Runtime::follow`] with `?run=` | server-sent events, one per [`RunEvent`](eve_runtime::RunEvent) |
//! | `GET /healthz`, `GET /readyz` | probes, outside the key and origin rules | `200`, or `503` while not ready |
//! | `GET /metrics` | the recorder given to `Server::metrics` (feature `metrics`) | Prometheus's text format |
//! | `GET /ui` (and `/ui/app.js`, `/ui/app.css`) | the web inspector | HTML, or its sign-in form on a keyed server |
//! | `POST /ui/sign-in` (form `key`), `POST /ui/sign-out` | the inspector's sign-in | `303` to `/ui` with its cookie; `401` for a wrong key |
//!
//! # Who may call what
//!
//! The `/.well-known/workflow/v1/...` routes are reached by outside systems and people, and each
//! is opened by an unguessable token in its path, so they take no other credential. The `/v1`
//! run API starts, answers and cancels any run, under any principal (`/metrics` is behind the
//! same rules as `/v1`); give the server a key with
//! [`Server::api_key`] and every `/v1` request must carry `Authorization: Bearer <key>` (else
//! `401`). Without a key the run API is open to whoever reaches the address, so serve it on
//! loopback only; the host's `serve` refuses any other address unless `EVE_API_KEY` is set.
//! Web pages are kept out either way (DNS rebinding, cross-site requests): without a key, `/v1`
//! answers only requests addressed to a loopback name, and a `/v1` request from a page of another
//! origin than the server's own (or one given with [`Server::allow_origin`]) gets `403`; see
//! `origin.rs`. The inspector at `/ui` follows the same `Host` and `Origin` rules; on a keyed
//! server it signs a browser in with the key once, and its cookie then stands in for the key on
//! `/v1`, for reads, and for changes that also carry the page's `X-Eve-UI` header (see
//! `cookie.rs` and `ui.rs`).
//!
//! # Invariants
//!
//! - **One 404 for every token that opens nothing.** An unknown token, a token of a finished run,
//!   a used sign-in callback, another provider's callback, a callback from a browser that did not
//!   open the sign-in's link, an over-long or undecodable path
//!   segment, and any unrouted path all get the same response: `404` with an empty body and the
//!   same headers. Bodies are read and checked *before* a token is looked up, so no refusal of a
//!   body depends on whether its token is live.
//! - **Secrets go to the runtime only.** Tokens, callback `state`s and `code`s are never logged
//!   (the request log names the route template, never the path or query) and never echoed in a
//!   response; an auth provider's error message is redacted of both before it is returned.
//! - **Bad input gets a 4xx with a JSON error**, `{"error": {"message", "field"}}`, naming the field
//!   at fault: malformed JSON `400`, a wrong type or a refused value `422`, a body over the limit
//!   `413`, a body that does not arrive in time `408`, a body that is not JSON `415`. A panic in a
//!   handler becomes a `500` without details, never a dropped connection.
//! - **Bounded waiting.** A request's headers and body must arrive within the body timeout; a
//!   manual webhook waits for its step's response at most the response timeout, then gets `504`.
//!   At most [`DEFAULT_MAX_CONNECTIONS`] connections (or [`Server::max_connections`]) are open at
//!   once; more clients wait in the listen backlog until one closes.
//!
//! Shutting down stops accepting connections, ends event streams, lets requests in flight finish,
//! and closes idle keep-alive connections.

mod auth;
mod body;
mod cookie;
mod errors;
mod events;
mod health;
mod metrics;
mod origin;
mod path;
mod routes;
mod runs;
mod serve;
mod sessions;
mod state;
#[cfg(test)]
mod tests;
mod ui;
mod webhook;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::cookie::SignIns;
use self::origin::{Origin, Origins};
pub use self::path::HOOK_PATH;
use self::state::{AppState, Limits, Shared};
pub use self::ui::UI_PATH;
use eve_runtime::Runtime;
pub use eve_runtime::auth::AUTH_CALLBACK_PATH;
use eve_runtime::secret::TokenHash;
pub use eve_runtime::webhook::WEBHOOK_PATH;

/// The default cap on a request body: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// The default time a request's headers and body have to arrive: 10 s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The default time a manual webhook waits for its step's response: 30 s.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The default cap on connections open at once: 1,024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// An HTTP server over a [`Runtime`]; see the [module documentation](self) for its routes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let runtime = eve_tools::Runtime::in_memory()?;
/// use std::time::Duration;
/// let server = eve_tools::http::Server::new(runtime)
///     .body_limit(256 * 1024)
///     .body_timeout(Duration::from_secs(5))
///     .response_timeout(Duration::from_secs(10))
///     .bind("127.0.0.1:0")
///     .await?;
/// assert!(server.local_addr().port() > 0);
/// server.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Server {
    runtime: Runtime,
    limits: Limits,
    api_key: Option<TokenHash>,
    /// Origins given with [`Server::allow_origin`], as given.
    allowed_origins: Vec<String>,
    /// The recorder `/metrics` renders, if any.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Metrics>,
    /// MCP: what to mount at `/mcp`, if not the default server.
    #[cfg(feature = "mcp")]
    mcp: Option<crate::mcp::http::Mounter>,
}

impl Server {
    /// A server over `runtime` with the default limits: 1 MiB bodies that arrive within 10 s,
    /// 30 s for a manual webhook's step to respond, and 1,024 connections open at once.
    pub fn new(runtime: Runtime) -> Self {
        let limits = Limits {
            body: DEFAULT_BODY_LIMIT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connections: DEFAULT_MAX_CONNECTIONS,
        };
        Server {
            runtime,
            limits,
            api_key: None,
            allowed_origins: Vec::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "mcp")]
            mcp: None,
        }
    }

    /// MCP: serves `handler` at `/mcp` instead of a default [`McpServer`](crate::mcp::McpServer)
    /// over the runtime: a configured one (some tools task-only, say), or a handler of your own
    /// that adds prompts or resources and hands tools and tasks to an `McpServer`. `/mcp` is
    /// behind the same API key and `Origin`/`Host` rules as the `/v1` run API.
    #[cfg(feature = "mcp")]
    pub fn mcp<H: rmcp::ServerHandler + Clone>(mut self, handler: H) -> Self {
        self.mcp = Some(crate::mcp::http::Mounter::new(handler));
        self
    }

    /// Serves `metrics` at `GET /metrics` in Prometheus's text format, behind the same API key
    /// and `Origin`/`Host` rules as the `/v1` run API (see [`crate::metrics`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = eve_tools::Runtime::in_memory()?;
    /// let metrics = eve_tools::metrics::install()?;
    /// let server = eve_tools::http::Server::new(runtime).metrics(metrics).bind("127.0.0.1:0").await?;
    /// server.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Requires `Authorization: Bearer <key>` on every `/v1` run API request; others get `401`.
    /// Only the key's hash is kept, and it is compared in constant time. Webhooks, hook resumes
    /// and sign-in callbacks are opened by their own tokens and need no key.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = eve_tools::Runtime::in_memory()?;
    /// let key = std::env::var("EVE_API_KEY").unwrap_or_else(|_| "a long random key".into());
    /// let server = eve_tools::http::Server::new(runtime).api_key(key).bind("127.0.0.1:0").await?;
    /// // `/v1` requests now need `Authorization: Bearer <key>`.
    /// server.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn api_key(mut self, key: impl Into<SecretString>) -> Self {
        self.api_key = Some(TokenHash::of(key.into().expose_secret()));
        self
    }

    /// Lets web pages served at `origin` (`scheme://host[:port]`, such as
    /// `https://inspector.example`) use the `/v1` run API from a browser. Without this, a `/v1`
    /// request that carries an `Origin` header is refused with `403` unless it comes from the
    /// server's own origin: that of the runtime's public URL, or `http://{Host}` for a loopback
    /// `Host`. Requests without `Origin` (scripts, the CLI) are not affected. A page allowed here
    /// still needs the API key, if the server has one; without a key, requests must also be
    /// addressed to a loopback name (`localhost`, `127.0.0.1` or `[::1]`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = eve_tools::Runtime::in_memory()?;
    /// let server = eve_tools::http::Server::new(runtime)
    ///     .allow_origin("http://localhost:5173") // a web inspector under development
    ///     .bind("127.0.0.1:0")
    ///     .await?;
    /// server.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`Server::serve`] refuses a value that is not an `http` or `https` origin.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Refuses request bodies over `bytes` with `413`.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.limits.body = bytes;
        self
    }

    /// Refuses requests whose headers, or whose whole body, take longer than `timeout` to arrive
    /// (`408`, or the connection is closed). Keep-alive connections idle for longer are closed too.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.limits.body_timeout = timeout;
        self
    }

    /// How long a request to a manual webhook waits for its step's response before `504`.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.limits.response_timeout = timeout;
        self
    }

    /// Keeps at most `connections` open at once (at least 1); further clients wait in the
    /// operating system's listen backlog until one closes. Idle keep-alive connections are closed
    /// after the body timeout, so slots come back.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.limits.connections = connections.max(1);
        self
    }

    /// Binds `addr` and serves on it. Must be called inside a Tokio runtime.
    pub async fn bind(self, addr: impl ToSocketAddrs) -> io::Result<ServerHandle> {
        self.serve(TcpListener::bind(addr).await?)
    }

    /// Serves on `listener` in a background task until [`ServerHandle::shutdown`]. Must be
    /// called inside a Tokio runtime.
    ///
    /// # Errors
    ///
    /// The listener has no local address, or an origin given to [`Server::allow_origin`] is not
    /// an `http` or `https` origin.
    pub fn serve(self, listener: TcpListener) -> io::Result<ServerHandle> {
        let addr = listener.local_addr()?;
        let origins = self.origins()?;
        let (stop, stopped) = watch::channel(false);
        let sign_in_key = self.runtime.derive_key(cookie::PURPOSE);
        let shared = Shared {
            runtime: self.runtime,
            limits: self.limits,
            api_key: self.api_key,
            origins,
            sign_ins: SignIns::default(),
            sign_in_key,
            stop: stopped.clone(),
            #[cfg(feature = "metrics")]
            metrics: self.metrics,
            #[cfg(feature = "mcp")]
            mcp: self.mcp,
        };
        let state = AppState(Arc::new(shared));
        let router = routes::router(state);
        let task = tokio::spawn(serve::accept(listener, router, self.limits, stopped));
        Ok(ServerHandle { addr, stop, task })
    }
}

impl Server {
    /// The origins whose pages may use the run API, besides `http://{Host}` for a loopback `Host`.
    fn origins(&self) -> io::Result<Origins> {
        let public = Origin::of_url(self.runtime.public_url());
        let allowed = self.allowed_origins.iter().map(|text| {
            Origin::exact(text).ok_or_else(|| {
                let message = format!(
                    "`{text}` is not a web origin; give `Server::allow_origin` a value such as `https://inspector.example` \
                     or `http://localhost:5173` (a scheme, a host and perhaps a port, nothing after them)"
                );
                io::Error::new(io::ErrorKind::InvalidInput, message)
            })
        });
        Ok(Origins { public, allowed: allowed.collect::<io::Result<_>>()? })
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("limits", &self.limits)
            .field("api_key", &self.api_key.as_ref().map(|_| "[set]"))
            .finish_non_exhaustive()
    }
}

/// A running [`Server`]. Dropping it shuts the server down as [`ServerHandle::shutdown`] does,
/// without waiting.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the server listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, ends event streams, lets requests in flight finish and closes
    /// idle connections; returns when every connection has closed.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        if let Err(error) = self.task.await
            && error.is_panic()
        {
            tracing::error!("the HTTP server task panicked");
        }
    }
}
