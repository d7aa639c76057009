//! The state one run's body shares with its executor: the operation table.
//!
//! Durable primitives (step calls, sleeps, hooks, recorded values) find the run they belong to
//! through [`current`], a thread-local the executor sets only while it polls the body. Creating a
//! primitive takes the next [`Op`] number at once, so creation order is program order even when
//! futures are polled out of order by `select!` or `join!`.
//!
//! While replaying, every creation is checked against the journal's [`ReplayIndex`]: a different
//! kind, name or input hash at the same op number records a [`NonDeterminismError`] and the body
//! is never polled again. Deliveries reach a slot only through [`RunCore::deliver`], which the
//! executor calls once per journal entry, after the entry is durable.
//!
//! The state sits behind a mutex, as anything may look at it from any thread (an abort signal
//! moved into a thread of its own, say). Most looks come from the driver's own thread, five a
//! step, so the driver lends the state to its thread for a step's start and the body's take of
//! its outcome ([`RunCore::lend`]): those looks move it out of a thread-local and back, and the
//! mutex is locked once for all of them.

mod definition;
mod lending;
mod services;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{VecDeque, hash_map};

use std::sync::Arc;
use std::task::Waker;

use serde_json::Value;

pub(crate) use self::definition::{AttemptFn, StepAttempt};
pub use self::definition::{Backoff, RetryPolicy, StepDef};
pub(crate) use self::services::{HookCheck, Services};
use crate::error::NonDeterminismError;
use crate::journal::{
    Entry, InputHash, Op, OpKind, OpSignature, Payload, RecordKind, RunId, SourceLocation, StepOutcome,
};
use crate::secret::Token;
use crate::time::Timestamp;

/// A map keyed by op number. Ops are small dense integers looked up on every step, and nothing
/// outside the process chooses them, so they hash to themselves ([`OpHasher`]).
pub(crate) type OpMap<V> = std::collections::HashMap<Op, V, std::hash::BuildHasherDefault<OpHasher>>;

/// Hashes an op number to itself in the low bits, so consecutive ops take consecutive buckets
/// and a replay, which looks the ops up in order, walks its tables in order instead of missing
/// the cache once per op on a long history (as a hash that spreads them did). The top 7 bits,
/// which the table compares to tell keys in one group apart, are mixed from the number so they
/// still differ from op to op.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OpHasher(u64);

impl std::hash::Hasher for OpHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `Op` is hashed here, through `write_u32`; anything else still hashes consistently.
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let n = u64::from(n);
        self.0 = n ^ (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) & 0xfe00_0000_0000_0000);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<RunCore>>> = const { RefCell::new(None) };
}

/// The run whose body this thread is polling, if any.
pub(crate) fn current() -> Option<Arc<RunCore>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Makes the run `handle` holds current until the guard drops. The handle is the driver's own
/// spare `Arc`, moved into the thread-local and back rather than cloned for each poll of the body
/// (a clone and its drop are two atomic writes).
pub(crate) fn enter(handle: &mut Option<Arc<RunCore>>) -> EnterGuard<'_> {
    let previous = CURRENT.with(|current| current.replace(handle.take()));
    EnterGuard { previous, handle }
}

/// Restores the previously current run on drop, and hands the entered run's handle back.
pub(crate) struct EnterGuard<'a> {
    previous: Option<Arc<RunCore>>,
    handle: &'a mut Option<Arc<RunCore>>,
}

impl Drop for EnterGuard<'_> {
    fn drop(&mut self) {
        *self.handle = CURRENT.with(|current| current.replace(self.previous.take()));
    }
}

/// What a run was started with, from its first journal entry.
#[derive(Clone, Debug)]
pub(crate) struct Started {
    pub principal: Option<String>,
    pub interactive: bool,
    /// How many histories came before this one (continue-as-new).
    pub continued: u32,
    /// The run this one reports to, if any.
    pub parent: Option<crate::journal::ParentLink>,
    /// The span the run's activations are children of (see `crate::trace`).
    pub traceparent: Option<crate::journal::TraceParent>,
    /// The run and op this one was forked from, if it is a fork: kept by a continue-as-new.
    pub forked_from: Option<crate::journal::ForkedFrom>,
}

impl Default for Started {
    /// A run started anonymously, someone to answer it, in its first history, with no links.
    fn default() -> Self {
        Started { principal: None, interactive: true, continued: 0, parent: None, traceparent: None, forked_from: None }
    }
}

