//! Errors: what steps and bodies return, and what the runtime reports.
//!
//! [`StepError`] and [`ToolError`] work like `anyhow::Error`: any `std::error::Error` converts into
//! them with `?`. They do not implement `std::error::Error` themselves, which is what lets that
//! blanket conversion coexist with the conversions from [`FatalError`] and [`RetryableError`].

use std::fmt;
use std::time::Duration;

use std::path::PathBuf;

use crate::journal::ask::AnswerError;
use crate::journal::depth::TooDeep;
use crate::journal::{Op, OpSignature, RunFailure, RunId, RunStatus, SourceLocation};

/// Why a step attempt (or the whole step) failed.
///
/// Returned by a `#[step]` body to ask for a retry (the default for any error converted with `?`)
/// or to stop at once ([`FatalError`]). Returned to the workflow body when the step has failed for
/// good: fatally, or on its last permitted attempt.
pub struct StepError {
    message: String,
    fatal: bool,
    retry_after: Option<Duration>,
    /// Set by `StepCtx::get_token`/`require_auth`: the attempt ends waiting for this provider's sign-in.
    auth: Option<AuthNeed>,
}

/// Why a step attempt needs a sign-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuthNeed {
    /// The provider id.
    pub provider: String,
    /// True when the API rejected the token (`require_auth`); false when there was none.
    pub rejected: bool,
}

impl StepError {
    /// A retryable error with this message.
    pub fn msg(message: impl fmt::Display) -> Self {
        StepError { message: message.to_string(), fatal: false, retry_after: None, auth: None }
    }

    /// The error message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the error stops the step without further attempts.
    pub fn is_fatal(&self) -> bool {
        self.fatal
    }

    /// The delay the step asked for before its next attempt, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The attempt must wait for a sign-in with `provider`, because it had no token or (when
    /// `rejected`) the API refused the one it had; propagate it with `?`.
    pub(crate) fn auth_required(provider: &str, rejected: bool) -> Self {
        let message = format!("sign-in with `{provider}` is required");
        StepError {
            message,
            fatal: false,
            retry_after: None,
            auth: Some(AuthNeed { provider: provider.to_owned(), rejected }),
        }
    }

    /// The provider whose sign-in the attempt waits for, if it ended that way.
    pub fn auth_provider(&self) -> Option<&str> {
        self.auth.as_ref().map(|need| need.provider.as_str())
    }

    pub(crate) fn auth_need(&self) -> Option<&AuthNeed> {
        self.auth.as_ref()
    }

