//! Subagents: models with their own instructions and tools, each working in a session of its own.
//!
//! An [`Agent`](super::Agent) is defined in Rust and given to the runtime with
//! [`SessionBuilderExt::agent`](crate::SessionBuilderExt::agent). A session offers every agent
//! (unless it is [hidden](super::Agent::hidden)) as a resumable task: the
//! model calls it with a `message`, the call answers with a receipt, and the agent works in its
//! own child session (`agent.started` names it) until its reply comes back as a `<task_result>`.
//! A later call with the same `taskId` continues the same conversation. A workflow body calls an
//! agent directly with [`AgentCtxExt::agent`], and reads the agents it can call with
//! [`AgentCtxExt::agents`].
//!
//! ```no_run
//! use eve_tools::prelude::*;
//! use eve_tools::session::{Agent, ModelResponse, ScriptedModel};
//!
//! # fn demo() -> Result<(), eve_tools::Error> {
//! let researcher = Agent::new("researcher")
//!     .description("Finds facts and cites where each comes from.")
//!     .instructions("You are a careful researcher. Answer with sources.")
//!     .tools(["search"]);
//! let model = ScriptedModel::new(|_| ModelResponse::text("…"));
//! let runtime = Runtime::builder().model(model).agent(researcher).build()?;
//! # Ok(())
//! # }
//! ```
//!
//! Both ways are durable: the child session is a run of its own, started and sent its message by
//! steps (through [`StepCtx::control`](eve_runtime::StepCtx::control)), and what it reports back
//! arrives on a hook of the calling run. So a restart in the
//! middle of an agent's work neither starts a second session nor sends the message twice.

use std::collections::BTreeMap;

use futures::future::Either;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::agents::{AGENT_WORKFLOW, Agents, tool_schema};
use super::engine::{SESSION, SESSION_HOOK, SessionInput, start_error};
use super::inbound::{SessionInbound, TurnPolicy, UserMessage};
use eve_runtime::StartOptions;
use eve_runtime::context::{Receive, ServeCtx, StretchSignal, WorkflowCtx};
use eve_runtime::error::{FatalError, StepError, ToolError};
use eve_runtime::journal::{ChildReport, Entry, ParentLink, RecordKind, RunId};
use eve_runtime::registry::{BodyFuture, EntryPoint, InternalWorkflow, Shape, ToolDescriptor};
use eve_runtime::step::{RetryPolicy, StepCall, StepCtx, StepDef};
use eve_runtime::wait::{Hook, HookError, create_hook};

// ---- the agent's resumable task

/// The run of an agent's task: each call is a message to the agent's session, and its reply the
/// session's final reply to it.
pub(crate) static AGENT: ToolDescriptor = ToolDescriptor {
    name: "eve.agent",
    description: "A subagent's resumable task: each call is a message to the agent's own session.",
    workflow_id: AGENT_WORKFLOW,
    shape: Shape::TASK,
    input_schema: tool_schema,
    validate_input: eve_runtime::registry::check_decodes::<AgentCall>,
    output_schema: || None,
    entry: EntryPoint::Serve(serve_entry),
    // The body is eve-sessions' own: its version says which code it is.
    fingerprint: concat!("eve-sessions ", env!("CARGO_PKG_VERSION")),
    version: env!("CARGO_PKG_VERSION"),
};

inventory::submit!(InternalWorkflow(&AGENT));

/// One call of an agent's task. The session adds the agent's name.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentCall {
    pub message: String,
    #[serde(default)]
    pub agent: String,
}

fn serve_entry(calls: Receive, ctx: ServeCtx) -> BodyFuture {
    Box::pin(async move {
        serve(calls.typed(), ctx).await?;
        Ok(Value::Null)
    })
}

async fn serve(mut calls: Receive<AgentCall>, ctx: ServeCtx) -> Result<(), ToolError> {
    let mut child: Option<Child> = None;
    while let Some(call) = calls.recv().await {
        let child = match &mut child {
            Some(child) => child,
            None => {
                let id = format!("{}.session", ctx.run_id());
                match Child::open(&ctx, &call.input.agent, id, None).await {
                    Ok(opened) => child.insert(opened),
                    Err(error) => {
                        ctx.reply(format!("Error: {}", error.message()))?;
                        continue;
                    }
                }
            }
        };
        let delivery = format!("call:{}", call.id());
        let signal = call.abort_signal();
        match child.turn(&ctx, call.input.message, &delivery, Some(signal)).await {
            Ok(Turn::Ended(reply)) => ctx.reply(reply.answer())?,
            // The session settled the stopped calls as cancelled already; back to `receive()`.
            Ok(Turn::Stopped) => {}
            Err(error) if ctx.is_cancelled() => {
                tracing::debug!("an agent's task was cancelled while it worked: {error}");
                break;
            }
            Err(error) => ctx.reply(format!("Error: {}", error.message()))?,
        }
    }
    // The task ends (its session closed, or it was cancelled): so does the agent's session.
    if let Some(child) = child {
        child.close().await?;
    }
    Ok(())
}

