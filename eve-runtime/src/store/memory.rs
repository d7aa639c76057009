//! An in-memory [`Store`] for tests and benchmarks. It keeps everything in one mutex and loses
//! everything when dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    Append, Claimed, Commit, Created, Delivered, Delivery, DeliveryPayload, Fence, HookMeta, HookRow, InboxItem,
    InboxLimits, IndexChanges, JournalPage, KEPT_HISTORIES, NewRun, Recovery, RunPage, RunQuery, RunRecord, RunSummary,
    Store, StoreError, Target, TimerKind, TimerRow, WaitingSignIn, WorkerId,
};
use crate::journal::{Entry, Op, Position, RunId, RunStatus};
use crate::secret::TokenHash;
use crate::time::Timestamp;

/// A [`Store`] that lives in memory.
///
/// ```
/// # use eve_tools::store::{MemoryStore, Store};
/// let store = MemoryStore::new();
/// assert!(!store.is_shared());
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    limits: InboxLimits,
}

#[derive(Debug, Default)]
struct State {
    /// Hashed with foldhash (seeded per map, as the standard hasher is): every append looks its
    /// run up here, and SipHash of the run id was about 3 % of an in-memory step.
    runs: foldhash::HashMap<RunId, RunState>,
    /// Creation order, for listings.
    order: Vec<RunId>,
    timers: BTreeMap<(RunId, Op, TimerKindKey), Timestamp>,
    hooks: HashMap<String, HookRow>,
    inbox: BTreeMap<u64, InboxItem>,
    next_inbox_id: u64,
}

#[derive(Debug)]
struct RunState {
    summary: RunSummary,
    entries: Vec<Entry>,
    /// The histories before the current one, oldest first, each with its number, for followers
    /// still reading them (at most [`KEPT_HISTORIES`]).
    previous: std::collections::VecDeque<(u32, Vec<Entry>)>,
    epoch: u64,
    owner: Option<(WorkerId, Timestamp)>,
    delivery_ids: HashSet<String>,
    hooks: Vec<String>,
}

/// `TimerKind` ordered, for use as a map key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKindKey {
    Sleep,
    Retry,
}

