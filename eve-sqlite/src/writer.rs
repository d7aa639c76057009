//! The write connection and its thread: every write to the file goes through one connection,
//! committing requests in groups.
//!
//! Callers [`submit`](Writer::submit) a request (a closure over the write connection) and await
//! its answer. A run's own append ([`Writer::submit_from_run`]) or parked mark
//! ([`Writer::submit_lazy_from_run`]) made as a lone writer (nothing queued, the connection free,
//! the last batch a single request, the caller on a multi-threaded Tokio runtime) commits at
//! once, on the caller's thread: a run whose steps follow one another then pays one commit per
//! step and no hand-off to another thread and back (two wake-ups, each tens of microseconds or
//! more on a virtual machine, as much as the fsync itself). Any other
//! request, and every request made for an outside caller (a delivery over HTTP, say, whose
//! handler's thread should not wait on the disk), goes to the writer thread. The thread first
//! prepares the statements a start's first writes need (see `serve`), then loops:
//!
//! 1. wait for one request, then take every request already queued behind it (up to
//!    [`MAX_BATCH`]): that is the batch;
//! 2. `BEGIN IMMEDIATE`; run each request, so that a refused request (fenced, stale sequence
//!    number, ...) writes nothing and does not disturb the others. Almost every refusal comes
//!    before the request changes a row, and then leaves nothing to undo, so requests run without
//!    savepoints; should one be refused after changing a row, the transaction is rolled back and
//!    the batch runs again with each request in its own `SAVEPOINT`, released if the request
//!    succeeded and rolled back if it failed (so a request may run twice: it is `FnMut`);
//! 3. failpoint `sqlite.before_commit`, `COMMIT` (with `synchronous=FULL` this is the fsync that
//!    makes the whole batch durable), failpoint `sqlite.after_commit`;
//! 4. answer every caller: its own result if the commit succeeded, else the commit's error.
//!
//! A batch made only of hints (a run's parked mark, [`Writer::submit_lazy_from_run`]) commits with
//! `synchronous=NORMAL`: without the fsync, so a power failure may lose it, which costs only a
//! replay at the next start. Any durable request in a batch makes the whole batch durable, and a
//! batch that cannot get `synchronous=FULL` back fails rather than commit without the fsync.
//!
//! Invariant: no caller is told "ok" before the COMMIT holding its writes has returned. If SQLite
//! abandons the transaction midway (it may on a full disk or an I/O error), every request of the
//! batch gets that error, and nothing of the batch is in the file.
//!
//! While one batch commits, new requests queue; the next batch takes them all, so under load the
//! cost of one fsync is shared by many requests, and a lone request costs exactly one commit. A
//! request committed on its caller's thread is a batch of one, with the same steps. It blocks
//! that thread for its commit, as the caller's task would have waited for it anyway; it is taken
//! only while nothing is queued, so it never delays a batch, and not while batches hold several
//! requests: many callers keep their runtime's threads, and share each fsync on the writer's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, mpsc};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::codec::{Failure, sqlite_error};
use eve_runtime::failpoint;
use eve_runtime::store::StoreError;

/// The most requests committed in one transaction, bounding a batch's latency and memory.
const MAX_BATCH: usize = 256;

/// The handle to the writer thread. Dropping it lets the thread finish the queued requests, close
/// the connection and exit, and waits for that.
pub(super) struct Writer {
    shared: Arc<Shared>,
    sender: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
}

/// What the callers and the writer thread share.
struct Shared {
    /// The write connection; whoever commits holds it.
    conn: Mutex<WriteConn>,
    /// Requests sent to the thread and not yet taken into a batch.
    queued: AtomicUsize,
    /// How many requests the last batch committed: more than one means callers are many, and
    /// their requests group better on the thread.
    last_batch: AtomicUsize,
    /// Whether a request has been made since the start: until then, the file holds what it held
    /// at open, and what was read then still holds.
    began: AtomicBool,
    /// The file, for error messages.
    path: String,
}

