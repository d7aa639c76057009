//! The executor: advances one run at a time by polling its body and journaling what happens.
//!
//! # The loop
//!
//! A [`Driver`] owns a run's body future while the run is active. It repeats:
//!
//! 1. Poll the body until it can make no more progress (its waker stays quiet).
//! 2. If the body returned (or diverged, or the cancellation grace ran out), append what is
//!    pending and the terminal entry in one transaction, and stop.
//! 3. **Commit**: append what is pending (the deliveries the body has seen and the records it
//!    produced meanwhile: sleep deadlines, hook hashes, recorded values) in one transaction. Only
//!    then does anything leave the run: steps the body polled start, timers are armed, questions
//!    and events are published.
//! 4. If nothing is in flight and no event is ready, **park**: the driver goes into the warm
//!    cache and no task is held. Otherwise wait for the next events (attempt results, timers,
//!    inbox deliveries), turn them into journal entries, and deliver them to the body one at a
//!    time, polling to quiescence after each; they become pending, with the records each poll
//!    produced, and the loop commits them together.
//!
//! So a chain of steps costs one commit per step: a step's completion and whatever the body does
//! when it sees it (the next sleep, the run's end) are one transaction. The body may see a
//! delivery before it is durable, but nothing it does escapes before that: if the commit fails
//! for good, the driver is dropped and the run is rebuilt from the journal, where the delivery
//! is not, and a step whose completion was lost runs again (at least once per crash). Deliveries
//! reach the body one at a time in journal order and replay feeds them the same way, so a replay
//! sees exactly the interleaving the live run saw.
//!
//! A chain of quick steps takes a shortcut through the same loop: a step whose first attempt ended
//! well as it started, with nothing else ready, is taken in directly
//! ([`Driver::take_in_lone_completion`]), doing what the general stage does for such a turn and
//! leaving anything else to it. Its commit takes none: a store that appends without waiting (the
//! in-memory store) answers the one append at once ([`Commit::Done`]), so the commit awaits
//! nothing and allocates no future.
//!
//! # What the store may take
//!
//! The pending entries are one [`Append`], given to the store as it is: the store may take the
//! entries themselves rather than copy them. So whatever the driver lets out after a commit is read
//! from the entries before it: the events of the bus (built only if someone listens, and sent only
//! once the batch is durable), how the run ended, and the hooks whose token was found taken. The
//! batch is fitted to the store's limit on one entry before the store sees it ([`fit`]); the store
//! refusing it as too large after that is a bug in the store, which fails the run.
//!
//! # Activation
//!
//! A run is activated by a message ([`Msg`]). The driver comes from the warm cache (no replay),
//! or is rebuilt cold: claim the run (a fresh fence), create the body from the registry, and
//! replay the journal. On a shared store a parked run's claim was given up, so a driver from the
//! warm cache claims the run again first ([`Driver::reclaim`]); if another worker advanced the run
//! meanwhile, the warm driver is stale and the run is rebuilt cold instead.
//!
//! # Losing the claim
//!
//! A driver lets its run go at once, dropping its body and the step attempts in flight, when the
//! store refuses an append as [`StoreError::Fenced`] or when the runtime's heartbeat finds the
//! claim taken over ([`Msg::LeaseLost`]): another worker advances the run now, and nothing more is
//! written for it here.

mod attempts;
pub(crate) mod check;
mod fit;
mod inbox;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::future::Either;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use crate::auth::Principal;
use crate::error::{StepError, StoreError, ToolError};
use crate::events::RunEvent;
use crate::journal::RunOutcome;
use crate::journal::{Entry, Op, RunFailure, RunId, RunStatus};
use crate::registry::{BodyFuture, EntryPoint};
pub(crate) use crate::run_core::Services;
use crate::run_core::{self, Mode, OpMap, ReplayIndex, RunCore, Started, signal};
use crate::store::{Append, Claimed, Commit, Fence, InboxItem, TimerKind};
use crate::time::Timestamp;

/// What an executor needs from the runtime that drives it: the store, the services the body's
/// primitives use, the event bus, the timer service, and the limits runs are held to. The runtime
/// owns one and lends it to every executor.
pub(crate) struct Engine {
    pub store: Arc<dyn crate::store::Store>,
    pub services: Arc<Services>,
    pub events: crate::events::EventBus,
    pub timers: crate::timers::TimerService,
    /// Who this process is, as a shared store's leases name it.
    pub worker: crate::store::WorkerId,
    /// How long a claim of a shared store lasts.
    pub lease: Duration,
    /// How long a cancelled run may unwind.
    pub grace: Duration,
    pub history: HistoryLimits,
    /// How many payloads a hook holds that its body has not taken; see
    /// [`RuntimeBuilder::hook_buffer`](crate::RuntimeBuilder::hook_buffer).
    pub hook_buffer: usize,
    /// Becomes `true` when the runtime begins to shut down.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// The followers of runs, told after each commit.
    pub followers: Arc<crate::follow::Followers>,
    /// Wakes another run whose inbox just received something (a child's report to its parent).
    pub wake: Box<dyn Fn(&RunId) + Send + Sync>,
    /// The store's limit on one journal entry, read once as the runtime is built (see
    /// [`Store::max_entry_bytes`](crate::store::Store::max_entry_bytes)): every batch is fitted
    /// to it before it is appended.
    pub max_entry_bytes: Option<usize>,
    /// The gauges of active and parked runs.
    pub gauges: crate::metrics::RunGauges,
}

impl Engine {
    /// Whether the runtime has begun to shut down.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once the runtime has begun to shut down.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }
}

/// How long a run's journal may grow: see
/// [`RuntimeBuilder::history_limit`](crate::RuntimeBuilder::history_limit).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HistoryLimits {
    /// At this many entries, `history_warning` is published.
    pub warning: u64,
    /// Past this many entries, the run fails.
    pub limit: u64,
}

/// Why a run is being activated or poked.
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    /// Recover or start the run; nothing else to do.
    Resume,
    /// A timer of the run is due.
    Timer(Op, TimerKind),
    /// The run's inbox has new deliveries.
    Inbox,
    /// The heartbeat found that the claim `fence` was taken over by another worker's claim (at
    /// epoch `current`): the driver holding that fence stops at once.
    LeaseLost {
        /// The claim that was lost.
        fence: Fence,
        /// The epoch of the claim that took over.
        current: u64,
    },
}

/// How an activation ended.
pub(crate) enum Exit {
    /// The body waits on durable waits only.
    Parked(Box<Driver>),
    /// The run ended and its terminal entry is durable.
    Finished(RunOutcome),
    /// The run continued as new: its fresh history is durable, and this driver runs it.
    Continued(Box<Driver>),
    /// The run cannot be advanced here (store failure, a newer claim elsewhere); its journal is
    /// intact and a later activation replays it.
    Lost(StoreError),
    /// The runtime is shutting down: the run is let go as it stands, and its journal is intact.
    Stopped,
}

/// Wakes the driver when any future inside the body is woken.
struct BodyWaker {
    woken: AtomicBool,
    notify: Notify,
}

impl Wake for BodyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.notify.notify_one();
    }
}