impl From<TimerKind> for TimerKindKey {
    fn from(kind: TimerKind) -> Self {
        match kind {
            TimerKind::Sleep => TimerKindKey::Sleep,
            TimerKind::Retry => TimerKindKey::Retry,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// An empty store that refuses deliveries beyond `limits` instead of [`InboxLimits::DEFAULT`].
    pub fn with_inbox_limits(limits: InboxLimits) -> Self {
        MemoryStore { limits, ..MemoryStore::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("memory store mutex is never poisoned: no code panics while holding it")
    }
}

impl State {
    /// [`Store::continue_as_new`] under the lock; `started` is called only once the run may
    /// continue, so a refused call leaves the caller's entry alone. The history that ends is kept
    /// for followers; returns the entries of the histories no longer kept, for the caller to drop
    /// once the lock is released: freeing a long journal should not hold up every other run.
    fn continue_as_new(
        &mut self,
        run: &RunId,
        fence: Fence,
        started: impl FnOnce() -> Entry,
        keep_inbox: bool,
    ) -> Result<Vec<Entry>, StoreError> {
        let state = self;
        let run_state = state.run_mut(run)?;
        if run_state.epoch != fence.epoch {
            return Err(StoreError::Fenced { run: run.clone(), held: fence.epoch, current: run_state.epoch });
        }
        if run_state.summary.status.is_finished() {
            return Err(StoreError::RunFinished(run.clone()));
        }
        let started = started();
        let keep_from = super::kit::continued(std::slice::from_ref(&started)).saturating_sub(KEPT_HISTORIES);
        let old = std::mem::replace(&mut run_state.entries, vec![started]);
        // The history that ends stays for followers still reading it; the oldest kept may go.
        run_state.previous.push_back((super::kit::continued(&old), old));
        let mut dropped = Vec::new();
        while run_state.previous.front().is_some_and(|(history, _)| *history < keep_from) {
            dropped.extend(run_state.previous.pop_front().map(|(_, entries)| entries).into_iter().flatten());
        }
        run_state.summary.entries = 1;
        run_state.summary.parked = false;
        run_state.summary.build = super::kit::build(&run_state.entries).cloned();
        if !keep_inbox {
            run_state.delivery_ids.clear();
        }
        let hooks = std::mem::take(&mut run_state.hooks);
        for hash in hooks {
            state.hooks.remove(&hash);
        }
        state.timers.retain(|(timer_run, _, _), _| timer_run != run);
        if !keep_inbox {
            state.inbox.retain(|_, item| &item.run != run || matches!(item.delivery, Delivery::Cancel { .. }));
        }
        Ok(dropped)
    }

    fn run_mut(&mut self, run: &RunId) -> Result<&mut RunState, StoreError> {
        self.runs.get_mut(run).ok_or_else(|| StoreError::RunNotFound(run.clone()))
    }

    /// Appends `batch` to `run`'s journal, moving its entries in, and updates the indexes it
    /// implies; or refuses it whole, leaving it as it was.
    fn append(&mut self, run: &RunId, fence: Fence, batch: &mut Append) -> Result<(), StoreError> {
        // One lookup of the run for the checks and the write: split borrows of the state.
        let State { runs, hooks, .. } = self;
        let run_state = runs.get_mut(run).ok_or_else(|| StoreError::RunNotFound(run.clone()))?;
        if run_state.epoch != fence.epoch {
            return Err(StoreError::Fenced { run: run.clone(), held: fence.epoch, current: run_state.epoch });
        }
        if run_state.summary.status.is_finished() {
            return Err(StoreError::RunFinished(run.clone()));
        }
        let actual = run_state.entries.len() as u64;
        if batch.first_seq != actual {
            return Err(StoreError::SeqConflict { run: run.clone(), expected: batch.first_seq, actual });
        }
        let changes = IndexChanges::of(&batch.entries);
        for (op, hash, _) in &changes.hooks_added {
            if hooks.get(hash).is_some_and(|holder| &holder.run != run) {
                return Err(StoreError::HookTokenInUse { run: run.clone(), op: *op });
            }
        }
        run_state.entries.append(&mut batch.entries);
        run_state.summary.entries = run_state.entries.len() as u64;
        run_state.summary.parked = false;
        for &id in &batch.consumed {
            // Only this run's items: an id naming another run's delivery must not drop it.
            if self.inbox.get(&id).is_some_and(|item| &item.run == run) {
                self.inbox.remove(&id);
            }
        }
        self.apply_indexes(run, changes);
        for new in &batch.runs {
            self.create(new, None);
        }
        for notice in &batch.notices {
            self.accept_notice(notice);
        }
        Ok(())
    }

    fn apply_indexes(&mut self, run: &RunId, changes: IndexChanges) {
        for (op, due, kind) in changes.timers_added {
            self.timers.insert((run.clone(), op, kind.into()), due);
        }
        for (op, kind) in changes.timers_removed {
            self.timers.remove(&(run.clone(), op, kind.into()));
        }
        for (op, hash, meta) in changes.hooks_added {
            self.hooks.insert(hash.clone(), HookRow { run: run.clone(), op, meta });
            if let Some(state) = self.runs.get_mut(run) {
                state.hooks.push(hash);
            }
        }
        if !changes.hooks_removed.is_empty() {
            self.hooks.retain(|_, hook| &hook.run != run || !changes.hooks_removed.contains(&hook.op));
        }
        // Looked up only when an entry names a build: every step's append comes through here.
        if let Some(build) = changes.build
            && let Some(state) = self.runs.get_mut(run)
        {
            state.summary.build = Some(*build);
        }
        if let Some(status) = changes.status {
            self.finish(run, status);
        }
    }

    /// Marks `run` finished and releases its timers, hooks and pending inbox.
    fn finish(&mut self, run: &RunId, status: RunStatus) {
        let hooks = match self.runs.get_mut(run) {
            Some(state) => {
                state.summary.status = status;
                std::mem::take(&mut state.hooks)
            }
            None => return,
        };
        for hash in hooks {
            self.hooks.remove(&hash);
        }
        self.timers.retain(|(timer_run, _, _), _| timer_run != run);
        self.inbox.retain(|_, item| &item.run != run);
    }
}

impl State {
    /// Accepts a notice into its run's inbox, unless the run is finished or the id was seen.
    fn accept_notice(&mut self, notice: &super::Notice) {
        let Some(run_state) = self.runs.get_mut(&notice.run) else { return };
        if run_state.summary.status.is_finished() || !run_state.delivery_ids.insert(notice.delivery_id.clone()) {
            return;
        }
        self.next_inbox_id += 1;
        let (id, run, delivery) = (self.next_inbox_id, notice.run.clone(), notice.delivery.clone());
        self.inbox.insert(id, InboxItem { id, run, delivery });
    }

    /// Every pending timer, ordered by run, op and kind.
    fn timer_rows(&self) -> Vec<TimerRow> {
        let rows = self.timers.iter().map(|((run, op, kind), due)| TimerRow {
            run: run.clone(),
            op: *op,
            due: *due,
            kind: match kind {
                TimerKindKey::Sleep => TimerKind::Sleep,
                TimerKindKey::Retry => TimerKind::Retry,
            },
        });
        rows.collect()
    }

    /// Creates `run`, claimed by `owner` at epoch 1 or unclaimed at epoch 0, unless its id is
    /// taken; returns whether it did.
    fn create(&mut self, run: &NewRun, owner: Option<&WorkerId>) -> bool {
        if self.runs.contains_key(&run.id) {
            return false;
        }
        let summary = RunSummary {
            id: run.id.clone(),
            workflow_id: run.workflow_id.clone(),
            tool: run.tool.clone(),
            status: RunStatus::Active,
            created_at: run.created_at,
            entries: 1,
            parked: false,
            build: run.build.clone(),
        };
        let run_state = RunState {
            summary,
            entries: vec![run.started_entry()],
            previous: std::collections::VecDeque::new(),
            epoch: u64::from(owner.is_some()),
            owner: owner.map(|owner| (owner.clone(), Timestamp::from_millis(u64::MAX))),
            delivery_ids: HashSet::new(),
            hooks: Vec::new(),
        };
        self.order.push(run.id.clone());
        self.runs.insert(run.id.clone(), run_state);
        true
    }

    /// Refuses a delivery that would put more than `limits` in waiting for its run or its hook.
    fn check_room(&self, run: &RunId, delivery: &Delivery, limits: InboxLimits) -> Result<(), StoreError> {
        let waiting: Vec<&InboxItem> = self.inbox.values().filter(|item| &item.run == run).collect();
        if waiting.len() >= limits.per_run {
            return Err(StoreError::InboxFull { run: run.clone(), hook: None, pending: waiting.len() });
        }
        let Some(op) = delivery.hook_op() else { return Ok(()) };
        let for_hook = waiting.iter().filter(|item| item.delivery.hook_op() == Some(op)).count();
        if for_hook >= limits.per_hook {
            return Err(StoreError::InboxFull { run: run.clone(), hook: Some(op), pending: for_hook });
        }
        Ok(())
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn is_durable(&self) -> bool {
        false
    }

    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
        let created = self.lock().create(&run, Some(owner));
        Ok(if created { Created::New(Fence { epoch: 1 }) } else { Created::Existing })
    }

    async fn claim(
        &self,
        run: &RunId,
        owner: &WorkerId,
        _lease: Duration,
        _now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError> {
        // Leases never expire in a single-process store: every claim comes from this process.
        let mut state = self.lock();
        let run_state = state.run_mut(run)?;
        run_state.epoch += 1;
        run_state.owner = Some((owner.clone(), Timestamp::from_millis(u64::MAX)));
        let fence = Fence { epoch: run_state.epoch };
        let from = usize::try_from(from_seq).unwrap_or(usize::MAX).min(run_state.entries.len());
        let entries = run_state.entries[from..].to_vec();
        let next_seq = run_state.entries.len() as u64;
        let inbox = state.inbox.values().filter(|item| &item.run == run).cloned().collect();
        Ok(Claimed { fence, entries, next_seq, inbox })
    }

    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
        let mut state = self.lock();
        let run_state = state.run_mut(run)?;
        if run_state.epoch == fence.epoch {
            run_state.owner = None;
        }
        Ok(())
    }

    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        // No I/O: the append is made, or refused, before this returns.
        Commit::Done(self.lock().append(run, fence, append))
    }

    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        let mut state = self.lock();
        let run_state = state.run_mut(run)?;
        if run_state.epoch == fence.epoch && run_state.entries.len() as u64 == next_seq {
            run_state.summary.parked = !run_state.summary.status.is_finished();
        }
        Ok(())
    }

    async fn recovery(&self) -> Result<Recovery, StoreError> {
        let state = self.lock();
        let unfinished: Vec<&RunState> = state.runs.values().filter(|run| !run.summary.status.is_finished()).collect();
        let with_inbox: std::collections::BTreeSet<&RunId> = state.inbox.values().map(|item| &item.run).collect();
        let mut runnable: Vec<RunId> = state
            .order
            .iter()
            .filter_map(|id| state.runs.get(id))
            .filter(|run| !run.summary.status.is_finished())
            .filter(|run| !run.summary.parked || with_inbox.contains(&run.summary.id))
            .map(|run| run.summary.id.clone())
            .collect();
        let mut sign_ins = Vec::new();
        for hook in state.hooks.values() {
            let HookMeta::Auth { provider, nonce } = &hook.meta else { continue };
            let Some(run) = state.runs.get(&hook.run) else { continue };
            if nonce.is_empty() {
                // Written before nonces were indexed: replaying the run publishes its link.
                runnable.push(hook.run.clone());
                continue;
            }
            let (provider, nonce, tool) = (provider.clone(), nonce.clone(), run.summary.tool.clone());
            sign_ins.push(WaitingSignIn { run: hook.run.clone(), tool, op: hook.op, provider, nonce });
        }
        sign_ins.sort_by(|left, right| (&left.run, left.op).cmp(&(&right.run, right.op)));
        runnable.dedup();
        Ok(Recovery { unfinished: unfinished.len(), runnable, timers: state.timer_rows(), sign_ins })
    }

    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a> {
        let take = || started.take().expect("Store::continue_as_new is given the entry to continue with");
        // The guard goes at the end of the statement; the old histories after it.
        let continued = self.lock().continue_as_new(run, fence, take, keep_inbox);
        Commit::Done(continued.map(drop))
    }

    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        payload: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        let mut state = self.lock();
        let (run, delivery) = match (target, payload) {
            (Target::Hook(hash), payload) => match state.hooks.get(hash.as_str()) {
                Some(hook) => match payload.for_hook(hook)? {
                    Some(delivery) => (hook.run.clone(), delivery),
                    None => return Ok(Delivered::NotFound),
                },
                None => return Ok(Delivered::NotFound),
            },
            (Target::Run(run), DeliveryPayload::Run(delivery)) => (run, delivery),
            (Target::Run(_), _) => return Err(StoreError::MismatchedTarget),
        };
        let Some(run_state) = state.runs.get_mut(&run) else { return Ok(Delivered::NotFound) };
        if run_state.summary.status.is_finished() {
            return Ok(Delivered::NotFound);
        }
        if delivery_id.is_some_and(|id| run_state.delivery_ids.contains(id)) {
            return Ok(Delivered::Duplicate { run });
        }
        state.check_room(&run, &delivery, self.limits)?;
        if let Some(id) = delivery_id {
            state.runs.get_mut(&run).expect("checked above").delivery_ids.insert(id.to_owned());
        }
        state.next_inbox_id += 1;
        let id = state.next_inbox_id;
        state.inbox.insert(id, InboxItem { id, run: run.clone(), delivery });
        Ok(Delivered::Accepted { run, id })
    }

    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        let state = self.lock();
        let tail = state.runs.get(run).and_then(|run| Some((run.summary.clone(), run.entries.last()?.clone())));
        Ok(tail)
    }

    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        Ok(self.lock().inbox.values().filter(|item| &item.run == run).cloned().collect())
    }

    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        Ok(self.lock().hooks.get(token.as_str()).cloned())
    }

    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
        Ok(self.lock().timer_rows())
    }

    async fn read(&self, run: &RunId, at: Position, limit: usize) -> Result<Option<JournalPage>, StoreError> {
        let state = self.lock();
        let Some(run_state) = state.runs.get(run) else { return Ok(None) };
        let continued = super::kit::continued(&run_state.entries);
        let journal: &[Entry] = if at.history == continued {
            &run_state.entries
        } else {
            let kept = run_state.previous.iter().find(|(history, _)| *history == at.history);
            kept.map_or(&[], |(_, entries)| entries)
        };
        let from = usize::try_from(at.seq).unwrap_or(usize::MAX).min(journal.len());
        let to = from.saturating_add(limit).min(journal.len());
        Ok(Some(JournalPage::new(continued, journal[from..to].to_vec())))
    }

    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let state = self.lock();
        let record = state
            .runs
            .get(run)
            .map(|run_state| RunRecord { summary: run_state.summary.clone(), entries: run_state.entries.clone() });
        Ok(record)
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        let state = self.lock();
        // A run's position is its index in `order` plus one, so that no cursor is 0.
        let end = query
            .before
            .map_or(state.order.len(), |before| (before.0.saturating_sub(1) as usize).min(state.order.len()));
        let listed = state.order[..end]
            .iter()
            .enumerate()
            .rev()
            .filter_map(|(index, id)| Some((&state.runs.get(id)?.summary, index as u64 + 1)))
            .filter(|(summary, _)| query.keeps(summary))
            .take(query.limit.saturating_add(1))
            .map(|(summary, position)| (summary.clone(), position));
        Ok(RunPage::of(query, listed.collect()))
    }
}