/// The write connection and its `synchronous` setting (FULL or NORMAL), kept up to date.
struct WriteConn {
    conn: Connection,
    full: bool,
}

impl Shared {
    /// The connection, waiting for whoever commits; a request that panicked midway left its
    /// transaction open, so it is rolled back first.
    fn lock(&self) -> MutexGuard<'_, WriteConn> {
        self.conn.lock().unwrap_or_else(|poisoned| Self::recovered(poisoned.into_inner()))
    }

    /// The connection if nobody commits, nothing is queued for the thread, the last batch was a
    /// lone request, and the caller runs on a multi-threaded runtime (a single-threaded one would
    /// stop everything else while the disk syncs).
    fn try_idle(&self) -> Option<MutexGuard<'_, WriteConn>> {
        if self.queued.load(Ordering::Acquire) != 0 || self.last_batch.load(Ordering::Relaxed) > 1 {
            return None;
        }
        let flavor = tokio::runtime::Handle::try_current().map(|runtime| runtime.runtime_flavor());
        if flavor.ok() != Some(tokio::runtime::RuntimeFlavor::MultiThread) {
            return None;
        }
        match self.conn.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(Self::recovered(poisoned.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn recovered(guard: MutexGuard<'_, WriteConn>) -> MutexGuard<'_, WriteConn> {
        if !guard.conn.is_autocommit() {
            // Best effort, as after a failed batch: the next BEGIN says so if it failed.
            let _ = guard.conn.execute_batch("ROLLBACK");
        }
        guard
    }

    /// Commits `batch` on this thread, lets go of the connection, then answers the callers (who
    /// may come back at once with their next request, and find the connection free).
    fn commit(&self, mut conn: MutexGuard<'_, WriteConn>, mut batch: Vec<Box<dyn Job>>) {
        let WriteConn { conn: connection, full } = &mut *conn;
        let outcome = commit_batch(connection, &self.path, &mut batch, full);
        self.last_batch.store(batch.len(), Ordering::Relaxed);
        drop(conn);
        for job in batch {
            job.answer(outcome.as_ref().err());
        }
    }
}

impl Writer {
    /// Starts the writer thread; the connection is shared with callers that commit at once.
    pub(super) fn start(conn: Connection, path: String) -> Result<Self, StoreError> {
        let (sender, receiver) = mpsc::channel();
        // The connection opens with `synchronous = FULL` (see `open::writer_connection`).
        let conn = Mutex::new(WriteConn { conn, full: true });
        let (queued, last_batch) = (AtomicUsize::new(0), AtomicUsize::new(1));
        let shared = Arc::new(Shared { conn, queued, last_batch, began: AtomicBool::new(false), path });
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("eve-sqlite-writer".into())
            .spawn(move || serve(&serving, &receiver))
            .map_err(|error| StoreError::Backend(format!("cannot start the SQLite writer thread: {error}")))?;
        Ok(Writer { shared, sender: Some(sender), thread: Some(thread) })
    }

    /// Runs `work` in the next batch on the writer thread and returns its result once that batch
    /// is durable. `work` may run twice, should another request of its batch be refused after
    /// writing (see the module documentation), so it must do the same on the same file each time.
    pub(super) async fn submit<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, true, false).await
    }

    /// Runs `work` like [`submit`](Writer::submit), or at once on the caller's thread when it is a
    /// lone writer (see the module documentation). Only a run's own appends come this way: a
    /// request made for an outside caller (an HTTP delivery, say) never blocks the thread that
    /// serves it on the disk.
    pub(super) async fn submit_from_run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, true, true).await
    }

    /// Runs `work` like [`submit`](Writer::submit), for a write that may be lost in a power
    /// failure without harm (a hint such as a run's parked mark): a batch of such writes alone
    /// commits without waiting for the disk; any durable request in the batch makes it wait.
    /// The only hint today is a run's own ([`submit_lazy_from_run`](Writer::submit_lazy_from_run));
    /// the tests send one through the thread this way.
    #[cfg(test)]
    pub(super) async fn submit_lazy<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, false, false).await
    }

    /// Runs `work` in the next batch like [`submit`](Writer::submit), for a write that may be lost
    /// in a power failure without harm (a run's parked mark): a batch of such writes alone commits
    /// without waiting for the disk; any durable request in the batch makes it wait. Made as a
    /// lone writer, it commits at once on the caller's thread, as
    /// [`submit_from_run`](Writer::submit_from_run) does: only the run's own task marks it, and
    /// without the fsync it holds that thread only for SQLite's own work.
    pub(super) async fn submit_lazy_from_run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.send(work, false, true).await
    }

    /// Whether a request has been made since the writer started. While none has, the file
    /// holds what it held at open: what was read then is what a read would find now.
    pub(super) fn began(&self) -> bool {
        self.shared.began.load(Ordering::SeqCst)
    }

    async fn send<T, F>(&self, work: F, durable: bool, inline: bool) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, Failure> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let request: Box<dyn Job> = Box::new(Request { work, result: None, reply, durable });
        let sender = self.sender.as_ref().ok_or_else(stopped)?;
        if !self.shared.began.load(Ordering::SeqCst) {
            // Before the request can commit: see `began`.
            self.shared.began.store(true, Ordering::SeqCst);
        }
        if inline && let Some(conn) = self.shared.try_idle() {
            // Answered before this returns: the await below is ready at once.
            self.shared.commit(conn, vec![request]);
        } else {
            self.shared.queued.fetch_add(1, Ordering::AcqRel);
            if let Err(mpsc::SendError(_)) = sender.send(request) {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(stopped());
            }
        }
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
    /// Runs the request on `conn`, keeping its result (a later run replaces it); returns its error
    /// so the batch can tell whether SQLite abandoned the transaction.
    fn run(&mut self, conn: &Connection, path: &str) -> Result<(), StoreError>;

    /// Answers the caller, given the error that failed the whole batch, if any.
    fn answer(self: Box<Self>, batch_error: Option<&StoreError>);

    /// Whether the caller must hear back only once the write is on disk.
    fn durable(&self) -> bool;
}