/// The result of one step attempt.
struct Attempt {
    op: Op,
    attempt: u32,
    result: Result<crate::journal::Payload, StepError>,
}

/// Where [`Driver::advance`] left the run.
enum Advanced {
    /// Only durable waits are outstanding.
    Idle,
    /// The run ended; its terminal entry is durable.
    Finished(RunOutcome),
    /// The body asked to continue as new with this input.
    Continues(crate::error::ContinueWith),
    /// The runtime is shutting down.
    Stopped,
}

/// How the body ended, before it is journaled.
enum Finish {
    Returned(Result<Value, ToolError>),
    Panicked(String),
}

/// Something the driver must journal.
enum Event {
    Msg(Msg),
    Attempt(Attempt),
    /// A step's completion, made as its first attempt ended (see `Driver::start_first_attempt`).
    Completed(Entry),
    Woken,
    GraceOver,
    Shutdown,
}

/// Buffers a busy run reuses from one turn of its loop to the next.
#[derive(Default)]
struct Spare {
    /// The entries [`Driver::take_in`] makes of the events it takes.
    entries: Vec<Entry>,
    /// The steps the body polled for the first time, as [`Driver::start_polled_steps`] takes them.
    polled: Vec<Op>,
    /// The steps among them to start, with what the journal says each was doing.
    starting: Vec<(Op, attempts::StartedStep, Option<run_core::Resume>)>,
    /// The events [`Driver::ready_events`] gathers and `take_in` takes.
    events: Vec<Event>,
}

/// One run's body and everything needed to advance it.
pub(crate) struct Driver {
    core: Arc<RunCore>,
    /// A second handle to `core`, made current while the body is polled (see [`run_core::enter`]).
    entered: Option<Arc<RunCore>>,
    /// Another handle on the run's core, moved out while the driver lends the core's state to
    /// its thread ([`RunCore::lend`]) and back after: the lending borrows it, not the driver.
    lender: Option<Arc<RunCore>>,
    /// The tool whose body this is (`None` only while failing a run of an unknown workflow).
    tool: Option<&'static crate::registry::ToolDescriptor>,
    body: Option<BodyFuture>,
    finish: Option<Finish>,
    body_waker: Arc<BodyWaker>,
    waker: Waker,
    fence: Fence,
    attempts: FuturesUnordered<attempts::Running>,
    /// Attempts that ended the first time they were polled, as they started, or the
    /// completions they made at once: taken in with the next ready events, before those of
    /// `attempts`.
    ended: Vec<Event>,
    /// Buffers kept from one turn of the loop to the next while the run is busy, so a step does
    /// not allocate them anew; a run that goes idle drops them, and `pending`'s (see
    /// [`Driver::shed`]).
    spare: Spare,
    /// Steps that started and have not completed, with their attempt functions and the attempt
    /// running now, if any, by op.
    execs: OpMap<attempts::StartedStep>,
    /// Steps waiting for a sign-in callback.
    awaiting_auth: OpMap<attempts::AwaitingAuth>,
    /// Steps whose current attempt started right after a sign-in (a rejection then is fatal).
    signed_in: OpMap<attempts::SignedIn>,
    /// Sign-in URLs to publish once their `AuthRequired` is durable: (op, provider, nonce).
    announce_after_append: Vec<(Op, String, String)>,
    /// Attempts to restart once their `AuthCompleted` is durable.
    restart_after_append: Vec<(Op, attempts::AwaitingAuth)>,
    /// Steps waiting out a retry backoff: the next attempt and when it is due. Like a sleep, a
    /// backoff is a durable wait: the run may park, and the timer service wakes it.
    retrying: OpMap<(u32, Timestamp)>,
    /// Inbox items read but not yet turned into entries.
    inbox: VecDeque<InboxItem>,
    /// How many of the mailbox's first messages were sent before `inbox` was read whole (as a
    /// cold activation's claim reads it): an inbox message among them announces deliveries
    /// committed before that read, which `inbox` holds, so it asks for no read of its own.
    announced_before_read: usize,
    /// The next commit's batch, what is not yet durable: the deliveries the body has seen and the
    /// records it produced, in order, the inbox items they consume, and the runs the records start
    /// with the deliveries to them (see [`RunCore::start_run`]). It starts where the journal ends:
    /// its `first_seq` is the journal's length.
    pending: Append,
    /// Sleeps found due when the run was rebuilt, to fire in its first batch.
    due_timers: Vec<Op>,
    /// Hooks whose deliveries were left in the inbox because they held as many payloads as the
    /// runtime's hook buffer allows; the inbox is read again once one of them has room.
    backlog: OpMap<()>,
    grace_until: Option<Timestamp>,
    /// Whether the cancellation keeps the body's output (an interrupted call) instead of ending
    /// the run cancelled.
    keeps_output: bool,
    /// Whether the body was rebuilt from a journal (so finishing early is a divergence).
    replayed: bool,
}

impl Driver {
    /// A driver for a run just created: nothing to replay.
    pub fn fresh(
        rt: &Engine,
        run: RunId,
        tool: &'static crate::registry::ToolDescriptor,
        input: Value,
        started: &Started,
        fence: Fence,
        warm: Option<crate::error::Warm>,
    ) -> Self {
        let task = task_of(tool, &run);
        let core = Arc::new(RunCore::new(run, rt.services.clone(), started, task, ReplayIndex::default(), Mode::Live));
        core.lock().warm = warm;
        let body = start_body(&core, tool, input);
        Driver::new(core, Some(tool), body, fence, 1, false)
    }

    fn new(
        core: Arc<RunCore>,
        tool: Option<&'static crate::registry::ToolDescriptor>,
        body: Option<BodyFuture>,
        fence: Fence,
        next_seq: u64,
        replayed: bool,
    ) -> Self {
        let body_waker = Arc::new(BodyWaker { woken: AtomicBool::new(true), notify: Notify::new() });
        let waker = Waker::from(body_waker.clone());
        core.lock().driver_waker = Some(waker.clone());
        Driver {
            entered: Some(core.clone()),
            lender: Some(core.clone()),
            core,
            tool,
            body,
            finish: None,
            waker,
            body_waker,
            fence,
            attempts: FuturesUnordered::new(),
            ended: Vec::new(),
            spare: Spare::default(),
            execs: OpMap::default(),
            awaiting_auth: OpMap::default(),
            signed_in: OpMap::default(),
            announce_after_append: Vec::new(),
            restart_after_append: Vec::new(),
            retrying: OpMap::default(),
            inbox: VecDeque::new(),
            announced_before_read: 0,
            pending: Append { first_seq: next_seq, ..Append::default() },
            backlog: OpMap::default(),
            due_timers: Vec::new(),
            grace_until: None,
            keeps_output: false,
            replayed,
        }
    }