    pub(crate) fn from_record(fatal: bool, message: String) -> Self {
        StepError { message, fatal, retry_after: None, auth: None }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepError")
            .field("message", &self.message)
            .field("fatal", &self.fatal)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for StepError {
    fn from(error: E) -> Self {
        StepError::msg(chain(&error))
    }
}

/// The message of `error` followed by its sources, joined by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// An error that stops a step at once: no further attempt is made.
///
/// ```
/// # use eve_tools::{FatalError, StepError};
/// let error: StepError = FatalError::new("card declined").into();
/// assert!(error.is_fatal());
/// ```
#[derive(Debug, Clone)]
pub struct FatalError(String);

impl FatalError {
    /// A fatal error with this message.
    pub fn new(message: impl fmt::Display) -> Self {
        FatalError(message.to_string())
    }
}

impl fmt::Display for FatalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<FatalError> for StepError {
    fn from(error: FatalError) -> Self {
        StepError { message: error.0, fatal: true, retry_after: None, auth: None }
    }
}

/// An error that asks for another attempt, optionally after a given delay.
///
/// ```
/// # use eve_tools::{RetryableError, StepError};
/// # use std::time::Duration;
/// let error: StepError = RetryableError::new("rate limited").retry_after(Duration::from_secs(30)).into();
/// assert_eq!(error.retry_after(), Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone)]
pub struct RetryableError {
    message: String,
    retry_after: Option<Duration>,
}

impl RetryableError {
    /// A retryable error with this message; the step's backoff policy sets the delay.
    pub fn new(message: impl fmt::Display) -> Self {
        RetryableError { message: message.to_string(), retry_after: None }
    }

    /// Waits `delay` before the next attempt instead of the policy's backoff.
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }
}

impl fmt::Display for RetryableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<RetryableError> for StepError {
    fn from(error: RetryableError) -> Self {
        StepError { message: error.message, fatal: false, retry_after: error.retry_after, auth: None }
    }
}

/// The error a tool body returns; the run fails with its message.
///
/// ```
/// # use eve_tools::ToolError;
/// fn parse(text: &str) -> Result<u32, ToolError> {
///     Ok(text.parse::<u32>()?)
/// }
/// assert_eq!(parse("x").unwrap_err().to_string(), "invalid digit found in string");
/// ```
pub struct ToolError {
    message: String,
    /// Set by `WorkflowCtx::continue_as_new`: not a failure, but the input the run goes on with.
    continue_with: Option<ContinueWith>,
}

/// How a run continues as new: [`ToolError::continues_with`].
#[derive(Debug)]
pub(crate) struct ContinueWith {
    /// The input of the new history.
    pub input: crate::journal::Payload,
    /// Whether the deliveries waiting in the inbox reach the new history (see
    /// `Store::continue_as_new`).
    pub keep_inbox: bool,
    /// What the new history's body would deserialize from `input`, already built, when the body
    /// built `input` from a value of its own input type: the new body takes it in process
    /// ([`WorkflowCtx::take_warm`](crate::context::WorkflowCtx::take_warm)) instead of checking
    /// and decoding `input` again. A restart decodes `input` from the journal, so `input` must
    /// decode to an equal value.
    pub warm: Option<Warm>,
}

/// A new history's input, already built, handed over in process (see [`ContinueWith::warm`]).
pub(crate) type Warm = Box<dyn std::any::Any + Send + Sync>;

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl fmt::Display) -> Self {
        ToolError { message: message.to_string(), continue_with: None }
    }

    /// The error message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The "error" `WorkflowCtx::continue_as_new` returns: the run goes on with `input`.
    pub(crate) fn continue_as_new(input: serde_json::Value) -> Self {
        let continue_with = Some(ContinueWith { input: input.into(), keep_inbox: false, warm: None });
        ToolError { message: "the run continues as new".to_owned(), continue_with }
    }

    /// The "error" a body returns to continue as new, as
    /// [`WorkflowCtx::continue_as_new`](crate::WorkflowCtx::continue_as_new) does, but keeping
    /// the deliveries waiting in the inbox for the new history (whose body must create the same
    /// hooks first, as a session's does) and handing the new body `warm`, the value `input` was
    /// serialized from, to take with [`WorkflowCtx::take_warm`](crate::WorkflowCtx::take_warm)
    /// instead of decoding `input` again. A restart decodes `input` from the journal, so `input`
    /// must decode to a value equal to `warm`.
    pub fn continue_keeping_inbox<T>(input: crate::journal::Payload, warm: T) -> Self
    where
        T: std::any::Any + Send + Sync,
    {
        let continue_with = Some(ContinueWith { input, keep_inbox: true, warm: Some(Box::new(warm)) });
        ToolError { message: "the run continues as new".to_owned(), continue_with }
    }

    /// How the run continues, if this is `continue_as_new`'s return value.
    pub(crate) fn continues_with(&mut self) -> Option<ContinueWith> {
        self.continue_with.take()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolError").field(&self.message).finish()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::new(chain(&error))
    }
}

impl From<StepError> for ToolError {
    fn from(error: StepError) -> Self {
        ToolError::new(error.message)
    }
}

impl From<FatalError> for ToolError {
    fn from(error: FatalError) -> Self {
        ToolError::new(error.0)
    }
}

