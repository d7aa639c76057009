//! How values are stored in Postgres columns, and how database failures become [`StoreError`]s.
//!
//! Integers: Postgres `bigint` is signed, the runtime's counters and timestamps unsigned. Counters
//! never come near `i64::MAX`; timestamps can (`sleep(Duration::MAX)` saturates to `u64::MAX`), so
//! [`int`] saturates at `i64::MAX`, which keeps ordering by time correct, as in the SQLite store.
//!
//! Text: run statuses, timer kinds, hook kinds and delivery kinds are stored as lowercase names, so
//! the tables read well in `psql`; journal entries, deliveries and hook metadata as JSON *text*,
//! not `jsonb`: `jsonb` refuses `\u0000` inside strings and does not keep the text byte for byte,
//! and the store reads these values back only whole, by key.

use tokio_postgres::error::SqlState;

use eve_runtime::journal::{Entry, Op, RunId, RunStatus};
use eve_runtime::store::{Delivery, HookMeta, StoreError, TimerKind};
use eve_runtime::time::Timestamp;

/// Why a piece of work on a connection failed, before it is turned into a [`StoreError`] by code
/// that knows what was being done and where.
#[derive(Debug)]
pub(super) enum Failure {
    /// The store refused the request (fenced, finished, ...); nothing was written.
    Store(StoreError),
    /// Postgres (or the connection to it) failed before the transaction was committed, so nothing
    /// of it was written.
    Pg(tokio_postgres::Error),
    /// The connection failed while the transaction was being committed: it may or may not have
    /// been written.
    InDoubt(tokio_postgres::Error),
    /// A stored value could not be decoded: the table was changed by something other than eve.
    Decode(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Pg(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

impl Failure {
    /// Whether the request failed only because its connection was lost before anything could be
    /// committed, so running it again on another connection is safe.
    pub(super) fn is_lost_connection(&self) -> bool {
        matches!(self, Failure::Pg(error) if is_connection_loss(error))
    }

    /// Whether the request's connection is broken, so it must not go back to the pool.
    pub(super) fn broke_connection(&self) -> bool {
        matches!(self, Failure::Pg(error) | Failure::InDoubt(error) if is_connection_loss(error))
    }

    /// The error to report for `what` (such as "an append to run x") on the store at `target`.
    pub(super) fn into_store_error(self, what: &str, target: &str) -> StoreError {
        match self {
            Failure::Store(error) => error,
            Failure::Pg(error) => pg_error(&error, what, target),
            Failure::InDoubt(error) => StoreError::Backend(format!(
                "lost the connection to Postgres at {target} while committing {what} ({}); it may or may not \
                 have been written: read the run back before trying again",
                describe(&error)
            )),
            Failure::Decode(reason) => StoreError::Corrupt { path: target.to_owned(), reason },
        }
    }
}

/// Whether `error` means the connection is gone: closed, broken, or ended by the server (shut
/// down, restarted, or the backend terminated).
pub(super) fn is_connection_loss(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        return code.code().starts_with("08")
            || [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(code);
    }
    // No SQLSTATE and not a closed connection: an I/O failure on the socket.
    error.as_db_error().is_none()
        && std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

/// The [`StoreError`] for a Postgres failure while doing `what` on the store at `target`.
pub(super) fn pg_error(error: &tokio_postgres::Error, what: &str, target: &str) -> StoreError {
    let code = error.code();
    if code == Some(&SqlState::DISK_FULL) {
        return StoreError::DiskFull;
    }
    if code.is_some_and(|code| [SqlState::DATA_CORRUPTED, SqlState::INDEX_CORRUPTED].contains(code)) {
        return StoreError::Corrupt { path: target.to_owned(), reason: describe(error) };
    }
    let cause = if is_connection_loss(error) {
        format!("lost the connection to Postgres at {target} during {what}; nothing of it was committed")
    } else if code == Some(&SqlState::QUERY_CANCELED) {
        format!(
            "{what} took longer than the statement timeout (PostgresOptions::statement_timeout) on {target}; \
             nothing of it was committed"
        )
    } else {
        format!("Postgres at {target} failed during {what}; nothing of it was committed")
    };
    StoreError::Backend(format!("{cause}: {}", describe(error)))
}

/// One line saying what Postgres reported: the server's message and SQLSTATE, or the client's
/// error with its causes.
pub(super) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `value` as a `bigint`, saturating at `i64::MAX` (see the module documentation).
pub(super) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `bigint` the store wrote from an unsigned value.
pub(super) fn uint(value: i64) -> Result<u64, Failure> {
    u64::try_from(value).map_err(|_| Failure::Decode(format!("found the negative number {value} in a counter column")))
}

/// A timestamp column.
pub(super) fn timestamp(value: i64) -> Result<Timestamp, Failure> {
    uint(value).map(Timestamp::from_millis)
}

/// An operation-number column.
pub(super) fn op(value: i64) -> Result<Op, Failure> {
    u32::try_from(value)
        .map(Op)
        .map_err(|_| Failure::Decode(format!("found {value} where an operation number was expected")))
}

/// A `bytea` column holding a string (see the schema's documentation).
pub(super) fn text(bytes: &[u8], column: &str) -> Result<String, Failure> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Failure::Decode(format!("the {column} column holds bytes that are not UTF-8")))
}

/// A run-id column.
pub(super) fn run_id(text: &str) -> Result<RunId, Failure> {
    text.parse().map_err(|error| Failure::Decode(format!("{error}")))
}

/// The stored name of a run status.
pub(super) fn status_name(status: RunStatus) -> &'static str {
    status.name()
}

/// A run-status column.
pub(super) fn status(name: &str) -> Result<RunStatus, Failure> {
    RunStatus::from_name(name).ok_or_else(|| Failure::Decode(format!("found the unknown run status {name:?}")))
}

/// The stored name of a timer kind.
pub(super) fn kind_name(kind: TimerKind) -> &'static str {
    kind.name()
}

