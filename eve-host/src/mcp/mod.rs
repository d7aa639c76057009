//! The Model Context Protocol server (cargo feature `mcp`): every tool in the manifest, served to
//! MCP clients over stdio ([`serve_stdio`]) or Streamable HTTP (`/mcp` on
//! [`crate::http::Server`]), with durable runs as MCP tasks.
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
//! | a sign-in a step waits for | a URL elicitation carrying the sign-in link, keyed `sign-in-{op}` |
//! | `tasks/update` | [`Runtime::answer`] for each answered question |
//! | `tasks/cancel` | [`Runtime::cancel`]: the run's cleanup runs, and the task ends `cancelled` |
//! | a run that completed | `completed`, its output as the tool result |
//! | a body that returned an error | `completed` with `isError: true` |
//! | a run that panicked, diverged or outgrew its history | `failed`, with a JSON-RPC error |
//! | a cancelled run | `cancelled` |
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

/// An MCP server over a [`Runtime`]'s tools. Cheap to clone; clones share one server.
///
/// It implements rmcp's [`ServerHandler`](rmcp::ServerHandler), so it can also be served on any
/// rmcp transport.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    runtime: Runtime,
    catalog: Arc<tools::Catalog>,
    /// Tools that only run as tasks: a call from a client without the tasks extension is refused.
    task_only: Vec<String>,
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
            poll_interval: Duration::from_millis(500),
            states: Arc::new(call::States::new(&SecretKey::generate())),
            seen: Arc::new(status::LastChanges::default()),
            levels: Arc::default(),
            runtime,
        };
        McpServer { inner: Arc::new(inner) }
    }

    /// Makes `tool` run only as a task: a call from a client that has not declared the tasks
    /// extension gets the JSON-RPC error `-32021` (a missing client capability) and starts nothing.
    pub fn require_task(mut self, tool: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.inner).task_only.push(tool.into());
        self
    }

    /// How often clients should poll a task (`pollIntervalMs`); default 500 ms.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        Arc::make_mut(&mut self.inner).poll_interval = interval;
        self
    }

    /// Seals the state of multi round-trip calls (`requestState`) with a key derived from `key`
    /// instead of one made for this process, so a round that a restarted server, or another
    /// server sharing the key, receives goes on. The host CLI passes its data directory's key.
    pub fn request_state_key(mut self, key: &SecretKey) -> Self {
        Arc::make_mut(&mut self.inner).states = Arc::new(call::States::new(key));
        self
    }

    /// The runtime this server runs tools with.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
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