struct Request<T, F> {
    work: F,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
    durable: bool,
}

impl<T, F> Job for Request<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<T, Failure> + Send,
{
    fn run(&mut self, conn: &Connection, path: &str) -> Result<(), StoreError> {
        let result = (self.work)(conn).map_err(|failure| failure.into_store_error(path));
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

/// The writer's own statements, which every batch runs. Not the `synchronous` settings: SQLite
/// applies a pragma when it prepares it (and again each time a statement that has run is run
/// again), so preparing one ahead would change the setting under the batch that runs next.
const WARM: [&str; 2] = [BEGIN, COMMIT];

const BEGIN: &str = "BEGIN IMMEDIATE";
const COMMIT: &str = "COMMIT";
/// The setting of a batch of hints only.
const LAZY: &str = "PRAGMA synchronous = NORMAL";
/// The setting of a batch with a durable request.
const DURABLE: &str = "PRAGMA synchronous = FULL";

/// The writer thread's loop: one batch per iteration until every [`Writer`] handle is gone.
///
/// First the thread readies the statements of a start's first writes ([`WARM`], then
/// [`writes::WARM`](super::writes::WARM)), as the reader threads do theirs: the store's open
/// starts it before it fills the log, so this is done while the fill waits on the disk, not when
/// a restarted run first parks or takes a delivery.
fn serve(shared: &Shared, receiver: &mpsc::Receiver<Box<dyn Job>>) {
    for sql in WARM.iter().chain(&super::writes::WARM) {
        // Errors are left to the writes themselves, which report them.
        let _ = shared.lock().conn.prepare_cached(sql).map(drop);
    }
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        batch.extend(receiver.try_iter().take(MAX_BATCH - 1));
        shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        shared.commit(shared.lock(), batch);
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
        execute(conn, path, if durable { DURABLE } else { LAZY })?;
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
    execute(conn, path, BEGIN)?;
    if !run_unguarded(conn, path, batch)? {
        // A request was refused after it wrote: start again, each request in its own savepoint.
        execute(conn, path, "ROLLBACK")?;
        execute(conn, path, BEGIN)?;
        for job in batch.iter_mut() {
            run_in_savepoint(conn, path, job.as_mut())?;
        }
    }
    failpoint::hit("sqlite.before_commit");
    execute(conn, path, COMMIT)?;
    failpoint::hit("sqlite.after_commit");
    Ok(())
}

/// Runs every request of `batch` without a savepoint, which would cost two statements and
/// SQLite's copy of every page a request touches. Returns `false`, with the transaction still
/// open, as soon as a request is refused after it changed a row: its writes cannot be undone
/// alone, so the caller runs the batch again in savepoints (every request can run again; each
/// keeps its last result). A request refused before it changed anything (almost every refusal:
/// a stale fence or sequence number, an unknown run, a full inbox) leaves the transaction as if
/// it had not run.
fn run_unguarded(conn: &Connection, path: &str, batch: &mut [Box<dyn Job>]) -> Result<bool, StoreError> {
    for job in batch.iter_mut() {
        // A statement that fails adds nothing to the count, so an unchanged count means that
        // nothing of the request is in the transaction.
        let changes = conn.total_changes();
        let Err(error) = job.run(conn, path) else { continue };
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (a full disk, an I/O error): the batch is lost.
            return Err(error);
        }
        if conn.total_changes() != changes {
            return Ok(false);
        }
    }
    Ok(true)
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
    if sql == DURABLE && tests::FAIL_FULL.with(|fail| fail.take()) {
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

    /// A writer whose thread has readied its statements (it serves requests only then), so the
    /// connection is idle.
    async fn writer() -> (Writer, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let conn = super::super::open::writer_connection(&path, &super::super::SqliteOptions::default()).unwrap();
        let writer = Writer::start(conn, path.display().to_string()).unwrap();
        writer.submit(|_: &Connection| Ok(())).await.unwrap();
        (writer, dir)
    }

    /// The connection's `synchronous` setting, read inside a request: 2 is FULL, 1 NORMAL.
    async fn synchronous(writer: &Writer, durable: bool) -> Result<i64, StoreError> {
        let read = |conn: &Connection| Ok(conn.pragma_query_value(None, "synchronous", |row| row.get(0))?);
        if durable { writer.submit(read).await } else { writer.submit_lazy(read).await }
    }

    /// The name of the thread a request ran on.
    fn thread_name(_: &Connection) -> Result<Option<String>, Failure> {
        Ok(std::thread::current().name().map(str::to_owned))
    }

    /// A request that says so on `holding` once it holds the connection, then holds it until told
    /// on `go`; it answers with the name of the thread it ran on.
    fn holding_request() -> (Hold, oneshot::Receiver<()>, std::sync::mpsc::Sender<()>) {
        let (held, holding) = oneshot::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut held = Some(held);
        let hold = move |conn: &Connection| {
            // Holds the connection on its first run only (a batch may run a request twice).
            if let Some(held) = held.take() {
                held.send(()).unwrap();
                wait.recv().unwrap();
            }
            thread_name(conn)
        };
        (Box::new(hold), holding, go)
    }

    /// See [`holding_request`].
    type Hold = Box<dyn FnMut(&Connection) -> Result<Option<String>, Failure> + Send>;

    /// A run's request that finds the connection idle commits on its caller's thread; one made
    /// while another commits queues, and the writer thread commits it once the connection is free.
    /// Any other request always goes to the thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_request_commits_on_its_callers_thread_and_others_queue() {
        let (writer, _dir) = writer().await;
        let writer = Arc::new(writer);
        let lone = writer.submit_from_run(thread_name).await.unwrap();
        assert_ne!(lone.as_deref(), Some("eve-sqlite-writer"), "an idle connection commits at once");
        let outside = writer.submit(thread_name).await.unwrap();
        assert_eq!(outside.as_deref(), Some("eve-sqlite-writer"), "a request for an outside caller goes to the thread");

        // A request that holds the connection until told, committing on a thread of its own.
        let (hold, holding, go) = holding_request();
        let handle = tokio::runtime::Handle::current();
        let holder = tokio::task::spawn_blocking({
            let writer = writer.clone();
            move || handle.block_on(writer.submit_from_run(hold))
        });
        holding.await.unwrap();
        let queued = tokio::spawn({
            let writer = writer.clone();
            async move { writer.submit_from_run(thread_name).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!queued.is_finished(), "nothing commits while the connection is held");
        go.send(()).unwrap();
        assert_ne!(holder.await.unwrap().unwrap().as_deref(), Some("eve-sqlite-writer"));
        assert_eq!(queued.await.unwrap().unwrap().as_deref(), Some("eve-sqlite-writer"));
        assert_eq!(writer.shared.queued.load(Ordering::Acquire), 0);
    }

    /// A run's hint made as a lone writer commits on its caller's thread too, without the fsync,
    /// and the durable request after it gets the fsync back; an outside caller's hint goes to the
    /// writer thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runs_lone_hint_commits_on_its_callers_thread_without_the_fsync() {
        let (writer, _dir) = writer().await;
        let setting_and_thread = |conn: &Connection| {
            let setting: i64 = conn.pragma_query_value(None, "synchronous", |row| row.get(0))?;
            Ok((setting, thread_name(conn)?))
        };
        let (setting, thread) = writer.submit_lazy_from_run(setting_and_thread).await.unwrap();
        assert_ne!(thread.as_deref(), Some("eve-sqlite-writer"), "an idle connection commits the hint at once");
        assert_eq!(setting, 1, "a hint commits without the fsync");
        let (setting, thread) = writer.submit_from_run(setting_and_thread).await.unwrap();
        assert_ne!(thread.as_deref(), Some("eve-sqlite-writer"));
        assert_eq!(setting, 2, "the next durable request commits with the fsync");
        let (setting, thread) = writer.submit_lazy(setting_and_thread).await.unwrap();
        assert_eq!(thread.as_deref(), Some("eve-sqlite-writer"), "an outside caller's hint goes to the thread");
        assert_eq!(setting, 1);
    }

    /// What the thread readies at its start leaves each batch the `synchronous` setting it
    /// sets: hints still commit without the fsync, durable requests with it, however they alternate.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn statements_readied_at_start_leave_each_batch_its_setting() {
        let (writer, _dir) = writer().await;
        for _ in 0..2 {
            assert_eq!(synchronous(&writer, false).await.unwrap(), 1, "a hint commits without the fsync");
            assert_eq!(synchronous(&writer, true).await.unwrap(), 2, "a durable request commits with it");
        }
    }

    /// After a batch of several requests, the next lone request still goes to the writer thread
    /// (callers were many a moment ago); once a batch holds one, lone requests commit at once
    /// again. A caller on a single-threaded runtime always goes to the thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lone_requests_commit_at_once_only_after_a_batch_of_one() {
        let (writer, _dir) = writer().await;
        let writer = Arc::new(writer);
        writer.submit_from_run(thread_name).await.unwrap();
        // A request from a single-threaded runtime holds the connection, on the writer thread.
        let (hold, holding, go) = holding_request();
        let holder = std::thread::spawn({
            let writer = writer.clone();
            move || {
                let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                runtime.block_on(writer.submit_from_run(hold))
            }
        });
        holding.await.unwrap();
        let queued: Vec<_> = (0..3)
            .map(|_| {
                let writer = writer.clone();
                tokio::spawn(async move { writer.submit_from_run(thread_name).await })
            })
            .collect();
        while writer.shared.queued.load(Ordering::Acquire) < 3 {
            tokio::task::yield_now().await;
        }
        // Each is counted just before it is sent, in the same poll: give the last send a moment.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        go.send(()).unwrap();
        assert_eq!(holder.join().unwrap().unwrap().as_deref(), Some("eve-sqlite-writer"), "single-threaded");
        for request in queued {
            assert_eq!(request.await.unwrap().unwrap().as_deref(), Some("eve-sqlite-writer"));
        }
        assert_eq!(writer.shared.last_batch.load(Ordering::Relaxed), 3, "the three queued went as one batch");
        let after_many = writer.submit_from_run(thread_name).await.unwrap();
        assert_eq!(after_many.as_deref(), Some("eve-sqlite-writer"), "callers were many a moment ago");
        let after_one = writer.submit_from_run(thread_name).await.unwrap();
        assert_ne!(after_one.as_deref(), Some("eve-sqlite-writer"), "a batch of one: a lone writer again");
    }

