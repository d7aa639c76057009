//! The reader threads: a few read-only connections that answer queries without waiting for the
//! writer.
//!
//! In WAL mode a reader sees the last commit made before its read transaction began and never
//! blocks, or is blocked by, the writer. Since a caller is answered only after its write commits,
//! a read it issues afterwards always sees that write.
//!
//! The threads share one queue; each takes the next query when it is free, so a slow query (a long
//! journal) holds up one thread, not every read. A query may queue a part of its work for another
//! thread ([`Readers::parallel`]): a long journal is read in two halves at once.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, TryLockError, mpsc};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::codec::Failure;
use super::open::reader_connection;
use eve_runtime::store::StoreError;

type ReadJob = Box<dyn FnOnce(&mut Connection) + Send>;

/// The handle to the reader threads. Dropping it lets them finish the queued queries and exit,
/// and waits for that.
pub(super) struct Readers {
    path: String,
    queue: Option<Queue>,
    threads: Vec<JoinHandle<()>>,
}

/// The reader threads' queue, for a read that gives a part of its work to another thread.
#[derive(Clone)]
pub(super) struct Queue(mpsc::Sender<ReadJob>);

/// The answer to a read queued with [`Queue::queue`], to await with [`Readers::wait`].
pub(super) type Pending<T> = oneshot::Receiver<Result<T, Failure>>;

impl Queue {
    /// Queues `work` for the next free read connection. The answer closes without a value if the
    /// threads stop first.
    pub(super) fn queue<T, F>(&self, work: F) -> Pending<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Failure> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            // The caller may have stopped waiting; a read changes nothing, so there is nothing to undo.
            let _ = reply.send(work(conn));
        });
        // A send fails only once the threads have stopped, which drops `reply` and closes `answer`.
        let _ = self.0.send(job);
        answer
    }
}

impl Readers {
    /// Opens `count` read connections (at least one), each served by its own thread.
    pub(super) fn start(path: &Path, count: usize) -> Result<Self, StoreError> {
        let (sender, receiver) = mpsc::channel::<ReadJob>();
        let receiver = Arc::new(Mutex::new(receiver));
        let mut readers = Readers { path: path.display().to_string(), queue: Some(Queue(sender)), threads: Vec::new() };
        for index in 0..count.max(1) {
            let conn = reader_connection(path)?;
            let receiver = receiver.clone();
            let thread = std::thread::Builder::new()
                .name(format!("eve-sqlite-reader-{index}"))
                .spawn(move || serve(conn, &receiver))
                .map_err(|error| StoreError::Backend(format!("cannot start a SQLite reader thread: {error}")))?;
            readers.threads.push(thread);
        }
        Ok(readers)
    }

    /// Runs `work` on the next free read connection.
    pub(super) async fn read<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Failure> + Send + 'static,
    {
        let queue = self.queue.as_ref().ok_or_else(stopped)?;
        self.wait(queue.queue(work)).await
    }

    /// Queues `work` for the next free read connection, to await later with
    /// [`wait`](Readers::wait); `None` once the threads have stopped.
    pub(super) fn queue<T, F>(&self, work: F) -> Option<Pending<T>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Failure> + Send + 'static,
    {
        self.queue.as_ref().map(|queue| queue.queue(work))
    }

    /// The answer to a read queued with [`Queue::queue`].
    pub(super) async fn wait<T>(&self, pending: Pending<T>) -> Result<T, StoreError> {
        pending.await.map_err(|_| stopped())?.map_err(|failure| failure.into_store_error(&self.path))
    }

    /// The queue, for a read queued from another thread (the writer's); `None` once the threads
    /// have stopped.
    pub(super) fn handle(&self) -> Option<Queue> {
        self.queue.clone()
    }

    /// The queue, for a read that gives a part of its work to another thread; `None` with one
    /// thread, which would only do the part after the read that queued it.
    pub(super) fn parallel(&self) -> Option<Queue> {
        self.queue.clone().filter(|_| self.threads.len() > 1)
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        drop(self.queue.take());
        for thread in self.threads.drain(..) {
            // A reader that panicked has already failed its caller; there is nothing left to report.
            let _ = thread.join();
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Backend("the SQLite reader threads have stopped; restart the process".into())
}

/// Answers queries until the store is dropped. While it has nothing to do, the thread readies
/// the statements a start needs ([`reads::WARM`](super::reads::WARM)), one at a time, so a
/// query that arrives meanwhile waits for one statement at most (it prepares what it needs
/// itself): a start that sends its first query at once is not held up by statements it does
/// not need yet.
fn serve(mut conn: Connection, receiver: &Mutex<mpsc::Receiver<ReadJob>>) {
    let mut cold = super::reads::WARM.iter();
    loop {
        let job = match cold.len() {
            0 => next_job(receiver),
            _ => match queued_job(receiver) {
                Queued::Job(job) => Some(job),
                Queued::Stopped => None,
                Queued::Nothing => {
                    // Errors are left to the queries themselves, which report them.
                    let _ = cold.next().map(|sql| conn.prepare_cached(sql));
                    continue;
                }
            },
        };
        let Some(job) = job else { return };
        job(&mut conn);
    }
}

/// What [`queued_job`] found.
enum Queued {
    Job(ReadJob),
    /// Nothing queued, or another thread waits on the queue and will take what comes.
    Nothing,
    /// The store was dropped.
    Stopped,
}

/// The next query if one is queued and no other thread waits on the queue, without waiting.
fn queued_job(receiver: &Mutex<mpsc::Receiver<ReadJob>>) -> Queued {
    let receiver = match receiver.try_lock() {
        Ok(receiver) => receiver,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return Queued::Nothing,
    };
    match receiver.try_recv() {
        Ok(job) => Queued::Job(job),
        Err(mpsc::TryRecvError::Empty) => Queued::Nothing,
        Err(mpsc::TryRecvError::Disconnected) => Queued::Stopped,
    }
}

/// The next query, or `None` once the store is dropped. The lock is held while waiting, so exactly
/// one idle thread waits on the queue and the others wait for it.
fn next_job(receiver: &Mutex<mpsc::Receiver<ReadJob>>) -> Option<ReadJob> {
    receiver.lock().unwrap_or_else(PoisonError::into_inner).recv().ok()
}
