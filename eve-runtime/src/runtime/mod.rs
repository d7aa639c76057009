//! The [`Runtime`]: starts runs, activates them when something happens, parks them when they
//! wait, and recovers them after a restart.
//!
//! # Run states in this process
//!
//! - **active**: a task runs the run's executor; messages reach it through its mailbox.
//! - **parked**: the executor waits on durable waits only. Its body future may sit in the warm
//!   cache (bounded; resuming from it costs no replay), or nowhere (replayed from the journal when
//!   next woken). No task is held either way.
//! - **finished**: the journal ends with a terminal entry.
//!
//! Whether a run is active is decided under one lock (`runs`), which also covers moving a parked
//! executor into the warm cache, so a wake can never start a second executor for a run.
//!
//! On a shared store (Postgres) other processes advance runs too: see [`worker`] for clients and
//! workers, leases, heartbeats and how work is found. There a parked run's claim is given up, so a
//! parked executor taken from the warm cache claims its run again before it goes on, and is
//! dropped for a rebuild from the journal if another worker advanced the run meanwhile.

mod builder;
mod deliver;
mod fork;
mod pinning;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Semaphore, broadcast, mpsc, watch};

use crate::context::ToolCtx;
use crate::control::RunControl;
pub use crate::control::StartOptions;
pub use crate::error::Error;
use crate::events::RunEvent;
use crate::executor::{Driver, Engine, Exit, Msg};
pub use crate::journal::RunOutcome;
use crate::journal::{Entry, Op, RunId, RunStatus, TraceParent};
use crate::registry::{self, EntryPoint, ToolDescriptor};
use crate::run_core::Started;
use crate::store::{
    Created, Delivered, Delivery, DeliveryPayload, MemoryStore, NewRun, RunPage, RunQuery, RunRecord, RunSummary,
    Store, StoreError, Target,
};
use crate::time::Clock;

pub use self::builder::{DATABASE_URL_VARIABLE, DefaultStore, Opening, RuntimeBuilder};
pub use self::deliver::{AuthorizationStart, OpenQuestion, PendingResponse, WebhookReply};
pub use self::pinning::{RefusedRun, Upgrade, UpgradedRun};

/// Where a run stands in this process.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// Not yet seen by this process since it started.
    Unknown,
    /// An executor is advancing it.
    Running,
    /// It waits on durable waits only and holds no task.
    Parked,
    /// It ended.
    Finished(RunOutcome),
}

/// What delivering to a hook did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookDelivery {
    /// The payload was accepted durably for this run.
    Accepted(RunId),
    /// A delivery with the same id was accepted before; nothing changed.
    Duplicate(RunId),
}

/// The state shared by the runtime's handles, executors and timer task.
pub(crate) struct Shared {
    /// What executors need; `Shared` dereferences to it.
    pub engine: Engine,
    /// The mailbox of every run active in this process. A run is registered here before anything
    /// can wake it, and at most once, so at most one executor advances it.
    runs: Mutex<HashMap<RunId, mpsc::UnboundedSender<Msg>>>,
    /// How many runs are active (the size of `runs`), for `Runtime::settle`.
    active: watch::Sender<usize>,
    /// How many run tasks are alive, for `Runtime::shutdown`; see [`TaskGuard`].
    tasks: watch::Sender<usize>,
    cache: Mutex<WarmCache>,
    phases: Mutex<HashMap<RunId, watch::Sender<Phase>>>,
    replays: Semaphore,
    /// What sharing runs with other processes needs (used only on a shared store).
    sharing: worker::Sharing,
    /// The runs this runtime leaves to workers of another build (see [`pinning`]).
    passed_over: pinning::PassedOverRuns,
    /// The runs this runtime holds on a single-process store (see [`pinning`]).
    held: pinning::HeldRuns,
}

impl Shared {
    /// The runtime's state around `engine`, keeping as many parked runs warm as `cache` allows and
    /// replaying at most `replays` runs at once.
    pub(crate) fn new(engine: Engine, cache: CacheLimits, replays: usize, sharing: worker::Settings) -> Self {
        Shared {
            engine,
            runs: Mutex::new(HashMap::new()),
            active: watch::channel(0).0,
            tasks: watch::channel(0).0,
            cache: Mutex::new(WarmCache::new(cache)),
            phases: Mutex::new(HashMap::new()),
            replays: Semaphore::new(replays),
            sharing: worker::Sharing::new(sharing),
            passed_over: pinning::PassedOverRuns::default(),
            held: pinning::HeldRuns::default(),
        }
    }
}

impl std::ops::Deref for Shared {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl Shared {
    /// Publishes how many runs are active, to `settle` and to the gauges; called with the `runs`
    /// lock held after every change.
    fn count_active(&self, runs: &HashMap<RunId, mpsc::UnboundedSender<Msg>>) {
        self.active.send_if_modified(|count| std::mem::replace(count, runs.len()) != runs.len());
        self.gauges.active(runs.len());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("runtime mutexes are never poisoned: no code panics while holding them")
}

impl Shared {
    /// Sends `msg` to the run's executor, activating the run if it is not active. A client of a
    /// shared store activates nothing: the store wakes the workers.
    pub fn wake(self: &Arc<Self>, run: &RunId, msg: Msg) {
        // A run passed over is left to workers of its own build, which the store wakes too; a held
        // run waits, its wake-ups kept in the store, for a build that replays it. A runtime that
        // is stopping activates nothing, whoever still holds it: the store keeps what the run
        // waits for, and the next runtime's recovery takes it up.
        if self.is_stopping() || self.is_client() || self.is_passed_over(run) || self.is_held(run) {
            return;
        }
        tracing::debug!(%run, reason = ?msg, "waking the run");
        let mut runs = lock(&self.runs);
        let msg = match runs.get(run) {
            Some(mailbox) => match mailbox.send(msg) {
                Ok(()) => return,
                Err(mpsc::error::SendError(msg)) => msg,
            },
            None => msg,
        };
        let receiver = self.register(&mut runs, run);
        let _ = runs[run].send(msg);
        let start = lock(&self.cache).take(run).map_or(Start::Cold, Start::Cached);
        drop(runs);
        self.spawn(run.clone(), start, receiver);
    }

