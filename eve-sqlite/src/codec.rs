//! How values are stored in SQLite columns, and how database failures become [`StoreError`]s.
//!
//! Integers: SQLite integers are signed 64-bit, the runtime's counters and timestamps unsigned.
//! Counters (sequence numbers, epochs, operations) never come near `i64::MAX`; timestamps can
//! (`sleep(Duration::MAX)` saturates to `u64::MAX`), so [`int`] saturates at `i64::MAX`, which
//! keeps SQL ordering by time correct. A deadline past the year 292 million reads back as that year.
//!
//! Text: run statuses and timer kinds are stored as their lowercase names so the file reads well in
//! the `sqlite3` shell; journal entries and deliveries are stored as JSON text.

use rusqlite::ErrorCode;

use eve_runtime::journal::{Entry, RunId, RunStatus};
use eve_runtime::store::{StoreError, TimerKind};
use eve_runtime::time::Timestamp;

/// Why a piece of work on a connection failed, before it is turned into a [`StoreError`] by
/// code that knows the store's path.
#[derive(Debug)]
pub(super) enum Failure {
    /// The store refused the request (fenced, finished, ...); nothing was written.
    Store(StoreError),
    /// SQLite itself failed.
    Sqlite(rusqlite::Error),
    /// A stored value could not be decoded: the file was damaged or written by something else.
    Decode(String),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Failure::Sqlite(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

impl Failure {
    /// The error to report for a store at `path`.
    pub(super) fn into_store_error(self, path: &str) -> StoreError {
        match self {
            Failure::Store(error) => error,
            Failure::Sqlite(error) => sqlite_error(&error, path),
            Failure::Decode(reason) => StoreError::Corrupt { path: path.to_owned(), reason },
        }
    }
}

/// The [`StoreError`] for a SQLite failure while the store is in use.
pub(super) fn sqlite_error(error: &rusqlite::Error, path: &str) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => StoreError::DiskFull,
        // The file was made read-only after the store opened it.
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path: path.to_owned() },
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            StoreError::Corrupt { path: path.to_owned(), reason: error.to_string() }
        }
        _ => StoreError::Backend(format!("sqlite failed on {path}: {error}")),
    }
}

/// The [`StoreError`] for a SQLite failure while the store is being opened.
pub(super) fn open_error(error: &rusqlite::Error, path: &str) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull | ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => sqlite_error(error, path),
        _ => StoreError::Open {
            path: path.to_owned(),
            reason: format!("{error}; check that the path names a file this process may read and write"),
        },
    }
}

/// `value` as a SQLite integer, saturating at `i64::MAX` (see the module documentation).
pub(super) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A SQLite integer that the store wrote from an unsigned value.
pub(super) fn uint(value: i64) -> Result<u64, Failure> {
    u64::try_from(value).map_err(|_| Failure::Decode(format!("found the negative number {value} in a counter column")))
}

/// A timestamp column.
pub(super) fn timestamp(value: i64) -> Result<Timestamp, Failure> {
    uint(value).map(Timestamp::from_millis)
}

/// An operation-number column.
pub(super) fn op(value: i64) -> Result<eve_runtime::journal::Op, Failure> {
    u32::try_from(value)
        .map(eve_runtime::journal::Op)
        .map_err(|_| Failure::Decode(format!("found {value} where an operation number was expected")))
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

/// `entry` as JSON text, refused with [`StoreError::TooLarge`] if longer than `limit` bytes.
pub(super) fn encode_entry(entry: &Entry, limit: usize) -> Result<String, StoreError> {
    encode(entry, "a journal entry (SqliteOptions::max_entry_bytes)", limit)
}

/// `value` as JSON text, refused with [`StoreError::TooLarge`] if longer than `limit` bytes.
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
