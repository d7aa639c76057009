//! The writer thread: the only code that writes to the file, committing requests in groups.
//!
//! Callers [`submit`](Writer::submit) a request (a closure over the write connection) and await
//! its answer. The thread loops:
//!
//! 1. wait for one request, then take every request already queued behind it (up to
//!    [`MAX_BATCH`]): that is the batch;
//! 2. `BEGIN IMMEDIATE`; run each request inside its own `SAVEPOINT`, releasing it if the request
//!    succeeded and rolling it back if it failed, so a refused request (fenced, stale sequence
//!    number, ...) writes nothing and does not disturb the others;
//! 3. failpoint `sqlite.before_commit`, `COMMIT` (with `synchronous=FULL` this is the fsync that
//!    makes the whole batch durable), failpoint `sqlite.after_commit`;
//! 4. answer every caller: its own result if the commit succeeded, else the commit's error.
//!
//! A batch made only of hints ([`Writer::submit_lazy`], such as a run's parked mark) commits with
//! `synchronous=NORMAL`: without the fsync, so a power failure may lose it, which costs only a
//! replay at the next start. Any durable request in a batch makes the whole batch durable, and a
//! batch that cannot get `synchronous=FULL` back fails rather than commit without the fsync.
//!
//! Invariant: no caller is told "ok" before the COMMIT holding its writes has returned. If SQLite
//! abandons the transaction midway (it may on a full disk or an I/O error), every request of the
//! batch gets that error, and nothing of the batch is in the file.
//!
//! While one batch commits, new requests queue; the next batch takes them all, so under load the
//! cost of one fsync is shared by many requests, and a lone request costs exactly one commit.

use std::sync::mpsc;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::codec::{Failure, sqlite_error};
use crate::failpoint;
use crate::store::StoreError;

/// The most requests committed in one transaction, bounding a batch's latency and memory.
const MAX_BATCH: usize = 256;

/// The handle to the writer thread. Dropping it lets the thread finish the queued requests, close
/// the connection and exit, and waits for that.
pub(super) struct Writer {
    sender: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread, which takes ownership of `conn`.
    pub(super) fn start(conn: Connection, path: String) -> Result<Self, StoreError> {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("eve-sqlite-writer".into())
            .spawn(move || serve(&conn, &path, &receiver))
            .map_err(|error| StoreError::Backend(format!("cannot start the SQLite writer thread: {error}")))?;
        Ok(Writer { sender: Some(sender), thread: Some(thread) })
    }

    /// Runs `work` in the next batch and returns its result once that batch is durable.
    pub(super) async fn submit<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, true).await
    }

    /// Runs `work` like [`submit`](Writer::submit), for a write that may be lost in a power
    /// failure without harm (a hint such as a run's parked mark): a batch of such writes alone
    /// commits without waiting for the disk; any durable request in the batch makes it wait.
    pub(super) async fn submit_lazy<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, false).await
    }

    async fn send<T, F>(&self, work: F, durable: bool) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let request = Box::new(Request { work: Some(work), result: None, reply, durable });
        let sender = self.sender.as_ref().ok_or_else(stopped)?;
        sender.send(request).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            // A panic on the writer thread has already failed its callers; there is nothing left to report.
            let _ = thread.join();
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Backend("the SQLite writer thread has stopped; restart the process".into())
}

/// One queued request, type-erased so requests with different results share a queue.
trait Job: Send {
    /// Runs the request on `conn`, keeping its result; returns its error so the batch can tell
    /// whether SQLite abandoned the transaction.
    fn run(&mut self, conn: &Connection, path: &str) -> Result<(), StoreError>;

    /// Answers the caller, given the error that failed the whole batch, if any.
    fn answer(self: Box<Self>, batch_error: Option<&StoreError>);

    /// Whether the caller must hear back only once the write is on disk.
    fn durable(&self) -> bool;
}