    /// Makes `run` active in this process, with a fresh mailbox, and returns the mailbox's
    /// receiving end. Called with the `runs` lock held and the run not active: the one place a
    /// registration is made, so one run never has two.
    fn register(&self, runs: &mut HashMap<RunId, mpsc::UnboundedSender<Msg>>, run: &RunId) -> Mailbox {
        debug_assert!(!runs.contains_key(run), "a run is registered at most once");
        let (mailbox, receiver) = mpsc::unbounded_channel();
        runs.insert(run.clone(), mailbox);
        self.count_active(runs);
        receiver
    }

    /// Registers `run` unless it is active already; see [`Runtime::start_with`] for why a run is
    /// reserved before the store creates it.
    fn reserve(&self, run: &RunId) -> Option<Mailbox> {
        let mut runs = lock(&self.runs);
        (!runs.contains_key(run)).then(|| self.register(&mut runs, run))
    }

    /// Gives up a reservation whose run could not be created, unless something was sent to it
    /// meanwhile: then the run exists after all, and a rebuild from the store serves the message.
    fn unreserve(self: &Arc<Self>, run: &RunId, mailbox: Mailbox) {
        let mut runs = lock(&self.runs);
        if mailbox.is_empty() {
            runs.remove(run);
            self.count_active(&runs);
            return;
        }
        drop(runs);
        self.spawn(run.clone(), Start::Cold, mailbox);
    }

    /// Runs the run's executor in a task of its own; `mailbox` is its registration's receiver.
    fn spawn(self: &Arc<Self>, run: RunId, start: Start, mailbox: Mailbox) {
        let Some(guard) = TaskGuard::new(&self.tasks, &self.stopping) else {
            // The runtime stopped after this activation was asked for: the store keeps the run,
            // for the next runtime's recovery.
            return self.deactivate(&run);
        };
        let shared = self.clone();
        let activation = async move {
            shared.activate(run, start, mailbox).await;
            drop(guard);
        };
        tokio::spawn(activation);
    }

    /// Loads the run's executor, then advances it inside the activation's span.
    async fn activate(self: Arc<Self>, run: RunId, start: Start, mailbox: Mailbox) {
        let kind = start.kind();
        let Some(driver) = self.load(&run, start, &mailbox).await else { return };
        // One span per activation, made once the driver is known: a span's parent can be set only
        // before it is first entered, and after a restart only the journal knows the run's trace.
        let span =
            tracing::info_span!("run", eve.run.id = %run, gen_ai.tool.name = driver.tool_name(), eve.activation = kind);
        crate::trace::set_parent(&span, driver.traceparent());
        tracing::Instrument::instrument(self.advance(run, driver, mailbox), span).await;
    }

    /// The executor an activation advances: made fresh, taken from the warm cache, or rebuilt
    /// from the journal. `None` if there is nothing to advance here.
    async fn load(self: &Arc<Self>, run: &RunId, start: Start, mailbox: &Mailbox) -> Option<Box<Driver>> {
        match start {
            Start::Fresh(driver) => Some(driver),
            Start::Cached(driver) => self.resume_parked(run, driver, true).await,
            Start::Cold => {
                // An inbox message queued now announces a delivery committed before the claim
                // reads the inbox, which the claim hands the driver: it asks for no read of its own.
                let queued = mailbox.len();
                self.rebuild(run).await.map(|driver| driver.read_inbox_after(queued))
            }
        }
    }

    /// Runs an executor until its run parks or ends.
    async fn advance(self: Arc<Self>, run: RunId, mut driver: Box<Driver>, mut mailbox: Mailbox) {
        self.publish(&run, Phase::Running);
        loop {
            self.hold(&run, driver.position().0);
            let tool = driver.tool_name();
            match driver.run(&self, &mut mailbox).await {
                Exit::Parked(parked) => {
                    // Marked before the run leaves this task: every way a parked run makes
                    // progress again appends (clearing the mark) or is indexed (a due timer).
                    let (fence, next_seq) = parked.position();
                    if let Err(error) = self.store.park(&run, fence, next_seq).await {
                        tracing::warn!(%run, "cannot mark the run parked; a restart will replay it: {error}");
                    }
                    self.let_go(&run);
                    match self.park(parked, &mailbox) {
                        Some(again) => match self.resume_parked(&run, again, false).await {
                            Some(again) => driver = again,
                            None => return,
                        },
                        None => return tracing::debug!("parked: waiting on durable waits only"),
                    }
                }
                Exit::Continued(next) => driver = next,
                Exit::Finished(outcome) => {
                    self.let_go(&run);
                    crate::metrics::run_finished(tool, outcome.status().name());
                    self.gauges.created(-1);
                    return self.finish(&run, outcome);
                }
                Exit::Lost(error) => {
                    self.let_go(&run);
                    return self.lose(&run, error);
                }
                Exit::Stopped => {
                    self.let_go(&run);
                    self.deactivate(&run);
                    return tracing::debug!(%run, "run let go as the runtime stops");
                }
            }
        }
    }

    /// A parked executor ready to go on: on a shared store, with the run claimed again (its claim
    /// was given up when it parked), or rebuilt from the journal if another worker advanced the
    /// run meanwhile. `None` if the run could not be claimed (another worker holds it) or ended.
    async fn resume_parked(
        self: &Arc<Self>,
        run: &RunId,
        mut driver: Box<Driver>,
        from_cache: bool,
    ) -> Option<Box<Driver>> {
        if !self.store.is_shared() {
            if from_cache {
                driver.resumed_from_cache(self);
            }
            return Some(driver);
        }
        match driver.reclaim(self).await {
            Ok(true) => {
                if from_cache {
                    driver.resumed_from_cache(self);
                }
                Some(driver)
            }
            Ok(false) => {
                tracing::debug!(%run, "another worker advanced the run since it parked here; replaying it");
                drop(driver);
                self.rebuild(run).await
            }
            Err(error) => {
                self.lose(run, error);
                None
            }
        }
    }

