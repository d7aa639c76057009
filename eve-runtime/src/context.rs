//! The contexts tool bodies receive, one per cell of lifetime × suspendability.
//!
//! Capabilities are gated by type: `now`, `random` and `uuid` (recorded, so they replay) exist
//! only on workflow contexts; a plain tool's [`ToolCtx`] has none of them, and nothing here can
//! hand out a token (that belongs to steps).

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::ask::{self, Ask, AskOutcome, Pending};
use crate::journal::{Entry, OpKind, OpSignature, RecordKind, RunId};
use crate::run_core::{CoreRef, RunCore, Slot};
use crate::time::Timestamp;
use crate::wait::AbortSignal;

/// The context of a `#[workflow_tool]` body.
///
/// Everything here is deterministic on replay: [`now`](WorkflowCtx::now),
/// [`random`](WorkflowCtx::random) and [`uuid`](WorkflowCtx::uuid) are recorded in the journal the
/// first time and read back from it afterwards.
#[derive(Clone)]
pub struct WorkflowCtx {
    core: CoreRef,
    tool: &'static str,
}

impl WorkflowCtx {
    pub(crate) fn new(core: Arc<RunCore>, tool: &'static str) -> Self {
        WorkflowCtx { core: core.into(), tool }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.core.run
    }

    /// The model-facing name of the tool being run.
    pub fn tool_name(&self) -> &'static str {
        self.tool
    }

    /// The current time, recorded so that replay sees the same value.
    #[track_caller]
    pub fn now(&self) -> Timestamp {
        let live = || serde_json::to_value(self.core.services.clock.now()).expect("timestamps serialize");
        let value = self.core.record(RecordKind::Now, live);
        value.and_then(|value| serde_json::from_value(value).ok()).unwrap_or_else(|| self.core.services.clock.now())
    }

    /// 64 random bits from the operating system, recorded so that replay sees the same value.
    #[track_caller]
    pub fn random(&self) -> u64 {
        let live = || Value::from(random_u64());
        let value = self.core.record(RecordKind::Random, live);
        value.and_then(|value| value.as_u64()).unwrap_or_else(random_u64)
    }

    /// A random (version 4) UUID in its hyphenated form, recorded so that replay sees the same value.
    #[track_caller]
    pub fn uuid(&self) -> String {
        let live = || Value::from(uuid_v4());
        let value = self.core.record(RecordKind::Uuid, live);
        value.and_then(|value| value.as_str().map(str::to_owned)).unwrap_or_else(uuid_v4)
    }

    /// The run's durable abort signal.
    pub fn abort_signal(&self) -> AbortSignal {
        AbortSignal::new(Some(self.core.clone()))
    }

    /// Asks a person a question and returns the pending answer; see [`crate::ask`].
    ///
    /// The question is journaled and published as `input.requested` once the body yields. Await
    /// the result (or `&mut` it inside a `select!` to keep it open across several waits).
    #[track_caller]
    pub fn ask(&self, request: Ask) -> Pending {
        self.ask_as(request)
    }

    /// Asks a person to fill in a form of `T`'s fields ([`Ask::form`]) and returns the pending
    /// answer, which resolves to a [`FormOutcome`](crate::ask::FormOutcome) holding a `T`. The
    /// answer is checked against `T`'s JSON Schema before the runtime takes it, and an answer
    /// that does not fit is refused, naming the field, so the body only ever sees a `T`.
    ///
    /// # Errors
    ///
    /// `T` has a field a form cannot show (see [`Ask::form`]); nothing is asked then.
    #[track_caller]
    pub fn ask_form<T: schemars::JsonSchema + serde::de::DeserializeOwned>(
        &self,
        prompt: impl Into<String>,
    ) -> Result<Pending<crate::ask::FormOutcome<T>>, crate::ask::FormError> {
        Ok(self.ask_as(Ask::form::<T>(prompt)?))
    }

    /// Asks the calling client's model for a completion ([`Sampling`](crate::ask::Sampling)),
    /// and returns the pending answer, which resolves to a
    /// [`SampleOutcome`](crate::ask::SampleOutcome). It is a durable wait like `ask`: journaled
    /// once, answered once, kept across restarts, withdrawn when the run is cancelled. Over MCP
    /// the client's model answers (`sampling/createMessage`); a client that declared no sampling
    /// capability gets an error at its call instead. Elsewhere it is listed with the run's
    /// questions (display `sampling`) and answered with a [`Completion`](crate::ask::Completion)
    /// as the value.
    #[track_caller]
    pub fn sample(&self, request: crate::ask::Sampling) -> Pending<crate::ask::SampleOutcome> {
        self.ask_as(Ask::sampling(request))
    }

    #[track_caller]
    fn ask_as<O>(&self, request: Ask) -> Pending<O> {
        let core = &self.core;
        let signature = OpSignature { kind: OpKind::Ask, name: "ask".into(), input_hash: ask::hash(&request) };
        let unresolved = Slot::Ask { outcome: (!core.interactive).then_some(AskOutcome::Unavailable) };
        let Some(op) = core.create(signature, unresolved) else { return Pending::diverged() };
        let mut state = core.lock();
        if !state.index.asks_created.contains_key(&op) {
            state.outbox.push(Entry::AskCreated { op, request_id: ask::request_id(op), request: request.clone() });
            if core.interactive {
                state.new_asks.push((op, request));
            } else {
                // Nobody can answer: the question resolves at once, and the journal says so.
                state.outbox.push(Entry::AskResolved { op, outcome: AskOutcome::Unavailable });
            }
        }
        drop(state);
        if core.interactive { Pending::durable(core.clone(), op) } else { Pending::resolved(AskOutcome::Unavailable) }
    }

    /// Whether this run takes the new code of the patch `id`: `false` for a run whose journal was
    /// written before the patch reached this point of the body, `true` for every other run.
    ///
    /// Change a workflow while runs of it are in flight by keeping both versions behind it:
    ///
    /// ```ignore
    /// if ctx.patched("notify-by-email") {
    ///     send_email(&order).await?;
    /// } else {
    ///     send_sms(&order).await?;
    /// }
    /// ```
    ///
    /// A run that takes the patch journals a marker here, so the answer never changes for it, on
    /// any replay. Once no run that took the old branch is in flight, replace the `if` with
    /// [`deprecate_patch`](WorkflowCtx::deprecate_patch) and the new branch alone; once no run
    /// that took the patch is in flight either, remove that call too. The id is a string literal
    /// used once in the body (the macros check both).
    #[track_caller]
    pub fn patched(&self, id: &'static str) -> bool {
        self.core.patched(id, false)
    }

    /// Marks where the patch `id` was, in a build that keeps only its new branch: a run that took
    /// the patch replays past its marker, a new run records one, and a run that took the old
    /// branch fails with a divergence that says to finish it on a build that still calls
    /// [`patched`](WorkflowCtx::patched). `host replay` finds such runs before a deploy.
    #[track_caller]
    pub fn deprecate_patch(&self, id: &'static str) {
        self.core.patched(id, true);
    }

    /// Ends this history of the run and starts the body again with `input`, under the same run
    /// id, with a fresh journal: return it from the body, `return ctx.continue_as_new(next)`.
    ///
    /// A workflow that runs for ever (a poller, a subscription, a long conversation) does this
    /// every so often to keep its journal short, so replay stays fast and the run stays under the
    /// runtime's history limit. What the next stretch needs must travel in `input`: timers, hooks
    /// and questions of the old history end with it (deliveries to its hooks are refused), while
    /// a pending cancellation carries over. The tool's input type must accept `input`.
    pub fn continue_as_new<T>(&self, input: impl serde::Serialize) -> Result<T, crate::error::ToolError> {
        match serde_json::to_value(input) {
            Ok(input) => Err(crate::error::ToolError::continue_as_new(input)),
            Err(error) => {
                Err(crate::error::ToolError::new(format!("the input to continue with cannot be serialized: {error}")))
            }
        }
    }

    /// Reads the runtime's value of type `T` (given with `RuntimeBuilder::state`) the first time
    /// the body gets here, records what `read` makes of it under `name`, and returns the recorded
    /// value ever after, on replay too: a body may not read the state directly, since it may change
    /// between a run's start and its replay (a session's `ctx.agents()` reads the agents so).
    /// Replay checks the name, so recording something else at this point of the body is a
    /// divergence (and this returns `null` while the run fails with it).
    #[track_caller]
    pub fn record_state<T: Send + Sync + 'static>(
        &self,
        name: &'static str,
        read: impl FnOnce(Option<&T>) -> Value,
    ) -> Value {
        let fresh = || read(self.core.services.state.get::<T>().ok().as_deref());
        self.core.record_value(name, fresh).unwrap_or_default()
    }

    /// Takes the input the run's last history handed this one already built, if it is a `T`: see
    /// [`ToolError::continue_keeping_inbox`](crate::ToolError::continue_keeping_inbox). `None`
    /// when the body starts from its journaled input (a new run, a replay after a restart); the
    /// body then decodes that input instead.
    pub fn take_warm<T: std::any::Any>(&self) -> Option<T> {
        let warm = self.core.lock().warm.take()?;
        let warm: Box<dyn std::any::Any> = warm;
        warm.downcast().ok().map(|warm| *warm)
    }

    /// Publishes `value` to the run's parent (a session sees it as the child's report) and to
    /// whoever follows the run: recorded, so it is published once and not again on replay.
    #[track_caller]
    pub fn publish(&self, value: impl Into<crate::journal::Payload>) {
        self.core.record_only(RecordKind::Published, || value.into());
    }

    /// Sends a log message: to `tracing`, and to whoever listens to this run (an MCP client
    /// that asked for logs at `level` or below gets it as `notifications/message`). Never
    /// journaled, and not sent again when a replay makes the same call: see [`crate::logs`].
    ///
    /// ```
    /// use eve_runtime::{LogLevel, WorkflowCtx};
    /// fn note_plan(ctx: &WorkflowCtx, files: usize) {
    ///     ctx.log(LogLevel::Info, format!("copying {files} files"));
    /// }
    /// ```
    pub fn log(&self, level: crate::logs::LogLevel, message: impl Into<String>) {
        self.core.log(self.tool, level, message.into());
    }

    /// Starts `child`: the child run is created by the commit that journals this start, so a
    /// crash never leaves a child without its parent's record of it, and replay does not start it
    /// again. Returns the id the journal records here, or `None` once the body has diverged from
    /// its journal.
    ///
    /// The caller checks the input first
    /// ([`registry::check_start_input`](crate::registry::check_start_input)): a child whose input
    /// its tool refuses would fail at once.
    #[track_caller]
    pub fn start_child(&self, child: ChildRun) -> Option<RunId> {
        let core = &self.core;
        core.start_run(|| {
            let ChildRun { run, workflow_id, tool, build, input, parent, notices } = child;
            let options = crate::control::StartOptions::new().parent(parent);
            // The child joins its parent's trace: its activations are children of the parent
            // activation's span, current while the body runs.
            let trace = (core.services.clock.now(), crate::trace::traceparent(&tracing::Span::current()));
            (options.new_run(run, (workflow_id, tool, build), input, trace), notices)
        })
    }

    /// Says whether the body now waits idle: on a person, for what may be days (a session
    /// between turns). A hint to the warm cache, which keeps only the most recently active of
    /// such runs (`RuntimeBuilder::warm_idle_runs`); never journaled.
    pub fn set_idle(&self, idle: bool) {
        self.core.set_idle(idle);
    }

    /// The link a person opens to sign in for the step of `run` that waits at `op` for
    /// `provider` (as its [`Entry::AuthRequired`] with `nonce` says): how a parent shows its
    /// child's sign-in.
    pub fn sign_in_link(&self, run: &RunId, op: crate::journal::Op, provider: &str, nonce: &str) -> String {
        let services = &self.core.services;
        let state = services.auth_state(run, op, nonce);
        crate::auth::sign_in_link(&services.public_url, provider, state.expose())
    }

    /// Whether the run has been cancelled; cleanup code checks this after a wait returns `Cancelled`.
    pub fn is_cancelled(&self) -> bool {
        self.core.is_cancelled()
    }
}

