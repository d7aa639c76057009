//! Stores: the only durable I/O boundary of the runtime.
//!
//! A [`Store`] keeps, per run, the journal and a few indexes derived from it:
//!
//! - the **runs** index (status, workflow id, owner and epoch);
//! - **timers**: one row per [`Entry::TimerScheduled`] not yet followed by its
//!   [`Entry::TimerFired`], and one per [`Entry::StepRetrying`] whose step has not completed;
//! - **hooks**: the token hash of every [`Entry::HookCreated`] of an unfinished run (so a token is
//!   released, and may be reused, when its run ends);
//! - the **inbox**: deliveries from outside (hook payloads, cancellations) accepted durably before
//!   the run's owner moves them into the journal.
//!
//! The indexes change only inside [`Store::append`], in the same transaction as the entries that
//! imply them, so they always agree with the journal.
//!
//! # Ownership and fencing
//!
//! A run is advanced by one worker at a time. [`Store::claim`] gives the caller a [`Fence`] whose
//! epoch is higher than any before it; [`Store::append`] refuses a fence that is no longer
//! current (a stale writer), and refuses an append that does not start at the journal's next
//! sequence number, in both cases writing nothing. Single-process stores (memory, SQLite) hold
//! leases that never expire; a shared store (Postgres) expires them so a dead worker's runs move on.

mod commit;
pub mod kit;
mod memory;

#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod conformance;
#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod shared_conformance;

pub use commit::Commit;
pub use kit::IndexChanges;
pub use memory::MemoryStore;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::error::StoreError;
use crate::journal::{BuildStamp, Entry, Op, Position, RunId, RunStatus};
use crate::secret::TokenHash;
use crate::time::Timestamp;

/// A run to create.
#[derive(Clone, Debug)]
pub struct NewRun {
    /// Its id. Creating a run whose id exists returns the existing run instead.
    pub id: RunId,
    /// The workflow id of its body.
    pub workflow_id: String,
    /// The model-facing tool name.
    pub tool: String,
    /// The validated tool input.
    pub input: Value,
    /// When it was created.
    pub created_at: Timestamp,
    /// The identity that started it, if known.
    pub principal: Option<String>,
    /// Whether someone can answer its asks.
    pub interactive: bool,
    /// The run it reports to, if it was started by another run (a session's task).
    pub parent: Option<crate::journal::ParentLink>,
    /// The trace its spans join, when traces are exported (see [`crate::trace`]).
    pub traceparent: Option<crate::journal::TraceParent>,
    /// The build that starts it (see [`BuildStamp`]), when known.
    pub build: Option<crate::journal::BuildStamp>,
    /// The run and op it was forked from, for a run made by `Runtime::fork`.
    pub forked_from: Option<crate::journal::ForkedFrom>,
}

impl NewRun {
    /// The journal's first entry for this run.
    pub fn started_entry(&self) -> Entry {
        Entry::RunStarted {
            workflow_id: self.workflow_id.as_str().into(),
            tool: self.tool.as_str().into(),
            input: self.input.clone().into(),
            at: self.created_at,
            principal: self.principal.as_deref().map(Box::from),
            interactive: self.interactive,
            continued: 0,
            parent: self.parent.clone().map(Box::new),
            traceparent: self.traceparent.clone().map(Box::new),
            build: self.build.clone().map(Box::new),
            forked_from: self.forked_from.clone().map(Box::new),
        }
    }
}

/// The result of [`Store::create_run`].
#[derive(Clone, Debug, PartialEq)]
pub enum Created {
    /// The run was created with [`Entry::RunStarted`] at sequence 0, claimed by the caller.
    New(Fence),
    /// A run with that id already existed; nothing was changed.
    Existing,
}

/// Proof of the right to append to one run: the epoch of the claim that produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fence {
    /// The claim's epoch; each claim of a run gets a higher one.
    pub epoch: u64,
}

/// The identity of a worker process, as leases record it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkerId(pub String);

impl WorkerId {
    /// A fresh random worker id.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 8];
        crate::secret::fill_random(&mut bytes);
        WorkerId(format!("worker_{}", u64::from_be_bytes(bytes)))
    }
}