    /// Rebuilds an executor from the journal, or settles the run if it has already ended; on a
    /// shared store, passes the run over if this build cannot replay it (see [`pinning`]).
    async fn rebuild(self: &Arc<Self>, run: &RunId) -> Option<Box<Driver>> {
        let _permit = self.replays.acquire().await.expect("the replay semaphore is never closed");
        let now = self.services.clock.now();
        let claimed = match self.store.claim(run, &self.worker, self.lease, now, 0).await {
            Ok(claimed) => self.admit(run, claimed).await?,
            Err(error) => {
                self.lose(run, error);
                return None;
            }
        };
        match Driver::cold(self, run, claimed).await {
            Ok(Ok(driver)) => Some(Box::new(driver)),
            Ok(Err(outcome)) => {
                self.finish(run, outcome);
                None
            }
            Err(error) => {
                self.lose(run, error);
                None
            }
        }
    }

    /// Moves an idle executor into the warm cache, unless a message arrived meanwhile (then it is
    /// handed back to keep running).
    fn park(&self, driver: Box<Driver>, mailbox: &mpsc::UnboundedReceiver<Msg>) -> Option<Box<Driver>> {
        let mut runs = lock(&self.runs);
        if !mailbox.is_empty() {
            return Some(driver);
        }
        let run = driver.run_id().clone();
        runs.remove(&run);
        let mut cache = lock(&self.cache);
        let evicted = cache.insert(driver);
        if let Some(evicted) = &evicted
            && !cache.holds(evicted.run_id())
        {
            // Said with the `runs` lock held, so the run's next claim, which reads its whole
            // journal, comes after it.
            self.store.left_memory(evicted.run_id());
        }
        drop(cache);
        // Counted once the park is done with the cache and the store, so `settle` returns after.
        self.count_active(&runs);
        drop(runs);
        // Dropping an evicted body runs user `Drop` code, so it happens outside the locks.
        drop(evicted);
        self.publish(&run, Phase::Parked);
        self.events.emit(|| RunEvent::Parked { run });
        None
    }

    fn finish(&self, run: &RunId, outcome: RunOutcome) {
        self.deactivate(run);
        let sender = lock(&self.phases).remove(run);
        if let Some(sender) = sender {
            sender.send_replace(Phase::Finished(outcome));
        }
    }

    fn lose(&self, run: &RunId, error: StoreError) {
        self.deactivate(run);
        match error {
            // Another worker's claim superseded this one (this process stalled past its lease):
            // notable, since this executor was advancing the run.
            StoreError::Fenced { .. } => {
                tracing::info!(%run, "another worker took the run over; letting it go: {error}")
            }
            // Another worker holds the run: the usual answer to a claim by a worker that heard of it too.
            StoreError::Leased { .. } => tracing::debug!(%run, "run is advanced by another claim: {error}"),
            // Nothing to advance: a wake for an id no run has (only a failed start's leftovers).
            StoreError::RunNotFound(_) => tracing::debug!(%run, "{error}"),
            _ if self.is_stopping() => tracing::debug!(%run, "run let go as the runtime stops: {error}"),
            error => {
                // Nothing durable was lost; try again later (the store may have recovered). A
                // store that is away for a while (a database restarting) is expected in operation
                // and cured by the retry, so it warns; anything else needs a person, so it is an error.
                if error.is_transient() {
                    tracing::warn!(%run, "the store is unavailable; retrying the run in 5 s: {error}");
                } else {
                    tracing::error!(%run, "cannot advance run, retrying in 5 s: {error}");
                }
                let due = self.services.clock.now().saturating_add(Duration::from_secs(5));
                self.timers.add(run.clone(), crate::journal::Op(0), due, crate::store::TimerKind::Retry);
            }
        }
    }

    /// Counts a run of `descriptor` this process created in the store.
    fn run_created(&self, descriptor: &'static ToolDescriptor) {
        crate::metrics::run_started(descriptor.name);
        self.gauges.created(1);
    }

    /// Whether an executor of `run` is registered in this process.
    fn is_active(&self, run: &RunId) -> bool {
        lock(&self.runs).contains_key(run)
    }

    fn deactivate(&self, run: &RunId) {
        let mut runs = lock(&self.runs);
        runs.remove(run);
        self.count_active(&runs);
    }

    fn publish(&self, run: &RunId, phase: Phase) {
        let mut phases = lock(&self.phases);
        match phases.get(run) {
            Some(sender) => {
                sender.send_replace(phase);
            }
            None => {
                phases.insert(run.clone(), watch::channel(phase).0);
            }
        }
    }

    fn subscribe(&self, run: &RunId) -> watch::Receiver<Phase> {
        let mut phases = lock(&self.phases);
        phases.entry(run.clone()).or_insert_with(|| watch::channel(Phase::Unknown).0).subscribe()
    }

    fn forget_phase(&self, run: &RunId) {
        let mut phases = lock(&self.phases);
        if phases.get(run).is_some_and(|sender| sender.receiver_count() == 0) {
            phases.remove(run);
        }
    }
}

/// The receiving end of a run's mailbox, owned by its executor's task.
type Mailbox = mpsc::UnboundedReceiver<Msg>;

/// Counts a run task while it lives. `activate` consumes the task's `Arc<Shared>`, so when the
/// guard is dropped after it, the task no longer holds the runtime.
struct TaskGuard(watch::Sender<usize>);

impl TaskGuard {
    /// Counts a task in, unless the runtime is stopping. `stopping` is read under the count's
    /// lock, under which `Runtime::shutdown` sets it: a task is either counted before the shutdown
    /// waits for the count to reach zero, or not started.
    fn new(tasks: &watch::Sender<usize>, stopping: &watch::Sender<bool>) -> Option<Self> {
        let mut counted = false;
        tasks.send_if_modified(|count| {
            counted = !*stopping.borrow();
            *count += usize::from(counted);
            counted
        });
        counted.then(|| TaskGuard(tasks.clone()))
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count -= 1);
    }
}

/// Where an activation gets its executor from.
enum Start {
    /// A run just created.
    Fresh(Box<Driver>),
    /// A parked run from the warm cache: no replay.
    Cached(Box<Driver>),
    /// Rebuilt from the journal.
    Cold,
}

impl Start {
    /// How the activation starts, as its span says: `fresh`, `warm` or `cold` (replayed).
    fn kind(&self) -> &'static str {
        match self {
            Start::Fresh(_) => "fresh",
            Start::Cached(_) => "warm",
            Start::Cold => "cold",
        }
    }
}