impl fmt::Debug for WorkflowCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkflowCtx").field("run", &self.core.run).field("tool", &self.tool).finish()
    }
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    crate::secret::fill_random(&mut bytes);
    u64::from_le_bytes(bytes)
}

fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    crate::secret::fill_random(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = crate::secret::hex(&bytes);
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// A child run a body starts with [`WorkflowCtx::start_child`] (a session's task, say).
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// Its id: a parent names its children itself, so that a replay names them again.
    pub run: RunId,
    /// The workflow id of its body.
    pub workflow_id: &'static str,
    /// The tool name its summary shows.
    pub tool: &'static str,
    /// The build of its body (`ToolDescriptor::build`), which it records as it starts.
    pub build: crate::journal::BuildStamp,
    /// Its input, already checked against the tool.
    pub input: Value,
    /// The run and hook it reports to.
    pub parent: crate::journal::ParentLink,
    /// Deliveries made to it by the commit that creates it (a resumable task's first call).
    pub notices: Vec<crate::store::Notice>,
}

/// The context of a `#[task]` body: a [`WorkflowCtx`] plus the task's identity.
#[derive(Clone, Debug)]
pub struct TaskCtx {
    workflow: WorkflowCtx,
    task_id: String,
}

impl TaskCtx {
    pub(crate) fn new(workflow: WorkflowCtx, task_id: String) -> Self {
        TaskCtx { workflow, task_id }
    }

