//! The write-ahead log, made ready as a store opens: begun, and filled to its working size.
//!
//! A clean close removes the log, so every start begins a new one. Left to itself, SQLite would
//! create it at the first commit, which then also syncs the new file's header and the directory
//! that gained it (three fsyncs where a commit needs one), and every commit until the first
//! automatic checkpoint would grow the file: the file system then allocates and records the new
//! space besides syncing the commit, which on this kind of disk roughly halved a new log's commit
//! rate (a commit that rewrites space already written pays only for its data). So [`prepare`]
//! begins the log and fills it with zeros to its working size, as PostgreSQL does with each new
//! WAL segment (`wal_init_zero`), and syncs it once; the store's commits then rewrite it.
//!
//! Zeros are safe past the log's last frame: SQLite reads a log's frames in order up to the
//! first whose salt and checksum do not match the log's header, and zeros never match, so they
//! read as the log's end, after a crash too. The fill only ever writes past the file's end, and
//! runs before the store's threads start, so no frame is overwritten.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use rusqlite::Connection;

/// The size of a log's header, and of each frame's header before its page.
const LOG_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

/// Begins the log, then fills it to its working size: the frames SQLite writes before its
/// automatic checkpoint lets it start again from the beginning, and a tenth more for the batch
/// that crosses that mark. A log already that long (one a crash left) is only extended, never
/// rewritten. Neither step is needed for correctness: an error is logged at debug level and left
/// to the first write, which meets it again or grows the log as SQLite writes it. Fails only if
/// the connection cannot be set back to `synchronous = FULL`, without which no commit would be
/// durable.
pub(super) fn prepare(conn: &Connection, path: &Path) -> rusqlite::Result<()> {
    let log = super::open::beside(path, "-wal");
    let begun = begin(conn, &log);
    // The writer commits with `synchronous = FULL` (see `open::writer_connection`).
    conn.pragma_update(None, "synchronous", "FULL")?;
    if let Err(error) = begun {
        tracing::debug!(path = %path.display(), "cannot begin the write-ahead log ahead of the first write: {error}");
        return Ok(());
    }
    let filled = working_size(conn).map_err(std::io::Error::other).and_then(|size| fill(&log, size));
    if let Err(error) = filled {
        tracing::debug!(log = %log.display(), "cannot fill the write-ahead log ahead of its writes: {error}");
    }
    Ok(())
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
fn begin(conn: &Connection, log: &Path) -> rusqlite::Result<()> {
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