/// How many parked runs the warm cache keeps: see [`RuntimeBuilder::warm_cache`] and
/// [`RuntimeBuilder::warm_idle_runs`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheLimits {
    pub runs: usize,
    pub idle: usize,
}

/// Parked executors kept in memory so a resume costs no replay; the least recently parked is
/// evicted first; and as soon as more runs that parked idle (a session between turns) are kept
/// than their own limit, the least recently parked of them.
struct WarmCache {
    limits: CacheLimits,
    tick: u64,
    entries: HashMap<RunId, Cached>,
    order: BTreeMap<u64, RunId>,
    idle: BTreeMap<u64, RunId>,
}

/// A parked executor in the warm cache, with when it parked and whether it parked idle.
struct Cached {
    tick: u64,
    idle: bool,
    driver: Box<Driver>,
}

impl WarmCache {
    fn new(limits: CacheLimits) -> Self {
        WarmCache { limits, tick: 0, entries: HashMap::new(), order: BTreeMap::new(), idle: BTreeMap::new() }
    }

    /// Inserts a parked executor, returning the one it evicts, if any.
    fn insert(&mut self, driver: Box<Driver>) -> Option<Box<Driver>> {
        let idle = driver.is_idle();
        if self.limits.runs == 0 || (idle && self.limits.idle == 0) {
            return Some(driver);
        }
        self.tick += 1;
        let (run, tick) = (driver.run_id().clone(), self.tick);
        self.order.insert(tick, run.clone());
        if idle {
            self.idle.insert(tick, run.clone());
        }
        if let Some(old) = self.entries.insert(run, Cached { tick, idle, driver }) {
            self.forget(&old);
            return Some(old.driver);
        }
        let oldest = if self.idle.len() > self.limits.idle {
            self.idle.first_key_value()
        } else if self.entries.len() > self.limits.runs {
            self.order.first_key_value()
        } else {
            None
        };
        let oldest = oldest.map(|(_, run)| run.clone())?;
        self.take(&oldest)
    }

    /// Whether a parked executor of `run` is kept.
    fn holds(&self, run: &RunId) -> bool {
        self.entries.contains_key(run)
    }

    fn take(&mut self, run: &RunId) -> Option<Box<Driver>> {
        let cached = self.entries.remove(run)?;
        self.forget(&cached);
        Some(cached.driver)
    }

    /// Removes `cached` from the eviction orders.
    fn forget(&mut self, cached: &Cached) {
        self.order.remove(&cached.tick);
        if cached.idle {
            self.idle.remove(&cached.tick);
        }
    }
}

/// The durable execution runtime: starts runs of the tools compiled into this binary and keeps
/// them moving across waits, crashes and restarts.
///
/// Cloning is cheap; clones share one runtime.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
}

impl Runtime {
    /// A runtime on an in-memory store, for tests and examples.
    pub fn in_memory() -> Result<Runtime, Error> {
        RuntimeBuilder::new().store(MemoryStore::new()).build()
    }

    /// Starts a run of the workflow tool or task `tool` with a fresh run id.
    pub async fn start(&self, tool: &str, input: Value) -> Result<RunHandle, Error> {
        self.start_with(tool, input, StartOptions::new()).await
    }

    /// Starts a run with the given id. If a run of the same tool with the same input has that id,
    /// returns it unchanged, so a retried start is harmless; if the run with that id is of another
    /// tool or had another input, refuses with [`Error::RunIdTaken`] and changes nothing.
    pub async fn start_with_id(&self, id: RunId, tool: &str, input: Value) -> Result<RunHandle, Error> {
        self.start_with(tool, input, StartOptions::new().id(id)).await
    }

    /// Starts a run of `tool` as `options` say (its id, the identity starting it, whether anyone
    /// can answer its questions).
    pub async fn start_with(&self, tool: &str, input: Value, options: StartOptions) -> Result<RunHandle, Error> {
        self.start_descriptor(workflow_tool(tool)?, input, options).await
    }

    /// Starts a run of the workflow `descriptor` describes: a tool of the manifest, a resumable
    /// task a session calls, or a workflow a part registers (a session).
    pub async fn start_descriptor(
        &self,
        descriptor: &'static ToolDescriptor,
        input: Value,
        options: StartOptions,
    ) -> Result<RunHandle, Error> {
        if self.shared.is_stopping() {
            return Err(Error::ShuttingDown);
        }
        registry::check_start_input(descriptor, &input)?;
        let id = options.id.clone().unwrap_or_else(RunId::generate);
        // The run's trace starts with this span (a child of the caller's, or of the span current
        // here), and its context is journaled for every activation to join (see `crate::trace`).
        let span = tracing::info_span!("start", eve.run.id = %id, gen_ai.tool.name = descriptor.name);
        crate::trace::set_parent(&span, options.traceparent.as_ref());
        let traceparent = crate::trace::traceparent(&span);
        tracing::Instrument::instrument(self.create(descriptor, id, input, options, traceparent), span).await
    }