// ---- ctx.agent

/// What sessions add to a workflow body's context: calling subagents. In the prelude of
/// eve-tools.
pub trait AgentCtxExt {
    /// The agent `name`, to send a message with [`AgentRef::send`]. Hidden agents are callable too.
    ///
    /// ```no_run
    /// use eve_tools::prelude::*;
    /// use serde_json::json;
    ///
    /// # async fn demo(ctx: &WorkflowCtx, notes: String) -> Result<(), ToolError> {
    /// let review = ctx
    ///     .agent("reviewer")
    ///     .output_schema(json!({
    ///         "type": "object",
    ///         "properties": { "approved": { "type": "boolean" }, "reason": { "type": "string" } },
    ///         "required": ["approved", "reason"]
    ///     }))
    ///     .send(format!("Review these release notes:\n\n{notes}"))
    ///     .await?;
    /// let approved = review.output().and_then(|output| output["approved"].as_bool()).unwrap_or(false);
    /// # Ok(())
    /// # }
    /// ```
    fn agent(&self, name: impl Into<String>) -> AgentRef;

    /// The agents this body can call, name → description, hidden ones included: read once and
    /// recorded, so replay sees the same list even if the runtime's agents changed since.
    fn agents(&self) -> BTreeMap<String, String>;
}

impl AgentCtxExt for WorkflowCtx {
    fn agent(&self, name: impl Into<String>) -> AgentRef {
        AgentRef { ctx: self.clone(), name: name.into(), output_schema: None }
    }

    #[track_caller]
    fn agents(&self) -> BTreeMap<String, String> {
        let read = |agents: Option<&Agents>| {
            let described = agents.map(Agents::describe).unwrap_or_default();
            serde_json::to_value(described).expect("names and descriptions serialize")
        };
        serde_json::from_value(self.record_state("agents", read)).unwrap_or_default()
    }
}

/// An agent a workflow body is about to call: [`AgentCtxExt::agent`].
#[derive(Debug)]
#[must_use = "an agent is called only by `send`"]
pub struct AgentRef {
    ctx: WorkflowCtx,
    name: String,
    output_schema: Option<Value>,
}

impl AgentRef {
    /// Requires a structured reply matching this JSON Schema: the agent is offered
    /// `final_output`, and a reply that does not match fails the call with the field at fault.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Sends the agent `message` in a session of its own and waits for its final reply. Each send
    /// opens its own session, named by the call's place in the body, so repeated and parallel
    /// sends to one agent each keep their identity on replay.
    ///
    /// Fails when the agent does not exist, its turn fails or is cancelled, or its reply does
    /// not match the output schema.
    pub async fn send(self, message: impl Into<String>) -> Result<AgentReply, ToolError> {
        let AgentRef { ctx, name, output_schema } = self;
        let mut child = Child::open(&ctx, &name, String::new(), output_schema.clone()).await?;
        let turn = child.turn(&ctx, message.into(), "send", None).await;
        child.close().await?;
        let Turn::Ended(reply) = turn? else { unreachable!("a send has no stretch to stop") };
        match reply.status.as_str() {
            "completed" => {}
            "cancelled" => return Err(ToolError::new(format!("the agent `{name}`'s turn was cancelled"))),
            _ => {
                let error = reply.error.as_deref().unwrap_or("its turn failed");
                return Err(ToolError::new(format!("the agent `{name}` failed: {error}")));
            }
        }
        if let Some(schema) = &output_schema {
            check_output(&name, schema, reply.output.as_ref())?;
        }
        Ok(reply)
    }
}

