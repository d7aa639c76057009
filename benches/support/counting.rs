//! A store that counts its commits: it delegates every call to a real store and keeps, in order,
//! one [`Write`] per call that changes what the store holds, so a bench can count the commits
//! between two moments it picks (issue 9: a task's receipt reaches the model at most one commit
//! after the tool call is journaled).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use eve_tools::secret::TokenHash;
use eve_tools::store::{
    Append, Claimed, Commit, Created, Delivered, DeliveryPayload, Fence, HookRow, InboxItem, NewRun, Recovery, RunPage,
    RunQuery, RunRecord, RunSummary, Store, StoreError, Target, TimerRow, WorkerId,
};
use eve_tools::{Entry, RunId, Timestamp};

/// What one write call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// `create_run`: a run created (with its `run_started` entry), durable.
    CreateRun,
    /// `append`: entries journaled (and the notices they imply), durable; the entries' kinds and,
    /// for completed steps, the step's name.
    Append(Vec<String>),
    /// `deliver`: a delivery accepted into an inbox, durable.
    Deliver,
    /// `continue_as_new`: a history replaced, durable.
    ContinueAsNew,
    /// `park`: the parked mark, a hint a store may write lazily (not a durable commit).
    Park,
}

impl WriteKind {
    /// Whether the write is a durable commit (everything but the lazy parked mark).
    pub fn is_commit(&self) -> bool {
        !matches!(self, WriteKind::Park)
    }
}

/// One successful write, in the order the store took them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The run written to (for `deliver`, the run that received it).
    pub run: RunId,
    /// What was written.
    pub kind: WriteKind,
    /// When the store returned.
    pub at: Instant,
}

/// A store that logs every successful write of the store it wraps.
pub struct Counting {
    inner: Arc<dyn Store>,
    log: Mutex<Vec<Write>>,
}

impl Counting {
    /// A store that behaves as `inner` and logs its writes.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Counting { inner, log: Mutex::new(Vec::new()) })
    }

    /// The writes so far, in order.
    pub fn log(&self) -> Vec<Write> {
        self.lock().clone()
    }

    /// How many writes the log holds (a position to compare later logs with).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Write>> {
        self.log.lock().expect("the log's mutex is never poisoned")
    }

    fn note(&self, run: &RunId, kind: WriteKind) {
        self.lock().push(Write { run: run.clone(), kind, at: Instant::now() });
    }
}

/// The kind of an entry, with a completed step's name: `step_completed:session.model`.
fn describe(entry: &Entry) -> String {
    match entry {
        Entry::StepCompleted { name, .. } => format!("step_completed:{name}"),
        other => other.kind().to_owned(),
    }
}

#[async_trait]
impl Store for Counting {
    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
        let id = run.id.clone();
        let created = self.inner.create_run(run, owner).await?;
        if matches!(created, Created::New(_)) {
            self.note(&id, WriteKind::CreateRun);
        }
        Ok(created)
    }

    async fn claim(
        &self,
        run: &RunId,
        owner: &WorkerId,
        lease: Duration,
        now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError> {
        self.inner.claim(run, owner, lease, now, from_seq).await
    }

    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
        self.inner.release(run, fence).await
    }

    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        // Described before the append: the store may keep the entries.
        let described = append.entries.iter().map(describe).collect();
        let appending = self.inner.append(run, fence, append);
        Commit::pending(async move {
            appending.await?;
            self.note(run, WriteKind::Append(described));
            Ok(())
        })
    }

    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        self.inner.park(run, fence, next_seq).await?;
        self.note(run, WriteKind::Park);
        Ok(())
    }

    async fn recovery(&self) -> Result<Recovery, StoreError> {
        self.inner.recovery().await
    }

    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a> {
        let continuing = self.inner.continue_as_new(run, fence, started, keep_inbox);
        Commit::pending(async move {
            continuing.await?;
            self.note(run, WriteKind::ContinueAsNew);
            Ok(())
        })
    }

    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        delivery: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        let delivered = self.inner.deliver(target, delivery_id, delivery).await?;
        if let Delivered::Accepted { run, .. } = &delivered {
            self.note(run, WriteKind::Deliver);
        }
        Ok(delivered)
    }

    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        self.inner.inbox(run).await
    }

    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        self.inner.find_hook(token).await
    }

    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
        self.inner.timers().await
    }

    async fn read(
        &self,
        run: &RunId,
        at: eve_tools::journal::Position,
        limit: usize,
    ) -> Result<Option<eve_tools::store::JournalPage>, StoreError> {
        self.inner.read(run, at, limit).await
    }

    async fn watch(&self, run: &RunId) -> Result<Option<eve_tools::store::Watch>, StoreError> {
        self.inner.watch(run).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.inner.load(run).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        self.inner.list_runs(query).await
    }

    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        self.inner.tail(run).await
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        self.inner.max_entry_bytes()
    }

    async fn renew(&self, run: &RunId, fence: Fence, lease: Duration, now: Timestamp) -> Result<(), StoreError> {
        self.inner.renew(run, fence, lease, now).await
    }

    async fn claimable(&self, now: Timestamp, limit: usize) -> Result<Vec<RunId>, StoreError> {
        self.inner.claimable(now, limit).await
    }

    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }

    fn is_durable(&self) -> bool {
        self.inner.is_durable()
    }

    /// Passed on: a hint writes nothing, and the store it wraps times its deliveries by it.
    fn left_memory(&self, run: &RunId) {
        self.inner.left_memory(run);
    }
}