impl Started {
    pub fn of(entry: &Entry) -> Started {
        match entry {
            Entry::RunStarted { principal, interactive, continued, parent, traceparent, forked_from, .. } => Started {
                principal: principal.as_deref().map(str::to_owned),
                interactive: *interactive,
                continued: *continued,
                parent: parent.as_deref().cloned(),
                traceparent: traceparent.as_deref().cloned(),
                forked_from: forked_from.as_deref().cloned(),
            },
            _ => Started::default(),
        }
    }
}

/// Whether the executor is feeding recorded entries or running live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Replaying,
    Live,
}

/// What the journal says about each op, built once before replay.
#[derive(Debug, Default)]
pub(crate) struct ReplayIndex {
    pub signatures: OpMap<OpSignature>,
    pub recorded: OpMap<Payload>,
    pub deadlines: OpMap<Timestamp>,
    pub hooks: OpMap<HookRecord>,
    /// What each started but unfinished step was doing when the journal ends.
    pub resume: OpMap<Resume>,
    pub completed: OpMap<()>,
    /// Sleeps whose `TimerFired` is recorded.
    pub fired: OpMap<()>,
    /// Asks whose resolution is recorded.
    pub asks_resolved: OpMap<()>,
    /// Asks whose creation is recorded.
    pub asks_created: OpMap<()>,
    /// The highest op number the journal mentions, if any.
    last: Option<Op>,
}

/// Where an unfinished step stands at the end of the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Attempt `next` is due at `due`.
    Retry { next: u32, due: Timestamp },
    /// Attempt `attempt` ended waiting for a sign-in with `provider`.
    AwaitAuth { attempt: u32, provider: String, nonce: String },
    /// The sign-in completed; attempt `attempt` runs again.
    AfterSignIn { attempt: u32 },
}

/// A journaled hook creation.
#[derive(Clone, Debug)]
pub(crate) struct HookRecord {
    pub nonce: Option<String>,
    /// Whether the hook knows its token is taken from its creation on: only in journals written
    /// before the conflict was journaled as a delivery ([`Entry::HookTokenTaken`]).
    pub conflict: bool,
}

impl ReplayIndex {
    /// Indexes `entries`. `step_name` gives the static name of a step compiled into this binary
    /// (see `registry::step_name`): a step's signature borrows it rather than copying each entry's
    /// name, so indexing a long journal allocates nothing per step, and a run kept warm holds no
    /// copy of its steps' names.
    pub fn build(entries: &[Entry], step_name: impl Fn(&str) -> Option<&'static str>) -> Self {
        let mut index = ReplayIndex::default();
        // Most entries name an op, most ops are steps: room for them all up front, not rehashed
        // as the tables grow.
        index.signatures.reserve(entries.len());
        index.completed.reserve(entries.len());
        // A journal names the same few steps again and again: look a name up only when it changes.
        let mut last: Option<&'static str> = None;
        let mut known_name = |name: &str| -> Cow<'static, str> {
            if let Some(known) = last.filter(|known| *known == name).or_else(|| step_name(name)) {
                last = Some(known);
                return Cow::Borrowed(known);
            }
            Cow::Owned(name.to_owned())
        };
        for entry in entries {
            let Some(op) = entry.op() else { continue };
            index.last = index.last.max(Some(op));
            if let hash_map::Entry::Vacant(vacant) = index.signatures.entry(op) {
                let signature = match entry {
                    Entry::StepCompleted { name, input_hash, .. } | Entry::StepRetrying { name, input_hash, .. } => {
                        // An entry made in this process already borrows its step's name.
                        let name = match name {
                            Cow::Owned(read) => known_name(read),
                            made => made.clone(),
                        };
                        Some(OpSignature { kind: OpKind::Step, name, input_hash: *input_hash })
                    }
                    _ => entry.signature(),
                };
                if let Some(signature) = signature {
                    vacant.insert(signature);
                }
            }
            match entry {
                Entry::Recorded { value, .. } => {
                    index.recorded.insert(op, value.clone());
                }
                Entry::TimerScheduled { deadline, .. } => {
                    index.deadlines.insert(op, *deadline);
                }
                Entry::HookCreated { nonce, conflict, .. } => {
                    index.hooks.insert(op, HookRecord { nonce: nonce.clone(), conflict: *conflict });
                }
                Entry::HookTokenTaken { .. } => {
                    // The conflict reaches the body as this delivery, not at the hook's creation.
                    if let Some(record) = index.hooks.get_mut(&op) {
                        record.conflict = false;
                    }
                }
                Entry::StepRetrying { attempt, next_attempt_at, .. } => {
                    index.resume.insert(op, Resume::Retry { next: attempt + 1, due: *next_attempt_at });
                }
                Entry::AuthRequired { attempt, provider, nonce, .. } => {
                    let (attempt, provider, nonce) = (*attempt, provider.clone(), nonce.clone());
                    index.resume.insert(op, Resume::AwaitAuth { attempt, provider, nonce });
                }
                Entry::AuthCompleted { .. } => {
                    if let Some(Resume::AwaitAuth { attempt, .. }) = index.resume.get(&op) {
                        let attempt = *attempt;
                        index.resume.insert(op, Resume::AfterSignIn { attempt });
                    }
                }
                Entry::TimerFired { .. } => {
                    index.fired.insert(op, ());
                }
                Entry::StepCompleted { .. } => {
                    index.resume.remove(&op);
                    index.completed.insert(op, ());
                }
                Entry::AskCreated { .. } => {
                    index.asks_created.insert(op, ());
                }
                Entry::AskResolved { .. } => {
                    index.asks_resolved.insert(op, ());
                }
                _ => {}
            }
        }
        index
    }

    /// The sleeps the journal schedules and does not record firing, with their deadlines.
    pub fn unfired_timers(&self) -> impl Iterator<Item = (Op, Timestamp)> + '_ {
        self.deadlines.iter().filter(|(op, _)| !self.fired.contains_key(op)).map(|(op, deadline)| (*op, *deadline))
    }

    /// The highest op number the journal mentions, if any.
    pub fn last_op(&self) -> Option<Op> {
        self.last
    }
}