/// What [`Store::claim`] returns: a fence and everything needed to advance the run.
#[derive(Clone, Debug)]
pub struct Claimed {
    /// The new fence.
    pub fence: Fence,
    /// The journal from the requested sequence number on.
    pub entries: Vec<Entry>,
    /// The journal's length (the sequence number of the next append).
    pub next_seq: u64,
    /// Inbox deliveries not yet moved into the journal, oldest first.
    pub inbox: Vec<InboxItem>,
}

/// One atomic append to a run's journal.
#[derive(Clone, Debug, Default)]
pub struct Append {
    /// The sequence number the first entry must get (the journal's current length).
    pub first_seq: u64,
    /// The entries, in order.
    pub entries: Vec<Entry>,
    /// Inbox items these entries consume; they are marked consumed in the same transaction.
    pub consumed: Vec<u64>,
    /// Deliveries to other runs that these entries imply (a child run telling its parent what it
    /// did): accepted into their inboxes in the same transaction, so they are sent exactly when
    /// the entries are journaled. A notice to a finished run, or a repeated delivery id, is
    /// dropped; notices are not held to the receiving inbox's limits.
    pub notices: Vec<Notice>,
    /// Runs these entries start (a session's task, say): created in the same transaction, before
    /// the notices are accepted, so a notice may be for one of them. They are created unclaimed,
    /// for the appender (or, on a shared store, any worker) to claim once the append is durable; a
    /// run whose id exists already is left as it is.
    pub runs: Vec<NewRun>,
}

/// A delivery to another run's inbox that an append implies: see [`Append::notices`].
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// The run it is for.
    pub run: RunId,
    /// Its delivery id, unique for the receiving run (a repeat is dropped).
    pub delivery_id: String,
    /// What it delivers.
    pub delivery: Delivery,
}

/// A delivery from outside, accepted durably and waiting for the run's owner.
#[derive(Clone, Debug, PartialEq)]
pub struct InboxItem {
    /// Its id, unique within the store.
    pub id: u64,
    /// The run it is for.
    pub run: RunId,
    /// What was delivered.
    pub delivery: Delivery,
}

/// What a delivery carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Delivery {
    /// A payload for a hook.
    Hook {
        /// The hook's operation.
        op: Op,
        /// The payload.
        payload: Value,
    },
    /// A request to cancel the run.
    Cancel {
        /// Why.
        reason: String,
        /// Whether the run ends with what its body returns, as a call interrupted by a new
        /// message does, rather than cancelled.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        keep_output: bool,
    },
    /// A person's answer to an ask.
    Answer {
        /// The ask's operation.
        op: Op,
        /// The answer.
        answer: crate::journal::ask::Answer,
    },
    /// The sign-in a step waits for completed (a marker: the provider holds the token).
    AuthCompleted {
        /// The step's operation.
        op: Op,
    },
}

impl Delivery {
    /// The delivery's kind in a word (`hook`, `cancel`, `answer`, `auth`), for a store that keeps
    /// it beside the delivery: a continue-as-new keeps the cancellations without parsing the rest.
    pub fn kind(&self) -> &'static str {
        match self {
            Delivery::Hook { .. } => "hook",
            Delivery::Cancel { .. } => "cancel",
            Delivery::Answer { .. } => "answer",
            Delivery::AuthCompleted { .. } => "auth",
        }
    }

    /// The op of the hook (or sign-in callback) this delivery is for; inbox limits count per hook.
    pub fn hook_op(&self) -> Option<Op> {
        match self {
            Delivery::Hook { op, .. } | Delivery::AuthCompleted { op } => Some(*op),
            Delivery::Cancel { .. } | Delivery::Answer { .. } => None,
        }
    }
}

/// Where a delivery goes.
#[derive(Clone, Debug)]
pub enum Target {
    /// The hook with this token hash, in whichever unfinished run holds it.
    Hook(TokenHash),
    /// This run.
    Run(RunId),
}

/// The result of [`Store::deliver`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Delivered {
    /// The delivery was accepted into the inbox.
    Accepted {
        /// The run it is for.
        run: RunId,
        /// Its inbox id.
        id: u64,
    },
    /// A delivery with the same delivery id was already accepted for this run; nothing changed.
    Duplicate {
        /// The run it is for.
        run: RunId,
    },
    /// No unfinished run holds the hook (or the run has finished); nothing changed.
    NotFound,
}