    /// Many callers at once, some committing on their own threads and some through the writer
    /// thread (runs' requests and outside callers' mixed), each refused request among them undoing
    /// only its own writes: every caller hears
    /// its own answer, and the file holds exactly what was answered "ok".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_at_once_each_get_their_own_answer_and_nothing_else_lands() {
        let (writer, _dir) = writer().await;
        let writer = Arc::new(writer);
        writer.submit(|conn| Ok(conn.execute_batch("CREATE TABLE rows (k INTEGER PRIMARY KEY)")?)).await.unwrap();
        let callers = (0..16_i64).map(|caller| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut threads = Vec::new();
                for i in 0..100 {
                    let k = caller * 1_000 + i;
                    let insert = move |conn: &Connection| {
                        conn.execute("INSERT INTO rows (k) VALUES (?1)", [k])?;
                        Ok(std::thread::current().name().map(str::to_owned))
                    };
                    threads.push(writer.submit_from_run(insert).await.unwrap());
                    // The same key again: refused, and the first insert stays.
                    let again = move |conn: &Connection| Ok(conn.execute("INSERT INTO rows (k) VALUES (?1)", [k])?);
                    assert!(writer.submit(again).await.is_err(), "a duplicate key is refused");
                }
                threads
            })
        });
        let threads: Vec<Option<String>> =
            futures::future::try_join_all(callers).await.unwrap().into_iter().flatten().collect();
        let count = |conn: &Connection| {
            Ok(conn.query_row("SELECT count(*), sum(k) FROM rows", [], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
            })?)
        };
        let expected_sum: i64 = (0..16_i64).flat_map(|caller| (0..100).map(move |i| caller * 1_000 + i)).sum();
        assert_eq!(writer.submit(count).await.unwrap(), (1_600, expected_sum));
        let on_writer = threads.iter().filter(|name| name.as_deref() == Some("eve-sqlite-writer")).count();
        assert!(on_writer > 0 && on_writer < threads.len(), "both ways were taken: {on_writer} of {}", threads.len());
        assert_eq!(writer.shared.queued.load(Ordering::Acquire), 0);
    }

    /// A request refused after it wrote leaves none of its writes, when it commits alone (on its
    /// caller's thread, or as a batch of one on the writer thread) as when it shares a batch,
    /// whose other requests still commit; the connection takes the next request as before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_refused_after_writing_leaves_none_of_its_writes() {
        let (writer, _dir) = writer().await;
        let writer = Arc::new(writer);
        writer.submit(|conn| Ok(conn.execute_batch("CREATE TABLE rows (k INTEGER PRIMARY KEY)")?)).await.unwrap();
        writer.submit(|conn| Ok(conn.execute("INSERT INTO rows (k) VALUES (0)", [])?)).await.unwrap();
        // Inserts `k`, then the taken key 0: refused, after a write that must not land.
        let refused = |k: i64| {
            move |conn: &Connection| {
                conn.execute("INSERT INTO rows (k) VALUES (?1)", [k])?;
                Ok(conn.execute("INSERT INTO rows (k) VALUES (0)", [])?)
            }
        };
        let keys = |conn: &Connection| {
            let mut keys = conn.prepare("SELECT k FROM rows ORDER BY k")?;
            let keys = keys.query_map([], |row| row.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
            Ok(keys)
        };
        assert!(writer.submit_from_run(refused(1)).await.is_err(), "refused on the caller's thread");
        assert!(writer.submit(refused(2)).await.is_err(), "refused alone on the writer thread");
        assert_eq!(writer.submit(keys).await.unwrap(), [0], "neither refused request left its first insert");
        // A batch of three: the refused one in the middle.
        let (hold, holding, go) = holding_request();
        let holder = tokio::spawn({
            let writer = writer.clone();
            async move { writer.submit(hold).await }
        });
        holding.await.unwrap();
        let insert = |k: i64| {
            let writer = writer.clone();
            tokio::spawn(async move {
                writer.submit(move |conn| Ok(conn.execute("INSERT INTO rows (k) VALUES (?1)", [k])?)).await
            })
        };
        let three = insert(3);
        let four = tokio::spawn({
            let writer = writer.clone();
            async move { writer.submit(refused(4)).await }
        });
        let five = insert(5);
        while writer.shared.queued.load(Ordering::Acquire) < 3 {
            tokio::task::yield_now().await;
        }
        // Each is counted just before it is sent, in the same poll: give the last send a moment.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        go.send(()).unwrap();
        let answers = [three.await.unwrap(), four.await.unwrap(), five.await.unwrap()];
        holder.await.unwrap().unwrap();
        assert!(answers[0].is_ok() && answers[1].is_err() && answers[2].is_ok(), "{answers:?}");
        assert_eq!(writer.shared.last_batch.load(Ordering::Relaxed), 3, "the three went as one batch");
        assert_eq!(writer.submit_from_run(keys).await.unwrap(), [0, 3, 5]);
    }

    /// Every batch commits with the setting it needs, however often the connection switched
    /// before and whatever else it prepared meanwhile. The switches are cached statements, and
    /// SQLite applies `PRAGMA synchronous` when the statement is prepared, not when it runs: this
    /// holds only because SQLite expires a pragma's statement after each run, so the cached one
    /// is prepared, and the setting applied, again each time.
    #[tokio::test]
    async fn every_batch_sets_its_own_sync_however_often_it_switches() {
        let (writer, _dir) = writer().await;
        for round in 0..3 {
            assert_eq!(
                synchronous(&writer, false).await.unwrap(),
                1,
                "round {round}: a hint commits without the fsync"
            );
            assert_eq!(synchronous(&writer, true).await.unwrap(), 2, "round {round}: a durable batch commits with it");
        }
        // Enough other statements to push every cached one out; each switch is then prepared
        // afresh, the switch to NORMAL after the switch to FULL.
        let many = |conn: &Connection| {
            for n in 0..100 {
                conn.prepare_cached(&format!("SELECT {n}"))?;
            }
            Ok(())
        };
        for _ in 0..2 {
            writer.submit(many).await.unwrap();
            assert_eq!(synchronous(&writer, false).await.unwrap(), 1, "a hint commits without the fsync");
            assert_eq!(synchronous(&writer, true).await.unwrap(), 2, "a durable batch was committed without the fsync");
        }
    }

    /// A batch of hints commits without the fsync; every durable batch commits with it, even
    /// after a hint batch whose switch back to `synchronous = FULL` failed.
    #[tokio::test]
    async fn a_durable_batch_always_commits_with_full_sync() {
        let (writer, _dir) = writer().await;
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
