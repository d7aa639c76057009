//! What a session's API reports: the runtime's errors, and the session's own.

use eve_runtime::journal::RunId;

/// Errors of a session's API: the runtime's, and the session's own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The session has ended (closed, or its run finished): it takes no more messages.
    #[error("session {0} has ended and takes no more messages; start a new session")]
    Ended(RunId),
    /// The run with this id is not a session.
    #[error("run {0} is not a session; sessions are started with Runtime::session")]
    NotASession(RunId),
    /// The runtime refused or failed.
    #[error(transparent)]
    Runtime(#[from] eve_runtime::Error),
}
