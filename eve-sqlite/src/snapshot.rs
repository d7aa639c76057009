//! Reading a SQLite store that another process holds: the `runs` and `inspect` commands while
//! `serve` runs.
//!
//! A [`SqliteStore`](super::SqliteStore) is one process's at a time: it takes the store's lock
//! file and is the only writer. A [`SqliteSnapshot`] takes no lock and never writes. It opens one
//! read-only connection, which WAL lets read committed state while the owner commits, so each
//! read sees the store as of its last commit.

use std::path::Path;

use super::{codec::Failure, open, reads};
use eve_runtime::error::StoreError;
use eve_runtime::journal::RunId;
use eve_runtime::store::{InboxItem, RunPage, RunQuery, RunRecord};

/// A read-only view of a SQLite store, beside the process that owns it; see the module
/// documentation.
///
/// ```
/// # use eve_tools::store::{RunQuery, SqliteSnapshot, SqliteStore};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("eve.db");
/// let _owner = SqliteStore::open(&path)?;
/// let mut snapshot = SqliteSnapshot::open(&path)?;
/// assert!(snapshot.list_runs(&RunQuery::newest(10))?.runs.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteSnapshot {
    conn: rusqlite::Connection,
    path: String,
}

impl std::fmt::Debug for SqliteSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSnapshot").field("path", &self.path).finish_non_exhaustive()
    }
}

impl SqliteSnapshot {
    /// Opens the existing store at `path` read-only; fails with [`StoreError::Open`] if there is
    /// none. A store in a folder that cannot be written (a read-only mount, say) is read as the
    /// file holds it, since SQLite cannot make the shared-memory file it reads beside the owner
    /// with; nothing can be writing it there.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        if !path.exists() {
            let reason = match path.ancestors().skip(1).find(|folder| folder.is_file()) {
                Some(file) => open::not_a_folder(file),
                None => "there is no store there yet: it is made by the first command that starts a run".to_owned(),
            };
            return Err(StoreError::Open { path: path.display().to_string(), reason });
        }
        let conn = open::reader_connection(path)?;
        // SQLite opens the file at the first read; a read that cannot open it may be the
        // shared-memory file it cannot make in a read-only folder.
        let opened = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()));
        let folder = path.parent().filter(|folder| !folder.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let conn = match opened {
            Err(error)
                if error.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen) && open::is_read_only(folder) =>
            {
                open::immutable_connection(path)?
            }
            _ => conn,
        };
        Ok(SqliteSnapshot { conn, path: path.display().to_string() })
    }

    /// One page of the runs `query` asks for, newest first.
    pub fn list_runs(&mut self, query: &RunQuery) -> Result<RunPage, StoreError> {
        reads::list_runs(&self.conn, query).map_err(|failure| self.error(failure))
    }

    /// The run with its whole journal, if the store has it.
    pub fn load(&mut self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let loaded = reads::load(&mut self.conn, run);
        loaded.map_err(|failure| self.error(failure))
    }

    /// The deliveries the run has not taken in yet, oldest first.
    pub fn inbox(&mut self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        reads::inbox(&self.conn, run).map_err(|failure| self.error(failure))
    }

    fn error(&self, failure: Failure) -> StoreError {
        failure.into_store_error(&self.path)
    }
}
