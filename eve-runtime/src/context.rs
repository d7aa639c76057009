//! The contexts tool bodies receive, one per cell of lifetime × suspendability.
//!
//! Capabilities are gated by type: `now`, `random` and `uuid` (recorded, so they replay) exist
//! only on workflow contexts; a plain tool's [`ToolCtx`] has none of them, and nothing here can
//! hand out a token (that belongs to steps).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde_json::Value;

use crate::ask::{self, Ask, AskOutcome, Pending};
use crate::executor::core::{RunCore, Slot};
use crate::journal::{Entry, OpKind, OpSignature, RecordKind, RunId};
use crate::time::Timestamp;
use crate::wait::AbortSignal;

/// The context of a `#[workflow_tool]` body.
///
/// Everything here is deterministic on replay: [`now`](WorkflowCtx::now),
/// [`random`](WorkflowCtx::random) and [`uuid`](WorkflowCtx::uuid) are recorded in the journal the
/// first time and read back from it afterwards.
#[derive(Clone)]
pub struct WorkflowCtx {
    core: Arc<RunCore>,
    tool: &'static str,
}

impl WorkflowCtx {
    pub(crate) fn new(core: Arc<RunCore>, tool: &'static str) -> Self {
        WorkflowCtx { core, tool }
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
    pub fn now(&self) -> Timestamp {
        let live = || serde_json::to_value(self.core.services.clock.now()).expect("timestamps serialize");
        let value = self.core.record(RecordKind::Now, live);
        value.and_then(|value| serde_json::from_value(value).ok()).unwrap_or_else(|| self.core.services.clock.now())
    }

    /// 64 random bits from the operating system, recorded so that replay sees the same value.
    pub fn random(&self) -> u64 {
        let live = || Value::from(random_u64());
        let value = self.core.record(RecordKind::Random, live);
        value.and_then(|value| value.as_u64()).unwrap_or_else(random_u64)
    }

    /// A random (version 4) UUID in its hyphenated form, recorded so that replay sees the same value.
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
    pub fn ask(&self, request: Ask) -> Pending {
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
}

impl Deref for TaskCtx {
    type Target = WorkflowCtx;

    fn deref(&self) -> &WorkflowCtx {
        &self.workflow
    }
}

/// The context of a `#[task(serve)]` body: a [`TaskCtx`] that also replies to calls.
#[derive(Clone, Debug)]
pub struct ServeCtx {
    task: TaskCtx,
}

impl Deref for ServeCtx {
    type Target = TaskCtx;

    fn deref(&self) -> &TaskCtx {
        &self.task
    }
}

/// The stream of calls a `#[task(serve)]` body receives, one per call of the tool, each with an
/// input of type `T`.
pub struct Receive<T = Value> {
    input: std::marker::PhantomData<fn() -> T>,
}

impl<T> Receive<T> {
    /// The same stream, decoding each call's input as `U`. Generated code uses this.
    #[doc(hidden)]
    pub fn typed<U>(self) -> Receive<U> {
        Receive { input: std::marker::PhantomData }
    }
}

impl<T> fmt::Debug for Receive<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receive").finish_non_exhaustive()
    }
}

/// The context of a plain `#[tool]`: it runs inside the model step and cannot wait durably.
#[derive(Clone)]
pub struct ToolCtx {
    call_id: String,
    tool: &'static str,
    services: Arc<crate::executor::core::Services>,
}

impl fmt::Debug for ToolCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCtx").field("call_id", &self.call_id).field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl ToolCtx {
    pub(crate) fn new(call_id: String, tool: &'static str, services: Arc<crate::executor::core::Services>) -> Self {
        ToolCtx { call_id, tool, services }
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
