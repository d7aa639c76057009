//! The session's body: the agent loop, itself a durable workflow of the runtime (`eve.session`).
//!
//! Everything a session learns arrives on one hook, the first op of its run: messages from
//! people, cancellations, and the reports of the runs it started (tasks and the workflow tool
//! calls a turn waits on; see [`ChildReport`]). Everything it does that leaves the run is a step
//! or a record: calling the model (plain tools run inside that step), sending a resumable task a
//! call, interrupting or cancelling a run are steps; starting a child run is a record
//! (`WorkflowCtx::start_child`), and the commit that journals it creates the child, with a
//! resumable task's first call, so a crash never leaves a child its session does not know. What
//! it tells the outside world is a published event ([`SessionEvent`](super::SessionEvent)). So a session is replayed like any
//! workflow: after a restart mid-turn it goes on where it was, without calling the model twice
//! for one step or starting a tool twice.
//!
//! # A turn
//!
//! A message opens a turn (`turn.started`). Each model step first takes in what arrived since
//! the last one (task results as one `task.result` message, the `[Tasks]` note when tasks
//! changed), then calls the model. Its text completes a message (`message.completed`); its tool
//! calls are dispatched (`actions.requested`): plain tools already ran in the step; a
//! `#[workflow_tool]` call starts a child run the turn waits on; a `#[task]` or `#[task(serve)]`
//! call starts (or reaches) a task and answers with a receipt; `task_wait` and `task_cancel` are
//! answered by the session. A step without tool calls ends the turn, unless tasks still work:
//! then the turn is held (`turn.waiting`) until one settles or its caller steers it, and the
//! model is called again in the same turn. `turn.completed` comes only when the turn really ends,
//! and `session.waiting` after it.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::agents::{self, AGENT_WORKFLOW, AgentTool, Agents};
use super::inbound::{SessionInbound, TurnPolicy, UserMessage};
use super::model::SessionModel;
use super::model::{self, FinishReason, Message, ModelRequest, ModelResponse, ToolCall, ToolSpec};
use super::strings;
use super::tasks::{Settled, Task, TaskKind, TaskStatus, Tasks};
use eve_runtime::context::{CALLS_HOOK, ChildRun, ServeInbound, WorkflowCtx};
use eve_runtime::error::{FatalError, RetryableError, StepError, ToolError};
use eve_runtime::events::{CustomEvent, RunEvent};
use eve_runtime::journal::{ChildReport, Entry, Op, ParentLink, Payload, RecordKind, RunId, RunOutcome};
use eve_runtime::registry::{BodyFuture, EntryPoint, InputRefusal, InternalWorkflow, Shape, ToolDescriptor};
use eve_runtime::step::{Backoff, RetryPolicy, StepCall, StepCtx, StepDef};
use eve_runtime::store::{Delivery, Notice};
use eve_runtime::time::Timestamp;
use eve_runtime::wait::{Hook, create_hook, sleep, sleep_until};
use futures::future::Either;

/// The session workflow, started by `Runtime::session`; not a tool any model is offered.
pub(crate) static SESSION: ToolDescriptor = ToolDescriptor {
    name: "eve.session",
    description: "An agent session: turns in which a model calls tools.",
    workflow_id: "eve_runtime::session",
    shape: Shape::WORKFLOW_TOOL,
    input_schema: || json!({ "type": "object" }),
    // Decoded from the borrowed value: a session carried on holds its whole conversation.
    validate_input: eve_runtime::registry::check_decodes::<SessionInput>,
    output_schema: || None,
    entry: EntryPoint::Workflow(entry),
    // The body is eve-sessions' own: its version says which code it is.
    fingerprint: concat!("eve-sessions ", env!("CARGO_PKG_VERSION")),
    version: env!("CARGO_PKG_VERSION"),
};

inventory::submit!(InternalWorkflow(&SESSION));

/// The op of the session's hook: the first op of its run.
pub(crate) const SESSION_HOOK: Op = Op(0);

/// How a session was started.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionInput {
    /// The system prompt.
    #[serde(default)]
    pub system: String,
    /// The tools the model may call (all of the manifest's when absent).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Whether only the final reply reaches the caller (a child session).
    #[serde(default)]
    pub child: bool,
    /// The JSON Schema of the session's final output, if it has one: the model gives it by calling
    /// `final_output`, which ends the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The agents the model may call, each as a resumable task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentTool>,
    /// The agent whose session this is, if it is one: its model answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// How many messages of history the model is shown at most (see `SessionOptions::history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// How many turns one history of the session's run holds before it continues as new (see
    /// `SessionOptions::compact_every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_every: Option<u64>,
    /// The state an earlier history carried into this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<Box<Carried>>,
}

/// How many turns one history of a session holds, by default, before it continues as new.
pub(super) const DEFAULT_COMPACT_EVERY: u64 = 20;

/// What a session carries into a new history when it continues as new between turns: everything
/// its body knows, so a restart replays only the turns since, however long the session is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Carried {
    messages: Vec<Message>,
    turn_starts: VecDeque<usize>,
    compacted: u64,
    tasks: Tasks,
    results: Vec<String>,
    note_due: bool,
    stopping: Vec<Stopping>,
    queued: VecDeque<UserMessage>,
    turns: u64,
    steps: u64,
    children: u64,
    feed: u64,
}

/// How many messages of history the model is shown at most, by default.
pub(super) const DEFAULT_HISTORY: usize = 100;

fn entry(input: Value, ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let input = match ctx.take_warm::<SessionInput>() {
            Some(input) => input,
            None => serde_json::from_value(input)
                .map_err(|error| ToolError::new(format!("invalid session input: {error}")))?,
        };
        Body::new(input, &ctx).run().await?;
        Ok(Value::Null)
    })
}

/// What the session's hook receives.
enum Inbound {
    Message(UserMessage),
    Cancel,
    Close,
    Report(ChildReport),
    /// A stopped resumable task did not return to `receive()` in time.
    Overdue,
}

/// A resumable task whose work was stopped, until its body returns to `receive()`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stopping {
    run: RunId,
    stretch: u64,
    deadline: Timestamp,
}

/// How long a stopped resumable task's body has to return to `receive()` before its run is
/// cancelled and the task finishes.
const STOP_GRACE: Duration = Duration::from_secs(30);

fn parse(payload: Value) -> Option<Inbound> {
    if payload.get("child").is_some() {
        return serde_json::from_value(payload).ok().map(Inbound::Report);
    }
    // A message, the common case, is read straight into its struct: read as the tagged enum, its
    // fields would first be buffered, then read again. The tag is a field the struct ignores.
    let parsed = if payload.get("type").and_then(Value::as_str) == Some("message") {
        serde_json::from_value(payload).map(Inbound::Message)
    } else {
        serde_json::from_value(payload).map(|inbound| match inbound {
            SessionInbound::Message(message) => Inbound::Message(message),
            SessionInbound::Cancel => Inbound::Cancel,
            SessionInbound::Close => Inbound::Close,
        })
    };
    parsed.map_err(|error| tracing::warn!("a session received something it cannot read: {error}")).ok()
}

/// How a tool offered to the model is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    Execute,
    Task,
    Serve,
    /// A subagent: a resumable task whose run is an agent's (`eve.agent`).
    Agent,
    TaskWait,
    TaskCancel,
    FinalOutput,
}

impl Kind {
    /// Whether calling it starts (or reaches) a task.
    fn is_task(self) -> bool {
        matches!(self, Kind::Task | Kind::Serve | Kind::Agent)
    }
}

/// A tool the session offers: what the model sees, and how it is called.
struct Offered {
    /// Shared by every session that offers the tool: a parked session keeps only the pointer.
    spec: Arc<ToolSpec>,
    kind: Kind,
    descriptor: Option<&'static ToolDescriptor>,
}