/// A run's body asked for a different operation than its journal recorded.
///
/// The run fails with this error rather than hand a recorded result to the wrong call. It happens
/// when a workflow's code changes while runs of it are in flight: guard the change with
/// [`WorkflowCtx::patched`](crate::WorkflowCtx::patched), finish those runs on the build that
/// started them, or start new runs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", describe_divergence(.run, *.op, .expected.as_ref(), .found.as_ref(), .at.as_ref()))]
pub struct NonDeterminismError {
    /// The run that diverged.
    pub run: RunId,
    /// The operation number at which it diverged.
    pub op: Op,
    /// What the journal recorded at `op`, or `None` if the journal ends there.
    pub expected: Option<OpSignature>,
    /// What the body asked for at `op`, or `None` if the body finished without asking.
    pub found: Option<OpSignature>,
    /// Where in the source the body asked for `found`, when that is known.
    pub at: Option<SourceLocation>,
}

fn describe_divergence(
    run: &RunId,
    op: Op,
    expected: Option<&OpSignature>,
    found: Option<&OpSignature>,
    at: Option<&SourceLocation>,
) -> String {
    let recorded = expected.map_or_else(|| "nothing".to_owned(), ToString::to_string);
    let asked = found.map_or_else(|| "nothing more (the body returned)".to_owned(), ToString::to_string);
    let at = at.map(|at| format!(" (at {at})")).unwrap_or_default();
    if let Some(id) = patch_of(found) {
        return format!(
            "run {run} took the old branch of patch `{id}` at {op} (its journal, written before the patch, records \
             {recorded} there) but this build removed that branch with `ctx.deprecate_patch(\"{id}\")`{at}; finish \
             the run on a build that still calls `ctx.patched(\"{id}\")`"
        );
    }
    if let Some(id) = patch_of(expected) {
        return format!(
            "run {run} took patch `{id}` at {op} but the code now asks for {asked}{at}; keep \
             `ctx.deprecate_patch(\"{id}\")` at that point while runs that took the patch are in flight"
        );
    }
    format!(
        "run {run} diverged from its journal at {op}: the journal recorded {recorded} but the code now asks for \
         {asked}{at}; the workflow changed while the run was in flight: guard the change with \
         `if ctx.patched(\"a-patch-id\")` at that line so runs recorded before it keep the old code, finish such \
         runs on the build that started them, or start a new run"
    )
}

/// The id of the patch `signature` marks, if it marks one.
fn patch_of(signature: Option<&OpSignature>) -> Option<&str> {
    signature.filter(|signature| signature.kind == crate::journal::OpKind::Patch).map(|signature| &*signature.name)
}

impl NonDeterminismError {
    pub(crate) fn failure(&self) -> RunFailure {
        let (expected, found, at) = (self.expected.clone(), self.found.clone(), self.at.clone());
        RunFailure::NonDeterminism { op: self.op, expected, found, at }
    }
}