    /// The task id the model sees, such as `deploy-4hd8sa`.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Tells the session that started this task something it should act on, once: the model
    /// reads `message` attributed to the task (a `<task_message>` block), at the next step
    /// boundary, when a `task_wait` or a held turn wakes, or in the next turn, as task results
    /// are delivered (a message never starts a turn on its own). Journaled, so replay does not
    /// send it again. Progress that needs no action is not a message. A task run started
    /// outside a session has no one to tell: the message is only journaled.
    ///
    /// ```
    /// use eve_runtime::context::TaskCtx;
    /// fn halfway(ctx: &TaskCtx) {
    ///     ctx.post_message("The build passed; the deploy is next and needs about 10 minutes.");
    /// }
    /// ```
    pub fn post_message(&self, message: impl Into<String>) {
        self.publish(serde_json::json!({ "message": message.into() }));
    }
}

impl Deref for TaskCtx {
    type Target = WorkflowCtx;

    fn deref(&self) -> &WorkflowCtx {
        &self.workflow
    }
}

/// The context of a `#[task(serve)]` body: a [`TaskCtx`] that also replies to calls.
#[derive(Clone)]
pub struct ServeCtx {
    task: TaskCtx,
    calls: Arc<Mutex<Calls>>,
}

impl ServeCtx {
    /// Settles every call received so far with `output` (each call's result is `output`) and
    /// withdraws the questions still open for them. Calls received later wait for the next reply.
    pub fn reply(&self, output: impl serde::Serialize) -> Result<(), crate::error::ToolError> {
        let output = serde_json::to_value(output)
            .map_err(|error| crate::error::ToolError::new(format!("the reply cannot be serialized: {error}")))?;
        let settled: Vec<String> = lock(&self.calls).unsettled.drain(..).map(|(call, _)| call).collect();
        self.core.withdraw_open_asks();
        self.publish(serde_json::json!({ "reply": { "calls": settled, "output": output } }));
        Ok(())
    }
}