/// The open turn.
struct Turn {
    id: String,
    caller: Option<String>,
    cancelled: bool,
}

/// A workflow tool call the turn waits on.
struct Execution {
    call: ToolCall,
    run: RunId,
    interrupted: bool,
}

/// The session's state: rebuilt exactly on replay, since everything it learns is journaled.
struct Body<'c> {
    ctx: &'c WorkflowCtx,
    inbox: Hook<Value>,
    input: SessionInput,
    offered: Vec<Offered>,
    /// What every model step of this history is given besides the conversation, made once: the
    /// system prompt (with the tasks block when a task is offered), the tools' specs and the
    /// names of the plain tools, which run inside the step.
    prompt: Arc<str>,
    specs: Arc<[Arc<ToolSpec>]>,
    plain: Arc<[String]>,
    /// Shared with the model step that was last given them, so a step replayed from the journal
    /// costs no copy of the conversation (and a live step one, made inside its attempt).
    messages: Arc<Vec<Message>>,
    /// Where each turn still in `messages` starts, oldest first: where the history may be cut.
    turn_starts: VecDeque<usize>,
    /// How many turns were dropped from `messages`.
    compacted: u64,
    tasks: Tasks,
    /// `<task_result>` blocks for the next step boundary.
    results: Vec<String>,
    /// Whether the tasks changed since the last `[Tasks]` note.
    note_due: bool,
    /// Messages waiting for the open turn to end.
    queued: VecDeque<UserMessage>,
    turn: Option<Turn>,
    /// Workflow tool calls the turn waits on, by child run.
    executing: BTreeMap<RunId, Execution>,
    /// Results of those calls that settled, by call id.
    executed: BTreeMap<String, String>,
    /// Steering messages to read after the current step's results.
    steered: Vec<String>,
    /// Whether the session was closed during a turn: it ends once the turn does.
    closing: bool,
    /// The final output given in the open turn (`final_output`).
    output: Option<Value>,
    /// Resumable tasks stopped and not yet back in `receive()`.
    stopping: Vec<Stopping>,
    /// Counters that name things: turns, model steps, child runs, events.
    turns: u64,
    steps: u64,
    children: u64,
    feed: Cell<u64>,
    /// The name of the last event published.
    last_event: Cell<&'static str>,
    /// Turns in this history of the run (see [`Carried`]).
    turns_here: u64,
    /// Whether an earlier history carried its state into this one.
    continued: bool,
}

impl<'c> Body<'c> {
    fn new(input: SessionInput, ctx: &'c WorkflowCtx) -> Self {
        // First op of the run: deliveries address it as `SESSION_HOOK`.
        let inbox = create_hook::<Value>();
        let offered = offered_tools(input.tools.as_deref(), input.output_schema.as_ref(), &input.agents);
        let mut input = input;
        let continued = input.carried.is_some();
        let carried = input.carried.take().map(|carried| *carried).unwrap_or_default();
        let mut prompt = input.system.clone();
        if offered.iter().any(|tool| tool.kind.is_task()) {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(strings::tasks_prompt(input.child));
        }
        let specs = offered.iter().map(|tool| tool.spec.clone()).collect();
        let plain = offered.iter().filter(|tool| tool.kind == Kind::Plain).map(|tool| tool.spec.name.clone()).collect();
        Body {
            ctx,
            inbox,
            input,
            offered,
            prompt: prompt.into(),
            specs,
            plain,
            messages: Arc::new(carried.messages),
            turn_starts: carried.turn_starts,
            compacted: carried.compacted,
            tasks: carried.tasks,
            results: carried.results,
            note_due: carried.note_due,
            queued: carried.queued,
            turn: None,
            executing: BTreeMap::new(),
            executed: BTreeMap::new(),
            steered: Vec::new(),
            stopping: carried.stopping,
            output: None,
            closing: false,
            turns: carried.turns,
            steps: carried.steps,
            children: carried.children,
            feed: Cell::new(carried.feed),
            last_event: Cell::new(""),
            turns_here: 0,
            continued,
        }
    }

    /// Continues the session's run as new when this history holds enough turns: called between
    /// turns, when nothing but tasks is under way. The waiting deliveries stay for the new
    /// history, whose first op is the same hook.
    fn continue_if_long(&mut self) -> Result<(), ToolError> {
        self.turns_here += 1;
        let every = self.input.compact_every.unwrap_or(DEFAULT_COMPACT_EVERY).max(1);
        if self.turns_here < every || self.closing || !self.executing.is_empty() {
            return Ok(());
        }
        let carried = Carried {
            messages: Arc::unwrap_or_clone(std::mem::take(&mut self.messages)),
            turn_starts: std::mem::take(&mut self.turn_starts),
            compacted: self.compacted,
            tasks: std::mem::take(&mut self.tasks),
            results: std::mem::take(&mut self.results),
            note_due: self.note_due,
            stopping: std::mem::take(&mut self.stopping),
            queued: std::mem::take(&mut self.queued),
            turns: self.turns,
            steps: self.steps,
            children: self.children,
            feed: self.feed.get(),
        };
        // The body ends with this history, so its input is taken, not copied.
        let next = SessionInput { carried: Some(Box::new(carried)), ..std::mem::take(&mut self.input) };
        // As JSON text: a tree of the conversation would cost an allocation for every message's
        // every field and string, and as many again to free it with the history after next.
        let journaled = Payload::text(&next).map_err(|error| ToolError::new(format!("a session's state: {error}")))?;
        // The new history's body takes `next` itself; only a restart decodes the journaled copy,
        // so the two must agree. Every test that continues a session checks they do.
        #[cfg(debug_assertions)]
        eve_runtime::journal::assert_survives_journal::<SessionInput>(
            &journaled.to_value(),
            "a session's carried state",
        );
        Err(ToolError::continue_keeping_inbox(journaled, next))
    }

    async fn run(mut self) -> Result<(), ToolError> {
        let mut carried_on = self.continued;
        if carried_on {
            // The journal now starts here; the feed's numbers go on from the last history's.
            self.emit("session.compacted", json!({ "turns": self.turns }));
        }
        loop {
            if std::mem::take(&mut carried_on) {
                // The last history continued right after a turn: go on with the queue, then wait.
                if Box::pin(self.turns_then_wait(None)).await? {
                    return Ok(());
                }
                continue;
            }
            // Between turns with no task working or stopping, the session waits on a person:
            // idle, so the warm cache keeps only the most recently active of such sessions.
            self.ctx.set_idle(self.tasks.working_count() == 0 && self.stopping.is_empty());
            let inbound = self.next().await;
            self.ctx.set_idle(false);
            let Some(inbound) = inbound else { return Ok(()) };
            match inbound {
                Inbound::Message(message) => {
                    // Boxed: a turn's futures are large, and a session parked between turns (the
                    // common state of a warm-cached session) should not carry their space.
                    if Box::pin(self.turns_then_wait(Some(message))).await? {
                        return Ok(());
                    }
                }
                Inbound::Report(report) => Box::pin(self.on_report(report)).await?,
                Inbound::Overdue => Box::pin(self.overdue()).await?,
                Inbound::Cancel => Box::pin(self.cancel_tasks("turn_cancelled")).await?,
                Inbound::Close => {
                    Box::pin(self.cancel_tasks("turn_ended")).await?;
                    return Box::pin(self.end_idle_tasks()).await;
                }
            }
        }
    }

