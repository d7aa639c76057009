//! The Model Context Protocol server (cargo feature `mcp`): every tool in the manifest, served to
//! MCP clients over stdio ([`serve_stdio`]) or Streamable HTTP (`/mcp` on
//! [`crate::http::Server`]), with durable runs as MCP tasks and as resources a client reads and
//! watches.
//!
//! ```no_run
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = eve_tools::Runtime::builder().build()?; // embedded SQLite in .eve/
//!     eve_tools::mcp::serve_stdio(runtime).await?;
//!     Ok(())
//! }
//! ```
//!
//! # What maps to what
//!
//! | eve | MCP |
//! | --- | --- |
//! | a tool in the manifest | a tool: its name, its description (the doc comment), its input JSON Schema (without `$schema`) |
//! | a call of a `#[tool]` | `tools/call`, answered at once ([`Runtime::call_tool`]) |
//! | a call of a `#[workflow_tool]` or `#[task]` from a client that declares the tasks extension | a task (`resultType: "task"`) whose task id is the run's id, created durably by [`Runtime::start_with`] before the reply |
//! | the same call from a client without the extension | the result once the run ends, with its steps as progress notifications while it works (read from the run's journal as it grows, [`Runtime::follow`]) |
//! | an open question (`ctx.ask`) | a form elicitation keyed by the question's request id (`ask-3`): in `tasks/get` (`input_required`), as an `InputRequiredResult` (protocol 2026-07-28) or as an `elicitation/create` request (older revisions) |
//! | a form (`ctx.ask_form::<T>`) | the same, with the form's journaled schema as `requestedSchema`; `content` is checked against it, and `decline`/`cancel` resolve the question `declined`/`cancelled` for the body |
//! | a sign-in a step waits for | a URL elicitation carrying the sign-in link, keyed `sign-in-{op}` |
//! | `tasks/update` | [`Runtime::answer`] for each answered question |
//! | `tasks/cancel` | [`Runtime::cancel`]: the run's cleanup runs, and the task ends `cancelled` |
//! | a run that completed | `completed`, its output as the tool result |
//! | a body that returned an error | `completed` with `isError: true` |
//! | a run that panicked, diverged or outgrew its history | `failed`, with a JSON-RPC error |
//! | a cancelled run | `cancelled` |
//! | a run | the resource `eve://runs/{runId}` (its tool, status, waits and outcome, as JSON) and `eve://runs/{runId}/timeline` (its timeline); both are resource templates, and `resources/list` lists the store's runs newest first, a page at a time, with the store's cursor |
//! | an unknown run's URI | a missing resource: `-32602` on protocol 2026-07-28 (SEP-2164), `-32002` before, with `data.uri` |
//! | a run's journal growing | `notifications/resources/updated` for each subscribed URI whose resource changed, following the journal ([`Runtime::follow`]): per session with `resources/subscribe` until `resources/unsubscribe` or the session's end (older revisions), or per `subscriptions/listen` stream until it is cancelled (2026-07-28) |
//!
//! # State
//!
//! A task is a run, and everything said about it is read from the run's journal, so `tasks/get`
//! answers the same after a restart of the server, from any process on the same store. The
//! server holds nothing per task: a task parked on a question costs what a parked run costs (no
//! Tokio task). One thing lives in memory only, an optional convenience: the time each task was
//! last seen to change (`lastUpdatedAt`; after a restart, the first time it is read). A sign-in's
//! link is rebuilt from the journal with the runtime's secret key ([`Runtime::sign_in_url`]); one
//! whose provider this runtime lacks shows as `working`, with a status message saying so.
//!
//! A resource subscription is the one thing that costs a Tokio task: a watch of the run while the
//! run lives and the subscription stands. It lives in memory, with its session (or its
//! `subscriptions/listen` stream); a client that reconnects after a restart subscribes again. The
//! gauge `eve_mcp_resource_watches` counts the watches alive.
//!
//! # Bad input
//!
//! An unknown tool or task id is a JSON-RPC error `-32602`; arguments that do not match the
//! tool's input schema are an `isError` result naming the field by its JSON path (protocol
//! revision 2025-11-25 moved input validation errors into the result, so a model can correct
//! itself); an answer that does not fit its question is `-32602` naming the field. Nothing is
//! started or answered in any of these cases. A message over the size limit is refused by the
//! transport: `413` over HTTP; over stdio, `-32700` (and the line is skipped without being kept
//! in memory). A message that is not JSON, or not UTF-8, is `-32700` with id null, one that is
//! not JSON-RPC 2.0 is `-32600` with its id; over stdio, the server goes on with the next line
//! (see `wire.rs`).