/// What an op's slot holds.
pub(crate) enum Slot {
    Step(StepSlot),
    Sleep {
        fired: bool,
        /// When it may fire: a timer message for this op that comes earlier (a stale one, say,
        /// from the history before a continue-as-new) is ignored.
        deadline: Timestamp,
    },
    Hook(HookSlot),
    /// Recorded values resolve at creation; their slot only reserves the number.
    Recorded,
    /// A question for a person, and how it resolved.
    Ask {
        outcome: Option<crate::journal::ask::AskOutcome>,
    },
}

/// A step call's state.
pub(crate) struct StepSlot {
    pub def: &'static StepDef,
    pub input_hash: InputHash,
    /// Runs one attempt; taken by the executor when the step starts.
    pub attempt: Option<AttemptFn>,
    /// Whether the body has polled the call (which is when a step starts).
    pub polled: bool,
    pub outcome: Option<StepOutcome>,
    /// The output an attempt of a step that hands its output over returned, with the attempt's
    /// number, until its completion is delivered (see `StepDef::handing_over`).
    pub handed: Option<(u32, Box<dyn std::any::Any + Send>)>,
}

/// A hook's state: payloads delivered and not yet taken, in journal order.
pub(crate) struct HookSlot {
    pub token: Token,
    pub queue: VecDeque<Value>,
    pub conflict: bool,
}

/// One op: its state and who waits on it.
pub(crate) struct OpSlot {
    pub slot: Slot,
    pub waker: Option<Waiter>,
}

/// Who waits on an op: the driver itself, when the body polled the op's future directly (the
/// common case, recorded without cloning the driver's waker: a clone and its drop are two atomic
/// writes), or the waker of whatever polled it (a `join!` or `select!`).
pub(crate) enum Waiter {
    Driver,
    Other(Waker),
}