    /// Runs a turn for `first`, then one for each queued message, then says the session waits.
    /// Between two turns the run may continue as new (`Err` carries it out). Returns whether the
    /// session was closed and has ended.
    async fn turns_then_wait(&mut self, first: Option<UserMessage>) -> Result<bool, ToolError> {
        // A turn's future is not boxed again here: `run` boxes this one, so a parked session
        // carries neither, and a turn costs one allocation for its futures, not two.
        if let Some(message) = first {
            self.turn(message).await?;
            self.continue_if_long()?;
        }
        while let Some(message) = self.queued.pop_front().filter(|_| !self.closing) {
            self.turn(message).await?;
            self.continue_if_long()?;
        }
        if self.closing {
            Box::pin(self.end_idle_tasks()).await?;
            return Ok(true);
        }
        self.emit("session.waiting", json!({}));
        Ok(false)
    }

    /// The next thing the hook received, waiting for it (or for a stopped task's grace to run
    /// out); `None` once the run is cancelled.
    async fn next(&mut self) -> Option<Inbound> {
        loop {
            let received = match self.stopping.iter().map(|stop| stop.deadline).min() {
                None => self.inbox.recv_value().await,
                Some(deadline) => {
                    let overdue = sleep_until(deadline);
                    match futures::future::select(Box::pin(self.inbox.recv_value()), overdue).await {
                        Either::Left((received, _)) => received,
                        Either::Right(_) => return Some(Inbound::Overdue),
                    }
                }
            };
            match received {
                Ok(payload) => match parse(payload) {
                    Some(inbound) => return Some(inbound),
                    None => continue,
                },
                Err(_) => return None,
            }
        }
    }

    /// The next thing the hook holds already, without waiting.
    async fn next_ready(&mut self) -> Option<Inbound> {
        loop {
            match futures::poll!(self.inbox.recv_value()) {
                std::task::Poll::Ready(Ok(payload)) => match parse(payload) {
                    Some(inbound) => return Some(inbound),
                    None => continue,
                },
                _ => return None,
            }
        }
    }

    /// Publishes an event on the session's feed, journaled as the JSON text of `data`'s fields:
    /// a turn publishes eight events, which as trees of `Value`s would cost a turn about as many
    /// allocations again as everything else it does. Takes `&self`, so that `data` may borrow
    /// the body's own fields.
    fn emit(&self, name: &'static str, data: impl Serialize) {
        self.feed.set(self.feed.get() + 1);
        self.last_event.set(name);
        let event = Published { sequence: self.feed.get(), name, data };
        self.ctx.publish(Payload::text(&event).expect("a feed event's fields are JSON with string keys"));
    }

    /// The open turn's id, borrowed.
    fn open_turn(&self) -> Option<&str> {
        self.turn.as_ref().map(|turn| turn.id.as_str())
    }

    /// The open turn's id as the feed and the tasks keep it (`null` between turns).
    fn turn_id(&self) -> Value {
        self.open_turn().map_or(Value::Null, Value::from)
    }

    // ---- turns

    async fn turn(&mut self, message: UserMessage) -> Result<(), ToolError> {
        self.turns += 1;
        let id = format!("turn-{}", self.turns);
        // The event copies the id; the open turn keeps it, with the message's caller.
        self.turn = Some(Turn { id, caller: message.caller, cancelled: false });
        self.emit("turn.started", TurnData { turn_id: self.open_turn() });
        self.compact();
        self.turn_starts.push_back(self.messages.len());
        Arc::make_mut(&mut self.messages).push(Message::user(message.text));
        let ended = self.steps_of_turn().await;
        let turn = self.turn.take().expect("a turn is open");
        match ended {
            Ok(()) if turn.cancelled => {
                self.emit("turn.completed", json!({ "turnId": turn.id, "status": "cancelled" }))
            }
            Ok(()) => {
                let output = self.output.take();
                self.emit("turn.completed", TurnCompleted { turn_id: &turn.id, status: "completed", output });
            }
            Err(failure) => {
                // A failed turn cancels every working task.
                self.cancel_tasks("turn_ended").await?;
                self.emit("turn.completed", json!({ "turnId": turn.id, "status": "failed", "error": failure }));
            }
        }
        Ok(())
    }

    /// The model steps of the open turn; `Err` with the reason when the turn fails.
    async fn steps_of_turn(&mut self) -> Result<(), String> {
        loop {
            self.take_in_ready().await.map_err(|error| error.to_string())?;
            if self.turn_cancelled() {
                return Ok(());
            }
            self.boundary();
            let ModelStep { response, plain } = self.model_step().await.map_err(|error| error.to_string())?;
            let ModelResponse { text, tool_calls: calls, finish_reason } = response;
            let held = calls.is_empty() && self.tasks.working_count() > 0;
            let finish = if held && self.input.child { FinishReason::ToolCalls } else { finish_reason };
            if !text.is_empty() || calls.is_empty() {
                let data = MessageData { turn_id: self.open_turn(), text: &text, finish_reason: finish };
                self.emit("message.completed", data);
            }
            if calls.is_empty() {
                Arc::make_mut(&mut self.messages).push(Message::Assistant { content: text, tool_calls: calls });
                if !held {
                    return Ok(());
                }
                // No turn ends while tasks work: hold it until one settles or its caller steers.
                self.wait(None).await.map_err(|error| error.to_string())?;
                continue;
            }
            self.emit("actions.requested", ActionsData { turn_id: self.open_turn(), actions: Actions(&calls) });
            // Nothing reads the conversation while the calls are dispatched, so the model's message
            // joins it afterwards, taking the calls rather than a copy of them; then their results.
            let answered = self.dispatch(&calls, plain).await.map(|mut results| {
                // In call order, each result keeping the call id it is keyed by.
                let in_order = calls.iter().filter_map(|call| results.remove_entry(&call.id));
                in_order.map(|(call_id, content)| Message::Tool { call_id, content }).collect()
            });
            Arc::make_mut(&mut self.messages).push(Message::Assistant { content: text, tool_calls: calls });
            self.answer(answered.map_err(|error| error.to_string())?);
            if self.output.is_some() {
                return Ok(());
            }
        }
    }

    /// Keeps the history within its budget: when it holds more messages than the budget, the
    /// oldest turns are dropped until the rest fits in half of it, and the model reads first that
    /// they were (`[Compacted]`) and the `[Tasks]` note, so it still knows every task. Whole turns
    /// go, so a tool call never loses its result. Deterministic, so replay compacts the same way;
    /// and a parked session keeps only what its model is shown.
    fn compact(&mut self) {
        let budget = self.input.history.unwrap_or(DEFAULT_HISTORY).max(2);
        if self.messages.len() <= budget {
            return;
        }
        let len = self.messages.len();
        let Some(cut) = self.turn_starts.iter().copied().find(|start| len - start <= budget / 2) else { return };
        let dropped_turns = self.turn_starts.iter().take_while(|start| **start < cut).count();
        if dropped_turns == 0 {
            return;
        }
        self.turn_starts.drain(..dropped_turns);
        self.compacted += dropped_turns as u64;
        let notes = [Message::user(strings::compacted(self.compacted)), Message::user(self.tasks.note())];
        Arc::make_mut(&mut self.messages).splice(..cut, notes);
        for start in &mut self.turn_starts {
            *start = *start - cut + 2;
        }
    }

    fn turn_cancelled(&self) -> bool {
        self.turn.as_ref().is_some_and(|turn| turn.cancelled)
    }

    /// What the model reads first at a step boundary: task results, then the `[Tasks]` note.
    fn boundary(&mut self) {
        if !self.results.is_empty() {
            let blocks = std::mem::take(&mut self.results);
            Arc::make_mut(&mut self.messages).push(Message::user(strings::task_results(&blocks)));
        }
        if self.note_due {
            self.note_due = false;
            Arc::make_mut(&mut self.messages).push(Message::user(self.tasks.note()));
        }
    }

    /// Calls the model (in a step) with the conversation so far.
    async fn model_step(&mut self) -> Result<ModelStep, StepError> {
        self.steps += 1;
        self.emit("step.started", StepData { turn_id: self.open_turn(), step: self.steps });
        let request =
            Request { system: self.prompt.clone(), messages: self.messages.clone(), tools: self.specs.clone() };
        call_model(self.steps, request, self.plain.clone(), self.input.agent.clone()).await
    }

