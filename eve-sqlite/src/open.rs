//! Opening a store file: the directory, the one-process lock, the connections and their settings.
//!
//! Order matters: the lock is taken before SQLite touches the file, so a second process never
//! changes a store another process is using (not even to clear its claims).

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::SqliteOptions;
use super::codec::open_error;
use eve_runtime::store::StoreError;

/// How long a connection waits for SQLite's own locks (only checkpoints and recovery take them,
/// since one process with one writer uses the file).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements kept per connection; comfortably more than the store uses.
const STATEMENT_CACHE: usize = 64;

/// Fails unless `path` can be a database file, creating its parent directories.
pub(super) fn prepare_path(path: &Path) -> Result<(), StoreError> {
    if path.is_dir() {
        return Err(refuse(path, "it is a directory; give the path of a database file, such as `.eve/eve.db`".into()));
    }
    let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) else { return Ok(()) };
    if let Some(file) = parent.ancestors().find(|folder| folder.is_file()) {
        return Err(refuse(path, not_a_folder(file)));
    }
    std::fs::create_dir_all(parent).map_err(|error| {
        let reason =
            format!("cannot create its directory {}: {error}; check the path and permissions", parent.display());
        refuse(path, reason)
    })
}

/// Why a store cannot live under `file`, a file where its data folder should be.
pub(super) fn not_a_folder(file: &Path) -> String {
    format!(
        "{} is a file, not a folder; the data folder (`--data-dir`, `EVE_DATA_DIR` or `data_dir`) must be a folder, \
         or a path eve can create one at",
        file.display()
    )
}

/// Takes the exclusive advisory lock on `<path>.lock`, held for as long as the returned file is open.
pub(super) fn lock(path: &Path) -> Result<File, StoreError> {
    let lock_path = beside(path, ".lock");
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&lock_path);
    let file = file.map_err(|error| match error.kind() {
        // The lock file is the first thing the store writes: a folder it cannot write fails here.
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => read_only(&lock_path),
        _ => refuse(path, format!("cannot open the lock file {}: {error}; check permissions", lock_path.display())),
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => {
            Err(StoreError::InUse { path: path.display().to_string(), lock: lock_path.display().to_string() })
        }
        Err(TryLockError::Error(error)) => Err(refuse(path, format!("cannot lock {}: {error}", lock_path.display()))),
    }
}

/// The file SQLite or the store keeps beside the store's file: its path with `suffix` appended
/// (`.lock`, `-wal`).
pub(super) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The one write connection (the writer thread's, lent to a run's lone append): WAL,
/// `synchronous=FULL`, and the page limit if any.
pub(super) fn writer_connection(path: &Path, options: &SqliteOptions) -> Result<Connection, StoreError> {
    let shown = path.display().to_string();
    let conn = Connection::open(path).map_err(|error| open_error(&error, &shown))?;
    // SQLite opens a file it may not write read-only without a word, and says "attempt to write a
    // readonly database" only at the first write; say it now, naming the file.
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(|error| open_error(&error, &shown))? {
        return Err(StoreError::ReadOnly { path: shown });
    }
    let mode = configure_writer(&conn, options).map_err(|error| open_error(&error, &shown))?;
    if !mode.eq_ignore_ascii_case("wal") {
        let reason = format!("SQLite kept journal_mode={mode} instead of WAL; put the store on a local filesystem");
        return Err(refuse(path, reason));
    }
    Ok(conn)
}

/// Applies the writer's settings and returns the journal mode SQLite actually chose.
fn configure_writer(conn: &Connection, options: &SqliteOptions) -> rusqlite::Result<String> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    plan_once(conn)?;
    let mode = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    if let Some(pages) = options.max_page_count {
        conn.pragma_update(None, "max_page_count", i64::try_from(pages).unwrap_or(i64::MAX))?;
    }
    Ok(mode)
}

/// A read-only connection for the reader threads; WAL lets it read while the writer commits.
pub(super) fn reader_connection(path: &Path) -> Result<Connection, StoreError> {
    let shown = path.display().to_string();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|error| open_error(&error, &shown))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|error| open_error(&error, &shown))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    plan_once(&conn).map_err(|error| open_error(&error, &shown))?;
    Ok(conn)
}

/// A read-only connection to a store in a folder that cannot be written, as SQLite's `immutable`
/// option reads a file: no locks and no shared-memory file, which SQLite could not create there.
/// Refused while the store's write-ahead log holds commits not yet in the file (its owner stopped
/// without checkpointing), since such a connection reads the file alone.
pub(super) fn immutable_connection(path: &Path) -> Result<Connection, StoreError> {
    let shown = path.display().to_string();
    let log = beside(path, "-wal");
    if std::fs::metadata(&log).is_ok_and(|log| log.len() > 0) {
        let reason = format!(
            "its folder is read-only and its write-ahead log {} holds commits not yet in the store's file, which \
             cannot be read without writing; make the folder writable once, and any eve command folds them in",
            log.display()
        );
        return Err(refuse(path, reason));
    }
    // A URI, whose `?`, `#` and `%` would otherwise start its query, fragment or an escape.
    let escaped = shown.replace('%', "%25").replace('?', "%3f").replace('#', "%23");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(format!("file:{escaped}?immutable=1"), flags)
        .map_err(|error| open_error(&error, &shown))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    plan_once(&conn).map_err(|error| open_error(&error, &shown))?;
    Ok(conn)
}

/// Makes each cached statement keep the plan it was prepared with, whatever values are bound to
/// it later (`SQLITE_DBCONFIG_ENABLE_QPSG`). Without it, the bundled SQLite (built with
/// `SQLITE_ENABLE_STAT4`) lets its planner look at the values bound to a statement's parameters,
/// and then prepares the statement again whenever another value is bound to one of them: a read
/// of a journal was prepared again for nearly every run and range it was given, about 50,000
/// instructions each time, for the same plan (the store never runs `ANALYZE`, so there are no
/// statistics for a value to change it).
fn plan_once(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// The error for a store whose `file`, or the folder holding it, cannot be written: the folder,
/// when it is that which is read-only (a file in it would be too), else the file.
fn read_only(file: &Path) -> StoreError {
    let folder = file.parent().filter(|folder| is_read_only(folder));
    StoreError::ReadOnly { path: folder.unwrap_or(file).display().to_string() }
}

/// Whether `folder` refuses new files, found by trying to create one (a mode or a mount option
/// alone does not say: root writes through modes, and a mount may be read-only).
pub(super) fn is_read_only(folder: &Path) -> bool {
    let probe = folder.join(format!(".eve-write-probe-{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => std::fs::remove_file(&probe).is_err(),
        Err(error) => {
            matches!(error.kind(), std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied)
        }
    }
}

fn refuse(path: &Path, reason: String) -> StoreError {
    StoreError::Open { path: path.display().to_string(), reason }
}
