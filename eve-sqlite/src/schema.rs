//! The schema of an eve SQLite file, and the checks made on it when it is opened.
//!
//! An eve file carries `PRAGMA application_id` [`APPLICATION_ID`] and `PRAGMA user_version`
//! [`VERSION`]. Opening a file that is empty creates the schema, and opening a file of an older
//! version migrates it (each in one transaction, so a crash leaves either nothing or everything);
//! a file from a newer eve, or a SQLite file that eve did not create, is refused untouched.
//!
//! Tables (all but the journal keyed by the run id first, so a run's rows sit together):
//!
//! - `runs`: one row per run; `continued` numbers its current history (from version 6); `parked`
//!   marks a run that waits on durable waits only (cleared by every append), so a restart need not
//!   load it; `entries` is the journal's length while the run is parked or finished. While it goes
//!   on, the journal's last `seq` says its length, one seek away (see `reads::length_sql`), so an
//!   append that changes no status writes the journal alone (from version 4; before, every append
//!   advanced `entries`). Claims are not stored: one process uses a file at a time, so they live in
//!   memory (see the module documentation of the store). Listings order by `rowid`, which grows
//!   with creation since runs are never deleted, and page by it; `runs_by_status` and
//!   `runs_by_tool` (each holding the `rowid`) serve their filters in that order. `fingerprint`
//!   and `version` are the build the run's history runs on (both `NULL` if its journal records
//!   none), written only with the entries that name a build (`run_started`, `run_upgraded`), so
//!   listings show it and a start-up tells the runs of its own build without reading journals
//!   (from version 7).
//! - `journal`: `(run_id, seq) -> entry` JSON, dense from 0, stored in the order the entries were
//!   appended (`id`), with the unique index `journal_by_run` on `(run_id, seq)` (from version 5).
//!   Many runs appending at once then write the table's last page and a few pages of the small
//!   index per commit, where a table keyed by run wrote one page per run. A run's entries keep
//!   ascending ids, so a history appended without others in between is one range of the table,
//!   which a claim reads without the index (see `reads::journal_into`).
//! - `journal_previous`: the histories a run's last continue-as-news ended (at most
//!   `KEPT_HISTORIES`), `(run_id, history, seq) -> entry`, kept so a follower still reading one
//!   reads it to its end (from version 6).
//! - `timers`: pending sleeps and retries, one row per `(run_id, op, kind)`.
//! - `hooks`: `token_hash -> (run_id, op, meta)` for unfinished runs only (meta: hook, webhook with
//!   its response mode, or sign-in callback); never a token.
//! - `inbox`: deliveries, with the op of the hook they are for (`NULL` for a cancellation or an
//!   answer), `UNIQUE (run_id, delivery_id)` so a repeated delivery id is a duplicate even after
//!   its item was consumed. `AUTOINCREMENT` keeps ids unique over the file's life, as
//!   callers name items by id. A finished run's rows are deleted (it accepts no deliveries).

use rusqlite::{Connection, TransactionBehavior};

use super::codec::open_error;
use eve_runtime::store::StoreError;

/// `PRAGMA application_id` of an eve store: "EVE1" in ASCII.
pub(super) const APPLICATION_ID: i64 = 0x4556_4531;

/// The schema version this build writes and understands. Files of an older version are migrated
/// at open ([`MIGRATIONS`]).
pub(super) const VERSION: i64 = 7;

const CREATE: &str = "
CREATE TABLE runs (
    id          TEXT PRIMARY KEY NOT NULL,
    workflow_id TEXT NOT NULL,
    tool        TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'cancelled')),
    created_at  INTEGER NOT NULL,
    entries     INTEGER NOT NULL,
    parked      INTEGER NOT NULL DEFAULT 0,
    continued   INTEGER NOT NULL DEFAULT 0,
    fingerprint TEXT,
    version     TEXT
);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX runs_by_tool ON runs (tool);
CREATE INDEX runs_unparked ON runs (id) WHERE status = 'active' AND parked = 0;

CREATE TABLE journal (
    id     INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    entry  TEXT NOT NULL
);
CREATE UNIQUE INDEX journal_by_run ON journal (run_id, seq);

CREATE TABLE journal_previous (
    run_id  TEXT NOT NULL,
    history INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    entry   TEXT NOT NULL,
    PRIMARY KEY (run_id, history, seq)
) WITHOUT ROWID;

CREATE TABLE timers (
    run_id TEXT NOT NULL,
    op     INTEGER NOT NULL,
    kind   TEXT NOT NULL CHECK (kind IN ('sleep', 'retry')),
    due    INTEGER NOT NULL,
    PRIMARY KEY (run_id, op, kind)
) WITHOUT ROWID;