    // ---- tool calls

    /// Dispatches one step's tool calls, waits for what the turn waits on, and returns their
    /// results, by call id.
    async fn dispatch(
        &mut self,
        calls: &[ToolCall],
        mut plain: BTreeMap<String, Result<Value, String>>,
    ) -> Result<BTreeMap<String, String>, ToolError> {
        let mut results: BTreeMap<String, String> = BTreeMap::new();
        let mut wait: Option<Option<u64>> = None;
        for (index, call) in calls.iter().enumerate() {
            let kind =
                self.offered.iter().find(|tool| tool.spec.name == call.name).map(|tool| (tool.kind, tool.descriptor));
            let answer = match kind {
                None => Some(Err(format!("there is no tool named `{}`", call.name))),
                Some((Kind::Plain, _)) => {
                    // Taken rather than copied, unless a later call has the same id (a script may
                    // give one twice): then each of them is answered with it.
                    let repeated = calls[index + 1..].iter().any(|later| later.id == call.id);
                    let result = if repeated { plain.get(&call.id).cloned() } else { plain.remove(&call.id) };
                    Some(result.unwrap_or_else(|| Err("the tool did not run".into())).map(text_of))
                }
                Some((Kind::Execute, Some(descriptor))) => self.execute(call, descriptor).await?,
                Some((Kind::Task, Some(descriptor))) => {
                    Some(self.start_task(call, descriptor, TaskKind::Task, descriptor.name).await?)
                }
                Some((Kind::Serve, Some(descriptor))) => Some(self.serve(call, descriptor, descriptor.name).await?),
                Some((Kind::Agent, Some(descriptor))) => {
                    Some(self.serve(call, descriptor, agents::intern(&call.name)).await?)
                }
                Some((Kind::TaskCancel, _)) => Some(self.task_cancel(call).await?),
                Some((Kind::FinalOutput, _)) => Some(self.final_output(call)),
                Some((Kind::TaskWait, _)) => {
                    wait = Some(call.arguments.get("timeoutSeconds").and_then(Value::as_u64).filter(|s| *s >= 1));
                    None
                }
                Some(_) => Some(Err("the tool cannot be called".to_owned())),
            };
            if let Some(answer) = answer {
                self.action_result(call, &answer);
                results.insert(call.id.clone(), answer.unwrap_or_else(|error| format!("Error: {error}")));
            }
        }
        // The turn waits on its workflow tool calls until each settles (or is interrupted).
        while !self.executing.is_empty() && !self.turn_cancelled() {
            self.park().await?;
        }
        for (call_id, text) in std::mem::take(&mut self.executed) {
            results.insert(call_id, text);
        }
        if let Some(timeout) = wait {
            let call = calls.iter().find(|call| call.name == strings::TASK_WAIT).expect("a task_wait call");
            let answer = self.wait(timeout).await?;
            self.action_result(call, &Ok(answer.clone()));
            results.insert(call.id.clone(), answer);
        }
        Ok(results)
    }

    /// Appends the results of the model's last calls, then any steering message, which the model
    /// reads next.
    fn answer(&mut self, results: Vec<Message>) {
        let messages = Arc::make_mut(&mut self.messages);
        messages.extend(results);
        messages.extend(std::mem::take(&mut self.steered).into_iter().map(Message::user));
    }

    /// `final_output`: refused while tasks work (the error names them); otherwise it is kept, and
    /// the turn ends after this step's calls.
    fn final_output(&mut self, call: &ToolCall) -> Result<String, String> {
        let working = self.tasks.working_ids();
        if !working.is_empty() {
            return Err(strings::final_output_while_working(&working));
        }
        self.output = Some(call.arguments.clone());
        Ok(strings::FINAL_OUTPUT_RECORDED.to_owned())
    }

    fn action_result(&mut self, call: &ToolCall, answer: &Result<String, String>) {
        let (output, error) = match answer {
            Ok(output) => (Some(output.as_str()), None),
            Err(error) => (None, Some(error.as_str())),
        };
        let data = ActionResult { turn_id: self.open_turn(), call_id: &call.id, name: &call.name, output, error };
        self.emit("action.result", data);
    }

    /// Starts a workflow tool call's run, which the turn then waits on.
    async fn execute(
        &mut self,
        call: &ToolCall,
        tool: &'static ToolDescriptor,
    ) -> Result<Option<Result<String, String>>, ToolError> {
        let run = self.child_run();
        match self.start_child(tool, call.arguments.clone(), &run, None) {
            Ok(()) => {
                self.executing.insert(run.clone(), Execution { call: call.clone(), run, interrupted: false });
                Ok(None)
            }
            Err(error) => Ok(Some(Err(error))),
        }
    }

    /// Starts a task (named `name` for the model: its tool's, or its agent's) and answers with
    /// its receipt.
    async fn start_task(
        &mut self,
        call: &ToolCall,
        tool: &'static ToolDescriptor,
        kind: TaskKind,
        name: &'static str,
    ) -> Result<Result<String, String>, ToolError> {
        if self.tasks.working_count() >= strings::MAX_WORKING_TASKS {
            return Ok(Err(strings::too_many_tasks(self.tasks.working_count())));
        }
        let input = match call_input(call, tool, name) {
            Ok(input) => input,
            Err(message) => return Ok(Err(format!("invalid input for {name}: {message}"))),
        };
        let run = self.child_run();
        let task_id = eve_runtime::registry::task_id(name, &run);
        let first =
            (kind == TaskKind::Serve).then(|| ServeInbound::Call { call_id: call.id.clone(), input, stretch: 1 });
        let input = if kind == TaskKind::Serve { json!({}) } else { call.arguments.clone() };
        if let Err(error) = self.start_child(tool, input, &run, first) {
            return Ok(Err(error));
        }
        let turn_id = self.turn_id();
        let mut task = Task::new(task_id.clone(), name, run, kind, &call.id, turn_id.clone());
        if tool.workflow_id == AGENT_WORKFLOW {
            task = task.of_agent();
        }
        let event =
            json!({ "taskId": task_id, "callId": call.id, "turnId": turn_id, "name": name, "kind": task.kind_name() });
        self.tasks.start(task);
        self.note_due = true;
        self.emit("task.started", event);
        Ok(Ok(match kind {
            TaskKind::Serve => strings::started_resumable(&task_id, name),
            TaskKind::Task => strings::started(&task_id),
        }))
    }

    /// A call of a resumable task's tool (or of an agent, `name`): a new task, or another call of
    /// an unfinished one.
    async fn serve(
        &mut self,
        call: &ToolCall,
        tool: &'static ToolDescriptor,
        name: &'static str,
    ) -> Result<Result<String, String>, ToolError> {
        let Some(task_id) = call.arguments.get("taskId").and_then(Value::as_str).map(str::to_owned) else {
            return self.start_task(call, tool, TaskKind::Serve, name).await;
        };
        let input = match call_input(call, tool, name) {
            Ok(input) => input,
            Err(message) => return Ok(Err(format!("invalid input for {name}: {message}"))),
        };
        let Some(task) = self.tasks.resumable(&task_id, name) else {
            return Ok(Err(strings::unknown_task(&task_id, name)));
        };
        let kind = task.kind_name();
        let was_idle = task.status == TaskStatus::Idle;
        if was_idle && self.tasks.working_count() >= strings::MAX_WORKING_TASKS {
            return Ok(Err(strings::too_many_tasks(self.tasks.working_count())));
        }
        let turn_id = self.turn_id();
        let (run, stretch) = self.tasks.call(&task_id, &call.id, turn_id.clone());
        let payload = serde_json::to_value(ServeInbound::Call { call_id: call.id.clone(), input, stretch })
            .expect("a call always serializes");
        if let Err(error) = send_call(run, format!("call:{}", call.id), payload).await {
            return Ok(Err(error.to_string()));
        }
        self.note_due = true;
        let event = json!({ "taskId": task_id, "callId": call.id, "turnId": turn_id, "name": name, "kind": kind });
        self.emit("task.started", event);
        Ok(Ok(strings::sent(&task_id)))
    }