    /// Rebuilds a run from its journal, as `claimed` (a claim from sequence number 0) read it:
    /// create its body and replay every delivery.
    pub async fn cold(rt: &Engine, run: &RunId, claimed: Claimed) -> Result<Result<Driver, RunOutcome>, StoreError> {
        if let Some(outcome) = claimed.entries.last().and_then(RunOutcome::from_terminal) {
            return Ok(Err(outcome));
        }
        let Some(Entry::RunStarted { workflow_id, input, .. }) = claimed.entries.first() else {
            let reason = format!("run {run}'s journal does not start with run_started");
            return Err(StoreError::Corrupt { path: "the journal".into(), reason });
        };
        let index = ReplayIndex::build(&claimed.entries, crate::journal::decode::step_name);
        // Whatever activated the run, its unfired timers are armed again: a timer message lost
        // with a failed activation would otherwise never come back. One already due is taken in
        // by this activation itself rather than by another wake.
        let now = rt.services.clock.now();
        let (due, later): (Vec<_>, Vec<_>) = index.unfired_timers().partition(|(_, deadline)| *deadline <= now);
        for (op, deadline) in later {
            rt.timers.add(run.clone(), op, deadline, TimerKind::Sleep);
        }
        let tool = crate::registry::workflow(workflow_id);
        let task = tool.and_then(|tool| task_of(tool, run));
        let started = Started::of(&claimed.entries[0]);
        let core = Arc::new(RunCore::new(run.clone(), rt.services.clone(), &started, task, index, Mode::Replaying));
        let body = tool.and_then(|tool| start_body(&core, tool, input.to_value().into_owned()));
        let mut driver = Driver::new(core, tool, body, claimed.fence, claimed.next_seq, true);
        if driver.body.is_none() {
            let failure = RunFailure::UnknownWorkflow { workflow_id: workflow_id.to_string() };
            driver.core.lock().mode = Mode::Live;
            return driver.fail(rt, failure).await.map(Err);
        }
        rt.events.emit(|| RunEvent::Resumed { run: run.clone(), replayed: claimed.entries.len(), from_cache: false });
        tracing::debug!(entries = claimed.entries.len(), "replaying the journal");
        driver.replay(rt, &claimed.entries[1..]);
        driver.inbox.extend(claimed.inbox);
        driver.due_timers.extend(due.into_iter().map(|(op, _)| op));
        Ok(Ok(driver))
    }

    pub fn run_id(&self) -> &RunId {
        &self.core.run
    }

    /// Tells a driver just rebuilt that the first `queued` messages of its mailbox were sent
    /// before its claim read the inbox: the inbox messages among them are not read again.
    pub fn read_inbox_after(mut self: Box<Self>, queued: usize) -> Box<Self> {
        self.announced_before_read = queued;
        self
    }

