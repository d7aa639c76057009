//! The embedded SQLite store: one file, WAL, `synchronous=FULL`, by default `.eve/eve.db`.
//!
//! # Threads
//!
//! - One **writer** thread serves the only write connection. Every write (creating, claiming,
//!   releasing, appending, delivering) is a request queued to it; it commits all requests queued at
//!   that moment in one transaction, and answers each caller after the commit is durable (group
//!   commit; see `writer`). A lone request costs one commit; many
//!   concurrent requests share one. A run's append or parked mark made as a lone writer (nothing
//!   queued, the last batch a single request) commits on the run's own thread instead, with the
//!   same steps, sparing the hand-off; requests made for outside callers (deliveries over HTTP,
//!   say) always go to the writer thread.
//! - A few **reader** threads own read-only connections and answer loads, listings, timers, the
//!   inbox and hook look-ups without waiting behind a write batch (WAL readers never block). A
//!   claim of a long journal reads its two halves on two of them at once (see `reads`).
//! - Before the threads start, the store begins the write-ahead log (a clean close removed it) and
//!   fills it to its working size, so the first write after a start pays one fsync rather than
//!   three and commits rewrite the log rather than grow it (see `wal`).
//! - While the fill waits on the disk, a reader thread reads what a start asks first: the
//!   recovery, and the claims of the runs it wakes (their journals up to 16,384 entries and about
//!   16 MB of text in all). They are answered from that read as long as nothing has been written
//!   since the open (see `ahead`).
//! - A delivery to a run not in memory (neither created nor claimed since the open, as a run
//!   parked before a restart; or let go by the runtime's warm cache since its last claim, see
//!   `Store::left_memory`) wakes the run, whose claim reads its journal. The writer queues that
//!   read as soon as it finds the delivery's run, so it runs while the delivery's commit waits on
//!   the disk, and the claim takes it (see `ahead::OnDelivery`).
//!
//! # Claims and fences
//!
//! The file lock below means no other process writes the file while this store is open, so a
//! fence only has to hold within this process: epochs live in memory (`Epochs`), a claim bumps
//! its run's epoch and reads the journal (no commit, no fsync), and an append checks its fence
//! against the current epoch inside its own transaction. A stale writer is refused and writes
//! nothing, exactly as with durable epochs; after a restart no earlier fence exists to be stale.
//!
//! # Invariants
//!
//! - Indexes (timers, hooks, inbox, run status) change only through [`IndexChanges`], in the same
//!   transaction as the entries that imply them, exactly as in the memory store.
//! - A refused request writes nothing: one refused before it changed a row left nothing to undo,
//!   and should one be refused after, its batch runs again with each request in a savepoint.
//! - No caller hears "ok" before the commit holding its writes has returned; if a commit fails,
//!   nothing of its batch is in the file and every caller of the batch gets the error.
//! - One process at a time: [`SqliteStore::open`] takes an exclusive lock on `<path>.lock` and
//!   fails if another process holds it. That makes every claim recorded in the file dead at open,
//!   so open clears them; while the process lives, claims never expire.
//! - A file is checked (`PRAGMA quick_check`) and its schema version verified at open, so a damaged
//!   or foreign file is refused before anything is written to it.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod ahead;
mod codec;
mod epochs;
mod open;
mod readers;
mod reads;
mod schema;
mod snapshot;
mod wal;
mod writer;
mod writes;

pub use snapshot::SqliteSnapshot;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use self::ahead::{Ahead, OnDelivery};
use self::epochs::Epochs;
use self::readers::Readers;
use self::reads::ClaimRead;
use self::writer::Writer;
use self::writes::{AppendRows, NewRunRow};
use eve_runtime::journal::{Entry, Position, RunId};
use eve_runtime::secret::TokenHash;
use eve_runtime::store::kit;
use eve_runtime::store::{
    Append, Claimed, Commit, Created, Delivered, DeliveryPayload, Fence, HookRow, InboxItem, InboxLimits, IndexChanges,
    JournalPage, NewRun, Recovery, RunPage, RunQuery, RunRecord, RunSummary, Store, StoreError, Target, TimerRow,
    WorkerId,
};
use eve_runtime::time::Timestamp;

// Linked in, the embedded store is what `Runtime::builder()` opens unless given a store: the file
// `eve.db` in the runtime's data directory.
inventory::submit! {
    eve_runtime::DefaultStore { name: "sqlite", variable: None, open: open_default }
}

/// Opens the embedded store at `<data dir>/eve.db`.
fn open_default(opening: &eve_runtime::Opening<'_>) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(SqliteStore::open(opening.dir.join("eve.db"))?))
}

/// Settings of a [`SqliteStore`].
///
/// ```
/// # use eve_tools::store::SqliteOptions;
/// let options = SqliteOptions { max_entry_bytes: 1 << 20, ..SqliteOptions::default() };
/// assert_eq!(options.read_connections, 2);
/// ```
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// The largest journal entry or delivery accepted, in bytes of JSON; a larger one is refused
    /// with [`StoreError::TooLarge`] and nothing is written. Default 8 MiB.
    pub max_entry_bytes: usize,
    /// Caps the file at this many pages (`PRAGMA max_page_count`; a page is 4 KiB), so writes
    /// past it fail with [`StoreError::DiskFull`] as on a full disk. For tests; default `None`.
    pub max_page_count: Option<u64>,
    /// How many read-only connections, each on its own thread, answer reads. Default 2. With two
    /// or more, a run's restart reads a long journal (512 entries or more) on two at once.
    pub read_connections: usize,
    /// How many deliveries may wait for one run and for one hook. Default [`InboxLimits::DEFAULT`].
    pub inbox_limits: InboxLimits,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            max_entry_bytes: 8 << 20,
            max_page_count: None,
            read_connections: 2,
            inbox_limits: InboxLimits::DEFAULT,
        }
    }
}