/// A timer index row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerRow {
    /// The run.
    pub run: RunId,
    /// The operation.
    pub op: Op,
    /// When it is due.
    pub due: Timestamp,
    /// Whether it is a durable sleep or a step's next attempt.
    pub kind: TimerKind,
}

/// What a timer row is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// A durable sleep.
    Sleep,
    /// A step's next attempt after a failure.
    Retry,
}

impl TimerKind {
    /// Its name as stores keep it: `sleep` or `retry`.
    pub fn name(self) -> &'static str {
        match self {
            TimerKind::Sleep => "sleep",
            TimerKind::Retry => "retry",
        }
    }

    /// The kind with this [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<TimerKind> {
        [TimerKind::Sleep, TimerKind::Retry].into_iter().find(|kind| kind.name() == name)
    }
}

/// A summary of one run, as listings show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run id.
    pub id: RunId,
    /// The workflow id of its body.
    pub workflow_id: String,
    /// The tool name.
    pub tool: String,
    /// Its status.
    pub status: RunStatus,
    /// When it was created.
    pub created_at: Timestamp,
    /// How many journal entries it has.
    pub entries: u64,
    /// Whether it waits on durable waits only (see [`Store::park`]); a parked run is loaded again
    /// only when one of them resolves.
    #[serde(default)]
    pub parked: bool,
    /// The build its history runs on (the one its `RunStarted` records, or the last
    /// `RunUpgraded` names: see [`kit::build`]), kept beside the run so a listing shows it
    /// without reading the journal; `None` if the journal records none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStamp>,
}

impl RunSummary {
    /// The run's status as a person asks about it: an active run is `parked` (waiting on durable
    /// waits only) or `running`; a finished one is `completed`, `failed` or `cancelled`. These
    /// are the words of [`RunQuery::state`].
    pub fn state(&self) -> &'static str {
        match self.status {
            RunStatus::Active if self.parked => "parked",
            RunStatus::Active => "running",
            finished => finished.name(),
        }
    }
}

/// Which runs a listing asks for: newest first, filtered, one page at a time.
///
/// ```
/// use eve_runtime::journal::RunStatus;
/// use eve_runtime::store::RunQuery;
///
/// let failed_refunds = RunQuery::newest(50).status(RunStatus::Failed).tool("refund");
/// # let _ = failed_refunds;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Only parked runs (`Some(true)`) or only runs that are not parked (`Some(false)`).
    pub parked: Option<bool>,
    /// Only runs of this tool.
    pub tool: Option<String>,
    /// Only runs created before the one this cursor was taken from: the next page.
    pub before: Option<RunCursor>,
    /// At most this many runs.
    pub limit: usize,
}

impl RunQuery {
    /// The newest `limit` runs of any status and tool.
    pub fn newest(limit: usize) -> Self {
        RunQuery { limit, ..RunQuery::default() }
    }

    /// Only runs with `status`.
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only parked runs (`true`) or only runs that are not parked (`false`).
    pub fn parked(mut self, parked: bool) -> Self {
        self.parked = Some(parked);
        self
    }

    /// Only runs of `tool`.
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// The page after the one that returned `cursor` as its [`RunPage::next`].
    pub fn before(mut self, cursor: RunCursor) -> Self {
        self.before = Some(cursor);
        self
    }

    /// Only runs in the state `word` names: one of [`RUN_STATES`], the four stored statuses and
    /// `parked` and `running`, which split active runs by whether they are parked. `None` for a
    /// word that names no state.
    pub fn state(self, word: &str) -> Option<Self> {
        Some(match word {
            "active" => self.status(RunStatus::Active),
            "parked" => self.status(RunStatus::Active).parked(true),
            "running" => self.status(RunStatus::Active).parked(false),
            "completed" => self.status(RunStatus::Completed),
            "failed" => self.status(RunStatus::Failed),
            "cancelled" => self.status(RunStatus::Cancelled),
            _ => return None,
        })
    }