/// An error from a [`Store`](crate::store::Store).
///
/// It is `Clone` so a store that commits many callers' requests together can give each the same
/// error when the shared commit fails.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The writer's fence is stale: another claim of the run superseded it. Nothing was written.
    #[error(
        "run {run} is now advanced by another claim (epoch {current}, this writer holds {held}); nothing was written"
    )]
    Fenced {
        /// The run.
        run: RunId,
        /// The epoch the writer presented.
        held: u64,
        /// The current epoch.
        current: u64,
    },
    /// The append did not start at the journal's next sequence number. Nothing was written.
    #[error("run {run}'s journal has {actual} entries but the append expected {expected}; nothing was written")]
    SeqConflict {
        /// The run.
        run: RunId,
        /// The sequence number the writer expected next.
        expected: u64,
        /// The journal's actual length.
        actual: u64,
    },
    /// Another worker holds an unexpired lease on the run.
    #[error("run {run} is leased by worker {owner} until {until}; try again after the lease expires")]
    Leased {
        /// The run.
        run: RunId,
        /// The worker holding it.
        owner: String,
        /// When its lease expires.
        until: crate::time::Timestamp,
    },
    /// A hook's chosen token is held by another unfinished run. Nothing was written.
    #[error(
        "run {run} cannot create the hook at {op}: another unfinished run holds the same token; nothing was written"
    )]
    HookTokenInUse {
        /// The run whose append was refused.
        run: RunId,
        /// The hook's operation.
        op: Op,
    },
    /// No run has this id.
    #[error("no run with id {0}; list runs to see the ids this store holds")]
    RunNotFound(RunId),

    /// The run has ended, so its journal accepts no more entries.
    #[error("run {0} has already finished; its journal is closed")]
    RunFinished(RunId),
    /// The store could not be opened.
    #[error("cannot open the eve store at {path}: {reason}")]
    Open {
        /// Where the store lives.
        path: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// Another process holds the store (an embedded store is one process's at a time).
    #[error(
        "cannot open the eve store at {path}: another eve process is using the store (it holds {lock}); stop that process or use another data_dir"
    )]
    InUse {
        /// Where the store lives.
        path: String,
        /// The lock file the other process holds.
        lock: String,
    },
    /// The store's file, or the folder it lives in, cannot be written: a read-only file system or
    /// permissions. Nothing was written; reading may still work.
    #[error(
        "the eve store cannot be written: {path} is read-only; make it writable, or keep the store in a folder this \
         process can write (`--data-dir` or `EVE_DATA_DIR` on the command line, `data_dir` in code)"
    )]
    ReadOnly {
        /// The file or folder that is read-only.
        path: String,
    },
    /// The disk is full. Nothing from the failed write was kept; what was acknowledged before is intact.
    #[error("the disk holding the eve store is full; free space and retry (nothing already acknowledged was lost)")]
    DiskFull,
    /// The store file is damaged.
    #[error("the eve store at {path} is corrupt ({reason}); restore it from a backup")]
    Corrupt {
        /// Where the store lives.
        path: String,
        /// What the integrity check found.
        reason: String,
    },
    /// A value is larger than the store accepts.
    #[error("{what} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A value nests deeper than the store can read back. Nothing was written.
    #[error("{what} nests JSON deeper than the {limit} levels a journaled value may have; nothing was written")]
    TooDeep {
        /// What was too deep.
        what: &'static str,
        /// The deepest nesting a journaled value may have.
        limit: usize,
    },
    /// Too many deliveries wait for the run, or for one of its hooks: it does not take them in as
    /// fast as they come. Nothing was written; try again later.
    #[error("run {run} has {pending} deliveries waiting{}, the most its inbox holds; try again later", .hook.map_or_else(String::new, |op| format!(" for the hook at {op}")))]
    InboxFull {
        /// The run.
        run: RunId,
        /// The hook the limit is for, if it is the per-hook limit.
        hook: Option<Op>,
        /// How many deliveries wait.
        pending: usize,
    },
    /// The run's journal reached the runtime's history limit. Nothing was written; the run fails
    /// (a run that keeps going continues as new with `ctx.continue_as_new` before it gets there).
    #[error("run {run}'s journal reached the history limit of {limit} entries; nothing more was written")]
    HistoryLimit {
        /// The run.
        run: RunId,
        /// The limit, in journal entries.
        limit: u64,
    },
    /// A hook's payload was sent to a run, or a run's delivery to a hook: a caller's mistake.
    /// Nothing was written.
    #[error("a hook payload needs a hook target, and a run delivery a run target; nothing was written")]
    MismatchedTarget,
    /// Any other failure of the backing database.
    #[error("eve store error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Whether trying the same request again later may succeed: the backend failed or the disk was
    /// full. Refusals (a stale fence, a closed journal, a value over a limit) and damage are final.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Backend(_) | StoreError::DiskFull)
    }
}