/// A timer-kind column.
pub(super) fn kind(name: &str) -> Result<TimerKind, Failure> {
    TimerKind::from_name(name).ok_or_else(|| Failure::Decode(format!("found the unknown timer kind {name:?}")))
}

/// The stored kind of a hook row, so queries can pick sign-in callbacks without parsing metadata.
pub(super) fn hook_kind(meta: &HookMeta) -> &'static str {
    match meta {
        HookMeta::Hook => "hook",
        HookMeta::Webhook { .. } => "webhook",
        HookMeta::Auth { .. } => "auth",
    }
}

/// `entry` as JSON text, refused with [`StoreError::TooLarge`] if longer than `limit` bytes.
pub(super) fn encode_entry(entry: &Entry, limit: usize) -> Result<String, StoreError> {
    encode(entry, "a journal entry (PostgresOptions::max_entry_bytes)", limit)
}

/// `value` as JSON text, refused with [`StoreError::TooLarge`] if longer than `limit` bytes and with
/// [`StoreError::TooDeep`] if it nests deeper than the journal can read back.
pub(super) fn encode<T: serde::Serialize>(value: &T, what: &'static str, limit: usize) -> Result<String, StoreError> {
    let text = serde_json::to_string(value)
        .map_err(|error| StoreError::Backend(format!("cannot serialize {what} to JSON: {error}")))?;
    if text.len() > limit {
        return Err(StoreError::TooLarge { what, size: text.len(), limit });
    }
    if !eve_runtime::journal::depth::fits(&text) {
        return Err(StoreError::TooDeep { what, limit: eve_runtime::journal::depth::MAX_DEPTH });
    }
    Ok(text)
}

/// A journal entry read back from run `run` at `seq`; a step compiled into this binary keeps
/// its name borrowed.
pub(super) fn decode_entry(run: &RunId, seq: i64, text: &str) -> Result<Entry, Failure> {
    eve_runtime::journal::decode::entry(text)
        .map_err(|error| Failure::Decode(format!("run {run}'s journal entry {seq} is not a valid entry: {error}")))
}

/// An inbox item's delivery read back.
pub(super) fn decode_delivery(run: &RunId, id: i64, text: &str) -> Result<Delivery, Failure> {
    eve_runtime::journal::depth::from_str(text)
        .map_err(|error| Failure::Decode(format!("inbox item {id} of run {run} is not a valid delivery: {error}")))
}

/// A hook row's metadata read back.
pub(super) fn decode_meta(text: &str) -> Result<HookMeta, Failure> {
    serde_json::from_str(text).map_err(|error| Failure::Decode(format!("unreadable hook metadata: {error}")))
}