    /// Whether `summary` passes the filters (the cursor and the limit aside).
    pub fn keeps(&self, summary: &RunSummary) -> bool {
        self.status.is_none_or(|status| summary.status == status)
            && self.parked.is_none_or(|parked| summary.parked == parked)
            && self.tool.as_deref().is_none_or(|tool| summary.tool == tool)
    }
}

/// The words [`RunQuery::state`] understands, in the order a person would list them.
pub const RUN_STATES: [&str; 6] = ["active", "parked", "running", "completed", "failed", "cancelled"];

/// "unknown status `word`; use active, …, failed or cancelled": what to say to a person who gave
/// [`RunQuery::state`] a word it does not understand.
pub fn unknown_state(word: &str) -> String {
    let (last, others) = RUN_STATES.split_last().expect("there are states");
    format!("unknown status `{word}`; use {} or {last}", others.join(", "))
}

/// Where a listing stopped: pass it to [`RunQuery::before`] for the next page. It is the
/// store's own creation position of the last run listed, opaque to callers; it prints and parses
/// as a decimal string so that it can travel in a URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunCursor(u64);

impl RunCursor {
    /// The cursor after the run a store listed at `position`, its own creation position (what
    /// [`RunPage::of`] is given).
    pub fn at(position: u64) -> Self {
        RunCursor(position)
    }

    /// The store's creation position of the last run listed: a page after it lists runs created
    /// before that position.
    pub fn position(self) -> u64 {
        self.0
    }
}

impl fmt::Display for RunCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for RunCursor {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(RunCursor)
    }
}

/// One page of a listing.
#[derive(Clone, Debug, Default)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunSummary>,
    /// Where the next page starts, if there may be more runs past this one.
    pub next: Option<RunCursor>,
}

impl RunPage {
    /// The page of `query.limit` runs out of `listed`, which holds up to one more run (with its
    /// creation position) than the limit, so that whether there is a next page is known.
    pub fn of(query: &RunQuery, mut listed: Vec<(RunSummary, u64)>) -> RunPage {
        let more = listed.len() > query.limit;
        listed.truncate(query.limit);
        let next = listed.last().filter(|_| more).map(|(_, position)| RunCursor(*position));
        RunPage { runs: listed.into_iter().map(|(summary, _)| summary).collect(), next }
    }
}

/// A run with its whole journal.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// The summary.
    pub summary: RunSummary,
    /// The journal, entry 0 first.
    pub entries: Vec<Entry>,
}

/// How many histories before the current one a store keeps for followers (see [`Store::read`]):
/// a follower that falls behind by less than this many continue-as-news misses nothing.
pub const KEPT_HISTORIES: u32 = 8;

/// A stretch of a run's journal, as [`Store::read`] returns it.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct JournalPage {
    /// How many histories of the run came before its current one (the `continued` of its
    /// [`Entry::RunStarted`]). A reader that sees it grow knows the journal was replaced
    /// (continue-as-new) and its sequence numbers start again at 0.
    pub continued: u32,
    /// The entries of the history asked for, from the sequence number asked for on, in order, at
    /// most as many as asked for.
    pub entries: Vec<Entry>,
}

impl JournalPage {
    /// A page of a run whose current history `continued` histories came before.
    pub fn new(continued: u32, entries: Vec<Entry>) -> Self {
        JournalPage { continued, entries }
    }
}

/// What a runtime needs at start-up to carry on where the last process stopped, without replaying
/// the runs that only wait: see [`Store::recovery`].
#[derive(Clone, Debug, Default)]
pub struct Recovery {
    /// How many runs are unfinished.
    pub unfinished: usize,
    /// The unfinished runs that have something to do: they were not parked when the last process
    /// stopped (an activation was under way), or deliveries wait in their inbox.
    pub runnable: Vec<RunId>,
    /// Every pending timer; a parked run is loaded when one of its timers falls due.
    pub timers: Vec<TimerRow>,
    /// Every sign-in a step of a parked run waits for, so its link can be published again.
    pub sign_ins: Vec<WaitingSignIn>,
}

/// A sign-in a step waits for, from the hook index: enough to publish its link again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingSignIn {
    /// The run.
    pub run: RunId,
    /// The run's tool.
    pub tool: String,
    /// The step's op.
    pub op: Op,
    /// The provider id.
    pub provider: String,
    /// The nonce the callback's `state` is derived from.
    pub nonce: String,
}

