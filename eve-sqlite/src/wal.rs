//! The write-ahead log, made ready as a store opens: begun, and filled to its working size.
//!
//! A clean close removes the log, so every start begins a new one. Left to itself, SQLite would
//! create it at the first commit, which then also syncs the new file's header and the directory
//! that gained it (three fsyncs where a commit needs one), and every commit until the first
//! automatic checkpoint would grow the file: the file system then allocates and records the new
//! space besides syncing the commit, which on this kind of disk roughly halved a new log's commit
//! rate (a commit that rewrites space already written pays only for its data). So [`begin`]
//! begins the log and [`Begun::fill`] fills it with zeros to its working size, as PostgreSQL
//! does with each new WAL segment (`wal_init_zero`), and syncs it once; the store's commits then
//! rewrite it.
//!
//! Zeros are safe past the log's last frame: SQLite reads a log's frames in order up to the
//! first whose salt and checksum do not match the log's header, and zeros never match, so they
//! read as the log's end, after a crash too. The fill only ever writes past the file's end, and
//! runs before the writer thread starts, so no frame is overwritten. The reader threads start
//! before it, to ready their connections meanwhile (see [`Begun::fill`]): they never write to the
//! log, and read its frames only up to the last one committed.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

/// The size of a log's header, and of each frame's header before its page.
const LOG_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

/// A log begun by [`begin`], to fill to its working size with [`Begun::fill`]. `None` when the
/// log could not be begun, or its size read: the first write then meets the error again, or
/// grows the log as SQLite writes it.
pub(super) struct Begun(Option<(PathBuf, u64)>);

/// Begins the log, and reads the working size to fill it to: the frames SQLite writes before its
/// automatic checkpoint lets it start again from the beginning, and a tenth more for the batch
/// that crosses that mark. Neither step is needed for correctness: an error is logged at debug
/// level. Fails only if the connection cannot be set back to `synchronous = FULL`, without which
/// no commit would be durable.
pub(super) fn begin(conn: &Connection, path: &Path) -> rusqlite::Result<Begun> {
    let log = super::open::beside(path, "-wal");
    let begun = begin_log(conn, &log);
    // The writer commits with `synchronous = FULL` (see `open::writer_connection`).
    conn.pragma_update(None, "synchronous", "FULL")?;
    let size = begun.and_then(|()| working_size(conn));
    match size {
        Ok(size) => Ok(Begun(Some((log, size)))),
        Err(error) => {
            tracing::debug!(path = %path.display(), "cannot begin the write-ahead log ahead of the first write: {error}");
            Ok(Begun(None))
        }
    }
}

impl Begun {
    /// Fills the log to its working size and syncs it: a few milliseconds, spent mostly waiting
    /// on the disk, which the store's open lets its reader threads use to ready their
    /// connections. A log already that long (one a crash left) is only extended, never
    /// rewritten. An error is logged at debug level and left to the writes, which grow the log
    /// as SQLite writes it.
    pub(super) fn fill(self) {
        let Some((log, size)) = self.0 else { return };
        if let Err(error) = fill(&log, size) {
            tracing::debug!(log = %log.display(), "cannot fill the write-ahead log ahead of its writes: {error}");
        }
    }
}

/// The log's working size in bytes: its header, then a frame (its own header and one page) for
/// each page SQLite writes before its automatic checkpoint, and a tenth more.
fn working_size(conn: &Connection) -> rusqlite::Result<u64> {
    let pragma = |name: &str| conn.pragma_query_value(None, name, |row| row.get::<_, i64>(0));
    let frames = pragma("wal_autocheckpoint").ok().filter(|frames| *frames > 0).unwrap_or(1_000);
    let page = pragma("page_size")?;
    Ok(LOG_HEADER + (frames + frames / 10).unsigned_abs() * (FRAME_HEADER + page.unsigned_abs()))
}

/// Makes the log exist if it is empty, by rewriting `user_version` with its own value: a change
/// of nothing, committed without its own fsync (there is nothing to lose). Leaves the connection
/// with `synchronous = NORMAL`; the caller sets it back.
fn begin_log(conn: &Connection, log: &Path) -> rusqlite::Result<()> {
    if std::fs::metadata(log).is_ok_and(|log| log.len() > 0) {
        return Ok(());
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let tx = conn.unchecked_transaction()?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()
}

/// Appends zeros to the file at `log` until it is `size` bytes long, then syncs it.
fn fill(log: &Path, size: u64) -> std::io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let mut file = File::options().write(true).open(log)?;
    let mut end = file.seek(SeekFrom::End(0))?;
    if end >= size {
        return Ok(());
    }
    let zeros = vec![0; CHUNK];
    while end < size {
        let chunk = (size - end).min(CHUNK as u64) as usize;
        file.write_all(&zeros[..chunk])?;
        end += chunk as u64;
    }
    file.sync_data()
}