/// The mutable part of a run's core.
pub(crate) struct CoreState {
    pub mode: Mode,
    pub next_op: u32,
    pub index: ReplayIndex,
    pub ops: Vec<OpSlot>,
    /// Records the body produced that the executor must append before anything depends on them.
    pub outbox: Vec<Entry>,
    /// The runs that records in the outbox start ([`RecordKind::Started`]): created by the append
    /// that journals their records.
    pub starts: Vec<crate::store::NewRun>,
    /// The deliveries to those runs that go with them (a resumable task's first call).
    pub start_notices: Vec<crate::store::Notice>,
    /// Steps polled for the first time since the executor last looked.
    pub polled: Vec<Op>,
    /// Timers created since the executor last looked.
    pub new_timers: Vec<(Op, Timestamp)>,
    pub divergence: Option<NonDeterminismError>,
    pub cancelled: bool,
    /// Futures waiting on the abort signal itself.
    pub cancel_wakers: Vec<Waker>,
    /// Asks created since the executor last looked, for `input.requested`.
    pub new_asks: Vec<(Op, crate::journal::ask::Ask)>,
    /// Asks the body withdrew, for the executor to resolve.
    pub withdrawals: Vec<Op>,
    /// Whether the body waits with nothing under way for something that may be long in coming
    /// (a session between turns waits on a person): the warm cache keeps fewer such runs.
    pub idle: bool,
    /// The input the last history handed this one already built, until the body takes it (see
    /// `ContinueWith::warm`).
    pub warm: Option<crate::error::Warm>,
    /// The waker the driver polls the body with, once a driver runs it.
    pub driver_waker: Option<Waker>,
}

impl CoreState {
    /// Records that the future polled with `cx` waits on `op`.
    pub fn wait(&mut self, op: Op, cx: &std::task::Context<'_>) {
        let waiter = match &self.driver_waker {
            Some(driver) if driver.will_wake(cx.waker()) => Waiter::Driver,
            _ => Waiter::Other(cx.waker().clone()),
        };
        self.ops[op.0 as usize].waker = Some(waiter);
    }

    /// The [`signal`] bits that describe this state.
    fn signals(&self) -> u8 {
        let bit = |set: bool, bit: u8| if set { bit } else { 0 };
        bit(self.divergence.is_some(), signal::DIVERGED)
            | bit(!self.outbox.is_empty() || !self.starts.is_empty(), signal::RECORDS)
            | bit(!self.withdrawals.is_empty(), signal::WITHDRAWALS)
            | bit(!self.new_timers.is_empty() || !self.new_asks.is_empty(), signal::WAITS)
            | bit(!self.polled.is_empty(), signal::POLLED)
            | bit(self.mode == Mode::Replaying, signal::REPLAYING)
            | bit(self.cancelled, signal::CANCELLED)
    }
}

/// What the core's state holds for the executor, as bits of [`RunCore::signals`]: the driver
/// looks at these between polls many times a step, and reads them without taking the lock.
pub(crate) mod signal {
    /// The body diverged from its journal ([`CoreState::divergence`]).
    pub const DIVERGED: u8 = 1;
    /// Records, or runs they start, wait in the outbox.
    pub const RECORDS: u8 = 1 << 1;
    /// The body withdrew questions the executor has yet to resolve.
    pub const WITHDRAWALS: u8 = 1 << 2;
    /// The body created sleeps or questions the executor has yet to publish.
    pub const WAITS: u8 = 1 << 3;
    /// The body polled steps the executor has yet to start.
    pub const POLLED: u8 = 1 << 4;
    /// The executor is feeding recorded entries ([`super::Mode::Replaying`]).
    pub const REPLAYING: u8 = 1 << 5;
    /// The run's abort signal has fired ([`CoreState::cancelled`]).
    pub const CANCELLED: u8 = 1 << 6;
}

/// The core's state, locked: see [`lending::Held`]. Unlocking publishes the state's [`signal`]
/// bits first, while the lock is still held, so no change to the state can be missed by a later
/// look at them: every change goes through this guard.
pub(crate) type CoreGuard<'a> = lending::Held<'a, CoreState>;

/// A run's state lent to the driver's thread: see [`RunCore::lend`].
pub(crate) type Lending<'a> = lending::Lending<'a, CoreState>;

lending::lending_slots!(
    /// The state of the run whose driver lends it to this thread ([`RunCore::lend`]), while no
    /// [`CoreGuard`] holds it; and the address of the core it belongs to.
    LENT, LENDER: CoreState
);

impl lending::Lent for CoreState {
    fn lent() -> &'static lending::Slot<Option<Box<Self>>> {
        &LENT
    }

    fn lender() -> &'static lending::Slot<usize> {
        &LENDER
    }

    fn signals(&self) -> u8 {
        CoreState::signals(self)
    }
}