    /// Creates run `id` of `descriptor` and activates it: see [`Runtime::start_descriptor`].
    async fn create(
        &self,
        descriptor: &'static ToolDescriptor,
        id: RunId,
        input: Value,
        options: StartOptions,
        traceparent: Option<TraceParent>,
    ) -> Result<RunHandle, Error> {
        let shared = &self.shared;
        let workflow = (descriptor.workflow_id, descriptor.name, descriptor.build());
        let new =
            options.new_run(id.clone(), workflow, input.clone(), (shared.services.clock.now(), traceparent.clone()));
        let started = Started {
            principal: options.principal,
            interactive: options.interactive,
            continued: 0,
            parent: options.parent,
            traceparent,
            forked_from: None,
        };
        if shared.is_client() {
            return self.hand_over(new, descriptor).await;
        }
        // The id is reserved in this process before the store creates the run: whatever else
        // activates it meanwhile (a retried start, recovery, a delivery, a cancel) finds the
        // reservation and queues its message for the one executor this start spawns.
        let reserved = shared.reserve(&id);
        let created = shared.store.create_run(new, &shared.worker).await;
        match (created, reserved) {
            (Ok(Created::New(fence)), Some(mailbox)) => {
                shared.run_created(descriptor);
                shared.events.emit(|| RunEvent::Started { run: id.clone(), tool: descriptor.name.to_owned() });
                let driver = Box::new(Driver::fresh(shared, id.clone(), descriptor, input, &started, fence, None));
                shared.spawn(id.clone(), Start::Fresh(driver), mailbox);
            }
            (Ok(Created::Existing), reserved) => {
                if let Err(error) = self.same_call(&id, descriptor, &input).await {
                    if let Some(mailbox) = reserved {
                        shared.unreserve(&id, mailbox);
                    }
                    return Err(error);
                }
                let Some(mailbox) = reserved else {
                    shared.wake(&id, Msg::Resume);
                    return Ok(self.handle(id));
                };
                let start = lock(&shared.cache).take(&id).map_or(Start::Cold, Start::Cached);
                shared.spawn(id.clone(), start, mailbox);
            }
            // Another start of the same id holds the reservation and drives the run; a body made
            // here would only be superseded, so none is.
            (Ok(Created::New(_)), None) => {
                shared.run_created(descriptor);
                shared.wake(&id, Msg::Resume);
            }
            (Err(error), reserved) => {
                if let Some(mailbox) = reserved {
                    shared.unreserve(&id, mailbox);
                }
                return Err(error.into());
            }
        }
        let task_id = matches!(descriptor.entry, EntryPoint::Task(_)).then(|| registry::task_id(descriptor.name, &id));
        Ok(RunHandle { task_id, ..self.handle(id) })
    }

    /// Checks that the existing run `id` is a run of `descriptor` with `input`: a run id names one
    /// run of one tool with one input, so only a repeat of the same call is the same run. A run
    /// that has continued as new started over with another input, so only its tool is compared.
    async fn same_call(&self, id: &RunId, descriptor: &ToolDescriptor, input: &Value) -> Result<(), Error> {
        let Some(record) = self.shared.store.load(id).await? else { return Ok(()) };
        let same_input = match record.entries.first() {
            Some(Entry::RunStarted { input: recorded, continued, .. }) => *continued > 0 || recorded == input,
            _ => true,
        };
        if record.summary.workflow_id == descriptor.workflow_id && same_input {
            return Ok(());
        }
        Err(Error::RunIdTaken { run: id.clone(), existing: record.summary.tool, requested: descriptor.name.to_owned() })
    }

    /// Creates a run for the workers of a shared store to run: its creator's claim is given back at
    /// once (which wakes them), and nothing runs here. A run that existed is returned unchanged if
    /// it is the same call (see `same_call`).
    async fn hand_over(&self, new: NewRun, descriptor: &'static ToolDescriptor) -> Result<RunHandle, Error> {
        let shared = &self.shared;
        let id = new.id.clone();
        let input = new.input.clone();
        match shared.store.create_run(new, &shared.worker).await? {
            Created::New(fence) => {
                shared.run_created(descriptor);
                shared.events.emit(|| RunEvent::Started { run: id.clone(), tool: descriptor.name.to_owned() });
                if let Err(error) = shared.store.release(&id, fence).await {
                    tracing::warn!(run = %id, "cannot hand the new run to the workers; one takes it when its creation lease expires: {error}");
                }
            }
            Created::Existing => self.same_call(&id, descriptor, &input).await?,
        }
        let task_id = matches!(descriptor.entry, EntryPoint::Task(_)).then(|| registry::task_id(descriptor.name, &id));
        Ok(RunHandle { task_id, ..self.handle(id) })
    }

    /// Picks up where the last process stopped: arms every pending timer, publishes the links of
    /// the sign-ins that steps wait for, and loads the runs that have something to do (those that
    /// were not parked, and those with deliveries waiting). A parked run is not replayed here: it
    /// is loaded when one of its waits resolves. Call once after building the runtime. Returns how
    /// many runs are unfinished.
    ///
    /// First, on a single-process store (memory, SQLite), every unfinished run is looked at once,
    /// as [`Runtime::upgrade_runs`] does: a run whose recorded build is this one's goes on (no
    /// journal is read for it), one whose journal replays on this build is moved to it, and one
    /// whose journal does not is held (see [`Runtime::held_runs`]): left as it is, unfailed, its
    /// timers not armed, a warning logged for it.
    ///
    /// On a shared store (Postgres) this makes the runtime a worker instead: it loads nothing now,
    /// and from then on takes the runs that have something to do as it finds them (polling the
    /// store and listening to its wake-ups) and renews the leases of the runs it advances, until
    /// it is shut down. Before this call, a runtime on a shared store is a client that starts and
    /// delivers but runs nothing (the workers do). The lease, heartbeat and poll interval are set
    /// on the [`RuntimeBuilder`].
    pub async fn recover(&self) -> Result<usize, Error> {
        let shared = &self.shared;
        if shared.store.is_shared() {
            let recovery = shared.store.recovery().await?;
            shared.gauges.recovered(recovery.unfinished);
            for sign_in in &recovery.sign_ins {
                crate::executor::announce_waiting_sign_in(shared, sign_in);
            }
            shared.start_working();
            return Ok(recovery.unfinished);
        }
        self.check_runs().await?;
        // Read after the check, which appended to the runs it moved.
        let recovery = shared.store.recovery().await?;
        shared.gauges.recovered(recovery.unfinished);
        for timer in recovery.timers.into_iter().filter(|timer| !shared.is_held(&timer.run)) {
            shared.timers.add(timer.run, timer.op, timer.due, timer.kind);
        }
        for sign_in in recovery.sign_ins.iter().filter(|sign_in| !shared.is_held(&sign_in.run)) {
            crate::executor::announce_waiting_sign_in(shared, sign_in);
        }
        for run in &recovery.runnable {
            shared.wake(run, Msg::Resume);
        }
        Ok(recovery.unfinished)
    }