    /// The model-facing name of the tool whose body this is, for spans.
    pub fn tool_name(&self) -> &'static str {
        self.tool.map_or("(unknown)", |tool| tool.name)
    }

    /// The span the run's activations are children of, as its first entry journals it.
    pub fn traceparent(&self) -> Option<&crate::journal::TraceParent> {
        self.core.started.traceparent.as_ref()
    }

    /// The fence the driver appends under and the journal's length, for marking the run parked.
    pub fn position(&self) -> (Fence, u64) {
        (self.fence, self.next_seq())
    }

    /// The journal's length: the sequence number of the next entry.
    fn next_seq(&self) -> u64 {
        self.pending.first_seq
    }

    /// Feeds the journal's deliveries to the body one at a time, in journal order.
    fn replay(&mut self, rt: &Engine, entries: &[Entry]) {
        self.feed(entries, |driver, entry| {
            if let Entry::StepCompleted { op, name, .. } = entry {
                let run = &driver.core.run;
                rt.events.emit(|| RunEvent::StepReplayed { run: run.clone(), op: *op, step: name.to_string() });
            }
            driver.start_grace(rt, entry);
        });
        self.core.lock().mode = Mode::Live;
    }

    /// Delivers each delivery of `entries` to the body and polls it to quiescence, calling
    /// `each` with the entry first; stops early once the body has finished or diverged.
    fn feed(&mut self, entries: &[Entry], mut each: impl FnMut(&mut Self, &Entry)) {
        self.poll_body();
        for entry in entries.iter().filter(|entry| entry.is_delivery()) {
            if self.finish.is_some() || self.core.diverged() {
                break;
            }
            each(self, entry);
            self.deliver(entry);
            self.poll_body();
        }
    }

    /// Starts the cleanup's grace when `entry` is the cancellation. The deadline is the journaled
    /// one, so a replay after a restart does not extend it (journals from before it was journaled
    /// count from now).
    fn start_grace(&mut self, rt: &Engine, entry: &Entry) {
        if let Entry::CancelRequested { grace_until, keep_output, .. } = entry {
            let deadline = grace_until.unwrap_or_else(|| rt.services.clock.now().saturating_add(rt.grace));
            self.grace_until = Some(deadline);
            self.keeps_output = *keep_output;
        }
    }

    /// Applies a delivery to the body's state: see [`RunCore::deliver`]. A future the driver
    /// itself waits on is marked woken here, without the notification that wakes a driver
    /// waiting for events: this one polls the body next.
    fn deliver(&mut self, entry: &Entry) {
        if self.core.deliver(entry) {
            self.body_waker.woken.store(true, Ordering::Release);
        }
    }

    /// Polls the body until it stops waking itself.
    fn poll_body(&mut self) {
        while let Some(body) = self.body.as_mut() {
            // Read before the swap: most looks find the body quiet, and a load is no write.
            let woken = &self.body_waker.woken;
            if !(woken.load(Ordering::Acquire) && woken.swap(false, Ordering::AcqRel)) || self.core.diverged() {
                return;
            }
            let mut cx = Context::from_waker(&self.waker);
            let polled = {
                let _current = run_core::enter(&mut self.entered);
                std::panic::catch_unwind(AssertUnwindSafe(|| body.as_mut().poll(&mut cx)))
            };
            let finish = match polled {
                Ok(Poll::Pending) => continue,
                Ok(Poll::Ready(result)) => Finish::Returned(result),
                Err(panic) => Finish::Panicked(panic_message(&*panic)),
            };
            self.body = None;
            self.finish = Some(finish);
        }
    }

    /// Advances the run until it is idle (only durable waits outstanding) or ends. An idle driver
    /// comes back as [`Exit::Parked`]; the runtime parks it unless a message arrived meanwhile.
    pub async fn run(mut self: Box<Self>, rt: &Engine, mailbox: &mut mpsc::UnboundedReceiver<Msg>) -> Exit {
        let failure = match self.advance(rt, mailbox).await {
            Ok(Advanced::Finished(outcome)) => return Exit::Finished(outcome),
            Ok(Advanced::Idle) => return Exit::Parked(self),
            Ok(Advanced::Continues(with)) => return self.continue_as_new(rt, with).await,
            Ok(Advanced::Stopped) => return Exit::Stopped,
            Err(error @ (StoreError::TooLarge { .. } | StoreError::TooDeep { .. })) => {
                RunFailure::Tool { message: format!("the run could not journal what it did next: {error}") }
            }
            Err(StoreError::HistoryLimit { limit, .. }) => RunFailure::HistoryLimit { limit },
            Err(error) => return Exit::Lost(error),
        };
        match self.fail_unrecordable(rt, failure).await {
            Ok(outcome) => Exit::Finished(outcome),
            Err(error) => Exit::Lost(error),
        }
    }

    /// Ends the run failed because what it did next cannot be journaled: a record [`fit`] could not
    /// shrink (an `ask` with a huge prompt, say), a value nested too deep. Retrying would be
    /// refused the same way forever. The refused records are dropped: the run ends here, so
    /// nothing will replay them.
    async fn fail_unrecordable(&mut self, rt: &Engine, failure: RunFailure) -> Result<RunOutcome, StoreError> {
        self.take_records();
        self.clear_pending();
        self.attempts.clear();
        self.ended.clear();
        self.fail(rt, failure).await
    }

    /// Replaces the run's history with a fresh one that starts the body again with `input`, and
    /// returns the driver of the new history (or how the run ended, if `input` does not fit).
    async fn continue_as_new(mut self: Box<Self>, rt: &Engine, with: crate::error::ContinueWith) -> Exit {
        let crate::error::ContinueWith { input, keep_inbox, warm } = with;
        if keep_inbox {
            // What the body took in since its last commit is in the state it continues with, so
            // it is committed (taken) first: the inbox kept for the new history must not hold it.
            self.take_records();
            if let Err(error) = self.commit(rt).await {
                return Exit::Lost(error);
            }
        } else {
            // The old history ends here: what it did since its last commit goes with it.
            self.clear_pending();
        }
        let tool = self.tool.expect("a body runs only for a known tool");
        // A warm input was built from the tool's own input type, so it needs no schema check; its
        // depth is checked all the same, as the store would refuse it.
        let checked = if warm.is_some() {
            Ok(())
        } else {
            (tool.validate_input)(&input.to_value()).map_err(|refusal| refusal.message)
        };
        let fits =
            checked.and_then(|()| input.check_depth(|| "the input".to_owned()).map_err(|error| error.to_string()));
        if let Err(reason) = fits {
            let message = format!("`continue_as_new` was given an input tool `{}` does not take: {reason}", tool.name);
            return self.end_failed(rt, RunFailure::Tool { message }).await;
        }
        let started = Started { continued: self.core.started.continued + 1, ..self.core.started.clone() };
        // What the new body starts with, read before the store may take the entry; a warm body
        // reads nothing of it.
        let body_input = if warm.is_some() { Value::Null } else { input.to_value().into_owned() };
        let entry = Entry::RunStarted {
            workflow_id: tool.workflow_id.into(),
            tool: tool.name.into(),
            input,
            at: rt.services.clock.now(),
            principal: started.principal.as_deref().map(Box::from),
            interactive: started.interactive,
            continued: started.continued,
            parent: started.parent.clone().map(Box::new),
            // The new history is the same run, so its activations stay in the run's trace.
            traceparent: started.traceparent.clone().map(Box::new),
            // The new history is started by this build.
            build: Some(Box::new(tool.build())),
            // A fork stays a fork in its later histories.
            forked_from: started.forked_from.clone().map(Box::new),
        };
        if let Some(limit) = rt.max_entry_bytes
            && let Err(too_large) = fit::check(&entry, limit, "the new history's first entry, with the input,")
        {
            let message =
                format!("`continue_as_new` was given an input tool `{}` cannot journal: {too_large}", tool.name);
            return self.end_failed(rt, RunFailure::Tool { message }).await;
        }
        let mut entry = Some(entry);
        let mut backoff = StoreBackoff::default();
        loop {
            let continued = match rt.store.continue_as_new(&self.core.run, self.fence, &mut entry, keep_inbox) {
                Commit::Done(result) => result,
                Commit::Pending(write) => write.await,
            };
            match continued {
                Ok(()) => {
                    rt.followers.committed(&self.core.run);
                    break;
                }
                Err(error) if error.is_transient() => {
                    if let Err(error) = backoff.wait(rt, &self.core.run, error).await {
                        return Exit::Lost(error);
                    }
                }
                Err(error @ StoreError::TooLarge { .. }) => {
                    let message = format!("the run could not journal what it did next: {}", fit::store_bug(error));
                    return self.end_failed(rt, RunFailure::Tool { message }).await;
                }
                Err(error) => return Exit::Lost(error),
            }
        }
        // The old history's questions are gone with it; channels stop offering them.
        self.withdraw_open_asks(rt);
        let run = self.core.run.clone();
        rt.events.emit(|| RunEvent::ContinuedAsNew { run: run.clone(), continued: started.continued });
        let mut driver = Driver::fresh(rt, run, tool, body_input, &started, self.fence, warm);
        if keep_inbox {
            // What waited for the old history goes to the new one, whose body makes the same hooks.
            match rt.store.inbox(&driver.core.run).await {
                Ok(waiting) => driver.inbox.extend(waiting),
                Err(error) => return Exit::Lost(error),
            }
        }
        Exit::Continued(Box::new(driver))
    }

    /// Ends the run failed instead of continuing it as new.
    async fn end_failed(mut self: Box<Self>, rt: &Engine, failure: RunFailure) -> Exit {
        match self.fail(rt, failure).await {
            Ok(outcome) => Exit::Finished(outcome),
            Err(error) => Exit::Lost(error),
        }
    }

    /// The loop described in the module documentation.
    async fn advance(
        &mut self,
        rt: &Engine,
        mailbox: &mut mpsc::UnboundedReceiver<Msg>,
    ) -> Result<Advanced, StoreError> {
        loop {
            if self.grace_until.is_some_and(|deadline| deadline <= rt.services.clock.now()) {
                // Checked before anything starts: a run replayed after its grace ended starts no step.
                return self.end_cancelled(rt).await.map(Advanced::Finished);
            }
            self.poll_body();
            if self.take_records() {
                // A withdrawal lands in the commit of what the body did as it withdrew (a resumable
                // task's reply): the inbox is read first, so an answer that arrived before it wins.
                self.take_in(rt, vec![Event::Msg(Msg::Inbox)]).await?;
            }
            if let Some(advanced) = self.finish_if_done(rt).await? {
                return Ok(advanced);
            }
            self.commit(rt).await?;
            if self.finish.is_some() || self.core.diverged() {
                // A delivery made after the commit (a hook's token was taken) let the body return.
                continue;
            }
            let lone = if self.core.signals() & run_core::signal::POLLED != 0 {
                // A step the body polled starts, and if its attempt ends at once its completion
                // is taken in and the body polled again: the run's state is lent to the thread
                // for all of it, so the five looks at it (the step's start, the delivery of its
                // outcome, and the body's call taking it, creating the next step and polling it)
                // lock the core's mutex once between them.
                let lender = self.lender.take().expect("the lender is back after every lending");
                let lone = {
                    let _lending = lender.lend();
                    self.start_polled_steps(rt);
                    self.take_in_lone_completion(rt, mailbox)
                };
                self.lender = Some(lender);
                lone
            } else {
                self.take_in_lone_completion(rt, mailbox)
            };
            if lone {
                continue;
            }
            let mut events = self.ready_events(rt, mailbox);
            if events.is_empty() && self.body_waker.woken.load(Ordering::Acquire) {
                // Appending can wake the body (a hook whose chosen token turned out to be taken).
                continue;
            }
            if events.is_empty() {
                if !self.attempt_running() && self.grace_until.is_none() {
                    self.shed();
                    return Ok(Advanced::Idle);
                }
                events.push(self.next_event(rt, mailbox).await);
                events.extend(self.ready_events(rt, mailbox));
            }
            if events.iter().any(|event| matches!(event, Event::Shutdown)) {
                return Ok(Advanced::Stopped);
            }
            if let Some(current) = self.lease_lost(&events) {
                let run = self.core.run.clone();
                return Err(StoreError::Fenced { run, held: self.fence.epoch, current });
            }
            if events.iter().any(|event| matches!(event, Event::GraceOver)) {
                return self.end_cancelled(rt).await.map(Advanced::Finished);
            }
            self.take_in(rt, events).await?;
        }
    }

    /// The epoch of the claim that took this driver's over, if the heartbeat found one (a message
    /// about an earlier claim of this driver is stale and ignored).
    fn lease_lost(&self, events: &[Event]) -> Option<u64> {
        events.iter().find_map(|event| match event {
            Event::Msg(Msg::LeaseLost { fence, current }) if *fence == self.fence => Some(*current),
            _ => None,
        })
    }

    /// Events that are ready now, without waiting.
    fn ready_events(&mut self, rt: &Engine, mailbox: &mut mpsc::UnboundedReceiver<Msg>) -> Vec<Event> {
        let mut events = std::mem::take(&mut self.spare.events);
        while let Ok(msg) = mailbox.try_recv() {
            let announced_before_read = self.announced_before_read > 0;
            self.announced_before_read = self.announced_before_read.saturating_sub(1);
            if !(announced_before_read && matches!(msg, Msg::Inbox)) {
                events.push(Event::Msg(msg));
            }
        }
        // Every message counted was queued already, so none is left to skip; should one not have
        // been received, its read happens after all (a read too many, never one too few).
        self.announced_before_read = 0;
        events.append(&mut self.ended);
        // An empty set is not polled: nothing in it can be ready.
        while !self.attempts.is_empty()
            && let Some(Some(attempt)) = self.attempts.next().now_or_never()
        {
            events.push(Event::Attempt(attempt));
        }
        events.extend(self.due_timers.drain(..).map(|op| Event::Msg(Msg::Timer(op, TimerKind::Sleep))));
        let room = !self.backlog.is_empty() && self.backlog_has_room(rt.hook_buffer);
        if room {
            self.backlog.clear();
        }
        if room || !self.inbox.is_empty() || self.core.signals() & signal::WITHDRAWALS != 0 {
            // Withdrawals are resolved after the inbox is read, so answers that arrived first win.
            events.push(Event::Msg(Msg::Inbox));
        }
        events
    }

    /// The common turn of a chain of quick steps: the step just started ended well as it started
    /// (see `Driver::start_first_attempt`) and nothing else is ready. Its completion is taken in
    /// as [`Driver::take_in`] takes it (fitted, delivered, the body polled, its records taken),
    /// without gathering the events first. Returns false, doing nothing, in any other case.
    fn take_in_lone_completion(&mut self, rt: &Engine, mailbox: &mpsc::UnboundedReceiver<Msg>) -> bool {
        // What `ready_events` would look at besides `ended`, in the same order of cost.
        let quiet = self.attempts.is_empty()
            && self.due_timers.is_empty()
            && self.backlog.is_empty()
            && self.inbox.is_empty()
            && self.core.signals() & signal::WITHDRAWALS == 0
            && mailbox.is_empty();
        if !quiet || self.ended.len() != 1 || !matches!(self.ended[0], Event::Completed(_)) {
            return false;
        }
        let Some(Event::Completed(entry)) = self.ended.pop() else { unreachable!("checked just above") };
        // As `ready_events` does once the mailbox is empty: no message is left to skip.
        self.announced_before_read = 0;
        let mut entry = [entry];
        if let Some(limit) = rt.max_entry_bytes {
            fit::fit_entries(&mut entry, limit);
        }
        let [entry] = entry;
        self.take_in_entry(rt, entry);
        true
    }

    /// Waits for the next event.
    async fn next_event(&mut self, rt: &Engine, mailbox: &mut mpsc::UnboundedReceiver<Msg>) -> Event {
        let grace = match self.grace_until {
            Some(deadline) => Either::Left(rt.services.clock.sleep_until(deadline)),
            None => Either::Right(futures::future::pending()),
        };
        tokio::select! {
            biased;
            msg = mailbox.recv() => msg.map_or(Event::Shutdown, Event::Msg),
            Some(attempt) = self.attempts.next(), if !self.attempts.is_empty() => Event::Attempt(attempt),
            () = self.body_waker.notify.notified() => Event::Woken,
            () = grace => Event::GraceOver,
        }
    }

    /// Turns events into journal entries and delivers them to the body one at a time, polling to
    /// quiescence after each; they become pending, each followed by the records its poll
    /// produced. Nothing is appended here: the loop commits them.
    async fn take_in(&mut self, rt: &Engine, mut events: Vec<Event>) -> Result<(), StoreError> {
        let mut entries = std::mem::take(&mut self.spare.entries);
        let mut consumed = Vec::new();
        for event in events.drain(..) {
            match event {
                Event::Msg(Msg::Timer(op, TimerKind::Sleep)) => {
                    entries.extend(self.timer_fired(op, rt.services.clock.now(), &entries))
                }
                Event::Msg(Msg::Timer(op, TimerKind::Retry)) => self.retry_due(rt, op),
                Event::Msg(Msg::Inbox) => self.read_inbox(rt, &mut entries, &mut consumed).await?,
                Event::Attempt(attempt) => entries.extend(self.attempt_finished(rt, attempt)),
                Event::Completed(entry) => entries.push(entry),
                Event::Msg(Msg::Resume | Msg::LeaseLost { .. }) | Event::Woken => {}
                Event::GraceOver | Event::Shutdown => unreachable!("handled before journaling"),
            }
        }
        self.withdrawals(&mut entries);
        self.pending.consumed.extend(consumed);
        if let Some(limit) = rt.max_entry_bytes {
            // The body sees these before they are appended, so they must fit already: a step's
            // result too large to keep becomes its fatal failure now, not after the body saw it.
            fit::fit_entries(&mut entries, limit);
        }
        for entry in entries.drain(..) {
            self.take_in_entry(rt, entry);
        }
        self.spare.entries = entries;
        self.spare.events = events;
        Ok(())
    }

    /// Makes a fitted entry pending: a delivery reaches the body first, which is then polled to
    /// quiescence and its records taken after the entry.
    fn take_in_entry(&mut self, rt: &Engine, entry: Entry) {
        let delivered = entry.is_delivery() && self.finish.is_none() && !self.core.diverged();
        if delivered {
            tracing::debug!(op = entry.op().map(|op| op.0), delivery = entry.kind(), "delivering to the body");
            self.deliver(&entry);
            self.start_grace(rt, &entry);
        }
        self.pending.entries.push(entry);
        if delivered {
            self.poll_body();
            self.take_records();
        }
    }

    /// Drops the buffers kept for the next turn of the loop: a parked run keeps no spare
    /// capacity.
    fn shed(&mut self) {
        self.spare = Spare::default();
        if self.pending.entries.is_empty() && self.pending.consumed.is_empty() {
            // Committed, so its runs and notices are empty too.
            self.pending = Append { first_seq: self.pending.first_seq, ..Append::default() };
        }
        let mut state = self.core.lock();
        if state.polled.is_empty() {
            // It holds the buffer the last look at it swapped in.
            state.polled = Vec::new();
        }
    }

    /// Moves the records the body produced since the last look into the pending entries, with
    /// the runs they start. Returns whether the body withdrew questions the driver has yet to
    /// resolve (read under the same lock, which the loop would otherwise take again).
    fn take_records(&mut self) -> bool {
        if self.core.signals() & (signal::RECORDS | signal::WITHDRAWALS) == 0 {
            // The common case, a step's turn: nothing recorded, nothing withdrawn.
            return false;
        }
        let mut state = self.core.lock();
        // Taken rather than drained, so a parked run keeps no spare capacity. An empty outbox
        // holds no buffer, so it is left alone.
        if !state.outbox.is_empty() {
            self.pending.entries.extend(std::mem::take(&mut state.outbox));
        }
        if !state.starts.is_empty() {
            self.pending.runs.append(&mut state.starts);
            self.pending.notices.append(&mut state.start_notices);
        }
        !state.withdrawals.is_empty()
    }

    /// Drops what is pending, keeping its buffers: it was journaled, or it never will be.
    // Inlined into `commit`, which a chain of steps makes once a step: as calls, this and three
    // other helpers of it cost a step 0.8 % of its instructions (callgrind).
    #[inline]
    fn clear_pending(&mut self) {
        let Append { first_seq: _, entries, consumed, notices, runs } = &mut self.pending;
        entries.clear();
        consumed.clear();
        notices.clear();
        runs.clear();
    }

    /// Appends the pending batch in one transaction, then lets out what waited for it: events,
    /// armed timers, published questions and sign-in links, restarted attempts, and the delivery
    /// that tells the body a hook's token was taken. What of that the entries say is read before
    /// the store may take them (see the module documentation).
    async fn commit(&mut self, rt: &Engine) -> Result<(), StoreError> {
        if self.pending.entries.is_empty() && self.pending.consumed.is_empty() {
            return Ok(());
        }
        let own_notices = self.pending.notices.len();
        let mut taken = Vec::new();
        let mut backoff = StoreBackoff::default();
        loop {
            self.prepare(rt)?;
            // Read now: the store may keep the entries themselves.
            let events = self.journaled_events(rt);
            let appended = self.pending.entries.len() as u64;
            // The clock is read only for a recorder.
            let timed = crate::metrics::enabled().then(std::time::Instant::now);
            let result = loop {
                // A store that does no I/O answers at once, and nothing is awaited.
                let result = match rt.store.append(&self.core.run, self.fence, &mut self.pending) {
                    Commit::Done(result) => result,
                    Commit::Pending(write) => write.await,
                };
                match result {
                    // The batch, whole again, waits in memory while the store recovers.
                    Err(error) if error.is_transient() => backoff.wait(rt, &self.core.run, error).await?,
                    result => break result,
                }
            };
            match result {
                Ok(()) => {
                    if let Some(started) = timed {
                        crate::metrics::committed(appended as usize, started.elapsed());
                    }
                    self.pending.first_seq += appended;
                    self.committed(rt, events, taken);
                    return Ok(());
                }
                Err(StoreError::HookTokenInUse { op, .. }) => {
                    mark_hook_conflict(&mut self.pending.entries, op);
                    // The reports are made again, of the entries as they are now.
                    self.pending.notices.truncate(own_notices);
                    taken.push(op);
                }
                Err(error @ StoreError::TooLarge { .. }) => return Err(fit::store_bug(error)),
                Err(error) => return Err(error),
            }
        }
    }

    /// Lets out what waited for the batch just appended: see [`Driver::commit`]. `events` are
    /// the batch's, read before the append, and `taken` the hooks whose token another run holds.
    // Inlined into `commit`, which a chain of steps makes once a step: as calls, this and three
    // other helpers of it cost a step 0.8 % of its instructions (callgrind).
    #[inline]
    fn committed(&mut self, rt: &Engine, events: Vec<RunEvent>, taken: Vec<Op>) {
        rt.followers.committed(&self.core.run);
        if let Some(parent) = &self.core.started.parent
            && self.pending.notices.iter().any(|notice| notice.run == parent.run)
        {
            (rt.wake)(&parent.run);
        }
        for new in &self.pending.runs {
            crate::metrics::run_started(new.tool.clone());
            rt.gauges.created(1);
            rt.events.emit(|| RunEvent::Started { run: new.id.clone(), tool: new.tool.clone() });
            (rt.wake)(&new.id);
        }
        self.clear_pending();
        self.after_append(rt);
        if !events.is_empty() {
            for event in events {
                rt.events.emit(|| event);
            }
        }
        self.publish_new_waits(rt);
        for op in taken {
            if self.finish.is_none() {
                self.deliver(&Entry::HookTokenTaken { op });
                self.poll_body();
                self.take_records();
            }
        }
    }

    /// Readies the pending batch for the store: checks the history's limits, fits its
    /// records to the store's limit on one entry ([`fit::fit_records`]) and adds the reports to
    /// the parent. Fails, before anything is written, if the journal would pass its limit or the
    /// batch cannot be made to fit ([`fit::check_sent`]).
    // Inlined into `commit`, which a chain of steps makes once a step: as calls, this and three
    // other helpers of it cost a step 0.8 % of its instructions (callgrind).
    #[inline]
    fn prepare(&mut self, rt: &Engine) -> Result<(), StoreError> {
        let (next_seq, entries) = (self.next_seq(), &self.pending.entries);
        let after = next_seq + entries.len() as u64;
        // The entry that ends the run always fits, so a run at the limit can still fail.
        if after > rt.history.limit && !entries.last().is_some_and(Entry::is_terminal) {
            return Err(StoreError::HistoryLimit { run: self.core.run.clone(), limit: rt.history.limit });
        }
        if next_seq < rt.history.warning && after >= rt.history.warning {
            let (run, limit) = (self.core.run.clone(), rt.history.limit);
            tracing::warn!(%run, entries = after, limit, "the run's journal is long; continue it as new before the limit");
            rt.events.emit(|| RunEvent::HistoryWarning { run, entries: after, limit });
        }
        if let Some(limit) = rt.max_entry_bytes {
            // Records only: deliveries were fitted before the body saw them, and the entry that
            // ends the run as its outcome was read (see `Driver::append_final`).
            let entries = &mut self.pending.entries;
            let end = entries.len() - usize::from(entries.last().is_some_and(Entry::is_terminal));
            fit::fit_records(&mut entries[..end], limit)?;
        }
        if self.core.started.parent.is_some() {
            let reports = self.reports(&self.pending);
            self.pending.notices.extend(reports);
        }
        match rt.max_entry_bytes {
            Some(limit) => fit::check_sent(&self.pending, limit),
            None => Ok(()),
        }
    }

    /// The events the pending entries publish once durable; none, and nothing built, when nobody
    /// listens. A listener that subscribes during the append misses them, as it would had the
    /// append ended a moment before.
    // Inlined into `commit`, which a chain of steps makes once a step: as calls, this and three
    // other helpers of it cost a step 0.8 % of its instructions (callgrind).
    #[inline]
    fn journaled_events(&self, rt: &Engine) -> Vec<RunEvent> {
        if !rt.events.listening() {
            return Vec::new();
        }
        self.pending.entries.iter().filter_map(|entry| self.journaled_event(entry)).collect()
    }

    /// What a journaled entry says happened, to publish once it is durable; events never run
    /// ahead of the journal. The entries that start and end the run, and those of new waits, are
    /// published by the code that makes them (see [`Driver::publish_new_waits`]).
    fn journaled_event(&self, entry: &Entry) -> Option<RunEvent> {
        let published = matches!(
            entry,
            Entry::StepCompleted { .. }
                | Entry::StepRetrying { .. }
                | Entry::TimerFired { .. }
                | Entry::Recorded { kind: crate::journal::RecordKind::Published, .. }
                | Entry::HookReceived { .. }
                | Entry::CancelRequested { .. }
                | Entry::AskResolved { .. }
        );
        published.then(|| RunEvent::of_entry(&self.core.run, entry, self.core.task_id.as_deref())).flatten()
    }

    /// What a child run tells its parent about the entries of `batch`: see
    /// [`ChildReport`](crate::journal::ChildReport).
    fn reports(&self, batch: &Append) -> Vec<crate::store::Notice> {
        child_reports(&self.core.run, self.core.started.parent.as_ref(), batch)
    }

    /// Arms the timers and publishes the questions of the sleeps and asks the body created, now
    /// that their records are durable.
    fn publish_new_waits(&mut self, rt: &Engine) {
        if self.core.signals() & signal::WAITS == 0 {
            // The common case: the body created no sleep and no question since the last look.
            return;
        }
        let (timers, asks) = {
            let mut state = self.core.lock();
            (std::mem::take(&mut state.new_timers), std::mem::take(&mut state.new_asks))
        };
        for (op, deadline) in timers {
            rt.events.emit(|| RunEvent::TimerScheduled { run: self.core.run.clone(), op, deadline });
            rt.timers.add(self.core.run.clone(), op, deadline, TimerKind::Sleep);
        }
        for (op, request) in asks {
            let (run, request_id, task_id) =
                (self.core.run.clone(), crate::ask::request_id(op), self.core.task_id.clone());
            rt.events.emit(|| RunEvent::InputRequested { run, request_id, task_id, request });
        }
    }

    /// Appends the body's outstanding records and the terminal entry in one transaction, and
    /// returns how the run ended as journaled (an output too large to keep becomes a failure).
    async fn append_final(&mut self, rt: &Engine, mut terminal: Entry) -> Result<RunOutcome, StoreError> {
        self.take_records();
        if let Some(limit) = rt.max_entry_bytes {
            fit::fit_records(std::slice::from_mut(&mut terminal), limit)?;
        }
        // Read now: the store may keep the entry itself.
        let outcome = RunOutcome::from_terminal(&terminal).expect("a terminal entry, fitted, is still terminal");
        self.pending.entries.push(terminal);
        self.commit(rt).await?;
        // Ending the run withdraws its open questions; channels stop offering them.
        self.withdraw_open_asks(rt);
        Ok(outcome)
    }

    /// Publishes `input.resolved` (cancelled) for every question still open: the run, or its
    /// history, ended.
    fn withdraw_open_asks(&self, rt: &Engine) {
        for op in self.open_asks() {
            let (run, request_id, task_id) =
                (self.core.run.clone(), crate::ask::request_id(op), self.core.task_id.clone());
            rt.events.emit(|| RunEvent::InputResolved {
                run,
                request_id,
                task_id,
                outcome: crate::ask::AskOutcome::Cancelled,
            });
        }
    }

    /// Appends the terminal entry if the body returned, diverged or ran out of cancellation grace.
    async fn finish_if_done(&mut self, rt: &Engine) -> Result<Option<Advanced>, StoreError> {
        let divergence = self.core.diverged().then(|| self.core.lock().divergence.clone()).flatten();
        if let Some(divergence) = divergence {
            return self.fail(rt, divergence.failure()).await.map(|outcome| Some(Advanced::Finished(outcome)));
        }
        let Some(finish) = self.finish.take() else { return Ok(None) };
        if let Some(divergence) = self.unvisited_ops() {
            return self.fail(rt, divergence.failure()).await.map(|outcome| Some(Advanced::Finished(outcome)));
        }
        if self.core.is_cancelled() && !self.keeps_output {
            return self.end_cancelled(rt).await.map(|outcome| Some(Advanced::Finished(outcome)));
        }
        let outcome = match finish {
            Finish::Returned(Err(mut error)) => match error.continues_with() {
                Some(with) => return Ok(Some(Advanced::Continues(with))),
                None => self.finish_with(rt, Finish::Returned(Err(error))).await?,
            },
            finish => self.finish_with(rt, finish).await?,
        };
        Ok(outcome.map(Advanced::Finished))
    }

    /// Journals how the body ended.
    async fn finish_with(&mut self, rt: &Engine, finish: Finish) -> Result<Option<RunOutcome>, StoreError> {
        match finish {
            Finish::Returned(Ok(output)) => {
                if let Err(too_deep) = crate::journal::depth::check(&output, || "the tool's output".to_owned()) {
                    return self.fail(rt, RunFailure::Tool { message: too_deep.to_string() }).await.map(Some);
                }
                let outcome = self.append_final(rt, Entry::RunCompleted { output }).await?;
                // An output too large to keep was journaled as the run's failure.
                let status = match outcome {
                    RunOutcome::Completed(_) => RunStatus::Completed,
                    _ => RunStatus::Failed,
                };
                rt.events.emit(|| RunEvent::Finished { run: self.core.run.clone(), status });
                Ok(Some(outcome))
            }
            Finish::Returned(Err(error)) => {
                self.fail(rt, RunFailure::Tool { message: error.message().to_owned() }).await.map(Some)
            }
            Finish::Panicked(message) => self.fail(rt, RunFailure::Panicked { message }).await.map(Some),
        }
    }

    /// A replayed body that returned while the journal still records later ops diverged.
    fn unvisited_ops(&self) -> Option<crate::error::NonDeterminismError> {
        if !self.replayed {
            return None;
        }
        let state = self.core.lock();
        let last = state.index.last_op()?;
        let op = Op(state.next_op);
        (op <= last).then(|| crate::error::NonDeterminismError {
            run: self.core.run.clone(),
            op,
            expected: state.index.signatures.get(&op).cloned(),
            found: None,
            at: None,
        })
    }

    async fn fail(&mut self, rt: &Engine, failure: RunFailure) -> Result<RunOutcome, StoreError> {
        self.body = None;
        let outcome = self.append_final(rt, Entry::RunFailed { failure }).await?;
        rt.events.emit(|| RunEvent::Finished { run: self.core.run.clone(), status: RunStatus::Failed });
        Ok(outcome)
    }

    async fn end_cancelled(&mut self, rt: &Engine) -> Result<RunOutcome, StoreError> {
        self.body = None;
        self.append_final(rt, Entry::RunCancelled {}).await?;
        rt.events.emit(|| RunEvent::Finished { run: self.core.run.clone(), status: RunStatus::Cancelled });
        Ok(RunOutcome::Cancelled)
    }

    /// Whether the body parked idle: see [`RunCore::set_idle`].
    pub fn is_idle(&self) -> bool {
        self.core.lock().idle
    }

    /// Prepares a parked driver to run again after the warm cache hands it back.
    pub fn resumed_from_cache(&mut self, rt: &Engine) {
        rt.events.emit(|| RunEvent::Resumed { run: self.core.run.clone(), replayed: 0, from_cache: true });
    }

    /// Claims the run again for a driver that parked (on a shared store, parking gave the claim
    /// up). True if the journal is where the driver left it, so it goes on under the new fence,
    /// with the deliveries waiting in the inbox; false if another worker advanced the run
    /// meanwhile, so this driver is stale and the run must be rebuilt from the journal.
    pub async fn reclaim(&mut self, rt: &Engine) -> Result<bool, StoreError> {
        let now = rt.services.clock.now();
        let claimed = rt.store.claim(&self.core.run, &rt.worker, rt.lease, now, self.next_seq()).await?;
        if claimed.next_seq != self.next_seq() || !claimed.entries.is_empty() {
            return Ok(false);
        }
        self.fence = claimed.fence;
        self.inbox.extend(claimed.inbox);
        Ok(true)
    }
}