/// The embedded [`Store`]: durable, for one process at a time. See the module documentation.
///
/// ```
/// # use eve_tools::store::{SqliteStore, Store};
/// let dir = tempfile::tempdir()?;
/// let store = SqliteStore::open(dir.path().join("eve.db"))?;
/// assert!(store.is_durable());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteStore {
    // Fields drop in order: the threads finish and close their connections before the lock is
    // released, the readers before the writer, so the writer's is the last connection to the file
    // and closing it checkpoints the WAL into the file and removes it.
    readers: Readers,
    writer: Writer,
    ahead: Ahead,
    on_delivery: Arc<OnDelivery>,
    epochs: Epochs,
    options: SqliteOptions,
    path: String,
    _lock: File,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).field("options", &self.options).finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Where the runtime keeps its store unless told otherwise, relative to the working directory.
    pub const DEFAULT_PATH: &'static str = ".eve/eve.db";

    /// Opens (creating if needed) the store at `path` with default [`SqliteOptions`].
    ///
    /// Fails with [`StoreError::Open`] if the path cannot hold a database or another process uses
    /// it, and with [`StoreError::Corrupt`] if the file is damaged.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed) the store at `path`, creating its parent directories.
    ///
    /// Besides the file, a store keeps its write-ahead log in `<path>-wal` while it is open. Open
    /// fills the log to its working size (about 4.5 MB with SQLite's 4 KiB pages) and syncs it
    /// once, a few milliseconds, so that the store's commits rewrite the log rather than grow it.
    /// Meanwhile a reader thread reads what a restart asks first ([`Store::recovery`], then a
    /// claim of each run it wakes), so a restart finds it read. The read (journals of about 16 MB
    /// of text at most) is held until those calls take it or a write makes a call find it stale;
    /// a store never recovered holds it until it is dropped.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        open::prepare_path(path)?;
        schema::check_length(path)?;
        let lock = open::lock(path)?;
        let mut conn = open::writer_connection(path, &options)?;
        schema::check_integrity(&conn, &shown)?;
        schema::prepare(&mut conn, &shown)?;
        let log = wal::begin(&conn, path).map_err(|error| codec::open_error(&error, &shown))?;
        // The reader threads and the writer's start before the log is filled, so they load the
        // schema and prepare their statements while the fill's sync waits on the disk, not when a
        // restart's first queries and writes arrive. The fill writes the log's file, not through
        // the connection, and nothing writes through it before the open returns.
        let readers = Readers::start(path, options.read_connections)?;
        // A start's first reads, the recovery and the claims it leads to, are made meanwhile too
        // (see `ahead`).
        let other = readers.parallel();
        let budget = (reads::START_ENTRIES, reads::START_TEXT);
        let ahead = Ahead::new(readers.queue(move |conn| reads::start(conn, other.as_ref(), budget)));
        let writer = Writer::start(conn, shown.clone())?;
        log.fill();
        let (on_delivery, epochs) = (Arc::default(), Epochs::default());
        Ok(SqliteStore { writer, ahead, on_delivery, epochs, readers, options, path: shown, _lock: lock })
    }

    /// The file this store lives in.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What a claim reads: the journal from `from_seq`, the run's state and its inbox.
    async fn claim_read(&self, run: &RunId, from_seq: u64) -> Result<ClaimRead, StoreError> {
        let (run, other) = (run.clone(), self.readers.parallel());
        self.readers.read(move |conn: &mut _| reads::claimed(conn, &run, from_seq, other.as_ref())).await
    }

    /// What a claim reads, with the journal read ahead of a delivery (see `OnDelivery`): the
    /// run's state and inbox are read now, since the read ahead may have been made before the
    /// delivery committed. Should the state differ from the one the journal was read with, or
    /// the read ahead have found nothing to read, everything is read again.
    async fn claim_read_ahead(
        &self,
        run: &RunId,
        delivered: readers::Pending<Option<ClaimRead>>,
    ) -> Result<ClaimRead, StoreError> {
        let now = run.clone();
        let now = self.readers.read(move |conn| reads::state_and_inbox(conn, &now));
        let (ahead, now) = tokio::join!(self.readers.wait(delivered), now);
        let (state, inbox) = now?;
        let unchanged = |read: &ClaimRead| {
            state
                .as_ref()
                .is_some_and(|(status, length)| status == "active" && codec::uint(*length).ok() == Some(read.next_seq))
        };
        match ahead {
            Ok(Some(read)) if unchanged(&read) => {
                #[cfg(test)]
                self.on_delivery.answered_one();
                Ok(ClaimRead { inbox, ..read })
            }
            _ => self.claim_read(run, 0).await,
        }
    }

    fn encode_new_run(&self, run: &NewRun) -> Result<NewRunRow, StoreError> {
        let entry = run.started_entry();
        Ok(NewRunRow {
            entry: codec::encode_entry(&entry, self.options.max_entry_bytes)?,
            changes: IndexChanges::of(std::slice::from_ref(&entry)),
            id: run.id.clone(),
            workflow_id: run.workflow_id.clone(),
            tool: run.tool.clone(),
            created_at: run.created_at.as_millis(),
        })
    }

    fn encode_append(&self, run: &RunId, fence: Fence, append: &Append) -> Result<AppendRows, StoreError> {
        let limit = self.options.max_entry_bytes;
        let entries = append.entries.iter().map(|entry| codec::encode_entry(entry, limit)).collect::<Result<_, _>>()?;
        let what = "a notice to another run (SqliteOptions::max_entry_bytes)";
        let notices = append
            .notices
            .iter()
            .map(|notice| {
                let delivery = codec::encode(&notice.delivery, what, limit)?;
                let op = notice.delivery.hook_op().map(|op| op.0);
                Ok((notice.run.clone(), notice.delivery_id.clone(), op, delivery))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(AppendRows {
            run: run.clone(),
            fence,
            first_seq: append.first_seq,
            entries,
            consumed: append.consumed.clone(),
            changes: IndexChanges::of(&append.entries),
            notices,
            runs: append.runs.iter().map(|run| self.encode_new_run(run)).collect::<Result<_, _>>()?,
        })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_run(&self, run: NewRun, _owner: &WorkerId) -> Result<Created, StoreError> {
        // Claims live in memory (see the module documentation), so the owner is not stored.
        let row = self.encode_new_run(&run)?;
        let epochs = self.epochs.clone();
        self.writer.submit(move |conn| writes::create_run(conn, &row, &epochs)).await
    }

    async fn claim(
        &self,
        run: &RunId,
        _owner: &WorkerId,
        _lease: Duration,
        _now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError> {
        // A read made ahead of a delivery is for the run's next claim only, if that claim reads
        // the whole journal of a run not in memory (see `OnDelivery`); any claim drops it.
        let delivered = self.on_delivery.take(run);
        // Leases never expire in a single-process store: every claim comes from this process. The
        // new epoch is taken before the read, so appends under an older fence are refused from now.
        let (epoch, unheld) = self.epochs.bump(run);
        let read = async {
            let ClaimRead { mut entries, rest, next_seq, active, inbox, .. } =
                match self.ahead.claim(run, from_seq, || self.writer.began()) {
                    Some(read) => read,
                    None => match delivered.filter(|_| unheld && from_seq == 0) {
                        Some(delivered) => self.claim_read_ahead(run, delivered).await?,
                        None => self.claim_read(run, from_seq).await?,
                    },
                };
            if let Some(rest) = rest {
                entries.append(&mut self.readers.wait(rest).await?);
            }
            self.epochs.claimed(run, epoch, active.then_some(next_seq));
            Ok(Claimed { fence: Fence { epoch }, entries, next_seq, inbox })
        };
        read.await.inspect_err(|_| self.epochs.forget_if(run, epoch))
    }

    async fn release(&self, run: &RunId, _fence: Fence) -> Result<(), StoreError> {
        // Claims live in memory and never expire while this process holds the file, so there is
        // nothing to give up; the run must exist all the same.
        let run = run.clone();
        self.readers.read(move |conn| reads::exists(conn, &run)).await
    }

    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        // Encoded now: the write needs nothing more of the batch, which stays the caller's.
        let rows = match self.encode_append(run, fence, append) {
            Ok(rows) => rows,
            Err(refused) => return Commit::Done(Err(refused)),
        };
        let (finishes, length) = (rows.changes.status.is_some(), append.first_seq + append.entries.len() as u64);
        Commit::pending(async move {
            let epochs = self.epochs.clone();
            self.writer.submit_from_run(move |conn| writes::append(conn, &rows, &epochs)).await?;
            if finishes {
                // A finished run refuses appends whatever the fence, so its epoch is no longer needed.
                self.epochs.forget(run);
            } else {
                self.epochs.appended(run, fence.epoch, length);
            }
            Ok(())
        })
    }

    fn left_memory(&self, run: &RunId) {
        self.epochs.left_memory(run);
    }

    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        // No longer known to be unmarked, before the mark can reach the file: the run's next
        // append clears it.
        self.epochs.parking(run);
        let (run, epochs) = (run.clone(), self.epochs.clone());
        // A lost mark costs only a replay at the next start, so it need not wait for the disk;
        // the run's own task marks it, so as a lone writer it commits at once.
        self.writer.submit_lazy_from_run(move |conn| writes::park(conn, &run, fence, next_seq, &epochs)).await
    }

    async fn recovery(&self) -> Result<Recovery, StoreError> {
        if let Some(reading) = self.ahead.reading() {
            // Read as the store opened: still what the file holds if nothing was written since.
            // Should that read have failed, the one below meets the error again and reports it.
            if let Ok(read) = self.readers.wait(reading).await
                && !self.writer.began()
            {
                self.ahead.keep(read.claims);
                return Ok(read.recovery);
            }
        }
        self.readers.read(reads::recovery).await
    }

    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a> {
        let started = started.as_ref().expect("Store::continue_as_new is given the entry to continue with");
        let text = match codec::encode_entry(started, self.options.max_entry_bytes) {
            Ok(text) => text,
            Err(refused) => return Commit::Done(Err(refused)),
        };
        let history = kit::continued(std::slice::from_ref(started));
        let build = kit::build(std::slice::from_ref(started)).cloned();
        Commit::pending(async move {
            let (continued, epochs) = (run.clone(), self.epochs.clone());
            let write = move |conn: &_| {
                writes::continue_as_new(conn, &continued, fence, (history, &text, build.as_ref()), &epochs, keep_inbox)
            };
            self.writer.submit(write).await?;
            self.epochs.continued(run, fence.epoch);
            Ok(())
        })
    }

    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        payload: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        let (delivery_id, limit, limits) =
            (delivery_id.map(str::to_owned), self.options.max_entry_bytes, self.options.inbox_limits);
        let (on_delivery, epochs) = (self.on_delivery.clone(), self.epochs.clone());
        let (queue, other) = (self.readers.handle(), self.readers.parallel());
        // A request may run twice (see `writer`), so it keeps its payload and hands a copy over.
        let deliver = move |conn: &_| {
            let delivered =
                writes::deliver(conn, target.clone(), delivery_id.as_deref(), payload.clone(), limit, limits)?;
            if let (Delivered::Accepted { run, .. }, Some(queue)) = (&delivered, &queue)
                && let Some(length) = epochs.unheld(run)
            {
                // Not in memory: the claim this delivery leads to will read the journal. It is
                // read now, while the commit waits on the disk.
                on_delivery.read(run, length, queue, other.clone());
            }
            Ok(delivered)
        };
        self.writer.submit(deliver).await
    }

    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        let run = run.clone();
        self.readers.read(move |conn| reads::inbox(conn, &run)).await
    }

    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        let token = token.clone();
        self.readers.read(move |conn| reads::find_hook(conn, token.as_str())).await
    }

    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
        self.readers.read(|conn| reads::timers(conn)).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let run = run.clone();
        self.readers.read(move |conn| reads::load(conn, &run)).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        let query = query.clone();
        self.readers.read(move |conn| reads::list_runs(conn, &query)).await
    }

    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        let run = run.clone();
        self.readers.read(move |conn| reads::tail(conn, &run)).await
    }

    async fn read(&self, run: &RunId, at: Position, limit: usize) -> Result<Option<JournalPage>, StoreError> {
        let run = run.clone();
        self.readers.read(move |conn| reads::page(conn, &run, at, limit)).await
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        Some(self.options.max_entry_bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rusqlite::Connection;

    use super::*;
    use eve_runtime::journal::Op;
    use eve_runtime::store::RunCursor;

    /// Claim epochs live in memory for unfinished runs only: a finished run's is forgotten, so the
    /// map does not grow with every run the process ever advanced.
    #[tokio::test]
    async fn a_finished_runs_claim_epoch_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("eve.db")).unwrap();
        let owner = WorkerId("test".into());
        for index in 0..3 {
            let run = new_run(&format!("run-{index}"));
            let Created::New(fence) = store.create_run(run.clone(), &owner).await.unwrap() else { unreachable!() };
            let claimed = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(2), 0).await.unwrap();
            assert!(claimed.fence.epoch > fence.epoch);
            let record = Entry::Recorded {
                op: Op(0),
                kind: eve_runtime::journal::RecordKind::Now,
                value: serde_json::Value::from(1).into(),
            };
            let entries = vec![record, Entry::RunCompleted { output: serde_json::json!(index) }];
            store
                .append(
                    &run.id,
                    claimed.fence,
                    &mut Append { first_seq: 1, entries, consumed: vec![], notices: vec![], runs: vec![] },
                )
                .await
                .unwrap();
        }
        assert_eq!(store.epochs.len(), 0, "no epoch is kept for a finished run");
    }

    /// An append clears its run's parked mark, including when the append skips that statement
    /// for a run it knows to be unmarked: after a park, after a reopen that finds the mark in the
    /// file, and when a stale writer's append commits just before a newer claim parks the run.
    #[tokio::test]
    async fn every_append_after_a_park_clears_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let owner = WorkerId("test".into());
        let run = new_run("run-parked");
        let record = |op: u32| Entry::Recorded {
            op: Op(op),
            kind: eve_runtime::journal::RecordKind::Now,
            value: serde_json::Value::from(1).into(),
        };
        let append = |first_seq: u64| Append {
            first_seq,
            entries: vec![record(u32::try_from(first_seq).unwrap())],
            consumed: vec![],
            notices: vec![],
            runs: vec![],
        };
        async fn is_parked(store: &SqliteStore, run: &RunId) -> bool {
            store.tail(run).await.unwrap().unwrap().0.parked
        }

        let store = SqliteStore::open(&path).unwrap();
        let Created::New(fence) = store.create_run(run.clone(), &owner).await.unwrap() else { unreachable!() };
        store.append(&run.id, fence, &mut append(1)).await.unwrap();
        store.park(&run.id, fence, 2).await.unwrap();
        assert!(is_parked(&store, &run.id).await);
        store.append(&run.id, fence, &mut append(2)).await.unwrap();
        assert!(!is_parked(&store, &run.id).await, "the append after a park clears the mark");
        store.append(&run.id, fence, &mut append(3)).await.unwrap();
        store.park(&run.id, fence, 4).await.unwrap();
        drop(store);

        let store = SqliteStore::open(&path).unwrap();
        assert!(is_parked(&store, &run.id).await, "the mark is in the file after a reopen");
        let claimed = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(2), 0).await.unwrap();
        store.append(&run.id, claimed.fence, &mut append(4)).await.unwrap();
        assert!(!is_parked(&store, &run.id).await, "the first append after a reopen clears the mark the file holds");

        // A stale writer's append commits, a newer claim parks the run, then the stale writer
        // records its append: the newer claim's next append must still clear the mark.
        store.append(&run.id, claimed.fence, &mut append(5)).await.unwrap();
        let newer = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(3), 0).await.unwrap();
        store.park(&run.id, newer.fence, 6).await.unwrap();
        store.epochs.appended(&run.id, claimed.fence.epoch, 6);
        assert!(is_parked(&store, &run.id).await);
        store.append(&run.id, newer.fence, &mut append(6)).await.unwrap();
        assert!(!is_parked(&store, &run.id).await, "a stale writer's append does not vouch for the newer claim");
    }

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.parse().unwrap(),
            workflow_id: "t".into(),
            tool: "t".into(),
            input: serde_json::json!({}),
            created_at: Timestamp::from_millis(1),
            principal: None,
            interactive: true,
            parent: None,
            traceparent: None,
            build: None,
            forked_from: None,
        }
    }

    /// A run whose journal holds `run_started` and then `length - 1` recorded values, each its
    /// own position.
    async fn long_run(store: &SqliteStore, id: &str, length: u64) -> RunId {
        let owner = WorkerId("test".into());
        let run = new_run(id);
        store.create_run(run.clone(), &owner).await.unwrap();
        let mut fence = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(2), 0).await.unwrap().fence;
        for first_seq in (1..length).step_by(100) {
            let entries = (first_seq..length.min(first_seq + 100)).map(recorded).collect();
            let mut append = Append { first_seq, entries, consumed: vec![], notices: vec![], runs: vec![] };
            store.append(&run.id, fence, &mut append).await.unwrap();
        }
        fence = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(3), length).await.unwrap().fence;
        store.park(&run.id, fence, length).await.unwrap();
        run.id
    }

    /// A fresh store at `<dir>/eve.db` holding one [`long_run`] `length` entries long.
    async fn store_with_long_run(length: u64) -> (tempfile::TempDir, std::path::PathBuf, SqliteStore, RunId) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let store = SqliteStore::open(&path).unwrap();
        let run = long_run(&store, "run-long", length).await;
        (dir, path, store, run)
    }

    fn recorded(seq: u64) -> Entry {
        let op = Op(u32::try_from(seq).unwrap());
        Entry::Recorded { op, kind: eve_runtime::journal::RecordKind::Now, value: serde_json::Value::from(seq).into() }
    }

    /// An append of `entries` from `first_seq`, and nothing else.
    fn appending(first_seq: u64, entries: Vec<Entry>) -> Append {
        Append { first_seq, entries, consumed: vec![], notices: vec![], runs: vec![] }
    }

    /// A store at `path` whose run `run` is runnable, as a process that stopped mid-activation
    /// leaves it: its parked mark cleared by hand, the store closed.
    fn unpark(path: &std::path::Path, run: &RunId) {
        let conn = Connection::open(path).unwrap();
        let cleared = conn.execute("UPDATE runs SET parked = 0 WHERE id = ?1", [run.as_str()]).unwrap();
        assert_eq!(cleared, 1);
    }

    /// A store at `<dir>/eve.db` holding a [`long_run`] of each name and length, each runnable
    /// (see [`unpark`]), and closed.
    async fn runnable_runs(runs: &[(&str, u64)]) -> (tempfile::TempDir, std::path::PathBuf, Vec<RunId>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let store = SqliteStore::open(&path).unwrap();
        let mut ids = Vec::new();
        for (id, length) in runs {
            ids.push(long_run(&store, id, *length).await);
        }
        drop(store);
        for run in &ids {
            unpark(&path, run);
        }
        (dir, path, ids)
    }

    async fn claim_from_start(store: &SqliteStore, run: &RunId) -> Claimed {
        store.claim(run, &WorkerId("test".into()), Duration::ZERO, Timestamp::from_millis(4), 0).await.unwrap()
    }

    /// The recovery and the claims of the runs it wakes are answered from what the open read
    /// while it filled the log (see `ahead`), each once, a long journal in two halves. Seen here
    /// through a change made to the file behind the store's back (which no process does while a
    /// store holds it): the first claim does not see it, having been read before; the next claim
    /// reads the file again.
    #[tokio::test]
    async fn a_starts_recovery_and_first_claims_are_what_the_open_read() {
        let (_dir, path, runs) = runnable_runs(&[("run-long", 700), ("run-short", 300)]).await;
        let (long, short) = (&runs[0], &runs[1]);
        let store = SqliteStore::open(&path).unwrap();
        let recovery = store.recovery().await.unwrap();
        assert_eq!(recovery.runnable, runs);
        // Only the short journal, read in one part: the long one's second half may still be read.
        let behind = Connection::open(&path).unwrap();
        behind.execute("DELETE FROM journal WHERE run_id = ?1 AND seq > 0", [short.as_str()]).unwrap();
        for (run, length) in [(long, 700), (short, 300)] {
            let claimed = claim_from_start(&store, run).await;
            assert_eq!((claimed.entries.len(), claimed.next_seq), (length, length as u64), "read at open");
            let ops: Vec<u64> = claimed.entries[1..].iter().map(|entry| u64::from(entry.op().unwrap().0)).collect();
            assert_eq!(ops, (1..length as u64).collect::<Vec<_>>());
        }
        assert_eq!(claim_from_start(&store, short).await.entries.len(), 1, "read again");
    }

    /// A cancellation of `run`, for a delivery that needs no hook.
    async fn deliver_cancel(store: &SqliteStore, run: &RunId) -> Delivered {
        let cancel = eve_runtime::store::Delivery::Cancel { reason: "test".into(), keep_output: false };
        store.deliver(Target::Run(run.clone()), None, DeliveryPayload::Run(cancel)).await.unwrap()
    }

    /// A delivery to a run not claimed since the store opened reads its journal ahead of the
    /// claim it leads to, and that claim takes the read: the whole journal (its second half read
    /// apart), with the inbox read afresh, so it holds the delivery even when the journal was
    /// read before the delivery committed. A run claimed since the open is in memory, so a
    /// delivery to it reads nothing ahead.
    #[tokio::test]
    async fn a_delivery_to_a_run_not_in_memory_reads_its_journal_ahead_of_the_claim() {
        let (_dir, path, store, run) = store_with_long_run(700).await;
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.recovery().await.unwrap().runnable, Vec::<RunId>::new(), "the run is parked");
        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 1, "the claim's read is under way");
        let claimed = claim_from_start(&store, &run).await;
        assert_eq!(store.on_delivery.kept(), 0, "the claim took it");
        assert_eq!(store.on_delivery.answered(), 1, "and was answered from it");
        assert_eq!((claimed.entries.len(), claimed.next_seq), (700, 700));
        let ops: Vec<u64> = claimed.entries[1..].iter().map(|entry| u64::from(entry.op().unwrap().0)).collect();
        assert_eq!(ops, (1..700).collect::<Vec<_>>());
        assert_eq!(claimed.inbox.len(), 1, "the inbox holds the delivery");

        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 0, "a run claimed since the open is not read ahead");
        assert_eq!(claim_from_start(&store, &run).await.inbox.len(), 2);
    }

    /// A run the runtime let go of (`Store::left_memory`) is not in memory either: a delivery to
    /// it reads its journal ahead of its next claim, which is answered from that read. That claim
    /// holds the run in memory again, so a delivery after it reads nothing ahead until the
    /// runtime lets go of the run once more. Should the journal grow after the read (an append
    /// under the claim the runtime let go, which the runtime never makes), the claim reads again.
    /// A journal the store knows to be short is not read ahead.
    #[tokio::test]
    async fn a_run_the_runtime_let_go_of_is_read_ahead_of_its_next_claim() {
        let (_dir, _path, store, run) = store_with_long_run(700).await;
        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 0, "a run claimed since the open is in memory");
        store.left_memory(&run);
        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 1, "the claim's read is under way");
        let claimed = claim_from_start(&store, &run).await;
        assert_eq!((store.on_delivery.kept(), store.on_delivery.answered()), (0, 1), "the claim took it");
        assert_eq!((claimed.entries.len(), claimed.next_seq, claimed.inbox.len()), (700, 700, 2));

        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 0, "claimed again, the run is in memory");
        store.left_memory(&run);
        assert!(matches!(deliver_cancel(&store, &run).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 1);
        // The reader thread may be slow to start: the append must come after the read.
        store.on_delivery.made(&run).await;
        store.append(&run, claimed.fence, &mut appending(700, vec![recorded(700)])).await.unwrap();
        let claimed = claim_from_start(&store, &run).await;
        assert_eq!(store.on_delivery.answered(), 1, "the read was stale, so the claim read again");
        assert_eq!((claimed.entries.len(), claimed.next_seq), (701, 701));
        assert_eq!(claimed.entries.last(), Some(&recorded(700)));

        // A journal known to be short is read by its claim: reading it ahead costs more.
        let short = long_run(&store, "run-short", 100).await;
        store.left_memory(&short);
        assert!(matches!(deliver_cancel(&store, &short).await, Delivered::Accepted { .. }));
        assert_eq!(store.on_delivery.kept(), 0, "too short to read ahead");
        assert_eq!(claim_from_start(&store, &short).await.entries.len(), 100);
    }

    /// Whatever the journal held when it was read ahead, the claim returns what the file holds
    /// when it claims: here an entry appended behind the store's back (which no process does
    /// while a store holds the file) after the delivery, so the claim reads again. And at most
    /// `DELIVERED_KEPT` reads are kept, for runs whose claims may never come.
    #[tokio::test]
    async fn a_journal_read_ahead_is_taken_only_while_it_is_what_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let store = SqliteStore::open(&path).unwrap();
        let mut runs = Vec::new();
        for index in 0..10 {
            runs.push(long_run(&store, &format!("run-{index}"), 20).await);
        }
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        for run in &runs {
            assert!(matches!(deliver_cancel(&store, run).await, Delivered::Accepted { .. }));
        }
        assert_eq!(store.on_delivery.kept(), 8, "a few reads are kept, no more");
        store.on_delivery.made(&runs[0]).await;
        let behind = Connection::open(&path).unwrap();
        let entry = serde_json::to_string(&recorded(20)).unwrap();
        let appended = "INSERT INTO journal (run_id, seq, entry) VALUES (?1, 20, ?2)";
        behind.execute(appended, [runs[0].as_str(), entry.as_str()]).unwrap();
        // A parked run's length is kept in its row.
        behind.execute("UPDATE runs SET entries = 21 WHERE id = ?1", [runs[0].as_str()]).unwrap();
        let claimed = claim_from_start(&store, &runs[0]).await;
        assert_eq!((claimed.entries.len(), claimed.next_seq), (21, 21), "read again");
        assert_eq!(claimed.entries.last(), Some(&recorded(20)));
        for run in &runs[1..] {
            let claimed = claim_from_start(&store, run).await;
            assert_eq!((claimed.entries.len(), claimed.inbox.len()), (20, 1));
        }
        assert_eq!(store.on_delivery.kept(), 0);
    }

    /// A start reads ahead the journals of the runs it wakes, in order, until the next would take
    /// it past its entries, or until the text read reaches its limit (the run that reaches it is
    /// read whole).
    #[tokio::test]
    async fn a_start_reads_ahead_within_its_budget() {
        let (_dir, path, runs) = runnable_runs(&[("run-0", 10), ("run-1", 10), ("run-2", 10)]).await;
        let mut conn = open::reader_connection(&path).unwrap();
        let read = |conn: &mut Connection, budget| {
            let read = reads::start(conn, None, budget).unwrap();
            assert_eq!(read.recovery.runnable, runs);
            read.claims.into_iter().map(|(run, claim)| (run, claim.entries.len(), claim.text)).collect::<Vec<_>>()
        };
        let all = read(&mut conn, (30, usize::MAX));
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|(_, length, text)| *length == 10 && *text > 10 * 20), "{all:?}");
        assert_eq!(read(&mut conn, (29, usize::MAX)), all[..2], "the third would pass 29 entries");
        assert_eq!(read(&mut conn, (30, all[0].2 + 1)), all[..2], "the second reaches the text's limit");
        assert_eq!(read(&mut conn, (30, all[0].2)), all[..1], "the first reaches it");
        assert_eq!(read(&mut conn, (9, usize::MAX)), [], "none fits");
    }

    /// Once anything is written, what the open read is stale: a write before the recovery makes
    /// the recovery read the file again (it finds a run created since), and a write before a
    /// claim makes the claim read it again (it finds a delivery made since).
    #[tokio::test]
    async fn a_write_after_the_open_makes_the_recovery_and_the_claims_read_afresh() {
        let (_dir, path, runs) = runnable_runs(&[("run-long", 600), ("run-other", 3)]).await;
        let (run, other) = (&runs[0], &runs[1]);
        let cancel =
            || DeliveryPayload::Run(eve_runtime::store::Delivery::Cancel { reason: "stop".into(), keep_output: false });
        // Written before the recovery.
        let store = SqliteStore::open(&path).unwrap();
        let created = new_run("run-created");
        store.create_run(created.clone(), &WorkerId("test".into())).await.unwrap();
        let recovery = store.recovery().await.unwrap();
        assert_eq!(recovery.runnable, [created.id.clone(), run.clone(), other.clone()]);
        assert_eq!(recovery.unfinished, 3);
        drop(store);
        // Written after the recovery, before the claims.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.recovery().await.unwrap().runnable.len(), 3);
        store.deliver(Target::Run(run.clone()), None, cancel()).await.unwrap();
        let claimed = claim_from_start(&store, run).await;
        assert_eq!((claimed.entries.len(), claimed.inbox.len()), (600, 1), "the delivery made after the open");
        // A claim after a write drops what is left: the other run is read afresh too.
        store.deliver(Target::Run(other.clone()), None, cancel()).await.unwrap();
        assert_eq!(claim_from_start(&store, other).await.inbox.len(), 1);
    }

    /// Right after an open, the recovery, claims of every run it wakes, deliveries and new runs,
    /// all at once: a write acknowledged before a call begins is seen by that call, whether it is
    /// answered from what the open read or afresh.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_made_at_open_never_hides_a_write_acknowledged_before_the_call() {
        // Two long enough to be read in two halves.
        let names: Vec<String> = (0..16).map(|index| format!("run-{index:02}")).collect();
        let lengths: Vec<(&str, u64)> =
            names.iter().enumerate().map(|(index, name)| (name.as_str(), if index < 2 { 600 } else { 3 })).collect();
        let (_dir, path, runs) = runnable_runs(&lengths).await;
        let cancel =
            || DeliveryPayload::Run(eve_runtime::store::Delivery::Cancel { reason: "stop".into(), keep_output: false });
        for round in 0..6 {
            let store = Arc::new(SqliteStore::open(&path).unwrap());
            let mut calls = tokio::task::JoinSet::new();
            let recovering = store.clone();
            calls.spawn(async move {
                let recovery = recovering.recovery().await.unwrap();
                assert!(recovery.runnable.len() >= 16, "{:?}", recovery.runnable);
            });
            let creating = store.clone();
            calls.spawn(async move {
                let created = new_run(&format!("run-new-{round}"));
                creating.create_run(created.clone(), &WorkerId("test".into())).await.unwrap();
                assert!(creating.recovery().await.unwrap().runnable.contains(&created.id));
            });
            for (index, run) in runs.iter().enumerate() {
                let (store, run) = (store.clone(), run.clone());
                calls.spawn(async move {
                    let delivered = (index + round) % 2 == 0;
                    if delivered {
                        store.deliver(Target::Run(run.clone()), None, cancel()).await.unwrap();
                    }
                    let claimed = claim_from_start(&store, &run).await;
                    let length = if index < 2 { 600 } else { 3 };
                    assert_eq!(claimed.entries.len(), length, "{run}");
                    // Every delivery of the earlier rounds, and this round's if it was made.
                    let before = (0..round).filter(|round| (index + round) % 2 == 0).count() + usize::from(delivered);
                    assert!(claimed.inbox.len() >= before, "{run}: {:?}", claimed.inbox);
                });
            }
            while let Some(call) = calls.join_next().await {
                call.unwrap();
            }
            // What each claim saw is what the file holds: every delivery of the run so far.
            for (index, run) in runs.iter().enumerate() {
                let expected = (0..=round).filter(|round| (index + round) % 2 == 0).count();
                assert_eq!(store.inbox(run).await.unwrap().len(), expected, "{run}");
            }
            drop(store);
        }
    }

    /// A long journal is read in two halves on two reader threads; the claim returns it whole and
    /// in order, from any point, as a store with one reader thread (which never splits) does.
    #[tokio::test]
    async fn a_long_journal_is_claimed_whole_and_in_order_from_any_point() {
        let (_dir, path, store, run) = store_with_long_run(1_501).await;
        drop(store);
        let owner = WorkerId("test".into());
        for read_connections in [1, 2, 3] {
            let options = SqliteOptions { read_connections, ..SqliteOptions::default() };
            let store = SqliteStore::open_with(&path, options).unwrap();
            // Split (989 and 1,501 entries to read) and not split (201 and 0).
            for from_seq in [0, 512, 1_300, 1_501] {
                let claimed = store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(4), from_seq).await;
                let claimed = claimed.unwrap();
                assert_eq!(claimed.next_seq, 1_501);
                // `run_started` has no op; the others carry their position.
                let ops: Vec<Option<u64>> =
                    claimed.entries.iter().map(|entry| entry.op().map(|op| u64::from(op.0))).collect();
                let expected: Vec<Option<u64>> = (from_seq..1_501).map(|seq| (seq > 0).then_some(seq)).collect();
                assert_eq!(ops, expected, "{read_connections} reader(s), from {from_seq}");
            }
        }
    }

    /// Many long claims at once, more than there are reader threads, each waiting for its second
    /// half to be read by another thread: every one is answered, whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_claims_at_once_are_all_answered_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("eve.db")).unwrap());
        let mut runs = Vec::new();
        for index in 0..4 {
            runs.push(long_run(&store, &format!("run-{index}"), 600 + index * 100).await);
        }
        let mut claims = tokio::task::JoinSet::new();
        for round in 0..8 {
            for (index, run) in runs.iter().enumerate() {
                let (store, run) = (store.clone(), run.clone());
                claims.spawn(async move {
                    let owner = WorkerId(format!("test-{round}"));
                    let claimed =
                        store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(4), 0).await.unwrap();
                    let length = 600 + index as u64 * 100;
                    assert_eq!(claimed.entries.len() as u64, length);
                    let ops: Vec<u64> =
                        claimed.entries[1..].iter().map(|entry| u64::from(entry.op().unwrap().0)).collect();
                    assert_eq!(ops, (1..length).collect::<Vec<_>>());
                });
            }
        }
        while let Some(claim) = claims.join_next().await {
            claim.unwrap();
        }
    }

    /// A damaged entry in either half of a split claim fails the claim with the store's corrupt
    /// error naming the entry, as a claim read on one thread does.
    #[tokio::test]
    async fn a_damaged_entry_in_either_half_of_a_split_claim_is_reported() {
        let (_dir, path, store, run) = store_with_long_run(600).await;
        drop(store);
        for damaged in [100_i64, 450] {
            let conn = Connection::open(&path).unwrap();
            let sql = "UPDATE journal SET entry = '{\"recorded\":' WHERE run_id = ?1 AND seq = ?2";
            assert_eq!(conn.execute(sql, rusqlite::params![run.as_str(), damaged]).unwrap(), 1);
            drop(conn);
            let store = SqliteStore::open(&path).unwrap();
            let claimed =
                store.claim(&run, &WorkerId("test".into()), Duration::ZERO, Timestamp::from_millis(4), 0).await;
            let Err(StoreError::Corrupt { reason, .. }) = claimed else {
                panic!("expected a corrupt store: {claimed:?}")
            };
            assert!(reason.contains(&format!("journal entry {damaged} is not a valid entry")), "{reason}");
            drop(store);
            let conn = Connection::open(&path).unwrap();
            let fixed = serde_json::to_string(&recorded(damaged.unsigned_abs())).unwrap();
            conn.execute(
                "UPDATE journal SET entry = ?3 WHERE run_id = ?1 AND seq = ?2",
                rusqlite::params![run.as_str(), damaged, fixed],
            )
            .unwrap();
        }
    }

    /// The second half of a split claim is read in its own snapshot; should the journal's length
    /// differ there (the run was written to while it was claimed, which the runtime never does),
    /// the read fails rather than join two journals.
    #[tokio::test]
    async fn a_journal_that_changed_during_a_split_claim_fails_the_claim() {
        let (_dir, path, _store, run) = store_with_long_run(600).await;
        let mut conn = open::reader_connection(&path).unwrap();
        assert_eq!(reads::journal_rest(&mut conn, &run, 300, 600).unwrap().len(), 300);
        let error = reads::journal_rest(&mut conn, &run, 300, 599).unwrap_err().into_store_error("eve.db");
        let message = error.to_string();
        assert!(message.contains("journal changed while it was being claimed"), "{message}");
        assert!(message.contains("claim the run again"), "{message}");
    }

    /// A cached statement keeps its plan whatever run id or sequence numbers are bound to it: the
    /// bundled SQLite would otherwise prepare a journal read again each time it is given another
    /// run or range (five times in these six reads).
    #[tokio::test]
    async fn a_cached_statement_is_not_prepared_again_for_new_values() {
        let (_dir, path, store, first) = store_with_long_run(3).await;
        let second = long_run(&store, "run-other", 3).await;
        let mut conn = open::reader_connection(&path).unwrap();
        for run in [&first, &second, &first] {
            assert_eq!(reads::load(&mut conn, run).unwrap().unwrap().summary.entries, 3);
            assert_eq!(reads::journal_rest(&mut conn, run, 1, 3).unwrap().len(), 2);
            assert_eq!(reads::claimed(&mut conn, run, 1, None).unwrap().next_seq, 3);
        }
        for sql in [reads::JOURNAL, reads::RUN_STATE] {
            let reprepared = conn.prepare_cached(sql).unwrap().get_status(rusqlite::StatementStatus::RePrepare);
            assert_eq!(reprepared, 0, "prepared again for new values: {sql}");
        }
    }

    /// A file of schema version 3 kept each run's journal length in its row, and advanced it on
    /// every append. Opened by this build, it becomes the current version (which an older build
    /// refuses, as it would trust a running run's row) and keeps its runs: a parked run takes
    /// appends, reads its length from its journal while it runs, and parks again where it was.
    #[tokio::test]
    async fn a_version_3_file_is_migrated_and_its_runs_go_on() {
        let (_dir, path, store, run) = store_with_long_run(7).await;
        drop(store);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("UPDATE runs SET entries = (SELECT count(*) FROM journal WHERE run_id = runs.id);").unwrap();
        drop(conn);
        with_journal_keyed_by_run(&path, 3);

        let store = SqliteStore::open(&path).unwrap();
        let summary = store.load(&run).await.unwrap().unwrap().summary;
        assert_eq!((summary.entries, summary.parked), (7, true));
        let owner = WorkerId("test".into());
        let fence = store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(5), 7).await.unwrap().fence;
        let mut stale = appending(6, vec![recorded(6)]);
        let refused = store.append(&run, fence, &mut stale).await.unwrap_err();
        assert!(matches!(refused, StoreError::SeqConflict { expected: 6, actual: 7, .. }), "{refused:?}");
        let mut append = appending(7, vec![recorded(7)]);
        store.append(&run, fence, &mut append).await.unwrap();
        let running = store.load(&run).await.unwrap().unwrap().summary;
        assert_eq!((running.entries, running.parked), (8, false), "a running run's length is its journal's");
        store.park(&run, fence, 8).await.unwrap();
        let page = store.list_runs(&RunQuery::newest(10)).await.unwrap();
        assert_eq!(page.runs.iter().map(|run| (run.entries, run.parked)).collect::<Vec<_>>(), [(8, true)]);
        drop(store);

        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, schema::VERSION);
        let entries: i64 = conn.query_row("SELECT entries FROM runs", [], |row| row.get(0)).unwrap();
        assert_eq!(entries, 8, "the park kept the length in the row");
    }

    /// Rebuilds the journal of the file at `path` as schema versions 1 to 4 kept it, keyed by run,
    /// and gives the file schema version `version`.
    fn with_journal_keyed_by_run(path: &std::path::Path, version: i64) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "CREATE TABLE journal_by_run_first (
                 run_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (run_id, seq)
             ) WITHOUT ROWID;
             INSERT INTO journal_by_run_first SELECT run_id, seq, entry FROM journal;
             DROP TABLE journal;
             ALTER TABLE journal_by_run_first RENAME TO journal;
             DROP TABLE journal_previous;
             ALTER TABLE runs DROP COLUMN continued;
             ALTER TABLE runs DROP COLUMN fingerprint;
             ALTER TABLE runs DROP COLUMN version;",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", version).unwrap();
    }

    /// A version 4 file whose disk has no room for the migration's copy of the journal is refused
    /// with an error that says so and what to do, left as it was (still version 4, every entry in
    /// place), and migrated when opened again with room.
    #[tokio::test]
    async fn a_migration_without_room_for_its_copy_leaves_the_file_as_it_was() {
        let (_dir, path, store, run) = store_with_long_run(2_000).await;
        let before = store.load(&run).await.unwrap().unwrap();
        drop(store);
        with_journal_keyed_by_run(&path, 4);
        let conn = Connection::open(&path).unwrap();
        // No free pages left from the rebuild, so the copy needs new ones.
        conn.execute_batch("VACUUM").unwrap();
        let pages: i64 = conn.pragma_query_value(None, "page_count", |row| row.get(0)).unwrap();
        drop(conn);

        let cramped = SqliteOptions { max_page_count: Some(pages.unsigned_abs() + 4), ..SqliteOptions::default() };
        let Err(refused) = SqliteStore::open_with(&path, cramped) else { panic!("the migration had no room") };
        let StoreError::Open { path: named, reason } = &refused else { panic!("{refused:?}") };
        assert_eq!(named, &path.display().to_string());
        assert!(reason.contains("from eve schema version 4 to 7") && reason.contains("no room"), "{reason}");
        assert!(reason.contains("free about as much space") && reason.contains("left as it was"), "{reason}");
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, 4, "the refused migration changed nothing");
        let kept: i64 = conn.query_row("SELECT count(*) FROM journal", [], |row| row.get(0)).unwrap();
        assert_eq!(kept, 2_000);
        drop(conn);

        let store = SqliteStore::open(&path).unwrap();
        let after = store.load(&run).await.unwrap().unwrap();
        assert_eq!(format!("{after:?}"), format!("{before:?}"), "the journal reads as before");
    }

    /// A version 4 file, whose journal is keyed by run, opens as the current version: its journal
    /// is copied into the table kept in the order of appends, run by run, so each run's history is
    /// one range of it, and its runs go on.
    #[tokio::test]
    async fn a_version_4_file_is_migrated_and_its_runs_go_on() {
        let (_dir, path, store, run) = store_with_long_run(150).await;
        let other = long_run(&store, "run-first", 40).await;
        let before = (store.load(&run).await.unwrap().unwrap(), store.load(&other).await.unwrap().unwrap());
        drop(store);
        with_journal_keyed_by_run(&path, 4);

        let store = SqliteStore::open(&path).unwrap();
        let after = (store.load(&run).await.unwrap().unwrap(), store.load(&other).await.unwrap().unwrap());
        assert_eq!(format!("{after:?}"), format!("{before:?}"), "the journals read as before");
        let owner = WorkerId("test".into());
        let fence = store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(5), 0).await.unwrap().fence;
        let mut stale = appending(149, vec![recorded(149)]);
        let refused = store.append(&run, fence, &mut stale).await.unwrap_err();
        assert!(matches!(refused, StoreError::SeqConflict { expected: 149, actual: 150, .. }), "{refused:?}");
        store.append(&run, fence, &mut appending(150, vec![recorded(150)])).await.unwrap();
        assert_eq!(store.load(&run).await.unwrap().unwrap().entries.len(), 151);
        drop(store);

        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, schema::VERSION);
        // Copied run by run ("run-first" sorts first), each in order; the new entry comes last.
        let sql = "SELECT run_id, seq FROM journal ORDER BY id";
        let rows: Vec<(String, i64)> = conn
            .prepare(sql)
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let expected: Vec<(String, i64)> = (0..40)
            .map(|seq| ("run-first".to_owned(), seq))
            .chain((0..151).map(|seq| ("run-long".to_owned(), seq)))
            .collect();
        assert_eq!(rows, expected);
    }

    /// A run's journal reads the same, whole and in order from any point, however its entries lie
    /// in the table: interleaved with another run's (its first 80), as one range of it (appended
    /// alone: the next 100), or moved by hand so that the range of ids between two of its entries
    /// holds as many rows as entries, but not the right ones.
    #[tokio::test]
    async fn a_journal_reads_the_same_whether_its_entries_lie_together_or_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        let store = SqliteStore::open(&path).unwrap();
        let (owner, at) = (WorkerId("test".into()), Timestamp::from_millis(4));
        let (run, other) = (new_run("run-mine"), new_run("run-other"));
        let mut fences = Vec::new();
        for new in [&run, &other] {
            store.create_run(new.clone(), &owner).await.unwrap();
            fences.push(store.claim(&new.id, &owner, Duration::ZERO, at, 1).await.unwrap().fence);
        }
        // The other run's entries carry ops of their own, so none can pass for the first run's.
        let mine = |seq| (run.id.clone(), fences[0], appending(seq, vec![recorded(seq)]));
        let theirs = |seq| (other.id.clone(), fences[1], appending(seq, vec![recorded(seq + 1_000)]));
        let appends =
            (1..80).flat_map(|seq| [mine(seq), theirs(seq)]).chain((80..180).map(mine)).chain((80..130).map(theirs));
        for (id, fence, mut append) in appends {
            store.append(&id, fence, &mut append).await.unwrap();
        }
        reads_whole(&store, &run.id, 180).await;
        drop(store);

        // Two entries trade places in the table, as only an edit by hand can make them: the ids
        // between the first run's entries 99 and 179 stay as many as those entries, but hold
        // another run's entry 120, or the first run's entries out of order. Each in a copy of
        // the file as it was.
        let kept = dir.path().join("kept.db");
        std::fs::copy(&path, &kept).unwrap();
        for (one, other) in [(("run-mine", 120), ("run-other", 120)), (("run-mine", 130), ("run-mine", 170))] {
            std::fs::copy(&kept, &path).unwrap();
            let conn = Connection::open(&path).unwrap();
            let id = |(run, seq): (&str, i64)| -> i64 {
                let sql = "SELECT id FROM journal WHERE run_id = ?1 AND seq = ?2";
                conn.query_row(sql, rusqlite::params![run, seq], |row| row.get(0)).unwrap()
            };
            let (first, second) = (id(one), id(other));
            conn.execute("UPDATE journal SET id = -1 WHERE id = ?1", [first]).unwrap();
            conn.execute("UPDATE journal SET id = ?1 WHERE id = ?2", [first, second]).unwrap();
            conn.execute("UPDATE journal SET id = ?1 WHERE id = -1", [second]).unwrap();
            assert_eq!((id(one), id(other)), (second, first));
            drop(conn);
            reads_whole(&SqliteStore::open(&path).unwrap(), &run.id, 180).await;
        }
    }

    /// Checks that claims of `run` from several points, and a load, read its `length` entries
    /// (`run_started`, then a recorded value at each position) whole and in order.
    async fn reads_whole(store: &SqliteStore, run: &RunId, length: u64) {
        let owner = WorkerId("test".into());
        for from_seq in [0, 1, 40, 68, 99, 100, 150, length - 1, length] {
            let claimed = store.claim(run, &owner, Duration::ZERO, Timestamp::from_millis(4), from_seq).await.unwrap();
            let ops: Vec<Option<u64>> =
                claimed.entries.iter().map(|entry| entry.op().map(|op| u64::from(op.0))).collect();
            let expected: Vec<Option<u64>> = (from_seq..length).map(|seq| (seq > 0).then_some(seq)).collect();
            assert_eq!(ops, expected, "from {from_seq}");
        }
        assert_eq!(store.load(run).await.unwrap().unwrap().entries.len() as u64, length);
    }

    /// An append that starts where the claim knows the journal ends is not checked against the
    /// file before it writes. Should the file hold more (an append under an older claim that
    /// committed after the claim's read), the entry already there refuses it as a conflict, and
    /// nothing is written; an append at the file's length is still taken.
    #[tokio::test]
    async fn an_append_behind_the_file_is_refused_whatever_the_claim_knows() {
        let (_dir, _path, store, run) = store_with_long_run(5).await;
        let owner = WorkerId("test".into());
        let fence = store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(5), 5).await.unwrap().fence;
        assert_eq!(store.epochs.known(&run).length, Some(5));
        // The claim's knowledge one entry behind the file, as the race above leaves it.
        store.epochs.claimed(&run, fence.epoch, Some(4));
        let mut behind = appending(4, vec![recorded(4)]);
        let refused = store.append(&run, fence, &mut behind).await.unwrap_err();
        assert!(matches!(refused, StoreError::SeqConflict { expected: 4, actual: 5, .. }), "{refused:?}");
        let mut at_end = appending(5, vec![recorded(5)]);
        store.append(&run, fence, &mut at_end).await.unwrap();
        assert_eq!(store.epochs.known(&run).length, Some(6));
        let record = store.load(&run).await.unwrap().unwrap();
        assert_eq!(record.summary.entries, 6);
        assert!(matches!(&record.entries[4], Entry::Recorded { op: Op(4), .. }), "entry 4 is the first one written");

        // A finished run is refused whatever the claim knows of it.
        let done = Entry::RunCompleted { output: serde_json::json!(null) };
        let mut finish = appending(6, vec![done]);
        store.append(&run, fence, &mut finish).await.unwrap();
        let claimed = store.claim(&run, &owner, Duration::ZERO, Timestamp::from_millis(6), 7).await.unwrap();
        assert_eq!(store.epochs.known(&run).length, None, "a finished run's length is not kept");
        let mut after = appending(7, vec![recorded(7)]);
        let refused = store.append(&run, claimed.fence, &mut after).await.unwrap_err();
        assert!(matches!(refused, StoreError::RunFinished(_)), "{refused:?}");
    }

    /// Claims, appends and parks of one run from many tasks at once, each appending where its own
    /// claim saw the journal end: whatever the interleaving, an append is either acknowledged and
    /// in the file at its place, or refused (fenced, or a conflict) and absent. The journal ends
    /// dense, holding exactly the acknowledged entries.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_claims_and_appends_keep_exactly_the_acknowledged_entries() {
        const TASKS: u64 = 6;
        const ROUNDS: u64 = 150;
        // Most appends meet a newer claim, and how many get in depends on how fast the reader
        // threads answer the claims: rounds go on until enough have for the interleavings to matter.
        const WANTED: usize = ROUNDS as usize / 10;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("eve.db")).unwrap());
        let owner = WorkerId("test".into());
        let run = new_run("run-raced");
        store.create_run(run.clone(), &owner).await.unwrap();
        let mut acknowledged = Vec::new();
        for batch in 0..20 {
            if acknowledged.len() >= WANTED {
                break;
            }
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..TASKS {
                let rounds = batch * ROUNDS..(batch + 1) * ROUNDS;
                tasks.spawn(race_rounds(store.clone(), run.id.clone(), owner.clone(), task, rounds));
            }
            acknowledged.extend(tasks.join_all().await.into_iter().flatten());
        }
        acknowledged.sort_unstable();
        let record = store.load(&run.id).await.unwrap().unwrap();
        let journal: Vec<(u64, u64)> = (1..)
            .zip(&record.entries[1..])
            .map(|(seq, entry)| match entry {
                Entry::Recorded { value, .. } => (seq, value.to_value().as_u64().unwrap()),
                other => panic!("entry {seq} is {other:?}"),
            })
            .collect();
        assert_eq!(journal, acknowledged, "the journal holds exactly the acknowledged entries, each at its place");
        assert_eq!(record.summary.entries, record.entries.len() as u64);
        assert!(journal.len() >= WANTED, "the tasks got {} appends in", journal.len());
    }

    /// One racing task's `rounds`: each claims `run`, appends one to three entries where its claim
    /// saw the journal end until one is refused, and every fourth parks the run. Returns the
    /// acknowledged entries' positions and values.
    async fn race_rounds(
        store: Arc<SqliteStore>,
        run: RunId,
        owner: WorkerId,
        task: u64,
        rounds: std::ops::Range<u64>,
    ) -> Vec<(u64, u64)> {
        let mut acknowledged = Vec::new();
        for round in rounds {
            let now = Timestamp::from_millis(round);
            let claimed = store.claim(&run, &owner, Duration::ZERO, now, 0).await.unwrap();
            let mut next = claimed.next_seq;
            for _ in 0..=(round + task) % 3 {
                let value = task * 1_000_000_000 + round * 1_000 + next;
                let entry = Entry::Recorded {
                    op: Op(0),
                    kind: eve_runtime::journal::RecordKind::Now,
                    value: serde_json::Value::from(value).into(),
                };
                match store.append(&run, claimed.fence, &mut appending(next, vec![entry])).await {
                    Ok(()) => acknowledged.push((next, value)),
                    Err(StoreError::Fenced { .. } | StoreError::SeqConflict { .. }) => break,
                    Err(other) => panic!("an append refused otherwise: {other:?}"),
                }
                next += 1;
                tokio::task::yield_now().await;
            }
            if round % 4 == task % 4 {
                store.park(&run, claimed.fence, next).await.unwrap();
            }
        }
        acknowledged
    }

    /// Every read of a run's length (an append's checks, a claim, a park) seeks the end of the
    /// run's journal: a run 10,000 entries long costs the same as one of ten.
    #[test]
    fn every_read_of_a_length_is_one_seek() {
        let (_dir, conn) = new_file();
        for sql in [reads::RUN_STATE, writes::PARK] {
            let plan = query_plan(&conn, sql, &[&"run-1", &3]);
            assert!(plan.contains("SEARCH journal USING COVERING INDEX journal_by_run (run_id=?)"), "{sql}: {plan}");
            assert!(!plan.contains("SCAN") && !plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }

    /// Reading a journal is seeks and ranges, never a scan or a sort: a range of a run's entries
    /// through the index by run, one entry's place in the table, or a range of the table's ids.
    #[test]
    fn every_read_of_a_journal_is_a_seek_or_a_range() {
        let (_dir, conn) = new_file();
        let reads = [
            (reads::JOURNAL, "SEARCH journal USING INDEX journal_by_run (run_id=? AND seq>? AND seq<?)"),
            (reads::ENTRY_ID, "SEARCH journal USING COVERING INDEX journal_by_run (run_id=? AND seq=?)"),
            (reads::JOURNAL_SPAN, "SEARCH journal USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
        ];
        for (sql, expected) in reads {
            assert_eq!(query_plan(&conn, sql, &[&1, &1, &1]), expected, "{sql}");
        }
    }

    /// A new store's file, opened in plain SQLite.
    fn new_file() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("eve.db");
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        (dir, conn)
    }

    /// SQLite's plan for `sql`, its parameters bound to the first of `values` in turn: its steps,
    /// joined by "; ".
    fn query_plan(conn: &Connection, sql: &str, values: &[&dyn rusqlite::ToSql]) -> String {
        let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        for (index, value) in values.iter().enumerate().take(explain.parameter_count()) {
            explain.raw_bind_parameter(index + 1, value).unwrap();
        }
        let plan: Vec<String> = explain.raw_query().mapped(|row| row.get(3)).collect::<Result<_, _>>().unwrap();
        plan.join("; ")
    }

    /// The write-ahead log's working size: its header, and the frames of SQLite's automatic
    /// checkpoint (1,000 pages of 4 KiB, each with its 24-byte header) and a tenth more.
    const WORKING_LOG: u64 = 32 + 1_100 * (24 + 4_096);

    /// A clean close removes the write-ahead log; open begins a new one and fills it to its
    /// working size before any request, so the first write after a restart does not wait for the
    /// log's header and its directory entry to reach the disk, and the first thousand commits
    /// rewrite space already allocated rather than grow the file. The store's commits still sync.
    #[tokio::test]
    async fn a_reopened_store_begins_and_fills_its_write_ahead_log_before_the_first_write() {
        let (dir, path, store, run) = store_with_long_run(3).await;
        drop(store);
        let log = dir.path().join("eve.db-wal");
        assert!(!log.exists(), "a clean close removes the log");
        let store = SqliteStore::open(&path).unwrap();
        let len = std::fs::metadata(&log).unwrap().len();
        assert!((WORKING_LOG..WORKING_LOG + 64 * 1024).contains(&len), "the log is {len} bytes long");
        // Beginning the log committed without the fsync; the store's own commits sync (2 is FULL).
        let synchronous =
            |conn: &Connection| Ok(conn.pragma_query_value(None, "synchronous", |row| row.get::<_, i64>(0))?);
        assert_eq!(store.writer.submit(synchronous).await.unwrap(), 2);
        // The rewrite changed nothing: the store reads as before and takes writes.
        assert_eq!(store.load(&run).await.unwrap().unwrap().entries.len(), 3);
        let fence = store.claim(&run, &WorkerId("test".into()), Duration::ZERO, Timestamp::from_millis(5), 3).await;
        let mut append = appending(3, vec![recorded(3)]);
        store.append(&run, fence.unwrap().fence, &mut append).await.unwrap();
        drop(store);
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, schema::VERSION);
    }

    /// Many runs written at once, each commit on its run's thread or the writer's as it finds the
    /// connection; then the files as a crash would leave them, the log cut after its last frame. Reopened,
    /// the log is filled again, only past that frame: every acknowledged entry is there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_log_a_crash_left_is_extended_never_overwritten() {
        const RUNS: u64 = 40;
        const ENTRIES: u64 = 25;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("eve.db")).unwrap());
        let mut writes = tokio::task::JoinSet::new();
        for index in 0..RUNS {
            let store = store.clone();
            writes.spawn(async move {
                let owner = WorkerId("test".into());
                let run = new_run(&format!("run-{index}"));
                store.create_run(run.clone(), &owner).await.unwrap();
                let claimed = store.claim(&run.id, &owner, Duration::ZERO, Timestamp::from_millis(2), 0).await;
                let fence = claimed.unwrap().fence;
                for seq in 1..=ENTRIES {
                    let entries = vec![recorded(seq)];
                    let mut append = appending(seq, entries);
                    store.append(&run.id, fence, &mut append).await.unwrap();
                }
            });
        }
        writes.join_all().await;

        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("eve.db"), copy.path().join("eve.db")).unwrap();
        let mut log = std::fs::read(dir.path().join("eve.db-wal")).unwrap();
        drop(store);
        let frame = 24 + 4_096;
        let written = log.iter().rposition(|byte| *byte != 0).unwrap() + 1;
        log.truncate(32 + (written - 32).div_ceil(frame) * frame);
        assert!((log.len() as u64) < WORKING_LOG, "the writes filled part of the log");
        std::fs::write(copy.path().join("eve.db-wal"), &log).unwrap();

        let store = SqliteStore::open(copy.path().join("eve.db")).unwrap();
        assert!(std::fs::metadata(copy.path().join("eve.db-wal")).unwrap().len() >= WORKING_LOG);
        for index in 0..RUNS {
            let run: RunId = format!("run-{index}").parse().unwrap();
            let record = store.load(&run).await.unwrap().unwrap_or_else(|| panic!("{run} is there"));
            let values: Vec<u64> = record.entries[1..]
                .iter()
                .map(|entry| match entry {
                    Entry::Recorded { value, .. } => value.to_value().as_u64().unwrap(),
                    other => panic!("{run} holds {other:?}"),
                })
                .collect();
            assert_eq!(values, (1..=ENTRIES).collect::<Vec<_>>(), "{run} has every acknowledged entry");
        }
    }

    /// Every listing the inspector can ask for walks an index in `rowid` order from its cursor:
    /// no scan of the whole table, no sort of what it found, and each run's length is one seek.
    #[test]
    fn every_listing_walks_an_index_without_sorting() {
        let (_dir, conn) = new_file();
        let cursor: RunCursor = "1000".parse().unwrap();
        let mut queries = Vec::new();
        for state in [None, Some("active"), Some("parked"), Some("running"), Some("failed")] {
            for tool in [None, Some("refund")] {
                for before in [None, Some(cursor)] {
                    let mut query = RunQuery::newest(50);
                    if let Some(state) = state {
                        query = query.state(state).unwrap();
                    }
                    query.tool = tool.map(str::to_owned);
                    query.before = before;
                    queries.push(query);
                }
            }
        }
        for query in queries {
            let (sql, values) = reads::listing(&query);
            let values: Vec<&dyn rusqlite::ToSql> = values.iter().map(AsRef::as_ref).collect();
            let plan = query_plan(&conn, &sql, &values);
            assert!(!plan.contains("TEMP B-TREE"), "{query:?} sorts what it finds: {plan}");
            // Each listed run's length is a seek to the end of its journal, never a scan of it.
            let length =
                "; CORRELATED SCALAR SUBQUERY 1; SEARCH journal USING COVERING INDEX journal_by_run (run_id=?)";
            let plan = plan.strip_suffix(length).unwrap_or_else(|| panic!("{query:?} reads lengths otherwise: {plan}"));
            let indexed = plan.contains("USING INDEX runs_by_") || plan.contains("INTEGER PRIMARY KEY");
            let newest_first = plan == "SCAN runs" && query.status.is_none() && query.tool.is_none();
            assert!(indexed || newest_first, "{query:?} does not walk an index: {plan}");
        }
    }
}