    async fn task_cancel(&mut self, call: &ToolCall) -> Result<Result<String, String>, ToolError> {
        let Some(task_id) = call.arguments.get("taskId").and_then(Value::as_str) else {
            return Ok(Err("`taskId` is required".to_owned()));
        };
        let Some(task) = self.tasks.get(task_id) else { return Ok(Err(strings::unknown_task_to_cancel(task_id))) };
        if task.status != TaskStatus::Working {
            return Ok(Ok(strings::nothing_to_stop(task_id)));
        }
        let (tool, kind) = (task.tool, task.kind);
        self.stop(task_id, "task_cancel").await?;
        Ok(Ok(match kind {
            TaskKind::Serve => strings::stopped_resumable(task_id, tool),
            TaskKind::Task => strings::stopped(task_id),
        }))
    }

    /// Stops a working task's current work: its calls settle `cancelled` with `reason` and never
    /// report back. A task's run is cancelled (its cleanup runs); a resumable task's stretch is
    /// stopped, and the task is idle once its body returns to `receive()`.
    async fn stop(&mut self, task_id: &str, reason: &str) -> Result<(), ToolError> {
        let Some(task) = self.tasks.get(task_id).cloned() else { return Ok(()) };
        let settled = self.tasks.cancel(task_id);
        for settled in settled {
            self.settled_event(&settled, json!({ "cancel": { "reason": reason } }), "cancelled");
        }
        self.note_due = true;
        match task.kind {
            TaskKind::Task => abort_child(task.run.clone(), false, reason.to_owned()).await?,
            TaskKind::Serve => {
                let payload = serde_json::to_value(ServeInbound::Stop { stretch: task.stretch }).expect("serializes");
                send_call(task.run.clone(), format!("stop:{}:{}", task.run, task.stretch), payload).await?;
                let deadline = self.ctx.now().saturating_add(STOP_GRACE);
                self.stopping.push(Stopping { run: task.run.clone(), stretch: task.stretch, deadline });
            }
        }
        Ok(())
    }

    /// Cancels the runs of stopped resumable tasks whose bodies did not return to `receive()`
    /// within [`STOP_GRACE`]: their tasks finish.
    async fn overdue(&mut self) -> Result<(), ToolError> {
        let now = self.ctx.now();
        let (due, waiting): (Vec<Stopping>, Vec<Stopping>) =
            std::mem::take(&mut self.stopping).into_iter().partition(|stop| stop.deadline <= now);
        self.stopping = waiting;
        for stop in due {
            let reason = "the task did not return to receive() within 30 seconds of a cancel";
            abort_child(stop.run, false, reason.to_owned()).await?;
        }
        Ok(())
    }

    /// Cancels every working task, and the workflow tool calls the open turn waits on.
    async fn cancel_tasks(&mut self, reason: &str) -> Result<(), ToolError> {
        for task in self.tasks.working_ids() {
            self.stop(&task, reason).await?;
        }
        for run in std::mem::take(&mut self.executing).into_keys() {
            abort_child(run, false, reason.to_owned()).await?;
        }
        Ok(())
    }

    /// The end of the session ends every task: the working ones are cancelled already, and the
    /// runs of the idle resumable ones (waiting in `receive()` for calls that can no longer
    /// come) are cancelled too.
    async fn end_idle_tasks(&mut self) -> Result<(), ToolError> {
        for run in self.tasks.idle_runs() {
            abort_child(run, false, "the session ended".to_owned()).await?;
        }
        Ok(())
    }

    // ---- waiting

    /// `task_wait` (with its timeout, if any) or a held turn (`timeout` is `None` then): parks
    /// the turn until a task settles, its caller steers it, or the timeout passes. Returns at once
    /// if a result is already waiting. Returns `task_wait`'s answer.
    async fn wait(&mut self, timeout: Option<u64>) -> Result<String, ToolError> {
        let mut deadline = timeout.map(|seconds| Box::pin(sleep(Duration::from_secs(seconds))));
        let before = self.tasks.settled_count();
        loop {
            let settled = self.tasks.settled_since(before);
            if !settled.is_empty() || !self.results.is_empty() {
                let working = self.tasks.working_ids();
                return Ok(strings::task_wait_answer(&settled, &working));
            }
            if self.turn_cancelled() || !self.steered.is_empty() {
                return Ok(strings::task_wait_interrupted(&self.tasks.working_ids()));
            }
            if self.tasks.working_count() == 0 {
                return Ok(strings::still_working(&[]));
            }
            self.parking();
            let inbound = match deadline.as_mut() {
                Some(deadline) => {
                    let first = match futures::future::select(Box::pin(self.next()), deadline).await {
                        Either::Left((inbound, _)) => Some(inbound),
                        Either::Right(_) => None,
                    };
                    let Some(inbound) = first else {
                        let working = self.tasks.working_ids();
                        return Ok(strings::task_wait_timed_out(timeout.unwrap_or_default(), &working));
                    };
                    inbound
                }
                None => self.next().await,
            };
            match inbound {
                Some(inbound) => self.take(inbound).await?,
                None => return Ok(strings::task_wait_interrupted(&self.tasks.working_ids())),
            }
        }
    }