/// Records that the hook at `op` chose a token another run holds: its `HookCreated` says so (the
/// store then indexes no token for it) and a `HookTokenTaken` delivery follows in the same batch.
fn mark_hook_conflict(entries: &mut Vec<Entry>, op: Op) {
    for entry in entries.iter_mut() {
        if let Entry::HookCreated { op: hook, conflict, .. } = entry
            && *hook == op
        {
            *conflict = true;
        }
    }
    // After every delivery of the batch, which the body saw without the conflict, but before the
    // run's terminal entry if the batch ends the run.
    let at = entries.len() - usize::from(entries.last().is_some_and(Entry::is_terminal));
    entries.insert(at, Entry::HookTokenTaken { op });
}

/// Publishes the link of a sign-in a parked run waits for, from the store's index, so a restart
/// publishes it again without replaying the run.
pub(crate) fn announce_waiting_sign_in(rt: &Engine, sign_in: &crate::store::WaitingSignIn) {
    let crate::store::WaitingSignIn { run, op, provider, nonce, tool, .. } = sign_in;
    match sign_in_event(rt, run, tool, *op, provider, nonce) {
        Ok(event) => rt.events.emit(|| event),
        Err(error) => tracing::error!(%run, provider, "cannot build the sign-in URL: {error}"),
    }
}

