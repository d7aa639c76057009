//! A store that fails on purpose: it delegates to a real store and refuses the appends a test
//! picks, as a full disk or a lost connection would, so tests can show what the runtime does when
//! the store fails at a chosen moment. It also counts the runs created on their own
//! (`create_run`), as opposed to those an append starts, the reads of an inbox on its own, and the
//! lookups of a hook.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use eve_tools::secret::TokenHash;
use eve_tools::store::{
    Append, Claimed, Commit, Created, Delivered, DeliveryPayload, Fence, HookRow, InboxItem, NewRun, Recovery, RunPage,
    RunQuery, RunRecord, RunSummary, Store, StoreError, Target, TimerRow, WorkerId,
};
use eve_tools::{Entry, RunId, Timestamp};

/// Decides, for each append, whether it fails.
type Picker = Box<dyn FnMut(&[Entry]) -> bool + Send>;

/// A store whose appends fail while [`Faulty::fail_appends`]'s picker says so.
pub struct Faulty {
    inner: Arc<dyn Store>,
    picker: Mutex<Option<Picker>>,
    claims_to_fail: Mutex<usize>,
    failed: Mutex<usize>,
    created: Mutex<usize>,
    inbox_reads: Mutex<usize>,
    hook_lookups: Mutex<usize>,
    load_delay: Mutex<Duration>,
    let_go: Mutex<Vec<RunId>>,
    let_go_delay: Mutex<Duration>,
    declared_limit: Mutex<Option<usize>>,
    unavailable: std::sync::atomic::AtomicBool,
}

impl Faulty {
    /// A store that behaves as `inner` until told to fail.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Faulty {
            inner,
            picker: Mutex::new(None),
            claims_to_fail: Mutex::new(0),
            failed: Mutex::new(0),
            created: Mutex::new(0),
            inbox_reads: Mutex::new(0),
            hook_lookups: Mutex::new(0),
            load_delay: Mutex::new(Duration::ZERO),
            let_go: Mutex::new(Vec::new()),
            let_go_delay: Mutex::new(Duration::ZERO),
            declared_limit: Mutex::new(None),
            unavailable: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// While `down`, the store says it is not ready ([`Store::ready`]) with a transient backend
    /// error, as a database that cannot be reached does; everything else still works.
    pub fn set_unavailable(&self, down: bool) {
        self.unavailable.store(down, std::sync::atomic::Ordering::SeqCst);
    }

    /// Fails every append for which `picker` returns true (with a transient backend error, and
    /// writing nothing).
    pub fn fail_appends(&self, picker: impl FnMut(&[Entry]) -> bool + Send + 'static) {
        *self.picker.lock().unwrap() = Some(Box::new(picker));
    }

    /// Fails the first `times` appends containing an entry `matches` picks; later ones succeed.
    pub fn fail_first(&self, times: usize, matches: impl Fn(&Entry) -> bool + Send + 'static) {
        let mut left = times;
        self.fail_appends(move |entries| {
            let hit = left > 0 && entries.iter().any(&matches);
            left -= usize::from(hit);
            hit
        });
    }

    /// Fails the next `times` claims (a cold activation reading the run) with a transient error.
    pub fn fail_claims(&self, times: usize) {
        *self.claims_to_fail.lock().unwrap() = times;
    }

    /// Makes every later read of a run's journal (`load`, as `Runtime::journal` reads it, and
    /// each page a follower reads) wait `delay` first, as a store far away or under load does: the runs themselves move on
    /// meanwhile.
    pub fn delay_loads(&self, delay: Duration) {
        *self.load_delay.lock().unwrap() = delay;
    }

    /// Makes every later `left_memory` block its caller for `delay` before it records the run:
    /// a hint that should return at once, slowed so that what happens while it runs shows.
    pub fn delay_let_go(&self, delay: Duration) {
        *self.let_go_delay.lock().unwrap() = delay;
    }

    /// Declares `limit` as the store's limit on one journal entry (`max_entry_bytes`), whatever
    /// limit the store it wraps keeps: a store that lies about its limit. A runtime reads the limit
    /// as it is built, so this is said before.
    pub fn declare_max_entry_bytes(&self, limit: usize) {
        *self.declared_limit.lock().unwrap() = Some(limit);
    }

    /// How many appends and claims failed on purpose so far.
    pub fn failed(&self) -> usize {
        *self.failed.lock().unwrap()
    }

    /// How many runs `create_run` created so far (each its own commit).
    pub fn runs_created(&self) -> usize {
        *self.created.lock().unwrap()
    }

    /// How many times a run's inbox was read on its own (`inbox`; a claim's read is not counted).
    pub fn inbox_reads(&self) -> usize {
        *self.inbox_reads.lock().unwrap()
    }

    /// How many times a hook was looked up by its token (`find_hook`).
    pub fn hook_lookups(&self) -> usize {
        *self.hook_lookups.lock().unwrap()
    }

    /// The runs the runtime said it let go of (`left_memory`), in order.
    pub fn let_go(&self) -> Vec<RunId> {
        self.let_go.lock().unwrap().clone()
    }
}

#[async_trait]
impl Store for Faulty {
    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
        let created = self.inner.create_run(run, owner).await?;
        *self.created.lock().unwrap() += usize::from(matches!(created, Created::New(_)));
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
        let fail = {
            let mut left = self.claims_to_fail.lock().unwrap();
            let fail = *left > 0;
            *left -= usize::from(fail);
            fail
        };
        if fail {
            *self.failed.lock().unwrap() += 1;
            return Err(StoreError::Backend("injected failure: the store is unreachable".into()));
        }
        self.inner.claim(run, owner, lease, now, from_seq).await
    }

    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
        self.inner.release(run, fence).await
    }

    fn left_memory(&self, run: &RunId) {
        let delay = *self.let_go_delay.lock().unwrap();
        std::thread::sleep(delay);
        self.let_go.lock().unwrap().push(run.clone());
        self.inner.left_memory(run);
    }

    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        let fail = self.picker.lock().unwrap().as_mut().is_some_and(|picker| picker(&append.entries));
        if fail {
            *self.failed.lock().unwrap() += 1;
            return Commit::Done(Err(StoreError::Backend("injected failure: the store is unreachable".into())));
        }
        self.inner.append(run, fence, append)
    }

    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        self.inner.park(run, fence, next_seq).await
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
        self.inner.continue_as_new(run, fence, started, keep_inbox)
    }

    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        delivery: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        self.inner.deliver(target, delivery_id, delivery).await
    }

    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        *self.inbox_reads.lock().unwrap() += 1;
        self.inner.inbox(run).await
    }

    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        *self.hook_lookups.lock().unwrap() += 1;
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
        let delay = *self.load_delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.inner.read(run, at, limit).await
    }

    async fn watch(&self, run: &RunId) -> Result<Option<eve_tools::store::Watch>, StoreError> {
        self.inner.watch(run).await
    }

    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let delay = *self.load_delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.inner.load(run).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        self.inner.list_runs(query).await
    }

    async fn ready(&self) -> Result<(), StoreError> {
        if self.unavailable.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Backend("connection refused (the test took the store down)".into()));
        }
        self.inner.ready().await
    }

    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        self.inner.tail(run).await
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        self.declared_limit.lock().unwrap().or_else(|| self.inner.max_entry_bytes())
    }

    fn is_durable(&self) -> bool {
        self.inner.is_durable()
    }
}