    /// Stops this runtime: waits until every run task has parked its run or ended, and drops the
    /// parked runs kept in memory. When it returns, nothing inside the runtime holds the store, so
    /// dropping the last clone of this runtime and its `RunHandle`s releases it (for SQLite, the
    /// file and its lock, so another runtime may open it).
    ///
    /// From then on nothing runs in it, though clones and `RunHandle`s live on: timers that come
    /// due wake no run, and starting a run is refused with [`Error::ShuttingDown`]. What a parked
    /// run waits for stays in the store, for the next runtime's [`Runtime::recover`].
    pub async fn shutdown(self) {
        let shared = self.shared;
        // Under the task count's lock, so no activation is counted in after the wait below.
        shared.tasks.send_if_modified(|_| {
            shared.stopping.send_replace(true);
            false
        });
        *lock(&shared.cache) = WarmCache::new(CacheLimits { runs: 0, idle: 0 });
        let mut tasks = shared.tasks.subscribe();
        let _ = tasks.wait_for(|count| *count == 0).await;
    }

    /// Waits until every timer that is due has fired and every active run has parked or ended
    /// (a parked run is in the warm cache by then, or let go of).
    ///
    /// Tests that drive a [`ManualClock`](crate::ManualClock) call this after moving the clock:
    /// when it returns, everything the clock made due has happened.
    pub async fn settle(&self) {
        let shared = &self.shared;
        loop {
            shared.timers.flush().await;
            let mut active = shared.active.subscribe();
            let _ = active.wait_for(|count| *count == 0).await;
            // Runs that parked may have scheduled timers that are already due (a zero sleep).
            shared.timers.flush().await;
            if *shared.active.borrow() == 0 {
                return;
            }
        }
    }

    /// A handle to the run with this id (which need not be active in this process).
    pub fn handle(&self, run: RunId) -> RunHandle {
        RunHandle { id: run, task_id: None, shared: self.shared.clone() }
    }

    /// Delivers `payload` to the hook holding `token`.
    pub async fn resume_hook(&self, token: &str, payload: Value) -> Result<HookDelivery, Error> {
        self.deliver_to_hook(token, None, payload).await
    }

    /// Delivers `payload` to the hook holding `token` at most once per `delivery_id`.
    pub async fn resume_hook_once(
        &self,
        token: &str,
        delivery_id: &str,
        payload: Value,
    ) -> Result<HookDelivery, Error> {
        self.deliver_to_hook(token, Some(delivery_id), payload).await
    }

    /// Fires the run's abort signal. Its pending waits resolve as cancelled, its cleanup runs, and
    /// it ends cancelled (after at most the cancellation grace). Cancelling a finished run changes
    /// nothing and says so with [`Error::RunFinished`].
    ///
    /// A run this build holds (see [`Runtime::held_runs`]) ends cancelled at once, without its
    /// cleanup: its body cannot run on this build, and a run nobody could end without the build
    /// that started it would be held at every start-up. Its journal stays whole, with the
    /// cancellation's reason saying the cleanup did not run; to keep the cleanup, cancel it on the
    /// build that started it instead.
    pub async fn cancel(&self, run: &RunId, reason: &str) -> Result<(), Error> {
        self.abort(run, reason, false).await
    }

    /// Fires the run's abort signal, as [`Runtime::cancel`] does, but lets the run end with what
    /// its body returns: how a new message interrupts a call the turn waits on.
    pub async fn interrupt(&self, run: &RunId, reason: &str) -> Result<(), Error> {
        self.abort(run, reason, true).await
    }

    async fn abort(&self, run: &RunId, reason: &str, keep_output: bool) -> Result<(), Error> {
        if self.holds(run).await?.is_some() {
            return self.end_held(run, reason).await;
        }
        let target = Target::Run(run.clone());
        let payload = DeliveryPayload::Run(Delivery::Cancel { reason: reason.to_owned(), keep_output });
        match self.shared.store.deliver(target, None, payload).await? {
            Delivered::Accepted { run, .. } | Delivered::Duplicate { run } => self.shared.wake(&run, Msg::Inbox),
            Delivered::NotFound => match self.shared.store.load(run).await? {
                None => return Err(Error::RunNotFound(run.clone())),
                Some(record) if record.summary.status != RunStatus::Active && !keep_output => {
                    return Err(Error::RunFinished { run: run.clone(), status: record.summary.status });
                }
                Some(_) => {}
            },
        }
        Ok(())
    }

    /// Calls a plain `#[tool]` directly; it runs to completion and nothing is journaled.
    pub async fn call_tool(&self, tool: &str, input: Value) -> Result<Value, Error> {
        self.call_tool_as(tool, input, &RunId::generate().to_string()).await
    }

    /// [`call_tool`](Runtime::call_tool) as the call `call_id` (what the tool's
    /// [`ToolCtx::call_id`] says), so that its log messages can be listened to beforehand:
    /// `runtime.logs(call_id)`.
    pub async fn call_tool_as(&self, tool: &str, input: Value, call_id: &str) -> Result<Value, Error> {
        let descriptor = registry::tool(tool).ok_or_else(|| registry::unknown_tool(tool))?;
        let EntryPoint::Plain(entry) = descriptor.entry else {
            let hint = "start it as a run with Runtime::start";
            return Err(Error::WrongKind { tool: tool.to_owned(), actual: "a durable tool", hint });
        };
        registry::check_input(descriptor, &input).map_err(|refusal| registry::invalid_input(tool, refusal))?;
        let ctx = ToolCtx::new(call_id.to_owned(), descriptor.name, self.shared.services.clone());
        let started = std::time::Instant::now();
        let output = entry(input, ctx).await;
        crate::metrics::tool_called(descriptor.name, output.is_ok(), started.elapsed());
        output.map_err(|error| Error::ToolFailed { tool: tool.to_owned(), error })
    }

    /// Listens to the log messages of the run `source` (its id) or of the plain tool call
    /// `source` (its call id, given with [`call_tool_as`](Runtime::call_tool_as)) sent from now
    /// on, in this process: what its body, steps or tool send with `ctx.log`. Best-effort: not
    /// durable, not from other processes, and a listener that falls far behind misses some; see
    /// [`logs`](crate::logs).
    ///
    /// ```
    /// # async fn show(runtime: eve_runtime::Runtime, run: eve_runtime::RunId) {
    /// use futures::StreamExt;
    /// let mut logs = runtime.logs(run.as_str());
    /// while let Some(log) = logs.next().await {
    ///     eprintln!("{} [{}] {}", log.tool, log.level, log.message);
    /// }
    /// # }
    /// ```
    pub fn logs(&self, source: &str) -> crate::logs::Logs {
        self.shared.services.logs.listen(source)
    }