mod call;
mod handler;
#[cfg(feature = "http")]
pub(crate) mod http;
mod logging;
mod questions;
mod resources;
mod status;
mod stdio;
mod tools;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;

pub(crate) use self::stdio::log_to_stderr;
pub use self::stdio::{StdioReader, StdioWriter, stdio};
pub use self::tools::ToolContent;
use eve_runtime::Runtime;
use eve_runtime::secret::SecretKey;

/// The version of the official Rust SDK this server is built on, for naming its types
/// (`eve_tools::mcp::rmcp::model::…`) at the same version.
pub use rmcp;

/// How long `tasks/update` and a retried call wait for the run to take their answers in, so
/// that the next `tasks/get` no longer lists them.
const TAKE_IN_ANSWERS: Duration = Duration::from_secs(5);

/// The largest message the stdio transport reads: 4 MiB, as a default HTTP body limit is 1 MiB
/// and a stdio client is local.
pub const STDIO_MESSAGE_LIMIT: usize = 4 * 1024 * 1024;

/// An MCP server over a [`Runtime`]'s tools and runs. Cheap to clone: clones share the runtime
/// and the settings, but each clone starts with no resource subscriptions of its own, because a
/// subscription belongs to a session and rmcp serves each session with a handler of its own (a
/// clone per session over Streamable HTTP, the handler given to `serve` over stdio). Dropping the
/// handler, as rmcp does when its session ends, ends its subscriptions.
///
/// It implements rmcp's [`ServerHandler`](rmcp::ServerHandler), so it can also be served on any
/// rmcp transport, or called by a handler of the application's own that serves more (see
/// [`McpServer::serves_uri`]).
pub struct McpServer {
    inner: Arc<Inner>,
    subscriptions: resources::Subscriptions,
}

impl Clone for McpServer {
    fn clone(&self) -> Self {
        McpServer { inner: self.inner.clone(), subscriptions: resources::Subscriptions::default() }
    }
}

#[derive(Clone)]
struct Inner {
    runtime: Runtime,
    catalog: Arc<tools::Catalog>,
    /// Tools that only run as tasks: a call from a client without the tasks extension is refused.
    task_only: Vec<String>,
    /// Tools that ask the client's model: a call from a client without sampling is refused.
    sampling_only: Vec<String>,
    poll_interval: Duration,
    states: Arc<call::States>,
    seen: Arc<status::LastChanges>,
    /// The log levels sessions set with `logging/setLevel`.
    levels: Arc<logging::SessionLevels>,
}