/// The event that asks a person to sign in with `provider` for the step at `op` of `run` (of
/// `tool`), with the link to sign in at.
pub(crate) fn sign_in_event(
    rt: &Engine,
    run: &RunId,
    tool: &str,
    op: Op,
    provider: &str,
    nonce: &str,
) -> Result<RunEvent, crate::auth::AuthError> {
    let state = rt.services.auth_state(run, op, nonce);
    let url = rt.services.authorization_url(provider, &Principal::anonymous(), state.expose())?;
    let task_id = crate::registry::tool(tool).and_then(|tool| task_of(tool, run));
    Ok(RunEvent::AuthorizationRequired { run: run.clone(), op, task_id, provider: provider.to_owned(), url })
}

/// Creates the body future for `tool`, or `None` if the tool is not a workflow.
fn start_body(core: &Arc<RunCore>, tool: &'static crate::registry::ToolDescriptor, input: Value) -> Option<BodyFuture> {
    let ctx = crate::context::WorkflowCtx::new(core.clone(), tool.name);
    match tool.entry {
        EntryPoint::Workflow(entry) => Some(entry(input, ctx)),
        EntryPoint::Task(entry) => {
            let task_id = core.task_id.clone().unwrap_or_else(|| crate::registry::task_id(tool.name, &core.run));
            Some(entry(input, crate::context::TaskCtx::new(ctx, task_id)))
        }
        EntryPoint::Serve(entry) => {
            let task_id = core.task_id.clone().unwrap_or_else(|| crate::registry::task_id(tool.name, &core.run));
            let (serve, receive) = crate::context::ServeCtx::new(crate::context::TaskCtx::new(ctx, task_id));
            Some(entry(receive, serve))
        }
        EntryPoint::Plain(_) => None,
    }
}