    /// Parks the open turn until one thing arrives, and takes it in.
    async fn park(&mut self) -> Result<(), ToolError> {
        self.parking();
        match self.next().await {
            Some(inbound) => self.take(inbound).await,
            None => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.cancelled = true;
                }
                Ok(())
            }
        }
    }

    /// `turn.waiting`: the open turn parks.
    fn parking(&mut self) {
        let Some(turn) = self.turn.as_ref() else { return };
        if self.last_event.get() == "turn.waiting" {
            return; // Still parked: what arrived (a queued message, say) changed nothing the feed shows.
        }
        let data = json!({ "turnId": turn.id, "sequence": self.feed.get() + 1 });
        self.emit("turn.waiting", data);
    }

    /// Takes in everything the hook holds already (at a step boundary).
    async fn take_in_ready(&mut self) -> Result<(), ToolError> {
        while let Some(inbound) = self.next_ready().await {
            self.take(inbound).await?;
        }
        Ok(())
    }

    /// Takes in one thing the hook received while a turn is open.
    async fn take(&mut self, inbound: Inbound) -> Result<(), ToolError> {
        match inbound {
            Inbound::Report(report) => self.on_report(report).await,
            Inbound::Overdue => self.overdue().await,
            Inbound::Message(message) => {
                let own = self.turn.as_ref().is_some_and(|turn| turn.caller == message.caller);
                if own && message.turn_policy == TurnPolicy::Steer {
                    // A steering message ends a wait and interrupts the calls the turn waits on,
                    // never a task; the model reads it next.
                    for execution in self.executing.values_mut().filter(|execution| !execution.interrupted) {
                        execution.interrupted = true;
                        abort_child(execution.run.clone(), true, "a new message arrived".into()).await?;
                    }
                    self.steered.push(message.text);
                } else {
                    self.queued.push_back(message);
                }
                Ok(())
            }
            Inbound::Cancel => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.cancelled = true;
                }
                self.cancel_tasks("turn_cancelled").await
            }
            Inbound::Close => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.cancelled = true;
                }
                self.closing = true;
                self.cancel_tasks("turn_ended").await
            }
        }
    }

    // ---- child runs

    /// A fresh id for a child run: the session's id and a counter, so a replay names it again.
    fn child_run(&mut self) -> RunId {
        self.children += 1;
        format!("{}.{}", self.ctx.run_id(), self.children).parse().expect("a child of a valid run id is valid")
    }

    /// Starts the child run `run` of `tool` (with a resumable task's first call), or answers
    /// why not. The run is created by the append that journals its start, the same one that
    /// journals the model's call when nothing else comes between, so the model is shown the
    /// task's receipt with no commit of its own.
    fn start_child(
        &mut self,
        tool: &'static ToolDescriptor,
        input: Value,
        run: &RunId,
        first: Option<ServeInbound>,
    ) -> Result<(), String> {
        let parent = ParentLink { run: self.ctx.run_id().clone(), hook: SESSION_HOOK };
        eve_runtime::registry::check_start_input(tool, &input).map_err(|error| error.to_string())?;
        let notices = first.map(|call| Notice {
            run: run.clone(),
            delivery_id: call_delivery_id(run, &call),
            delivery: Delivery::Hook { op: CALLS_HOOK, payload: call_payload(&call) },
        });
        let child = ChildRun {
            run: run.clone(),
            workflow_id: tool.workflow_id,
            tool: tool.name,
            build: tool.build(),
            input,
            parent,
            notices: notices.into_iter().collect(),
        };
        match self.ctx.start_child(child) {
            Some(started) if &started == run => Ok(()),
            Some(started) => Err(format!("the journal records run {started} here, not {run}")),
            // The body diverged from its journal; the run fails with that, and this is not seen.
            None => Err(format!("run {run} was not started: the session diverged from its journal")),
        }
    }

    /// What a child run reported: a question, a sign-in, a reply, idleness, or its end.
    async fn on_report(&mut self, report: ChildReport) -> Result<(), ToolError> {
        let task = self.tasks.by_run(&report.child).map(|task| task.id.clone());
        let task_field = task.clone().map_or(Value::Null, Value::from);
        match &report.entry {
            Entry::AskCreated { request_id, request, .. } => {
                let data = json!({ "requestId": format!("{}:{request_id}", report.child), "taskId": task_field, "request": request });
                self.emit("input.requested", data);
            }
            Entry::AskResolved { op, outcome } => {
                let request_id = eve_runtime::ask::request_id(*op);
                let data = json!({ "requestId": format!("{}:{request_id}", report.child), "taskId": task_field, "outcome": outcome });
                self.emit("input.resolved", data);
            }
            Entry::AuthRequired { op, provider, nonce, .. } => {
                let url = self.ctx.sign_in_link(&report.child, *op, provider, nonce);
                self.emit("authorization.required", json!({ "taskId": task_field, "provider": provider, "url": url }));
            }
            Entry::AuthCompleted { .. } => self.emit("authorization.completed", json!({ "taskId": task_field })),
            Entry::Recorded { kind: RecordKind::Published, value, .. } => {
                self.on_published(&report.child, &value.to_value())
            }
            entry if entry.is_terminal() => self.on_end(&report.child, RunOutcome::from_terminal(entry)),
            _ => {}
        }
        Ok(())
    }

    /// A value a child run published: a progress snapshot of a workflow tool call, a message for
    /// the model, a reply settling a resumable task's calls, or that it is idle.
    fn on_published(&mut self, run: &RunId, value: &Value) {
        if let Some(agent) = value.get("agent") {
            self.agent_started(run, agent);
            return;
        }
        if let Some(event) = value.get("forward") {
            self.forward(run, event);
            return;
        }
        if let Some(partial) = value.get("partial") {
            // `action.partial` (last write wins by `callId`); never part of the model's history.
            let Some(execution) = self.executing.get(run) else { return };
            let call = &execution.call;
            let data = json!({ "turnId": self.turn_id(), "callId": call.id, "name": call.name, "partial": partial });
            // Progress changes nothing about where the turn stands: a parked turn is not parked again.
            let last_event = self.last_event.get();
            self.emit("action.partial", data);
            self.last_event.set(last_event);
            return;
        }
        if let Some(message) = value.get("message").and_then(Value::as_str) {
            // Delivered as results are: at the next boundary, or when a wait wakes.
            if let Some(task) = self.tasks.by_run(run) {
                let block = strings::task_message(&task.id, task.tool, message);
                self.results.push(block);
            }
            return;
        }
        if let Some(reply) = value.get("reply") {
            let calls: Vec<String> = serde_json::from_value(reply["calls"].clone()).unwrap_or_default();
            let output = reply["output"].clone();
            for settled in self.tasks.reply(run, &calls) {
                self.results.push(strings::task_result(
                    &settled.task,
                    settled.tool,
                    "completed",
                    &text_of(output.clone()),
                ));
                self.settled_event(&settled, json!({ "output": output }), "completed");
            }
            self.note_due = true;
        } else if let Some(stretch) = value.pointer("/idle/stretch").and_then(Value::as_u64) {
            // Back in `receive()`: a stop of this stretch (or an earlier one) is done.
            self.stopping.retain(|stop| !(&stop.run == run && stop.stretch <= stretch));
        }
    }

    /// A child run (an agent's task, or a workflow tool call) opened a session with an agent:
    /// `agent.started` names the call and turn whose run it is.
    fn agent_started(&mut self, run: &RunId, agent: &Value) {
        let (call, turn, task) = if let Some(task) = self.tasks.by_run(run) {
            let Some((call, turn)) = task.first_pending() else { return };
            (call.to_owned(), turn.clone(), Some(task.id.clone()))
        } else if let Some(execution) = self.executing.get(run) {
            (execution.call.id.clone(), self.turn_id(), None)
        } else {
            return; // Its call settled already: nobody follows it from here.
        };
        let session = agent["sessionId"].as_str().unwrap_or_default();
        let mut data = json!({
            "callId": call,
            "turnId": turn,
            "name": agent["name"],
            "sessionId": session,
            "streamPath": format!("/v1/sessions/{session}/events"),
        });
        if let Some(task) = task {
            data["taskId"] = Value::from(task);
        }
        // A parked turn stays parked: this says where to follow the agent, not that anything moved.
        let parked = self.last_event.get();
        self.emit("agent.started", data);
        if parked == "turn.waiting" {
            self.last_event.set(parked);
        }
    }

    /// A question or a sign-in in an agent's session, which the person answers through this one:
    /// the same event, naming this session's task.
    fn forward(&mut self, run: &RunId, event: &Value) {
        let name = match event["type"].as_str() {
            Some("input.requested") => "input.requested",
            Some("input.resolved") => "input.resolved",
            Some("authorization.required") => "authorization.required",
            Some("authorization.completed") => "authorization.completed",
            _ => return,
        };
        let mut data = event["data"].clone();
        let task = self.tasks.by_run(run).map(|task| task.id.clone());
        if let (Some(data), Some(task)) = (data.as_object_mut(), task) {
            data.insert("taskId".into(), Value::from(task));
        }
        self.emit(name, data);
    }

    /// A child run ended: a task settles (its result waits for the next step boundary), or a
    /// workflow tool call the turn waits on has its result.
    fn on_end(&mut self, run: &RunId, outcome: Option<RunOutcome>) {
        let Some(outcome) = outcome else { return };
        self.stopping.retain(|stop| &stop.run != run);
        if let Some(execution) = self.executing.remove(run) {
            let text = match outcome {
                RunOutcome::Completed(output) => text_of(output),
                RunOutcome::Failed(failure) if execution.interrupted => {
                    json!({ "interrupted": true, "error": failure }).to_string()
                }
                RunOutcome::Failed(failure) => format!("Error: {}", failure_message(&failure)),
                RunOutcome::Cancelled => json!({ "interrupted": true }).to_string(),
            };
            let answer = Ok(text.clone());
            self.action_result(&execution.call, &answer);
            self.executed.insert(execution.call.id, text);
            return;
        }
        let (status, field, body) = match &outcome {
            RunOutcome::Completed(output) => ("completed", json!({ "output": output }), text_of(output.clone())),
            RunOutcome::Failed(failure) => {
                let message = failure_message(failure);
                ("failed", json!({ "error": message }), message)
            }
            RunOutcome::Cancelled => ("cancelled", json!({}), String::new()),
        };
        // Cancelled work never reports back: the calls a cancel settled are settled already.
        for settled in self.tasks.end(run, status) {
            if status != "cancelled" {
                self.results.push(strings::task_result(&settled.task, settled.tool, status, &body));
            }
            self.settled_event(&settled, field.clone(), status);
        }
        self.note_due = true;
    }

    fn settled_event(&mut self, settled: &Settled, extra: Value, status: &str) {
        let mut data = json!({
            "taskId": settled.task,
            "callId": settled.call,
            "turnId": settled.turn,
            "name": settled.tool,
            "kind": settled.kind,
            "status": status,
        });
        if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
            data.extend(extra.clone());
        }
        self.emit("task.settled", data);
    }
}