/// How many deliveries may wait in one run's inbox, and for one hook, before more are refused
/// with [`StoreError::InboxFull`]. A run that keeps up takes its deliveries in as they come, so
/// its inbox stays near empty; these bound one that does not (or cannot: it is failing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboxLimits {
    /// Deliveries waiting for one run.
    pub per_run: usize,
    /// Deliveries waiting for one hook or webhook.
    pub per_hook: usize,
}

impl InboxLimits {
    /// 10,000 deliveries per run, 1,000 per hook.
    pub const DEFAULT: InboxLimits = InboxLimits { per_run: 10_000, per_hook: 1_000 };
}

impl Default for InboxLimits {
    fn default() -> Self {
        InboxLimits::DEFAULT
    }
}

/// The durable home of runs. See the module documentation for the contract; the `testkit` feature
/// exports a conformance suite every implementation must pass.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates `run` with [`Entry::RunStarted`] and claims it for `owner`, or returns
    /// [`Created::Existing`] without changing anything if the id is taken.
    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError>;

    /// Claims `run` for `owner`, superseding any earlier claim (whose appends are refused from now
    /// on), and returns the journal from `from_seq` on. Fails with [`StoreError::Leased`] if
    /// another worker's lease has not expired at `now`.
    async fn claim(
        &self,
        run: &RunId,
        owner: &WorkerId,
        lease: Duration,
        now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError>;

    /// Gives up a claim so another worker may take the run at once. A stale fence is ignored.
    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError>;

    /// Appends `append.entries` atomically at sequence number `append.first_seq`, and makes in
    /// the same transaction every change they imply: the indexes, the inbox items consumed, the
    /// runs started and the notices to other runs. Refuses, writing nothing, a stale fence
    /// ([`StoreError::Fenced`]), an append not starting at the journal's length
    /// ([`StoreError::SeqConflict`]), an append to a finished run ([`StoreError::RunFinished`]) and
    /// a hook whose token another unfinished run holds ([`StoreError::HookTokenInUse`]).
    ///
    /// The store may take the batch's entries to keep them (a store that holds entries as values
    /// moves them in instead of copying them):
    ///
    /// - on `Ok`, `append.entries` may be empty, its buffer kept for the caller's next batch or
    ///   not; the rest of the batch is as it was. A caller that needs anything of the entries after
    ///   the append reads it before.
    /// - on an error, the batch is exactly as it was, to be retried.
    ///
    /// A store that can answer without waiting (the in-memory store, which does no I/O) returns
    /// [`Commit::Done`], so a chain of steps, one append a step, allocates no future for its
    /// commits; one that writes to a disk or a server returns [`Commit::Pending`]. The runtime
    /// fits every batch to [`max_entry_bytes`](Store::max_entry_bytes) before appending it.
    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a>;

    /// Marks the run parked at `next_seq`: it waits on durable waits only, so a new process need
    /// not load it until one of them resolves (a timer falls due, a delivery arrives). Does
    /// nothing if `fence` is stale or the journal has grown past `next_seq`; the next append clears
    /// the mark. A shared store also gives up the claim, so any worker may take the run.
    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError>;

    /// Says that this process holds the parked run in memory no longer (its warm cache let it
    /// go), so the run's next claim will read its whole journal. A hint, which a store may use to
    /// read that journal while the delivery that wakes the run commits. The runtime says it
    /// before the run can be woken again, so the next claim of the run comes after it; it says it
    /// with its own locks held, so an implementation must return at once, without blocking or
    /// calling back into the runtime. The default does nothing.
    fn left_memory(&self, run: &RunId) {
        let _ = run;
    }

    /// What a runtime needs at start-up: see [`Recovery`].
    async fn recovery(&self) -> Result<Recovery, StoreError>;

    /// Replaces the run's history with a new one that starts with `started` (continue-as-new),
    /// keeping the run id: sets its journal aside for followers (see [`read`](Store::read)),
    /// dropping histories older than [`KEPT_HISTORIES`] before the new one, releases its timers
    /// and hooks, drops its inbox but for a pending cancellation, and writes `started` at
    /// sequence 0, all at once. Refuses a stale fence ([`StoreError::Fenced`]) or a finished run,
    /// writing nothing.
    ///
    /// With `keep_inbox`, the inbox stays whole instead: the deliveries still waiting reach the
    /// new history, and the delivery ids seen so far stay duplicates. That is for a body whose new
    /// history creates the same hooks first (a session's: its hook is op 0 in every history), so
    /// nothing sent while it continued is lost or taken twice.
    ///
    /// The store may take the entry as [`append`](Store::append) may take a batch's entries: on
    /// `Ok` it may have taken it (`started` is then `None`); on an error it is as it was, to be
    /// retried. Like `append`, a store that can answer without waiting returns [`Commit::Done`].
    ///
    /// # Panics
    ///
    /// A store may panic if `started` is `None`: the caller gives the entry it continues with.
    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a>;

    /// Accepts a delivery into the inbox of the run `target` names. A `delivery_id` seen before
    /// for the same run is reported as [`Delivered::Duplicate`] and changes nothing. A delivery
    /// that would put more than the store's [`InboxLimits`] in waiting is refused with
    /// [`StoreError::InboxFull`]. A [`Target::Hook`] is resolved with
    /// [`DeliveryPayload::for_hook`] in the same transaction: a token nobody holds, or one of
    /// another kind of hook than the payload is for, is [`Delivered::NotFound`]. The runtime does
    /// not look the hook up first, so this is the only check that a webhook receives HTTP requests
    /// only.
    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        delivery: DeliveryPayload,
    ) -> Result<Delivered, StoreError>;

    /// The inbox items of `run` not yet consumed, oldest first.
    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError>;

    /// The hook holding this token hash, if its run is unfinished.
    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError>;

    /// Every pending timer.
    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError>;

    /// A run and its whole journal.
    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError>;

    /// At most `limit` entries of history `at.history` of the run's journal, from sequence number
    /// `at.seq` on, read in one snapshot, with the number of the current history
    /// ([`JournalPage::continued`]); `None` if the run does not exist. This is how a run is
    /// followed (`Runtime::follow`): by pages, never the whole journal at once.
    ///
    /// A store keeps the current history and the [`KEPT_HISTORIES`] before it:
    /// [`continue_as_new`](Store::continue_as_new) sets the history it ends aside and drops any
    /// older than that, so a follower still reading a history that ended reads it to its end. An
    /// older history, or a sequence number past a history's end, reads no entries.
    async fn read(&self, run: &RunId, at: Position, limit: usize) -> Result<Option<JournalPage>, StoreError>;

    /// Subscribes to notices of the commits other processes make to `run`'s journal, for a
    /// follower in this process (see [`Store::read`]). A shared store sends [`WakeUp::Run`] with
    /// the run's id when an append or a continue-as-new of it commits, and [`WakeUp::Missed`] when
    /// notices may have been lost; the receiver may also hear of other watched runs. Commits this
    /// process makes need no notice: its runtime tells its own followers.
    ///
    /// The store sends notices for `run` for [`Watch::renew_within`] at least; call `watch` again
    /// within that time to keep them coming. Returns `None` for a store no other process writes
    /// (the default), or when called outside a Tokio runtime.
    async fn watch(&self, run: &RunId) -> Result<Option<Watch>, StoreError> {
        let _ = run;
        Ok(None)
    }

    /// One page of the runs `query` asks for, newest first. The listing is indexed: its cost
    /// depends on the page, not on how many runs the store holds.
    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError>;

    /// A run's summary and its last journal entry (the terminal entry of a finished run), without
    /// reading the rest of the journal. The default loads the whole journal; stores override it.
    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        let record = self.load(run).await?;
        Ok(record.and_then(|record| Some((record.summary, record.entries.last()?.clone()))))
    }

    /// The largest journal entry the store keeps, in bytes of JSON, if it has a limit; the same
    /// limit holds for each notice to another run (its delivery) and each run an append starts
    /// (its first entry). The runtime reads it once, as it is built, and fits every batch to it
    /// before appending it: a delivery before the body sees it, a record (a step's error, the
    /// tool's output) before its commit. What cannot be made to fit (an `ask` with a huge prompt)
    /// fails the run without reaching the store. So a store that refuses a batch as
    /// [`StoreError::TooLarge`] holds a limit it does not declare here: the runtime reports that as
    /// a bug in the store, and fails the run.
    fn max_entry_bytes(&self) -> Option<usize> {
        None
    }

    /// Extends the lease of the claim `fence` holds to `now + lease` (a worker's heartbeat while it
    /// advances the run). Fails with [`StoreError::Fenced`] if another claim superseded it; a
    /// released claim (or a parked run) stays released. Single-process stores hold leases that
    /// never expire, so the default does nothing.
    async fn renew(&self, run: &RunId, fence: Fence, lease: Duration, now: Timestamp) -> Result<(), StoreError> {
        let _ = (run, fence, lease, now);
        Ok(())
    }

    /// At most `limit` unfinished runs a worker may claim at `now`, oldest first: runs with
    /// something to do (not parked, a delivery waiting, or a timer due by `now`) whose lease is
    /// free or expired at `now`. A shared store answers without waiting on other workers'
    /// transactions. The default, for single-process stores (whose leases are all this process's
    /// own), lists [`Recovery::runnable`] and the runs with a timer due, by run id.
    async fn claimable(&self, now: Timestamp, limit: usize) -> Result<Vec<RunId>, StoreError> {
        let recovery = self.recovery().await?;
        let due = recovery.timers.into_iter().filter(|timer| timer.due <= now).map(|timer| timer.run);
        let mut runs: Vec<RunId> = recovery.runnable.into_iter().chain(due).collect();
        runs.sort();
        runs.dedup();
        runs.truncate(limit);
        Ok(runs)
    }

    /// [`claimable`](Store::claimable), leaving out each run of `passed_over` while the store
    /// still keeps the fingerprint given for it (see [`PassedOver`]): the runs a worker's build
    /// cannot replay, so a batch is never filled with runs it would only give back, and a run
    /// upgraded since ([`Entry::RunUpgraded`]) is listed again. A shared store keeps each run's
    /// fingerprint to do so; the default (for single-process stores, whose runtimes pass nothing
    /// over) leaves out the runs by id alone.
    async fn claimable_except(
        &self,
        now: Timestamp,
        limit: usize,
        passed_over: &[PassedOver],
    ) -> Result<Vec<RunId>, StoreError> {
        let passed: std::collections::HashSet<&RunId> = passed_over.iter().map(|passed| &passed.run).collect();
        let mut runs = self.claimable(now, limit.saturating_add(passed.len())).await?;
        runs.retain(|run| !passed.contains(run));
        runs.truncate(limit);
        Ok(runs)
    }

    /// Whether the store can serve now, for a readiness probe (`/readyz`): a round trip to where
    /// the runs are kept, and whatever else the store needs to do its part (a shared store's
    /// listening connection). The default lists one run. An error says what is not ready.
    async fn ready(&self) -> Result<(), StoreError> {
        self.list_runs(&RunQuery::newest(1)).await.map(drop)
    }

    /// Whether several processes share this store, so claims must be released when a run parks.
    fn is_shared(&self) -> bool {
        false
    }

    /// Subscribes to the wake-ups other processes send through this store: a shared store sends
    /// one when a delivery is accepted (a hook payload, an answer, a cancellation, a sign-in, a
    /// child run's notice to its parent), when a claim is released, and when a run parks with a
    /// delivery already waiting. A worker that hears one tries to claim the run. Wake-ups are a
    /// shortcut, never the only way work is found: [`Store::claimable`] finds the same runs.
    ///
    /// Returns `None` for a store no other process shares (the default), or when called outside a
    /// Tokio runtime. A subscriber that falls behind, or a store that lost its listening
    /// connection, receives [`WakeUp::Missed`]: look at [`Store::claimable`] now.
    fn wake_ups(&self) -> Option<tokio::sync::broadcast::Receiver<WakeUp>> {
        None
    }

    /// Whether the store survives the process (false only for the in-memory store).
    fn is_durable(&self) -> bool {
        true
    }
}