/// Errors from the [`Runtime`](crate::Runtime)'s API, and from what a step asks of it through
/// [`RunControl`](crate::control::RunControl).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tool has this name.
    #[error(
        "no tool named `{name}`{}; this binary has: {}. A library's tools are in a binary only if the binary \
         links the library: name it in the host with `eve_tools::tools!(my_tools)`",
        .nearest.map(|nearest| format!(" (did you mean `{nearest}`?)")).unwrap_or_default(),
        .known.join(", ")
    )]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The tools this binary has.
        known: Vec<&'static str>,
        /// The tool whose name is nearest to the one asked for, if one is near enough to be a
        /// typing mistake.
        nearest: Option<&'static str>,
    },
    /// The input does not fit the tool's JSON Schema, or does not decode into its input type;
    /// nothing started.
    #[error("invalid input for tool `{tool}`: {message}")]
    InvalidInput {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
        /// The field at fault, by its JSON path within the input (`quantity`, `lines[0].sku`),
        /// when one is.
        field: Option<String>,
    },
    /// A run with this id exists for another tool or with another input; nothing started. A run
    /// id names one run of one tool with one input, so only a repeat of the same call is the same
    /// run.
    #[error(
        "run id `{run}` is taken by a run of `{existing}`{}; use another id, or none for a fresh one",
        if existing == requested { " with another input".to_owned() } else { format!(", not `{requested}`") }
    )]
    RunIdTaken {
        /// The id.
        run: RunId,
        /// The tool of the run that has the id.
        existing: String,
        /// The tool the refused start asked for.
        requested: String,
    },
    /// A hook payload does not decode into the type the hook receives; nothing was delivered.
    #[error("the hook refused the payload: {message}")]
    InvalidPayload {
        /// What is wrong, naming the field.
        message: String,
        /// The field at fault, by its JSON path within the payload (`paid`, `lines[0].sku`), when
        /// one is.
        field: Option<String>,
    },
    /// The run has already ended, so there is nothing to cancel; nothing changed.
    #[error("run {run} has already {status}; there is nothing to cancel")]
    RunFinished {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// A plain tool ran and returned an error of its own (the input was fine).
    #[error("tool `{tool}` failed: {error}")]
    ToolFailed {
        /// The tool.
        tool: String,
        /// What the tool returned.
        error: ToolError,
    },
    /// The tool is not of the kind the call needs.
    #[error("tool `{tool}` is {actual}; {hint}")]
    WrongKind {
        /// The tool.
        tool: String,
        /// What kind it is.
        actual: &'static str,
        /// What to call instead.
        hint: &'static str,
    },
    /// Two tools compiled into the binary share a name.
    #[error(
        "{} tools are named `{name}` ({}); give all but one another name with `name = \"…\"`",
        .workflow_ids.len(),
        .workflow_ids.join(", ")
    )]
    DuplicateTool {
        /// The shared name.
        name: &'static str,
        /// The workflow ids of the tools claiming it.
        workflow_ids: Vec<&'static str>,
    },
    /// A value nests deeper than the journal keeps (see [`crate::journal::depth`]); nothing changed.
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// No unfinished run holds a hook with this token.
    #[error("no open hook has this token; check the token, or the run that held it may have ended")]
    UnknownHook,
    /// No step waits for a sign-in with this callback `state` and provider.
    #[error("no sign-in is waiting for this callback")]
    UnknownCallback,
    /// An answer was refused.
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// An auth provider failed.
    #[error(transparent)]
    Auth(AuthError),
    /// No run has this id.
    #[error("no run with id {0}; list runs to see the ids this store holds")]
    RunNotFound(RunId),

    /// A follower asked for a position in a history the run has not reached (see
    /// [`Runtime::follow`](crate::Runtime::follow)).
    #[error(
        "position {position} is past run {run}'s journal, which is in history {history}; follow from a position \
         the run's entries gave, or from the start"
    )]
    PositionAhead {
        /// The run.
        run: RunId,
        /// The position asked for.
        position: crate::journal::Position,
        /// The run's current history.
        history: u32,
    },
    /// The runtime was built outside a Tokio runtime.
    #[error("the eve runtime must be built inside a Tokio runtime (use #[tokio::main] or Runtime::block_on)")]
    NoTokioRuntime,
    /// A setting of the [`RuntimeBuilder`](crate::RuntimeBuilder) cannot be used.
    #[error("the runtime setting `{setting}` cannot be used: {reason}")]
    InvalidConfig {
        /// The builder method, as named in the code (`heartbeat`, `worker_id`, ...).
        setting: &'static str,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The secret key could not be read or created.
    #[error("cannot read or create the secret key at {path}: {source}")]
    SecretKey {
        /// Where the key lives.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The runtime is shutting down (or was dropped): the request was not carried out.
    #[error("the eve runtime is shutting down; nothing was done, try again once it runs")]
    ShuttingDown,
    /// This build holds the run: it is unfinished and its journal does not replay on this build,
    /// so it is neither advanced nor failed here (see
    /// [`Runtime::held_runs`](crate::Runtime::held_runs)); nothing changed.
    #[error(
        "run {run} is held: this build cannot replay its journal ({reason}); fork it onto this build from the op \
         before the divergence (`runs fork {run} --from <op>`), cancel it (its cleanup cannot run on this build), \
         run the build that started it until it finishes, or ship a build that replays it (a `ctx.patched(\"id\")` \
         at the line the divergence names)"
    )]
    Held {
        /// The run.
        run: RunId,
        /// Why this build cannot replay it, in a sentence: where its journal diverges.
        reason: String,
    },
    /// A run could not be forked (see [`Runtime::fork`](crate::Runtime::fork)); nothing was
    /// created.
    #[error(transparent)]
    Fork(#[from] ForkError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why [`Runtime::fork`](crate::Runtime::fork) refused to fork a run; nothing was created.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The run has not ended: it may still take the ops a fork would run again.
    #[error("run {run} is still active; cancel it first (or let it end), then fork it")]
    Active {
        /// The run.
        run: RunId,
    },
    /// The op to fork from is past the ops the run's journal records.
    #[error(
        "run {run} records {ops} ops (0 to {last}); fork from one of them, or from op {ops} to keep them all",
        last = ops.saturating_sub(1)
    )]
    PastTheEnd {
        /// The run.
        run: RunId,
        /// The op asked for.
        from: Op,
        /// How many ops the run's journal records.
        ops: u32,
    },
    /// The run's tool is not in this build (renamed or removed), or is not a workflow.
    #[error(
        "run {run} is a run of `{tool}`, which this build does not have as a workflow tool; fork it with a build that has it"
    )]
    UnknownTool {
        /// The run.
        run: RunId,
        /// Its tool.
        tool: String,
    },
    /// An op the fork would keep started a child run, which reports to the run forked and never
    /// to the fork.
    #[error(
        "{op} of run {run} started run {child}, which reports to {run} and not to a fork; fork from {op} or earlier"
    )]
    StartedChild {
        /// The run.
        run: RunId,
        /// The op that started the child.
        op: Op,
        /// The child run.
        child: String,
    },
    /// The ops the fork would keep do not replay on this build's body.
    #[error(
        "the ops of run {run} before {from} do not replay on this build: {reason}; fork from an earlier op, or \
         with a build whose body asks for them"
    )]
    Diverges {
        /// The run.
        run: RunId,
        /// The op asked for.
        from: Op,
        /// Where and how the body departs from the kept journal, in words.
        reason: String,
    },
}

impl Error {
    /// Whether the same request may succeed if tried again later: the store failed for a while,
    /// or the runtime was stopping. Refusals (an unknown tool, invalid input, a finished run) are
    /// final.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Store(error) => error.is_transient(),
            Error::ShuttingDown => true,
            _ => false,
        }
    }
}

/// Why an auth provider failed. Messages never contain tokens or codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The provider refused the exchange or the token.
    #[error("{provider} refused the sign-in: {reason}")]
    Refused {
        /// The provider id.
        provider: String,
        /// What it said, without secrets.
        reason: String,
    },
    /// The provider could not be reached.
    #[error("cannot reach {provider}: {reason}")]
    Unreachable {
        /// The provider id.
        provider: String,
        /// What went wrong.
        reason: String,
    },
    /// The provider is misconfigured.
    #[error("{provider} is misconfigured: {reason}")]
    Config {
        /// The provider id.
        provider: String,
        /// What is wrong.
        reason: String,
    },
}