CREATE TABLE hooks (
    token_hash TEXT PRIMARY KEY NOT NULL,
    run_id     TEXT NOT NULL,
    op         INTEGER NOT NULL,
    meta       TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX hooks_by_run ON hooks (run_id);

CREATE TABLE inbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    delivery_id TEXT,
    delivery    TEXT NOT NULL,
    consumed    INTEGER NOT NULL DEFAULT 0,
    op          INTEGER,
    UNIQUE (run_id, delivery_id)
);
CREATE INDEX inbox_pending ON inbox (run_id, id) WHERE consumed = 0;
CREATE INDEX inbox_pending_by_hook ON inbox (run_id, op) WHERE consumed = 0;
";

/// The SQL that brings a file from version `n` to `n + 1`, at index `n - 1`.
const MIGRATIONS: &[&str] = &[
    // 1 -> 2: parked runs are not replayed at start-up; inbox limits count deliveries per hook.
    "
ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_unparked ON runs (id) WHERE status = 'active' AND parked = 0;
ALTER TABLE inbox ADD COLUMN op INTEGER;
CREATE INDEX inbox_pending_by_hook ON inbox (run_id, op) WHERE consumed = 0;
",
    // 2 -> 3: the inspector lists runs by tool, a page at a time.
    "
CREATE INDEX runs_by_tool ON runs (tool);
",
    // 3 -> 4: `runs.entries` is kept only while a run is parked or finished (an unfinished run's
    // length is read from its journal), so appends no longer rewrite the row. Every version 3 row
    // holds its exact length, so nothing changes but the version, which keeps older builds (that
    // would trust a running run's `entries`) from opening the file.
    "",
    // 4 -> 5: the journal is stored in the order of its appends, indexed by run. Its entries are
    // copied run by run, so each history already written stays one range of the table.
    "
CREATE TABLE journal_by_append (
    id     INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    entry  TEXT NOT NULL
);
INSERT INTO journal_by_append (run_id, seq, entry) SELECT run_id, seq, entry FROM journal ORDER BY run_id, seq;
DROP TABLE journal;
ALTER TABLE journal_by_append RENAME TO journal;
CREATE UNIQUE INDEX journal_by_run ON journal (run_id, seq);
",
    // 5 -> 6: each run keeps the number of its history, which followers read with each page,
    // and the histories before it, which followers still reading one read to its end.
    "
ALTER TABLE runs ADD COLUMN continued INTEGER NOT NULL DEFAULT 0;
CREATE TABLE journal_previous (
    run_id  TEXT NOT NULL,
    history INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    entry   TEXT NOT NULL,
    PRIMARY KEY (run_id, history, seq)
) WITHOUT ROWID;
UPDATE runs SET continued = coalesce(
    (SELECT json_extract(entry, '$.run_started.continued') FROM journal WHERE run_id = runs.id AND seq = 0), 0);
",
    // 6 -> 7: each run keeps the build its history runs on (see `eve_runtime::store::kit::build`):
    // the last `run_upgraded`'s, else its `run_started`'s; NULL where the journal records none.
    r#"
ALTER TABLE runs ADD COLUMN fingerprint TEXT;
ALTER TABLE runs ADD COLUMN version TEXT;
UPDATE runs SET (fingerprint, version) = (
    SELECT json_extract(entry, '$.run_started.build.fingerprint'), json_extract(entry, '$.run_started.build.version')
    FROM journal WHERE run_id = runs.id AND seq = 0);
UPDATE runs SET (fingerprint, version) = (
    SELECT json_extract(entry, '$.run_upgraded.build.fingerprint'), json_extract(entry, '$.run_upgraded.build.version')
    FROM journal WHERE run_id = runs.id AND entry LIKE '{"run_upgraded"%' ORDER BY seq DESC LIMIT 1)
WHERE EXISTS (SELECT 1 FROM journal WHERE run_id = runs.id AND entry LIKE '{"run_upgraded"%');
"#,
];

/// What identifies the file's contents.
struct Identity {
    application_id: i64,
    version: i64,
    objects: i64,
}

/// Makes sure the file holds this version's schema, creating it in an empty file.
pub(super) fn prepare(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    let identity = identify(conn).map_err(|error| open_error(&error, path))?;
    match identity {
        Identity { application_id: APPLICATION_ID, version: VERSION, .. } => Ok(()),
        Identity { application_id: APPLICATION_ID, version, .. } if version > VERSION => Err(refuse(
            path,
            format!(
                "it was written by a newer eve (schema version {version}; this build understands {VERSION}); \
                 upgrade eve or use another data_dir"
            ),
        )),
        Identity { application_id: APPLICATION_ID, version, .. } if version >= 1 => {
            // Copying a long journal takes a while (about 10 s a gigabyte): say why open waits.
            tracing::info!(
                path,
                from = version,
                to = VERSION,
                copies_journal = version < 5,
                "upgrading the eve store's schema"
            );
            let started = std::time::Instant::now();
            migrate(conn, version).map_err(|error| migration_error(&error, path, version))?;
            let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::info!(path, took_ms, "upgraded the eve store's schema");
            Ok(())
        }
        Identity { application_id: APPLICATION_ID, version, .. } => Err(refuse(
            path,
            format!(
                "it has eve schema version {version}, which this build (version {VERSION}) cannot read; \
                 open it with the eve release that wrote it"
            ),
        )),
        Identity { application_id: 0, version: 0, objects: 0 } => {
            create(conn).map_err(|error| open_error(&error, path))
        }
        Identity { application_id, version, .. } => Err(refuse(
            path,
            format!(
                "it is a SQLite file that this eve did not create (application id {application_id:#x}, \
                 schema version {version}); use another data_dir or move the file away"
            ),
        )),
    }
}