/// A run a worker passed over: its journal does not replay on the worker's build (see
/// [`Store::claimable_except`]). It is passed over while its history runs on the build with
/// `fingerprint` (`None`: a journal that records no build); once that changes (an upgrade, a
/// continue-as-new by another build), the worker looks at it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassedOver {
    /// The run.
    pub run: RunId,
    /// The fingerprint of the build its history ran on when the worker passed it over.
    pub fingerprint: Option<String>,
}

/// A subscription to a shared store's notices of a run's commits: see [`Store::watch`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Watch {
    /// The notices.
    pub commits: tokio::sync::broadcast::Receiver<WakeUp>,
    /// How long the store keeps sending the run's notices unless `watch` is called again.
    pub renew_within: Duration,
}

impl Watch {
    /// A subscription that lasts `renew_within` unless renewed.
    pub fn new(commits: tokio::sync::broadcast::Receiver<WakeUp>, renew_within: Duration) -> Self {
        Watch { commits, renew_within }
    }
}

/// A wake-up sent through a shared store: see [`Store::wake_ups`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WakeUp {
    /// The run may have something to do: a delivery arrived, its claim was released, or it was
    /// created by a process that leaves it to the workers.
    Run(RunId),
    /// Wake-ups may have been lost (the store's listening connection broke and was opened again,
    /// or this subscriber fell behind): every run with something to do should be looked at.
    Missed,
}