struct Request<T, F> {
    work: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
    durable: bool,
}

impl<T, F> Job for Request<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> Result<T, Failure> + Send,
{
    fn run(&mut self, conn: &Connection, path: &str) -> Result<(), StoreError> {
        let Some(work) = self.work.take() else { return Ok(()) };
        let result = work(conn).map_err(|failure| failure.into_store_error(path));
        let outcome = result.as_ref().map(drop).map_err(Clone::clone);
        self.result = Some(result);
        outcome
    }

    fn answer(self: Box<Self>, batch_error: Option<&StoreError>) {
        let result = match (self.result, batch_error) {
            // A refused request wrote nothing either way; its own error is the more precise.
            (Some(Err(refused)), _) => Err(refused),
            (_, Some(error)) => Err(error.clone()),
            (Some(Ok(value)), None) => Ok(value),
            (None, None) => Err(StoreError::Backend("the SQLite writer skipped this request; retry it".into())),
        };
        // The caller may have stopped waiting; the outcome is durable regardless.
        let _ = self.reply.send(result);
    }

    fn durable(&self) -> bool {
        self.durable
    }
}

/// Writes the write-ahead log's header before the first request, when the log is empty, so that
/// request does not wait for it. `full` is the connection's `synchronous` setting, as in
/// [`commit_batch`].
///
/// A clean close removes the log, so the first commit after every start begins a new one, and
/// SQLite syncs the new log's header and the directory that gained the file before it syncs the
/// commit: three fsyncs where a commit needs one (on a restart, the first parked mark paid them
/// too). The thread does this as it starts, in parallel with the rest of start-up (reads, a
/// recovery), by rewriting `user_version` with its own value: a change of nothing, committed
/// without its own fsync (there is nothing to lose), that only makes the log exist. A first
/// request that comes sooner waits for the two fsyncs it would have made itself. Errors are left
/// to the first request, which meets them again.
fn prime_wal(conn: &Connection, path: &str, full: &mut bool) {
    let log = std::fs::metadata(format!("{path}-wal"));
    if log.is_ok_and(|log| log.len() > 0) {
        return;
    }
    let mut rewrite = || -> rusqlite::Result<()> {
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        *full = false;
        let tx = conn.unchecked_transaction()?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()
    };
    if let Err(error) = rewrite() {
        tracing::debug!(path, "cannot begin the write-ahead log ahead of the first write: {error}");
    }
}

/// The writer thread's loop: one batch per iteration until every [`Writer`] handle is gone.
fn serve(conn: &Connection, path: &str, receiver: &mpsc::Receiver<Box<dyn Job>>) {
    // The connection opens with `synchronous = FULL` (see `open::writer_connection`).
    let mut full = true;
    prime_wal(conn, path, &mut full);
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        batch.extend(receiver.try_iter().take(MAX_BATCH - 1));
        let outcome = commit_batch(conn, path, &mut batch, &mut full);
        for job in batch {
            job.answer(outcome.as_ref().err());
        }
    }
}

/// Runs every request of `batch` in one transaction and commits it; on failure nothing of the
/// batch is left in the file. `full` is the connection's `synchronous` setting (FULL or NORMAL),
/// kept up to date.
///
/// The setting a batch needs (FULL if any request is durable, else NORMAL) is set before it runs
/// whenever the connection has the other one, and a batch that cannot set it fails: so no
/// durable request is ever committed without its fsync, even should switching back after a
/// batch of hints have failed (it left every later durable commit without the fsync).
fn commit_batch(conn: &Connection, path: &str, batch: &mut [Box<dyn Job>], full: &mut bool) -> Result<(), StoreError> {
    // A batch of hints only commits without the fsync; the next durable commit syncs it too.
    let durable = batch.iter().any(|job| job.durable());
    if durable != *full {
        execute(conn, path, if durable { "PRAGMA synchronous = FULL" } else { "PRAGMA synchronous = NORMAL" })?;
        *full = durable;
    }
    let outcome = run_batch(conn, path, batch);
    if outcome.is_err() && !conn.is_autocommit() {
        // Best effort: if even ROLLBACK fails, the connection is unusable and the next BEGIN says so.
        let _ = conn.execute_batch("ROLLBACK");
    }
    outcome
}