    /// Subscribes to the events of every run: best-effort observations for logs and dashboards,
    /// which a slow subscriber misses some of. To follow one run without missing anything, use
    /// [`follow`](Runtime::follow).
    pub fn events(&self) -> broadcast::Receiver<RunEvent> {
        self.shared.events.subscribe()
    }

    /// Follows `run`'s journal from `from` on ([`Position::START`](crate::journal::Position::START)
    /// for all of it): the entries the store holds, then each entry as it is committed, by this
    /// process or, on a shared store, by any worker. Each entry comes once, in order, and only
    /// once it is durable; a follower that falls behind reads on from the store, and one that
    /// reconnects follows again from the position after the last entry it received. The stream
    /// ends after the entry that ends the run. See [`follow`](crate::follow).
    ///
    /// ```
    /// use eve_tools::journal::{Entry, Position};
    /// use eve_tools::{RunId, Runtime};
    /// use futures::StreamExt;
    ///
    /// /// How many steps the run completed, once it has ended.
    /// async fn steps_of(runtime: &Runtime, run: &RunId) -> Result<usize, eve_tools::Error> {
    ///     let mut follow = runtime.follow(run, Position::START);
    ///     let mut steps = 0;
    ///     while let Some(followed) = follow.next().await {
    ///         if matches!(followed?.entry, Entry::StepCompleted { .. }) {
    ///             steps += 1;
    ///         }
    ///     }
    ///     Ok(steps)
    /// }
    /// ```
    pub fn follow(&self, run: &RunId, from: crate::journal::Position) -> crate::follow::Follow {
        crate::follow::Follow::new(self.shared.store.clone(), &self.shared.followers, run.clone(), from)
    }

    /// The event an entry of `run`'s journal stands for, as [`RunEvent::of_entry`] says, with the
    /// run's task id and, for a step waiting for a sign-in, the link to sign in at: what a
    /// follower of the run ([`follow`](Runtime::follow)) reports to a person. `tool` is the run's
    /// tool.
    pub fn event_of(&self, run: &RunId, tool: &str, entry: &Entry) -> Option<RunEvent> {
        if let Entry::AuthRequired { op, provider, nonce, .. } = entry {
            return crate::executor::sign_in_event(&self.shared, run, tool, *op, provider, nonce).ok();
        }
        let task_id = registry::tool(tool).and_then(|tool| crate::executor::task_of(tool, run));
        RunEvent::of_entry(run, entry, task_id.as_deref())
    }

    /// The link a person signs in at for the sign-in a step of `run` waits for (one of a
    /// [`RunView`](crate::view::RunView)'s `sign_ins`): the provider's authorization URL, with
    /// the callback `state` derived from this runtime's secret key. The journal keeps only what
    /// the `state` is derived from, so any process with the key can rebuild the link.
    ///
    /// # Errors
    ///
    /// This runtime has no such provider, or cannot build its URL.
    pub fn sign_in_url(
        &self,
        run: &RunId,
        sign_in: &crate::view::WaitingSignIn,
    ) -> Result<String, crate::auth::AuthError> {
        let state = self.shared.services.auth_state(run, sign_in.op, &sign_in.nonce);
        self.shared.services.authorization_url(&sign_in.provider, &crate::auth::Principal::anonymous(), state.expose())
    }

    /// A run with its whole journal.
    pub async fn journal(&self, run: &RunId) -> Result<RunRecord, Error> {
        self.shared.store.load(run).await?.ok_or_else(|| Error::RunNotFound(run.clone()))
    }

    /// Runs, newest first, optionally only those with `status`, at most `limit`.
    pub async fn runs(&self, status: Option<RunStatus>, limit: usize) -> Result<Vec<RunSummary>, Error> {
        let query = RunQuery { status, ..RunQuery::newest(limit) };
        Ok(self.shared.store.list_runs(&query).await?.runs)
    }

    /// One page of the runs `query` asks for, newest first, filtered by status, parked, and
    /// tool; [`RunPage::next`] asks for the page after it.
    pub async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, Error> {
        Ok(self.shared.store.list_runs(query).await?)
    }

    /// Whether this runtime can take work now, for a readiness probe (`/readyz` of the HTTP
    /// server): `Ok` while it is not shutting down and its store answers ([`Store::ready`]: on
    /// Postgres, the database and, for a worker, its listening connection); otherwise why not.
    pub async fn ready(&self) -> Result<(), Error> {
        if self.shared.is_stopping() {
            return Err(Error::ShuttingDown);
        }
        self.shared.store.ready().await.map_err(Error::Store)
    }

    /// The store this runtime writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// The name this runtime's claims carry in a shared store's leases (see
    /// [`RuntimeBuilder::worker_id`]).
    pub fn worker_id(&self) -> &str {
        &self.shared.worker.0
    }

    /// The clock this runtime reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.services.clock
    }

    /// The base URL people and systems reach this runtime's HTTP server at (see
    /// [`RuntimeBuilder::public_url`]).
    pub fn public_url(&self) -> &str {
        &self.shared.services.public_url
    }

    /// Where `provider` sends people back after they sign in: the runtime's callback URL.
    pub fn sign_in_callback(&self, provider: &str) -> String {
        self.shared.services.redirect_uri(provider)
    }

    /// A key of this runtime's own for `purpose` (HMAC-SHA256 of the purpose under the runtime's
    /// secret key): how a part signs what it hands out (the inspector's sign-in cookies, say)
    /// without holding the runtime's key.
    pub fn derive_key(&self, purpose: &str) -> crate::secret::SecretKey {
        self.shared.services.key.derive(purpose)
    }

    /// The value of type `T` the host gave the runtime with [`RuntimeBuilder::state`].
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, crate::state::MissingState> {
        self.shared.services.state.get::<T>()
    }

    /// Delivers `payload` to the hook at `op` of `run`, once per `delivery_id`, and wakes the run:
    /// how a session sends a call to a resumable task (see [`RunControl::deliver`]).
    pub async fn deliver_to(
        &self,
        run: &RunId,
        op: crate::journal::Op,
        delivery_id: &str,
        payload: Value,
    ) -> Result<(), Error> {
        let delivery = DeliveryPayload::Run(Delivery::Hook { op, payload });
        match self.shared.store.deliver(Target::Run(run.clone()), Some(delivery_id), delivery).await? {
            Delivered::Accepted { .. } => self.shared.wake(run, Msg::Inbox),
            Delivered::Duplicate { .. } => {}
            Delivered::NotFound => return Err(Error::RunNotFound(run.clone())),
        }
        Ok(())
    }
}