impl Deref for ServeCtx {
    type Target = TaskCtx;

    fn deref(&self) -> &TaskCtx {
        &self.task
    }
}

impl fmt::Debug for ServeCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeCtx").field("task", &self.task).finish_non_exhaustive()
    }
}

/// What a resumable task's calls hook receives: a call, or the end of a stretch of work.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServeInbound {
    /// A call of the tool, in stretch `stretch`.
    Call {
        /// The call's id.
        #[serde(rename = "callId")]
        call_id: String,
        /// Its input.
        input: Value,
        /// The stretch of work it belongs to.
        stretch: u64,
    },
    /// Stop the work of stretch `stretch` (its calls were cancelled).
    Stop {
        /// The stretch.
        stretch: u64,
    },
}

/// The op of a resumable task's calls hook: the first op of its run, where a session delivers
/// its [`ServeInbound`] calls.
pub const CALLS_HOOK: crate::journal::Op = crate::journal::Op(0);

/// The calls a resumable task has received and not yet taken, and where its stretches stand.
struct Calls {
    core: CoreRef,
    hook: crate::wait::Hook<Value>,
    buffered: std::collections::VecDeque<(String, Value, u64)>,
    /// The highest stretch whose work was stopped.
    stopped: u64,
    /// Calls taken and not yet replied to, with their stretches.
    unsettled: Vec<(String, u64)>,
    /// The stretch the body was last seen idle in, so idleness is published once per stretch.
    idle_in: Option<u64>,
    /// The stretch of the last call taken.
    stretch: u64,
    /// Whether the run was cancelled (the hook yields no more calls).
    closed: bool,
}