/// The tools a session offers: the manifest's (or those named), and `task_wait` and
/// `task_cancel` when any of them is a task.
fn offered_tools(only: Option<&[String]>, output_schema: Option<&Value>, agents: &[AgentTool]) -> Vec<Offered> {
    let mut offered: Vec<Offered> = eve_runtime::registry::tools()
        .into_iter()
        .filter(|tool| only.is_none_or(|names| names.iter().any(|name| name == tool.name)))
        .map(|tool| {
            let kind = kind_of(tool);
            Offered { spec: manifest_spec(tool), kind, descriptor: Some(tool) }
        })
        .collect();
    let agent_task = eve_runtime::registry::workflow(AGENT_WORKFLOW);
    for agent in agents.iter().filter(|_| agent_task.is_some()) {
        let mut schema = agents::tool_schema();
        add_task_id(&mut schema);
        let spec = spec(agents::intern(&agent.name), &agent.description, schema);
        offered.push(Offered { spec, kind: Kind::Agent, descriptor: agent_task });
    }
    if offered.iter().any(|tool| tool.kind.is_task()) {
        static TASK_WAIT: LazyLock<Arc<ToolSpec>> =
            LazyLock::new(|| spec(strings::TASK_WAIT, TASK_WAIT_DESCRIPTION, task_wait_schema()));
        static TASK_CANCEL: LazyLock<Arc<ToolSpec>> =
            LazyLock::new(|| spec(strings::TASK_CANCEL, TASK_CANCEL_DESCRIPTION, task_cancel_schema()));
        offered.push(Offered { spec: TASK_WAIT.clone(), kind: Kind::TaskWait, descriptor: None });
        offered.push(Offered { spec: TASK_CANCEL.clone(), kind: Kind::TaskCancel, descriptor: None });
    }
    if let Some(schema) = output_schema {
        let spec = spec(strings::FINAL_OUTPUT, FINAL_OUTPUT_DESCRIPTION, schema.clone());
        offered.push(Offered { spec, kind: Kind::FinalOutput, descriptor: None });
    }
    offered
}

fn kind_of(tool: &ToolDescriptor) -> Kind {
    match tool.entry {
        EntryPoint::Plain(_) => Kind::Plain,
        EntryPoint::Workflow(_) => Kind::Execute,
        EntryPoint::Task(_) => Kind::Task,
        EntryPoint::Serve(_) => Kind::Serve,
    }
}

/// The spec of a manifest tool (`taskId` added for a resumable task); every tool's is built once
/// per process, the first time a session asks.
fn manifest_spec(tool: &'static ToolDescriptor) -> Arc<ToolSpec> {
    static SPECS: LazyLock<HashMap<&'static str, Arc<ToolSpec>>> = LazyLock::new(|| {
        let built = eve_runtime::registry::tools().into_iter().map(|tool| {
            let mut schema = (tool.input_schema)();
            if kind_of(tool) == Kind::Serve {
                add_task_id(&mut schema);
            }
            (tool.workflow_id, spec(tool.name, tool.description, schema))
        });
        built.collect()
    });
    SPECS[tool.workflow_id].clone()
}

const FINAL_OUTPUT_DESCRIPTION: &str =
    "Give the final output of your work, once it is done; it ends the turn. Not while tasks still work.";

const TASK_WAIT_DESCRIPTION: &str = "Wait until a task has a result, a new message arrives, or timeoutSeconds pass. Call it only \
    when you deliberately withhold a reply until a result arrives; tasks keep running and their results reach you without \
    it.";

const TASK_CANCEL_DESCRIPTION: &str = "Stop a task's current work. It won't report back.";

fn spec(name: &str, description: &str, schema: Value) -> Arc<ToolSpec> {
    Arc::new(ToolSpec { name: name.to_owned(), description: description.to_owned(), input_schema: schema })
}

fn task_wait_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "timeoutSeconds": { "type": "integer", "minimum": 1, "description": "Whole seconds to wait at most." } },
        "additionalProperties": false
    })
}

fn task_cancel_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "taskId": { "type": "string", "description": "The task to stop." } },
        "required": ["taskId"],
        "additionalProperties": false
    })
}

/// Adds the optional `taskId` a resumable task's calls carry to reach an unfinished task.
fn add_task_id(schema: &mut Value) {
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        let description = "Send this call to the unfinished task with this id instead of starting a new one.";
        properties.insert("taskId".into(), json!({ "type": "string", "description": description }));
    }
}

/// What a task's call gets as its input, once checked: the call's arguments without `taskId`,
/// and for an agent the agent's name, added after the check because the model does not write it
/// (an agent's schema takes no field but `message`).
fn call_input(call: &ToolCall, tool: &'static ToolDescriptor, name: &str) -> Result<Value, InputRefusal> {
    let mut input = without_task_id(&call.arguments);
    eve_runtime::registry::check_input(tool, &input)?;
    if tool.workflow_id == AGENT_WORKFLOW
        && let Some(object) = input.as_object_mut()
    {
        object.insert("agent".into(), Value::from(name));
    }
    Ok(input)
}

fn without_task_id(arguments: &Value) -> Value {
    let mut input = arguments.clone();
    if let Some(object) = input.as_object_mut() {
        object.remove("taskId");
    }
    input
}

/// A tool's output as the model reads it: a string as it is, anything else as JSON.
fn text_of(output: Value) -> String {
    match output {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

fn failure_message(failure: &eve_runtime::journal::RunFailure) -> String {
    match failure {
        eve_runtime::journal::RunFailure::Tool { message } | eve_runtime::journal::RunFailure::Panicked { message } => {
            message.clone()
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

// ---- the feed's events

/// A feed event as the journal keeps it: `{"sequence": …, "type": …, "data": {…}}`.
#[derive(Serialize)]
struct Published<D> {
    sequence: u64,
    #[serde(rename = "type")]
    name: &'static str,
    data: D,
}

// The data of the events every turn publishes, serialized from the body's own values.

/// `turn.started`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnData<'a> {
    turn_id: Option<&'a str>,
}

/// `step.started`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StepData<'a> {
    turn_id: Option<&'a str>,
    step: u64,
}

/// `message.completed`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageData<'a> {
    turn_id: Option<&'a str>,
    text: &'a str,
    finish_reason: FinishReason,
}

/// `actions.requested`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ActionsData<'a> {
    turn_id: Option<&'a str>,
    actions: Actions<'a>,
}

/// The calls of `actions.requested`, each as `{"callId", "name", "input"}`.
struct Actions<'a>(&'a [ToolCall]);

impl<'s> Serialize for Actions<'s> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Action<'a> {
            call_id: &'a str,
            name: &'a str,
            input: &'a Value,
        }
        let action = |call: &'s ToolCall| Action { call_id: &call.id, name: &call.name, input: &call.arguments };
        serializer.collect_seq(self.0.iter().map(action))
    }
}