/// A run's core as what user code holds across an `.await` holds it (a step's call and attempt, a
/// sleep, a hook, an ask, an abort signal, a workflow's or a step's context): an `Arc<RunCore>`
/// seen through a trait object that is `Send` and `Sync`.
///
/// rustc proves each tool's and step's future `Send` where the user's crate is compiled, and
/// inside an `async fn`'s state that proof cannot reuse earlier ones (its regions are
/// placeholders), so through an `Arc<RunCore>` it would walk the run's whole state and services
/// again for every step and tool of the crate. Through this it stops at the trait object. Made
/// from an `Arc<RunCore>` without allocating; each use costs one indirect call.
#[derive(Clone)]
pub(crate) struct CoreRef(Arc<dyn AsCore>);

/// What a [`CoreRef`] reaches its core through.
trait AsCore: Send + Sync {
    fn core(&self) -> &RunCore;
}

impl AsCore for RunCore {
    #[inline]
    fn core(&self) -> &RunCore {
        self
    }
}

impl From<Arc<RunCore>> for CoreRef {
    #[inline]
    fn from(core: Arc<RunCore>) -> Self {
        CoreRef(core)
    }
}

impl std::ops::Deref for CoreRef {
    type Target = RunCore;

    #[inline]
    fn deref(&self) -> &RunCore {
        self.0.core()
    }
}

/// The state one run's body shares with its executor.
pub(crate) struct RunCore {
    pub run: RunId,
    pub services: Arc<Services>,
    /// Who started the run; tokens resolve under this identity.
    pub principal: crate::auth::Principal,
    /// Whether someone can answer the run's asks.
    pub interactive: bool,
    /// The model-facing task id, if the run is a task.
    pub task_id: Option<String>,
    /// What the run was started with.
    pub started: Started,
    /// The state, in its mutex except while a [`CoreGuard`] holds it or the run's driver lends it
    /// to its thread ([`RunCore::lend`]), with its [`signal`] bits as its last holder left them:
    /// an uncontended lock and unlock is two atomic read-modify-writes, about 15 ns on some
    /// machines, and most of the driver's looks at the state between polls find nothing to take.
    state: lending::Lendable<CoreState>,
}

impl RunCore {
    pub fn new(
        run: RunId,
        services: Arc<Services>,
        started: &Started,
        task_id: Option<String>,
        index: ReplayIndex,
        mode: Mode,
    ) -> Self {
        let state = CoreState {
            mode,
            next_op: 0,
            // Room for every op the journal names: a replay creates them all again, and a table
            // grown by doubling copies each slot about once more.
            ops: Vec::with_capacity(index.signatures.len()),
            index,
            outbox: Vec::new(),
            starts: Vec::new(),
            start_notices: Vec::new(),
            polled: Vec::new(),
            new_timers: Vec::new(),
            divergence: None,
            cancelled: false,
            cancel_wakers: Vec::new(),
            new_asks: Vec::new(),
            withdrawals: Vec::new(),
            idle: false,
            warm: None,
            driver_waker: None,
        };
        let principal =
            started.principal.clone().map_or_else(crate::auth::Principal::anonymous, crate::auth::Principal::new);
        let interactive = started.interactive;
        let started = started.clone();
        RunCore { run, services, principal, interactive, task_id, started, state: lending::Lendable::new(state) }
    }

    /// The [`signal`] bits the state's last holder left: what the executor has to look at.
    pub fn signals(&self) -> u8 {
        self.state.signals()
    }

    /// Whether the executor is feeding the body its journal (a replay), without taking the lock:
    /// what the body does meanwhile it did before, so a log message it sends now was sent then.
    pub fn replaying(&self) -> bool {
        self.signals() & signal::REPLAYING != 0
    }

    /// Sends a log message of the body (see [`crate::logs`]), unless it is replaying.
    pub fn log(&self, tool: &'static str, level: crate::logs::LogLevel, message: String) {
        if !self.replaying() {
            self.services.logs.send(self.run.as_str(), tool, level, message);
        }
    }

    /// Whether the body diverged from its journal, without taking the lock.
    pub fn diverged(&self) -> bool {
        self.signals() & signal::DIVERGED != 0
    }

    /// Says whether the body now waits idle (see [`CoreState::idle`]); a hint to the warm
    /// cache, never journaled.
    pub fn set_idle(&self, idle: bool) {
        self.lock().idle = idle;
    }