impl McpServer {
    /// A server over every tool compiled into this binary, run by `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        let inner = Inner {
            catalog: Arc::new(tools::Catalog::from_registry()),
            task_only: Vec::new(),
            sampling_only: Vec::new(),
            poll_interval: Duration::from_millis(500),
            // The runtime's key is the data directory's (or the one every worker shares), so a
            // round that a restarted server, or another worker, receives goes on.
            states: Arc::new(call::States::new(&runtime.derive_key(call::STATE_KEY_PURPOSE))),
            seen: Arc::new(status::LastChanges::default()),
            levels: Arc::default(),
            runtime,
        };
        McpServer { inner: Arc::new(inner), subscriptions: resources::Subscriptions::default() }
    }

    /// Makes `tool` run only as a task: a call from a client that has not declared the tasks
    /// extension gets the JSON-RPC error `-32021` (a missing client capability) and starts nothing.
    pub fn require_task(mut self, tool: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.inner).task_only.push(tool.into());
        self
    }

    /// Makes `tool` callable only by clients that declared the sampling capability, for a tool
    /// that cannot do without the client's model (`ctx.sample`): a call from another client gets
    /// the JSON-RPC error `-32021` (a missing client capability, `requiredCapabilities`
    /// `{"sampling": {}}`) and starts nothing. Without it, such a call starts the run, which
    /// waits with its request open, and the call gets an `isError` result saying so.
    pub fn require_sampling(mut self, tool: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.inner).sampling_only.push(tool.into());
        self
    }

    /// How often clients should poll a task (`pollIntervalMs`); default 500 ms.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        Arc::make_mut(&mut self.inner).poll_interval = interval;
        self
    }

    /// Seals the state of multi round-trip calls (`requestState`) with a key derived from `key`
    /// instead of the runtime's secret key (the data directory's `eve.key`, or the one given to
    /// [`RuntimeBuilder::secret_key`](eve_runtime::RuntimeBuilder::secret_key)). Either way a
    /// round that a restarted server, or another server with the same key, receives goes on.
    pub fn request_state_key(mut self, key: &SecretKey) -> Self {
        Arc::make_mut(&mut self.inner).states = Arc::new(call::States::new(key));
        self
    }

    /// The runtime this server runs tools with.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Whether `uri` is one of the resources this server serves (`eve://…`, see the table
    /// above). A handler that serves resources of its own besides eve's hands these URIs to
    /// this server's resource methods, and lists eve's resources and templates after its own:
    ///
    /// ```
    /// use eve_tools::mcp::McpServer;
    /// use eve_tools::mcp::rmcp::model::{ReadResourceRequestParams, ReadResourceResponse, ServerConfig};
    /// use eve_tools::mcp::rmcp::service::RequestContext;
    /// use eve_tools::mcp::rmcp::{ErrorData, RoleServer, ServerHandler};
    ///
    /// #[derive(Clone)]
    /// struct App {
    ///     eve: McpServer,
    /// }
    ///
    /// impl ServerHandler for App {
    ///     fn get_info(&self) -> ServerConfig {
    ///         self.eve.get_info()
    ///     }
    ///
    ///     async fn read_resource(
    ///         &self,
    ///         request: ReadResourceRequestParams,
    ///         cx: RequestContext<RoleServer>,
    ///     ) -> Result<ReadResourceResponse, ErrorData> {
    ///         if self.eve.serves_uri(&request.uri) {
    ///             return self.eve.read_resource(request, cx).await;
    ///         }
    ///         Err(ErrorData::resource_not_found(format!("no resource at {}", request.uri), None))
    ///     }
    ///     // ... and the same for `subscribe` and `unsubscribe`; `list_resources` lists the
    ///     // app's own on the first page, then eve's pages, passing the cursor on.
    /// }
    /// ```
    pub fn serves_uri(&self, uri: &str) -> bool {
        resources::is_eve_uri(uri)
    }

    /// Serves MCP over a byte stream pair (newline-delimited JSON-RPC) until the client closes
    /// it: stdio, a socket, or an in-memory pipe in tests.
    ///
    /// # Errors
    ///
    /// The transport failed before the client closed it.
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let transport = wire::LineTransport::new(read, write, STDIO_MESSAGE_LIMIT);
        let running = self.serve(transport).await.map_err(|error| ServeError(error.to_string()))?;
        running.waiting().await.map_err(|error| ServeError(error.to_string()))?;
        Ok(())
    }
}

/// Serves every tool compiled into this binary over stdio until the client closes stdin:
/// recovers unfinished runs, serves, then shuts the runtime down. Log to stderr: stdout carries
/// the protocol.
///
/// # Errors
///
/// Recovery failed, or the transport failed before the client closed it.
pub async fn serve_stdio(runtime: Runtime) -> Result<(), ServeError> {
    let server = McpServer::new(runtime.clone());
    runtime.recover().await.map_err(|error| ServeError(format!("cannot recover unfinished runs: {error}")))?;
    // The runtime logged a warning for each held run; what to do about them is said once.
    let held = runtime.held_runs().len();
    if held > 0 {
        tracing::warn!("{}", crate::timeline::held_advice(held));
    }
    let (read, write) = stdio();
    let served = server.serve_io(read, write).await;
    runtime.shutdown().await;
    served
}

/// Why serving MCP stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("the MCP server stopped: {0}")]
pub struct ServeError(String);

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("tools", &self.inner.catalog.len()).finish_non_exhaustive()
    }
}
