//! What every handler shares: the runtime, the limits requests are held to, the API key, the
//! origins allowed to use the run API, and the server's stop signal.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::cookie::SignIns;
use super::origin::Origins;
use eve_runtime::Runtime;
use eve_runtime::secret::{SecretKey, TokenHash};

/// The limits every request is held to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The largest body accepted, in bytes.
    pub body: usize,
    /// How long the headers, and then the whole body, may take to arrive.
    pub body_timeout: Duration,
    /// How long a manual webhook waits for its step's response.
    pub response_timeout: Duration,
    /// How many connections may be open at once.
    pub connections: usize,
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState(pub Arc<Shared>);

pub(crate) struct Shared {
    pub runtime: Runtime,
    pub limits: Limits,
    /// The hash of the key the `/v1` run API requires, if any.
    pub api_key: Option<TokenHash>,
    /// The origins whose pages may use the `/v1` run API.
    pub origins: Origins,
    /// The inspector's sign-ins, which stand in for the key (see `cookie.rs`).
    pub sign_ins: SignIns,
    /// The key the sign-ins' cookies are signed with, derived from the runtime's.
    pub sign_in_key: SecretKey,
    /// Becomes `true` when the server shuts down.
    pub stop: watch::Receiver<bool>,
    /// The recorder `/metrics` renders, if the server was given one.
    #[cfg(feature = "metrics")]
    pub metrics: Option<crate::metrics::Metrics>,
    /// MCP: what is mounted at `/mcp` (a default server over the runtime when `None`).
    #[cfg(feature = "mcp")]
    pub mcp: Option<crate::mcp::http::Mounter>,
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}