impl Calls {
    /// Takes what the hook holds: calls are buffered, stops applied.
    fn drain(&mut self, cx: &mut std::task::Context<'_>) {
        while let std::task::Poll::Ready(next) = self.hook.poll_payload(cx) {
            match next.map(serde_json::from_value::<ServeInbound>) {
                Ok(Ok(ServeInbound::Call { call_id, input, stretch })) => {
                    self.buffered.push_back((call_id, input, stretch))
                }
                Ok(Ok(ServeInbound::Stop { stretch })) => {
                    // The stopped calls were settled `cancelled` by the session already.
                    self.stopped = self.stopped.max(stretch);
                    let stopped = self.stopped;
                    self.unsettled.retain(|(_, stretch)| *stretch > stopped);
                }
                Ok(Err(error)) => tracing::warn!("a resumable task received a call it cannot read: {error}"),
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }
}

fn lock(calls: &Mutex<Calls>) -> std::sync::MutexGuard<'_, Calls> {
    calls.lock().expect("the calls mutex is never poisoned: no code panics while holding it")
}

/// The stream of calls a `#[task(serve)]` body receives, one per call of the tool, each with an
/// input of type `T`. Take them with [`Receive::recv`]; when it returns `None` the run was
/// cancelled and the body should return.
pub struct Receive<T = Value> {
    calls: Arc<Mutex<Calls>>,
    input: std::marker::PhantomData<fn() -> T>,
}

impl<T> Receive<T> {
    /// The same stream, decoding each call's input as `U`. Generated code uses this.
    #[doc(hidden)]
    pub fn typed<U>(self) -> Receive<U> {
        Receive { calls: self.calls, input: std::marker::PhantomData }
    }
}

impl<T: serde::de::DeserializeOwned> Receive<T> {
    /// Waits for the next call. While the body waits here with nothing to take, the task is idle:
    /// its caller may give it new work later, and the state the body built stays.
    pub fn recv(&mut self) -> RecvCall<'_, T> {
        RecvCall { receive: self }
    }
}

impl<T> fmt::Debug for Receive<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receive").finish_non_exhaustive()
    }
}

/// The future [`Receive::recv`] returns.
#[must_use = "a call arrives only if awaited"]
pub struct RecvCall<'a, T> {
    receive: &'a mut Receive<T>,
}

impl<T: serde::de::DeserializeOwned> std::future::Future for RecvCall<'_, T> {
    type Output = Option<Call<T>>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Call<T>>> {
        let shared = self.receive.calls.clone();
        let mut calls = lock(&shared);
        calls.drain(cx);
        while let Some((call_id, input, stretch)) = calls.buffered.pop_front() {
            if stretch <= calls.stopped {
                continue; // Its stretch was stopped before the body took it: it was settled cancelled.
            }
            let input = match serde_json::from_value(input) {
                Ok(input) => input,
                Err(error) => {
                    tracing::warn!("a call of a resumable task does not match its input type: {error}");
                    continue;
                }
            };
            calls.stretch = stretch;
            calls.unsettled.push((call_id.clone(), stretch));
            let signal = StretchSignal { calls: shared.clone(), stretch };
            return std::task::Poll::Ready(Some(Call { input, id: call_id, signal }));
        }
        if calls.closed {
            return std::task::Poll::Ready(None);
        }
        let stretch = calls.stretch;
        if calls.idle_in != Some(stretch) && calls.unsettled.is_empty() {
            // Back in `receive()` with nothing to take and no call to answer: the task is idle
            // (published once per stretch). A body that takes calls before replying is not.
            calls.idle_in = Some(stretch);
            let core = calls.core.clone();
            drop(calls);
            let idle = serde_json::json!({ "idle": { "stretch": stretch } });
            core.record_only(RecordKind::Published, || idle.into());
        }
        std::task::Poll::Pending
    }
}

/// One call of a resumable task.
#[derive(Debug)]
pub struct Call<T> {
    /// The call's input.
    pub input: T,
    id: String,
    signal: StretchSignal,
}

impl<T> Call<T> {
    /// The call's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Fires when the work of the call's stretch is stopped (`task_cancel`, a cancelled turn) or
    /// the run is cancelled: stop, reply with what you have or not, and return to `receive()`.
    /// Every call of one stretch shares it.
    pub fn abort_signal(&self) -> StretchSignal {
        self.signal.clone()
    }
}

/// The abort signal of a stretch of a resumable task's work: see [`Call::abort_signal`].
#[derive(Clone)]
pub struct StretchSignal {
    calls: Arc<Mutex<Calls>>,
    stretch: u64,
}