fn run_batch(conn: &Connection, path: &str, batch: &mut [Box<dyn Job>]) -> Result<(), StoreError> {
    execute(conn, path, "BEGIN IMMEDIATE")?;
    for job in batch.iter_mut() {
        run_in_savepoint(conn, path, job.as_mut())?;
    }
    failpoint::hit("sqlite.before_commit");
    execute(conn, path, "COMMIT")?;
    failpoint::hit("sqlite.after_commit");
    Ok(())
}

/// Runs one request so that its failure undoes exactly its own writes. Fails only when the whole
/// transaction is lost.
fn run_in_savepoint(conn: &Connection, path: &str, job: &mut dyn Job) -> Result<(), StoreError> {
    execute(conn, path, "SAVEPOINT request")?;
    match job.run(conn, path) {
        Ok(()) => execute(conn, path, "RELEASE request"),
        // SQLite rolled the whole transaction back (a full disk, an I/O error): the batch is lost.
        Err(error) if conn.is_autocommit() => Err(error),
        Err(_) => {
            execute(conn, path, "ROLLBACK TO request")?;
            execute(conn, path, "RELEASE request")
        }
    }
}

fn execute(conn: &Connection, path: &str, sql: &str) -> Result<(), StoreError> {
    #[cfg(test)]
    if sql == "PRAGMA synchronous = FULL" && tests::FAIL_FULL.with(|fail| fail.take()) {
        return Err(StoreError::Backend("injected: cannot set synchronous = FULL".into()));
    }
    let run = || conn.prepare_cached(sql)?.execute([]);
    run().map(drop).map_err(|error| sqlite_error(&error, path))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Makes the next `PRAGMA synchronous = FULL` on this (writer) thread fail.
        pub(super) static FAIL_FULL: Cell<bool> = const { Cell::new(false) };
    }

    fn writer() -> (Writer, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let conn = super::super::open::writer_connection(&path, &super::super::SqliteOptions::default()).unwrap();
        (Writer::start(conn, path.display().to_string()).unwrap(), dir)
    }

    /// The connection's `synchronous` setting, read inside a request: 2 is FULL, 1 NORMAL.
    async fn synchronous(writer: &Writer, durable: bool) -> Result<i64, StoreError> {
        let read = |conn: &Connection| Ok(conn.pragma_query_value(None, "synchronous", |row| row.get(0))?);
        if durable { writer.submit(read).await } else { writer.submit_lazy(read).await }
    }

    /// A batch of hints commits without the fsync; every durable batch commits with it, even
    /// after a hint batch whose switch back to `synchronous = FULL` failed.
    #[tokio::test]
    async fn a_durable_batch_always_commits_with_full_sync() {
        let (writer, _dir) = writer();
        assert_eq!(synchronous(&writer, true).await.unwrap(), 2);
        assert_eq!(synchronous(&writer, false).await.unwrap(), 1, "a hint commits without the fsync");
        assert_eq!(synchronous(&writer, true).await.unwrap(), 2);
        // The next switch to FULL fails, once.
        let fail_next = |_: &Connection| {
            FAIL_FULL.with(|fail| fail.set(true));
            Ok(())
        };
        writer.submit(fail_next).await.unwrap();
        let _ = synchronous(&writer, false).await;
        match synchronous(&writer, true).await {
            Ok(setting) => assert_eq!(setting, 2, "a durable request was committed without the fsync"),
            Err(error) => assert!(error.to_string().contains("synchronous"), "{error}"),
        }
        assert_eq!(synchronous(&writer, true).await.unwrap(), 2);
    }
}