/// The task id of a run of `tool`, if it is a task.
pub(crate) fn task_of(tool: &crate::registry::ToolDescriptor, run: &RunId) -> Option<String> {
    matches!(tool.entry, EntryPoint::Task(_) | EntryPoint::Serve(_)).then(|| crate::registry::task_id(tool.name, run))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(message) = panic.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// Waits between attempts at a store request that failed transiently (a full disk, a lost
/// connection). What the request carries (a step's completion, say) stays in memory meanwhile and
/// is journaled once the store recovers: rebuilding the run instead would run the step again.
/// Waits 10 ms, doubling up to 5 s, for as long as it takes, unless the runtime stops.
#[derive(Default)]
pub(crate) struct StoreBackoff {
    failures: u32,
}

impl StoreBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(5);

    /// Waits before the next attempt, or gives `error` back if the runtime is stopping.
    pub async fn wait(&mut self, rt: &Engine, run: &RunId, error: StoreError) -> Result<(), StoreError> {
        let delay = Self::FIRST.saturating_mul(1 << self.failures.min(16)).min(Self::MAX);
        self.failures += 1;
        tracing::warn!(%run, failures = self.failures, "the store failed, retrying in {delay:?}: {error}");
        tokio::select! {
            () = tokio::time::sleep(delay) => Ok(()),
            () = rt.stopped() => Err(error),
        }
    }
}