    #[inline]
    pub fn lock(&self) -> CoreGuard<'_> {
        self.state.lock()
    }

    /// Lends the run's state to this thread until the returned guard drops: [`RunCore::lock`] on
    /// this thread then takes it without touching the mutex, which stays locked meanwhile, so
    /// other threads wait for the lending to end. The driver lends it while a step starts, its
    /// attempt runs its first poll and the body takes the outcome: five looks at the state a
    /// step, for one lock of the mutex. Nothing may await while it is lent (the task could move
    /// to another thread and leave the state behind), and no lock is taken twice on one thread,
    /// lent or not. See [`lending`].
    pub fn lend(&self) -> Lending<'_> {
        self.state.lend()
    }

    /// Takes the next op number for an operation with `signature`, checking it against the
    /// journal while replaying. Returns `None` (and records the divergence, with the source
    /// location of the body's call: every fn between it and here is `#[track_caller]`) on a
    /// mismatch.
    #[track_caller]
    pub fn create(&self, signature: OpSignature, slot: Slot) -> Option<Op> {
        let mut state = self.lock();
        if state.divergence.is_some() {
            return None;
        }
        let op = Op(state.next_op);
        if let Some(expected) = state.index.signatures.get(&op)
            && *expected != signature
        {
            state.divergence = Some(NonDeterminismError {
                run: self.run.clone(),
                op,
                expected: Some(expected.clone()),
                found: Some(signature),
                at: SourceLocation::of(std::panic::Location::caller()),
            });
            return None;
        }
        state.next_op += 1;
        state.ops.push(OpSlot { slot, waker: None });
        Some(op)
    }

    /// Whether the run takes the new branch of the patch `id` here (`WorkflowCtx::patched`), and
    /// with `deprecated` (`WorkflowCtx::deprecate_patch`), a divergence if it took the old one.
    ///
    /// A run takes it if its journal records the patch's marker at the next op, or if the journal
    /// records nothing from the next op on: then the body is past the history it has, and the
    /// marker is journaled so every replay takes the same branch. A journal that records another
    /// op there, or any later op, was written by code without the patch, so the run takes the old
    /// branch, and no op number is taken, so the old branch's ops keep theirs.
    #[track_caller]
    pub fn patched(&self, id: &'static str, deprecated: bool) -> bool {
        let mut state = self.lock();
        if state.divergence.is_some() {
            return true; // The body is not polled again: which branch it takes does not matter.
        }
        let op = Op(state.next_op);
        let signature = OpSignature { kind: OpKind::Patch, name: id.into(), input_hash: InputHash::default() };
        let recorded = state.index.signatures.get(&op);
        let marked = recorded == Some(&signature);
        let taken = marked || state.index.last_op().is_none_or(|last| last < op);
        if taken {
            state.next_op += 1;
            state.ops.push(OpSlot { slot: Slot::Recorded, waker: None });
            if !marked {
                state.outbox.push(Entry::Recorded { op, kind: RecordKind::Patch, value: Value::from(id).into() });
            }
        } else if deprecated {
            state.divergence = Some(NonDeterminismError {
                run: self.run.clone(),
                op,
                expected: recorded.cloned(),
                found: Some(signature),
                at: SourceLocation::of(std::panic::Location::caller()),
            });
        }
        taken
    }

    /// Whether the journal records the completion of the op the next creation will take.
    pub fn next_op_completed(&self) -> bool {
        // A live run records nothing ahead: no lock to find that out.
        if self.signals() & signal::REPLAYING == 0 {
            return false;
        }
        let state = self.lock();
        state.mode == Mode::Replaying && state.index.completed.contains_key(&Op(state.next_op))
    }

    /// Returns the recorded value for a clock or randomness read, producing and recording
    /// `fresh()` when the journal has none.
    #[track_caller]
    pub fn record(&self, kind: RecordKind, fresh: impl FnOnce() -> Value) -> Option<Value> {
        let (op, mut state) = self.create_record(kind)?;
        if let Some(value) = state.index.recorded.get(&op) {
            return Some(value.to_value().into_owned());
        }
        let value = fresh();
        state.outbox.push(Entry::Recorded { op, kind, value: value.clone().into() });
        Some(value)
    }

    /// Records `fresh()` unless the journal records this op already, like [`RunCore::record`],
    /// but hands nothing back, so the value is moved into the journal rather than copied (a
    /// published event, which the body never reads back).
    #[track_caller]
    pub fn record_only(&self, kind: RecordKind, fresh: impl FnOnce() -> Payload) {
        let Some((op, mut state)) = self.create_record(kind) else { return };
        if !state.index.recorded.contains_key(&op) {
            let value = fresh();
            state.outbox.push(Entry::Recorded { op, kind, value });
        }
    }

    /// Returns the value the journal records under `name` at this op, producing and recording
    /// `fresh()` (as `{"name": name, "value": fresh()}`) when it has none; see
    /// [`RecordKind::Value`].
    #[track_caller]
    pub fn record_value(&self, name: &'static str, fresh: impl FnOnce() -> Value) -> Option<Value> {
        let signature = OpSignature { kind: OpKind::Value, name: name.into(), input_hash: InputHash::default() };
        let op = self.create(signature, Slot::Recorded)?;
        let mut state = self.lock();
        if let Some(recorded) = state.index.recorded.get(&op) {
            return recorded.to_value().get("value").cloned();
        }
        let value = fresh();
        let record = serde_json::json!({ "name": name, "value": value });
        state.outbox.push(Entry::Recorded { op, kind: RecordKind::Value, value: record.into() });
        Some(value)
    }

    /// Takes the next op for a record of `kind` (see [`RunCore::create`]) and locks the state.
    #[track_caller]
    fn create_record(&self, kind: RecordKind) -> Option<(Op, CoreGuard<'_>)> {
        let op_kind = kind.op_kind();
        let signature = OpSignature { kind: op_kind, name: op_kind.name().into(), input_hash: InputHash::default() };
        let op = self.create(signature, Slot::Recorded)?;
        Some((op, self.lock()))
    }

    /// Starts the child run `child()` makes, with `notices` to it, in the append that journals
    /// this op's [`RecordKind::Started`] record, unless the journal records this op already (the
    /// run exists then). Returns `None` past a divergence.
    #[track_caller]
    pub fn start_run(
        &self,
        child: impl FnOnce() -> (crate::store::NewRun, Vec<crate::store::Notice>),
    ) -> Option<RunId> {
        let (op, mut state) = self.create_record(RecordKind::Started)?;
        if let Some(value) = state.index.recorded.get(&op) {
            return value.to_value()["run"].as_str().and_then(|run| run.parse().ok());
        }
        let (new, notices) = child();
        let run = new.id.clone();
        state.outbox.push(Entry::Recorded {
            op,
            kind: RecordKind::Started,
            value: serde_json::json!({ "run": run }).into(),
        });
        state.starts.push(new);
        state.start_notices.extend(notices);
        Some(run)
    }

    /// Applies one delivery entry to its slot and wakes the future waiting on it, unless the
    /// driver itself waits on it ([`Waiter::Driver`]): then this returns `true` and wakes
    /// nothing, for the driver, which polls the body next, marks the body woken itself. (Waking
    /// the driver would also leave a permit that its next wait would take as a wake-up.)
    ///
    /// A delivery for an op the body has not created means the body diverged: the original run
    /// had created it by the time the delivery was journaled.
    #[must_use = "the body must be marked woken when this returns `true`"]
    pub fn deliver(&self, entry: &Entry) -> bool {
        let mut state = self.lock();
        if let Entry::CancelRequested { .. } = entry {
            state.cancelled = true;
            let driver = state.driver_waker.clone();
            let ops = state.ops.iter_mut().filter_map(|op| op.waker.take());
            let wakers: Vec<Waker> = ops
                .filter_map(|waiter| match waiter {
                    Waiter::Driver => driver.clone(),
                    Waiter::Other(waker) => Some(waker),
                })
                .collect();
            for waker in wakers.into_iter().chain(std::mem::take(&mut state.cancel_wakers)) {
                waker.wake();
            }
            return false;
        }
        let Some(op) = entry.op() else { return false };
        let Some(slot) = state.ops.get_mut(op.0 as usize) else {
            if state.divergence.is_none() {
                let expected = state.index.signatures.get(&op).cloned();
                state.divergence =
                    Some(NonDeterminismError { run: self.run.clone(), op, expected, found: None, at: None });
            }
            return false;
        };
        match (&mut slot.slot, entry) {
            (Slot::Step(step), Entry::StepCompleted { outcome, attempt, .. }) => {
                // The attempt's own output, when it handed it over and the journal keeps it as it
                // was (not cut to fit): the body takes that, and the journal's copy is not cloned.
                let handed = step.handed.take().filter(|(number, _)| number == attempt);
                step.outcome = Some(match (outcome, handed) {
                    (StepOutcome::Ok { .. }, Some((_, output))) => {
                        step.handed = Some((*attempt, output));
                        StepOutcome::Ok { value: Value::Null.into() }
                    }
                    _ => outcome.clone(),
                });
            }
            (Slot::Sleep { fired, .. }, Entry::TimerFired { .. }) => *fired = true,
            (Slot::Hook(hook), Entry::HookReceived { payload, .. }) => hook.queue.push_back(payload.clone()),
            (Slot::Hook(hook), Entry::HookTokenTaken { .. }) => hook.conflict = true,
            (Slot::Ask { outcome }, Entry::AskResolved { outcome: resolved, .. }) => *outcome = Some(resolved.clone()),
            _ => return false,
        }
        match slot.waker.take() {
            Some(Waiter::Driver) => true,
            Some(Waiter::Other(waker)) => {
                waker.wake();
                false
            }
            None => false,
        }
    }

    /// Keeps the output attempt `attempt` of the step at `op` returned, for the body to take when
    /// the completion is delivered (see `StepDef::handing_over`).
    pub fn hand_over(&self, op: Op, attempt: u32, output: Box<dyn std::any::Any + Send>) {
        if let Some(OpSlot { slot: Slot::Step(step), .. }) = self.lock().ops.get_mut(op.0 as usize) {
            step.handed = Some((attempt, output));
        }
    }

    /// Asks the executor to withdraw the ask at `op` (once); an answer that arrived first wins.
    pub fn withdraw_ask(&self, op: Op) {
        let mut state = self.lock();
        if !state.withdrawals.contains(&op) {
            state.withdrawals.push(op);
        }
    }

    /// Withdraws every question still open (a resumable task's reply settles their calls).
    pub fn withdraw_open_asks(&self) {
        let mut state = self.lock();
        let open: Vec<Op> = state
            .ops
            .iter()
            .enumerate()
            .filter(|(_, slot)| matches!(slot.slot, Slot::Ask { outcome: None }))
            .map(|(op, _)| Op(op as u32))
            .collect();
        for op in open {
            if !state.withdrawals.contains(&op) {
                state.withdrawals.push(op);
            }
        }
    }

    /// Whether the run's abort signal has fired, without taking the lock: an abort signal is
    /// asked from any thread, also while the run's driver lends the state to its own.
    pub fn is_cancelled(&self) -> bool {
        self.signals() & signal::CANCELLED != 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::journal::RecordKind;
    use crate::secret::SecretKey;
    use crate::time::ManualClock;

    fn core(mode: Mode) -> RunCore {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
        let services =
            Services::new(clock, SecretKey::generate(), Default::default(), String::new(), Default::default());
        let started = Started::default();
        RunCore::new("run-1".parse().unwrap(), Arc::new(services), &started, None, ReplayIndex::default(), mode)
    }

    /// The driver reads the signals instead of locking the state: each change made under the lock
    /// shows in them once the lock is let go, and each one taken away clears its bit.
    #[test]
    fn the_signals_follow_every_change_to_the_state() {
        let core = core(Mode::Replaying);
        assert_eq!(core.signals(), signal::REPLAYING, "a replaying core starts with nothing to look at");
        core.lock().mode = Mode::Live;
        assert_eq!(core.signals(), 0);

        core.record(RecordKind::Now, || Value::from(1)).expect("no divergence");
        assert_eq!(core.signals(), signal::RECORDS);
        let records = std::mem::take(&mut core.lock().outbox);
        assert_eq!(records.len(), 1);
        assert_eq!(core.signals(), 0, "taking the records clears their bit");

        core.withdraw_ask(Op(0));
        core.lock().polled.push(Op(0));
        core.lock().new_timers.push((Op(0), Timestamp::from_millis(5)));
        assert_eq!(core.signals(), signal::WITHDRAWALS | signal::POLLED | signal::WAITS);
        {
            let mut state = core.lock();
            state.withdrawals.clear();
            state.polled.clear();
            state.new_timers.clear();
        }
        assert_eq!(core.signals(), 0);

        let other = OpSignature { kind: OpKind::Step, name: "other".into(), input_hash: InputHash::default() };
        core.lock().index.signatures.insert(Op(1), other);
        assert!(!core.diverged());
        assert_eq!(core.create_record(RecordKind::Now).map(|(op, _)| op), None, "op 1 is recorded as a step");
        assert!(core.diverged(), "a divergence shows without the lock");
    }
}