/// Checks a structured reply against the schema the caller gave.
fn check_output(agent: &str, schema: &Value, output: Option<&Value>) -> Result<(), ToolError> {
    let Some(output) = output else {
        return Err(ToolError::new(format!(
            "the agent `{agent}` replied without its structured output; its instructions should tell it to finish with `final_output`"
        )));
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|error| ToolError::new(format!("the output schema for the agent `{agent}` is not valid: {error}")))?;
    if let Some(error) = validator.iter_errors(output).next() {
        let at = error.instance_path().to_string();
        let at = if at.is_empty() { "the output".to_owned() } else { format!("`{at}`") };
        return Err(ToolError::new(format!(
            "the reply of the agent `{agent}` does not match its output schema: at {at}: {error}"
        )));
    }
    Ok(())
}

/// An agent's final reply to one message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentReply {
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    session: RunId,
}

impl AgentReply {
    /// The text of the agent's final reply.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The structured output the agent gave (`final_output`), if it was asked for one.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// The structured output as `T`.
    pub fn data<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        let output = self.output.clone().unwrap_or(Value::Null);
        serde_json::from_value(output)
            .map_err(|error| ToolError::new(format!("the agent's output is not of the expected type: {error}")))
    }

    /// The id of the session the agent worked in (its event feed shows what it did).
    pub fn session_id(&self) -> &RunId {
        &self.session
    }

    /// What the task's caller reads: the structured output if there is one, else the text.
    fn answer(&self) -> Value {
        match (&self.output, self.status.as_str()) {
            (Some(output), _) => output.clone(),
            (None, "completed") => Value::from(self.text.clone()),
            (None, _) => Value::from(format!("Error: {}", self.error.as_deref().unwrap_or("the agent's turn failed"))),
        }
    }
}

// ---- the child session

/// An agent's session, started by the calling run, reporting back to a hook of it.
struct Child {
    session: RunId,
    reports: Hook<Value>,
}

/// How one message to the agent went.
enum Turn {
    Ended(AgentReply),
    /// The caller's stretch of work was stopped: the agent's turn was cancelled.
    Stopped,
}

impl Child {
    /// Opens the agent's session: `id`, or (when empty) one named after the reports hook's op.
    async fn open(ctx: &WorkflowCtx, agent: &str, id: String, output_schema: Option<Value>) -> Result<Self, ToolError> {
        // Created first, so the session's reports have a hook to land on from its first event.
        let reports = create_hook::<Value>();
        let op = reports.op().ok_or_else(|| ToolError::new("an agent can be called only from a workflow body"))?;
        let id = if id.is_empty() { format!("{}.{agent}-{}", ctx.run_id(), op.0) } else { id };
        let session: RunId = id.parse().map_err(|_| {
            ToolError::new(format!("the agent's session id `{id}` is too long; use shorter run ids or agent names"))
        })?;
        let parent = ParentLink { run: ctx.run_id().clone(), hook: op };
        let open = Open { agent: agent.to_owned(), session: session.clone(), parent, output_schema };
        open_session(open).await?;
        ctx.publish(json!({ "agent": { "name": agent, "sessionId": session } }));
        Ok(Child { session, reports })
    }

    /// Sends `text` and waits for the turn it opens to end (or, with `stop`, for the caller's
    /// stretch to be stopped, which cancels the turn).
    async fn turn(
        &mut self,
        ctx: &WorkflowCtx,
        text: String,
        delivery: &str,
        stop: Option<StretchSignal>,
    ) -> Result<Turn, ToolError> {
        let message = SessionInbound::Message(UserMessage { text, turn_policy: TurnPolicy::Queue, caller: None });
        send(self.session.clone(), format!("message:{delivery}"), message).await?;
        let mut stop = stop;
        let mut stopped = false;
        let mut reply = String::new();
        loop {
            let next = match stop.as_mut() {
                Some(signal) => match futures::future::select(Box::pin(self.reports.recv()), signal).await {
                    Either::Left((next, _)) => next,
                    Either::Right(((), _)) => {
                        stop = None;
                        stopped = true;
                        let id = format!("cancel:{delivery}");
                        send(self.session.clone(), id, SessionInbound::Cancel).await?;
                        continue;
                    }
                },
                None => self.reports.recv().await,
            };
            let payload = match next {
                Ok(payload) => payload,
                Err(HookError::Cancelled) => return Err(ToolError::new("the call was cancelled")),
                Err(error) => return Err(ToolError::new(format!("the agent's session cannot report back: {error}"))),
            };
            let Ok(report) = serde_json::from_value::<ChildReport>(payload) else { continue };
            let event = match &report.entry {
                Entry::Recorded { kind: RecordKind::Published, value, .. } => value.to_value(),
                entry if entry.is_terminal() => {
                    return Err(ToolError::new(format!("the agent's session {} has ended", self.session)));
                }
                _ => continue,
            };
            let data = &event["data"];
            match event["type"].as_str().unwrap_or_default() {
                "message.completed" if data["finishReason"] != "tool-calls" => {
                    reply = data["text"].as_str().unwrap_or_default().to_owned();
                }
                "turn.completed" if stopped => return Ok(Turn::Stopped),
                "turn.completed" => {
                    return Ok(Turn::Ended(AgentReply {
                        text: reply,
                        output: data.get("output").cloned(),
                        status: data["status"].as_str().unwrap_or("failed").to_owned(),
                        error: data.get("error").and_then(Value::as_str).map(str::to_owned),
                        session: self.session.clone(),
                    }));
                }
                // A question or a sign-in in the agent's session reaches the person through the
                // session above (and is answered there).
                "input.requested" | "input.resolved" | "authorization.required" | "authorization.completed" => {
                    ctx.publish(json!({ "forward": event }));
                }
                _ => {}
            }
        }
    }