/// What a delivery carries before the store resolves its target.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DeliveryPayload {
    /// For a [`Target::Hook`] of a plain hook ([`HookMeta::Hook`]): a payload for the hook; the
    /// store fills in its run and op.
    Hook(Value),
    /// For a [`Target::Hook`] of a webhook ([`HookMeta::Webhook`]): the HTTP request, redacted, as
    /// the body will see it; the store fills in its run and op.
    Webhook(Value),
    /// For a [`Target::Hook`] of a sign-in ([`HookMeta::Auth`]): the callback completed; the
    /// store fills in run and op.
    AuthCompleted,
    /// For a [`Target::Run`]: a delivery whose op (if any) the caller already knows.
    Run(Delivery),
}

impl DeliveryPayload {
    /// The delivery for `hook`, or `Ok(None)` when the hook is of another kind than this payload
    /// is for (a JSON payload sent to a webhook's token, an HTTP request to a plain hook's, either
    /// to a sign-in's callback): a store answers that as it answers a token nobody holds, with
    /// [`Delivered::NotFound`], so whoever holds a token can deliver to its hook only what the
    /// hook takes. Fails when this payload needs a [`Target::Run`].
    pub fn for_hook(self, hook: &HookRow) -> Result<Option<Delivery>, StoreError> {
        let op = hook.op;
        Ok(match (self, &hook.meta) {
            (DeliveryPayload::Hook(payload), HookMeta::Hook)
            | (DeliveryPayload::Webhook(payload), HookMeta::Webhook { .. }) => Some(Delivery::Hook { op, payload }),
            (DeliveryPayload::AuthCompleted, HookMeta::Auth { .. }) => Some(Delivery::AuthCompleted { op }),
            (DeliveryPayload::Run(_), _) => return Err(StoreError::MismatchedTarget),
            _ => None,
        })
    }
}

/// What a hook index row is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HookMeta {
    /// A hook resumed with `Runtime::resume_hook`.
    Hook,
    /// A webhook, answered over HTTP as `respond` says.
    Webhook {
        /// How its HTTP requests are answered.
        respond: crate::journal::webhook::Respond,
        /// What is redacted from its requests besides the defaults (absent in rows written
        /// before webhooks had redaction options).
        #[serde(default, skip_serializing_if = "crate::journal::webhook::Redaction::is_default")]
        redaction: crate::journal::webhook::Redaction,
    },
    /// The callback of a sign-in a step waits for.
    Auth {
        /// The provider id.
        provider: String,
        /// The nonce the callback's `state` is derived from (absent in rows written before it was
        /// kept here).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        nonce: String,
    },
}

/// A hook index row: which run and op hold a token, and what kind of hook it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookRow {
    /// The run.
    pub run: RunId,
    /// The op.
    pub op: Op,
    /// What it is for.
    pub meta: HookMeta,
}