impl StretchSignal {
    /// Whether the stretch's work was stopped.
    pub fn is_aborted(&self) -> bool {
        let calls = lock(&self.calls);
        calls.stopped >= self.stretch || calls.closed || calls.core.is_cancelled()
    }
}

impl std::future::Future for StretchSignal {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let mut calls = lock(&self.calls);
        calls.drain(cx);
        if calls.stopped >= self.stretch || calls.closed || calls.core.is_cancelled() {
            return std::task::Poll::Ready(());
        }
        drop(calls);
        // The run's own cancellation also ends the stretch.
        let mut aborted = AbortSignal::new(Some(lock(&self.calls).core.clone())).aborted();
        std::pin::Pin::new(&mut aborted).poll(cx)
    }
}

impl fmt::Debug for StretchSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StretchSignal").field("stretch", &self.stretch).finish_non_exhaustive()
    }
}

impl ServeCtx {
    /// The context and the stream of calls of a resumable task's run: its calls hook is the
    /// run's first op ([`CALLS_HOOK`]).
    pub(crate) fn new(task: TaskCtx) -> (ServeCtx, Receive) {
        let core = task.workflow.core.clone();
        let hook = crate::wait::Hook::<Value>::in_run(core.clone());
        let calls = Calls {
            core,
            hook,
            buffered: Default::default(),
            stopped: 0,
            unsettled: Vec::new(),
            idle_in: None,
            stretch: 0,
            closed: false,
        };
        let calls = Arc::new(Mutex::new(calls));
        (ServeCtx { task, calls: calls.clone() }, Receive { calls, input: std::marker::PhantomData })
    }
}

/// The context of a plain `#[tool]`: it runs inside the model step and cannot wait durably.
#[derive(Clone)]
pub struct ToolCtx {
    call_id: String,
    tool: &'static str,
    services: Arc<crate::run_core::Services>,
}

impl fmt::Debug for ToolCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCtx").field("call_id", &self.call_id).field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl ToolCtx {
    pub(crate) fn new(call_id: String, tool: &'static str, services: Arc<crate::run_core::Services>) -> Self {
        ToolCtx { call_id, tool, services }
    }

    /// The context of a plain tool that a step runs itself, as the call `call_id` of `tool` (a
    /// session's model step runs the plain tools its model called): it reads the runtime's state
    /// and providers as a tool the runtime calls does. `None` outside a run.
    pub fn for_step(step: &crate::step::StepCtx, call_id: impl Into<String>, tool: &'static str) -> Option<ToolCtx> {
        Some(ToolCtx::new(call_id.into(), tool, step.services()?.clone()))
    }

    /// The value of type `T` the host gave the runtime with `RuntimeBuilder::state`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, crate::error::ToolError> {
        self.services.state.get::<T>().map_err(crate::error::ToolError::new)
    }

    /// The id of this tool call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The model-facing name of the tool being run.
    pub fn tool_name(&self) -> &'static str {
        self.tool
    }

    /// Sends a log message: to `tracing`, and to whoever listens to this call (an MCP client
    /// that asked for logs at `level` or below gets it as `notifications/message`); see
    /// [`crate::logs`].
    ///
    /// ```
    /// use eve_runtime::{LogLevel, ToolCtx};
    /// fn note_cache_miss(ctx: &ToolCtx, key: &str) {
    ///     ctx.log(LogLevel::Debug, format!("{key} is not cached; asking the API"));
    /// }
    /// ```
    pub fn log(&self, level: crate::logs::LogLevel, message: impl Into<String>) {
        self.services.logs.send(&self.call_id, self.tool, level, message.into());
    }

    /// A plain tool's abort signal never fires: it lives inside one model step.
    pub fn abort_signal(&self) -> AbortSignal {
        AbortSignal::new(None)
    }
}

/// A context a step with a `&StepCtx` parameter may be called with: the body's own context.
pub trait StepCtxSource: sealed::Sealed {}

impl StepCtxSource for WorkflowCtx {}
impl StepCtxSource for TaskCtx {}
impl StepCtxSource for ServeCtx {}
impl StepCtxSource for ToolCtx {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::WorkflowCtx {}
    impl Sealed for super::TaskCtx {}
    impl Sealed for super::ServeCtx {}
    impl Sealed for super::ToolCtx {}
}