    /// Ends the agent's session.
    async fn close(self) -> Result<(), ToolError> {
        send(self.session, "close".to_owned(), SessionInbound::Close).await?;
        Ok(())
    }
}

/// What opening an agent's session needs: its step's arguments.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Open {
    agent: String,
    session: RunId,
    parent: ParentLink,
    output_schema: Option<Value>,
}

static OPEN_STEP: StepDef = StepDef::new("eve_runtime::agent::open", "agent.open", RetryPolicy::DEFAULT);

/// Starts the agent's session (its id makes a retried or replayed start find it).
fn open_session(open: Open) -> StepCall<()> {
    StepCall::new(&OPEN_STEP, open, |open: Open, ctx: StepCtx| async move {
        let agents = ctx.state::<Agents>().unwrap_or_default();
        let Some(agent) = agents.0.get(&open.agent) else {
            let known: Vec<&str> = agents.0.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Err(FatalError::new(format!(
                "there is no agent named `{}`; the runtime's agents: {known} (add one with Runtime::builder().agent(..))",
                open.agent
            ))
            .into());
        };
        let input =
            SessionInput {
                system: agent.instructions.clone(),
                tools: Some(agent.tools.clone().unwrap_or_else(|| {
                    eve_runtime::registry::tools().iter().map(|tool| tool.name.to_owned()).collect()
                })),
                child: true,
                output_schema: open.output_schema,
                agents: Vec::new(),
                agent: Some(agent.name.clone()),
                history: None,
                compact_every: None,
                carried: None,
            };
        let input = serde_json::to_value(input).expect("a session's input always serializes");
        let options = StartOptions::new().id(open.session).parent(open.parent);
        ctx.control()?.start(SESSION.workflow_id, input, options).await.map_err(start_error)?;
        Ok::<_, StepError>(())
    })
}

static SEND_STEP: StepDef = StepDef::new("eve_runtime::agent::send", "agent.send", RetryPolicy::DEFAULT);

/// Delivers a message, a cancel or the close to the agent's session, once per delivery id.
fn send(session: RunId, delivery: String, inbound: SessionInbound) -> StepCall<()> {
    let payload = serde_json::to_value(inbound).expect("what a session receives always serializes");
    StepCall::new(
        &SEND_STEP,
        (session, delivery, payload),
        |(session, delivery, payload): (RunId, String, Value), ctx: StepCtx| async move {
            match ctx.control()?.deliver(&session, SESSION_HOOK, &delivery, payload).await {
                // A session that has ended needs no close, and takes no message.
                Ok(()) => Ok(()),
                Err(eve_runtime::Error::RunNotFound(_)) if delivery == "close" => Ok(()),
                Err(error) => Err(StepError::msg(error)),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_that_misses_a_field_names_it() {
        let schema =
            json!({ "type": "object", "properties": { "approved": { "type": "boolean" } }, "required": ["approved"] });
        let error = check_output("reviewer", &schema, Some(&json!({ "approved": "yes" }))).unwrap_err();
        assert!(error.message().contains("`/approved`"), "{}", error.message());
        let missing = check_output("reviewer", &schema, None).unwrap_err();
        assert!(missing.message().contains("final_output"), "{}", missing.message());
        assert!(check_output("reviewer", &schema, Some(&json!({ "approved": true }))).is_ok());
    }
}