fn identify(conn: &Connection) -> rusqlite::Result<Identity> {
    Ok(Identity {
        application_id: conn.pragma_query_value(None, "application_id", |row| row.get(0))?,
        version: conn.pragma_query_value(None, "user_version", |row| row.get(0))?,
        objects: conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))?,
    })
}

/// Brings a file of schema version `from` to [`VERSION`], in one transaction: a crash leaves the
/// old version whole, and the next open migrates again.
fn migrate(conn: &mut Connection, from: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for step in &MIGRATIONS[usize::try_from(from - 1).unwrap_or(0)..] {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()
}

fn create(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(CREATE)?;
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()
}

/// Why the migration of a version `version` file failed. Every migration from before version 5
/// copies the journal, so the file needs room for a second copy while it runs: a full disk says so, and
/// that nothing changed (the migration is one transaction).
fn migration_error(error: &rusqlite::Error, path: &str, version: i64) -> StoreError {
    if error.sqlite_error_code() != Some(rusqlite::ErrorCode::DiskFull) {
        return open_error(error, path);
    }
    if version >= 5 {
        let reason = format!(
            "upgrading it from eve schema version {version} to {VERSION} needs a little room on its disk, which \
             has none; free some space and open it again (the file was left as it was)"
        );
        return refuse(path, reason);
    }
    let size = std::fs::metadata(path).map(|file| format!(" (the file is {} MB)", file.len().div_ceil(1 << 20)));
    refuse(
        path,
        format!(
            "upgrading it from eve schema version {version} to {VERSION} copies its journal, and its disk \
             has no room for the copy{}; free about as much space as the file takes and open it again \
             (the file was left as it was)",
            size.unwrap_or_default()
        ),
    )
}

fn refuse(path: &str, reason: String) -> StoreError {
    StoreError::Open { path: path.to_owned(), reason }
}

/// Refuses a file shorter than its own header says it is: it was truncated. SQLite alone may not
/// notice at open (it trusts the file's length when the two disagree), so this is checked first.
/// The header's page count is only meaningful when its "valid for" counter matches the change
/// counter (bytes 92 and 24); files too short to have a header are left to SQLite.
///
/// A file with a write-ahead log holding frames is left to SQLite too: a checkpoint writes page 1
/// (and so the new page count) before the pages after it, so a crash in between leaves a file
/// shorter than its header while the log still holds every page, and SQLite recovers it whole.
pub(super) fn check_length(path: &std::path::Path) -> Result<(), StoreError> {
    if wal_has_frames(path) {
        return Ok(());
    }
    let mut header = [0u8; 100];
    let read = std::fs::File::open(path).and_then(|mut file| std::io::Read::read_exact(&mut file, &mut header));
    if read.is_err() {
        return Ok(());
    }
    let word = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        size => u64::from(size),
    };
    let (pages, valid) = (u64::from(word(28)), word(92) == word(24));
    let length = std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
    if !header.starts_with(b"SQLite format 3\0") || !valid || pages * page_size <= length {
        return Ok(());
    }
    let reason = format!("the file is {length} bytes but its header says {} (it was truncated)", pages * page_size);
    Err(StoreError::Corrupt { path: path.display().to_string(), reason })
}

/// Whether `<path>-wal` holds at least one frame beyond its 32-byte header.
fn wal_has_frames(path: &std::path::Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(std::path::PathBuf::from(wal)).is_ok_and(|meta| meta.len() > 32)
}

/// Runs SQLite's quick integrity check, which reads every page, so damage is found at open rather
/// than in the middle of a run.
pub(super) fn check_integrity(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let problems = quick_check(conn).map_err(|error| open_error(&error, path))?;
    if problems.iter().all(|line| line == "ok") {
        return Ok(());
    }
    Err(StoreError::Corrupt { path: path.to_owned(), reason: format!("integrity check: {}", problems.join("; ")) })
}

fn quick_check(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare("PRAGMA quick_check(5)")?;
    let lines = statement.query_map([], |row| row.get(0))?;
    lines.collect()
}