/// How long a cancelled run may keep unwinding before it ends cancelled regardless.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// What child run `run` tells its `parent` (if it has one) about the entries of `batch`: see
/// [`ChildReport`](crate::journal::ChildReport). Every append of a child's entries carries them,
/// whoever makes it (the executor, or the runtime ending a run it holds).
pub(crate) fn child_reports(
    run: &RunId,
    parent: Option<&crate::journal::ParentLink>,
    batch: &Append,
) -> Vec<crate::store::Notice> {
    let Some(parent) = parent else { return Vec::new() };
    let seqs = batch.first_seq..;
    let mut reported: Vec<(u64, &Entry)> =
        seqs.zip(&batch.entries).filter(|(_, entry)| crate::journal::ChildReport::reports(entry)).collect();
    // Questions resolved in this batch are reported first: a reply withdraws the questions
    // of the calls it settles, and the parent should see them gone before the reply moves it on.
    reported.sort_by_key(|(_, entry)| !matches!(entry, Entry::AskResolved { .. }));
    reported
        .into_iter()
        .map(|(seq, entry)| {
            let report = crate::journal::ChildReport { child: run.clone(), seq, entry: entry.clone() };
            let payload = serde_json::to_value(report).expect("a child report always serializes");
            crate::store::Notice {
                run: parent.run.clone(),
                delivery_id: format!("child:{run}:{seq}"),
                delivery: crate::store::Delivery::Hook { op: parent.hook, payload },
            }
        })
        .collect()
}