fn workflow_tool(tool: &str) -> Result<&'static ToolDescriptor, Error> {
    let descriptor = registry::tool(tool).ok_or_else(|| registry::unknown_tool(tool))?;
    match descriptor.entry {
        EntryPoint::Workflow(_) | EntryPoint::Task(_) => Ok(descriptor),
        EntryPoint::Plain(_) => {
            let hint = "call it with Runtime::call_tool";
            Err(Error::WrongKind { tool: tool.to_owned(), actual: "a plain tool", hint })
        }
        EntryPoint::Serve(_) => {
            let hint = "a resumable task is called from a session (Runtime::session), which sends it its calls";
            Err(Error::WrongKind { tool: tool.to_owned(), actual: "a resumable task (`#[task(serve)]`)", hint })
        }
    }
}

/// How often a [`RunHandle`] on a shared store reads the run again while it waits for the run to
/// park or end, since another process may be advancing it.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(50);

/// A handle to one run.
#[derive(Clone)]
pub struct RunHandle {
    id: RunId,
    task_id: Option<String>,
    shared: Arc<Shared>,
}

impl RunHandle {
    /// The model-facing task id (`refund_order-4hd8sa`) when the run is a `#[task]` this handle
    /// started; `None` for other runs and for handles made with [`Runtime::handle`].
    pub fn task_id(&self) -> Option<&str> {
        self.task_id.as_deref()
    }

    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// Waits until the run ends and returns how it ended.
    pub async fn outcome(&self) -> Result<RunOutcome, Error> {
        let phase = self.wait(|phase| matches!(phase, Phase::Finished(_))).await?;
        match phase {
            Phase::Finished(outcome) => Ok(outcome),
            _ => unreachable!("waited for a finished phase"),
        }
    }

    /// Waits until the run is parked (waiting on durable waits only) or has ended.
    pub async fn parked(&self) -> Result<Phase, Error> {
        self.wait(|phase| matches!(phase, Phase::Parked | Phase::Finished(_))).await
    }

    /// Waits for a phase `done` accepts. On a shared store, where another process may be advancing
    /// the run, the store is read again every [`FOLLOW_INTERVAL`] as well.
    async fn wait(&self, done: impl Fn(&Phase) -> bool) -> Result<Phase, Error> {
        let mut phases = self.shared.subscribe(&self.id);
        loop {
            // The journal is the truth: a run that ended before this process saw it is finished.
            let (summary, last) =
                self.shared.store.tail(&self.id).await?.ok_or_else(|| Error::RunNotFound(self.id.clone()))?;
            if let Some(outcome) = RunOutcome::from_terminal(&last) {
                drop(phases);
                self.shared.forget_phase(&self.id);
                return Ok(Phase::Finished(outcome));
            }
            // A held run moves on no build but its own: waiting would never end.
            if let Some(held) = self.shared.held_run(&self.id) {
                return Err(Error::Held { run: self.id.clone(), reason: held.reason() });
            }
            // A parked run that this process has not loaded stays parked until a wait resolves.
            if summary.parked && !self.shared.is_active(&self.id) && done(&Phase::Parked) {
                return Ok(Phase::Parked);
            }
            let changed = async {
                let phase = phases.wait_for(|phase| done(phase)).await.map(|phase| phase.clone());
                match phase {
                    Ok(phase) => phase,
                    // The sender is dropped after it published the final phase, or when the run
                    // is held; either way the loop looks at the run again.
                    Err(_) => phases.borrow().clone(),
                }
            };
            let phase = match self.shared.store.is_shared() {
                false => changed.await,
                true => match tokio::time::timeout(FOLLOW_INTERVAL, changed).await {
                    Ok(phase) => phase,
                    Err(_) => continue,
                },
            };
            if done(&phase) {
                return Ok(phase);
            }
            phases = self.shared.subscribe(&self.id);
        }
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle").field("id", &self.id).finish()
    }
}

/// The runtime as its steps reach it ([`StepCtx::control`](crate::StepCtx::control)): held weakly,
/// since the runtime owns the services that hold this, so a dropped runtime is not kept alive.
pub(crate) struct Control(pub(crate) std::sync::Weak<Shared>);

impl Control {
    fn runtime(&self) -> Result<Runtime, Error> {
        self.0.upgrade().map(|shared| Runtime { shared }).ok_or(Error::ShuttingDown)
    }
}

#[async_trait::async_trait]
impl RunControl for Control {
    async fn start(&self, workflow_id: &str, input: Value, options: StartOptions) -> Result<RunId, Error> {
        let descriptor = registry::workflow(workflow_id).ok_or_else(|| registry::unknown_tool(workflow_id))?;
        Ok(self.runtime()?.start_descriptor(descriptor, input, options).await?.id().clone())
    }

    async fn deliver(&self, run: &RunId, op: Op, delivery_id: &str, payload: Value) -> Result<(), Error> {
        self.runtime()?.deliver_to(run, op, delivery_id, payload).await
    }

    async fn cancel(&self, run: &RunId, reason: &str) -> Result<(), Error> {
        self.runtime()?.cancel(run, reason).await
    }

    async fn interrupt(&self, run: &RunId, reason: &str) -> Result<(), Error> {
        self.runtime()?.interrupt(run, reason).await
    }

    fn listening(&self) -> bool {
        self.0.upgrade().is_some_and(|shared| shared.events.listening())
    }

    fn publish(&self, event: RunEvent) {
        if let Some(shared) = self.0.upgrade() {
            shared.events.emit(|| event);
        }
    }
}