/// `action.result`: `output` or `error`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ActionResult<'a> {
    turn_id: Option<&'a str>,
    call_id: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// `turn.completed` of a turn that completed, with its final output if it gave one.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnCompleted<'a> {
    turn_id: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
}

// ---- steps

/// What one model step journals: the answer (with call ids), and the plain tools' results.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ModelStep {
    response: ModelResponse,
    plain: BTreeMap<String, Result<Value, String>>,
}

/// The body takes a live model step's output as the step returned it; replay decodes it.
static MODEL_STEP: StepDef = StepDef::new(
    "eve_runtime::session::model",
    "session.model",
    RetryPolicy { max_attempts: 5, backoff: Backoff::exponential_millis(1_000) },
)
.handing_over();

/// Calls the model and runs the plain tools it called: one step, so replay does neither again.
/// What a model step shows the model, shared: it becomes a [`ModelRequest`] only when the step
/// runs, so a step replayed from the journal copies nothing.
struct Request {
    system: Arc<str>,
    messages: Arc<Vec<Message>>,
    tools: Arc<[Arc<ToolSpec>]>,
}

fn call_model(step: u64, request: Request, plain: Arc<[String]>, agent: Option<String>) -> StepCall<ModelStep> {
    StepCall::new(&MODEL_STEP, step, move |step: u64, ctx: StepCtx| {
        let request = ModelRequest {
            system: request.system.to_string(),
            messages: request.messages.clone(),
            tools: request.tools.to_vec(),
        };
        let (plain, agent) = (plain.clone(), agent.clone());
        async move {
            // An agent's own model, if it has one; the runtime's otherwise.
            let own = agent.and_then(|name| ctx.state::<Agents>().ok()?.model(&name));
            let model = match own {
                Some(model) => model,
                None => ctx.state::<SessionModel>().map(|model| model.0.clone()).map_err(|_| {
                    FatalError::new("no model is configured: give the runtime one with RuntimeBuilder::model")
                })?,
            };
            let run = ctx.run_id().cloned();
            // Where the model's text goes as it streams: the runtime's events, if anyone listens.
            let listening = run.as_ref().and_then(|run| {
                let control = ctx.control().ok()?;
                control.listening().then(|| (control, run.clone()))
            });
            let started = std::time::Instant::now();
            let answered = match &listening {
                // Nobody would see the text stream by: the model may answer whole.
                None => model.answer(&request).await,
                Some((control, run)) => {
                    let stream = model.stream(&request).await.map_err(model_error)?;
                    model::collect(stream, |piece| control.publish(model_text(run, piece))).await
                }
            };
            crate::metrics::model_called(model.name(), answered.is_ok(), started.elapsed());
            let mut response = answered.map_err(model_error)?;
            // Named by the run and the step (its argument), so a retried attempt names them again.
            let run_name = run.as_ref().map_or("", RunId::as_str);
            for (index, call) in response.tool_calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("{run_name}-{step}-{index}");
                }
            }
            let mut results = BTreeMap::new();
            for call in response.tool_calls.iter().filter(|call| plain.contains(&call.name)) {
                results.insert(call.id.clone(), run_plain(&ctx, call).await);
            }
            Ok::<_, StepError>(ModelStep { response, plain: results })
        }
    })
}

fn model_error(error: model::ModelError) -> StepError {
    match error {
        model::ModelError::Unavailable { retry_after: Some(delay), .. } => {
            RetryableError::new(error.to_string()).retry_after(delay).into()
        }
        model::ModelError::Unavailable { .. } => StepError::msg(error),
        model::ModelError::Malformed(_) | model::ModelError::Config(_) => FatalError::new(error).into(),
    }
}

/// Runs a plain tool inside the model step.
async fn run_plain(ctx: &StepCtx, call: &ToolCall) -> Result<Value, String> {
    let Some(tool) = eve_runtime::registry::tool(&call.name) else {
        return Err(format!("there is no tool named `{}`", call.name));
    };
    let EntryPoint::Plain(entry) = tool.entry else { return Err("the tool is not a plain tool".into()) };
    eve_runtime::registry::check_input(tool, &call.arguments).map_err(|message| format!("invalid input: {message}"))?;
    let tool_ctx = eve_runtime::ToolCtx::for_step(ctx, call.id.clone(), tool.name).ok_or("no run")?;
    let started = std::time::Instant::now();
    let output = entry(call.arguments.clone(), tool_ctx).await;
    eve_runtime::metrics::tool_called(tool.name, output.is_ok(), started.elapsed());
    output.map_err(|error| error.message().to_owned())
}

/// The delivery id of a call (or stop) sent to the resumable task `run`: each is taken once.
fn call_delivery_id(run: &RunId, call: &ServeInbound) -> String {
    match call {
        ServeInbound::Call { call_id, .. } => format!("call:{call_id}"),
        ServeInbound::Stop { stretch } => format!("stop:{run}:{stretch}"),
    }
}

fn call_payload(call: &ServeInbound) -> Value {
    serde_json::to_value(call).expect("a call always serializes")
}

/// A start the store could not take now is tried again; anything else (invalid input, say) is
/// the call's answer.
pub(super) fn start_error(error: eve_runtime::Error) -> StepError {
    match error.is_transient() {
        true => StepError::msg(error),
        false => FatalError::new(error).into(),
    }
}

static SEND_STEP: StepDef = StepDef::new("eve_runtime::session::send", "session.send", RetryPolicy::DEFAULT);

/// Sends a resumable task a call (or a stop), once per delivery id.
fn send_call(run: RunId, delivery: String, payload: Value) -> StepCall<()> {
    StepCall::new(
        &SEND_STEP,
        (run, delivery, payload),
        |(run, delivery, payload): (RunId, String, Value), ctx: StepCtx| async move {
            ctx.control()?.deliver(&run, CALLS_HOOK, &delivery, payload).await.map_err(StepError::msg)?;
            Ok::<_, StepError>(())
        },
    )
}

static ABORT_STEP: StepDef = StepDef::new("eve_runtime::session::abort", "session.abort", RetryPolicy::DEFAULT);

/// Cancels a child run (or, with `keep_output`, interrupts it: it ends with what it returns).
fn abort_child(run: RunId, keep_output: bool, reason: String) -> StepCall<()> {
    StepCall::new(
        &ABORT_STEP,
        (run, keep_output, reason),
        |(run, keep, reason): (RunId, bool, String), ctx: StepCtx| async move {
            let control = ctx.control()?;
            let done = if keep { control.interrupt(&run, &reason).await } else { control.cancel(&run, &reason).await };
            // A child that has already ended has nothing left to cancel.
            match done {
                Ok(()) | Err(eve_runtime::Error::RunFinished { .. }) => {}
                Err(error) => return Err(StepError::msg(error)),
            }
            Ok::<_, StepError>(())
        },
    )
}

/// A piece of a model's answer as it streams in a session, for whoever follows the runtime's
/// events (`model.text`); not durable: the whole answer is journaled with the step that asked for it.
fn model_text(run: &RunId, text: &str) -> RunEvent {
    let mut data = serde_json::Map::new();
    data.insert("text".to_owned(), Value::from(text));
    RunEvent::Custom(CustomEvent { run: run.clone(), name: "model.text", data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_of_output<A, F>(_: fn(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// What a session parked between turns keeps in the warm cache is its body's future: a turn's
    /// futures are boxed so that state stays small (it was 3,200 bytes with the turn inline).
    #[test]
    fn a_parked_sessions_future_stays_small() {
        let parked = size_of_output(Body::<'static>::run);
        assert!(parked <= 3 * std::mem::size_of::<Body<'static>>(), "{parked} bytes");
    }
}
