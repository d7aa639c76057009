//! The handle people and programs use: [`SessionRuntimeExt::session`] starts a session,
//! [`Session`] sends it messages, cancels its turn, answers its tasks' questions and reads its
//! feed; [`SessionBuilderExt`] gives the runtime its model and subagents.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use eve_runtime::ask::Answer;
use eve_runtime::journal::RunId;
use eve_runtime::{Runtime, RuntimeBuilder, StartOptions};

use crate::agents::{self, Agent};
use crate::engine::{SESSION, SESSION_HOOK, SessionInput};
use crate::error::Error;
use crate::feed::{self, SessionEvent};
use crate::inbound::{SessionInbound, UserMessage};
use crate::model::{Model, SessionModel};

/// How a session starts: [`SessionRuntimeExt::session`].
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    id: Option<RunId>,
    input: SessionInput,
}

impl SessionOptions {
    /// A session with no system prompt that offers every tool of the manifest.
    pub fn new() -> Self {
        SessionOptions::default()
    }

    /// The session's id (its run's). Starting a session with an id that exists returns that
    /// session unchanged, so a process that restarts can call this again.
    pub fn id(mut self, id: RunId) -> Self {
        self.id = Some(id);
        self
    }

    /// The system prompt. The block about tasks is added after it when the session offers a task.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.input.system = prompt.into();
        self
    }

    /// Offers only these tools of the manifest and agents of the runtime (`task_wait` and
    /// `task_cancel` come with any task).
    pub fn tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.input.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Gives the session a final output of this JSON Schema: the model is offered `final_output`,
    /// which ends the turn with its arguments as `turn.completed`'s `output`, and is refused (the
    /// error names them) while tasks work.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.input.output_schema = Some(schema);
        self
    }

    /// Shows the model at most `messages` messages of history (100 by default): once there are
    /// more, the oldest turns are dropped until the rest fits in half of that, and the model reads
    /// a `[Compacted]` line and the `[Tasks]` note first, so it still knows every task. Whole turns
    /// are dropped, so no tool call loses its result. Sizes the model's context and what a parked
    /// session keeps in memory.
    pub fn history(mut self, messages: usize) -> Self {
        self.input.history = Some(messages);
        self
    }

    /// Continues the session's run as new every `turns` turns (20 by default): between two turns,
    /// the session carries what it knows into a fresh journal, so a restart replays at most that
    /// many turns however long the session is. The feed's events before it are no longer in the
    /// journal (the feed's sequence numbers go on, and `session.compacted` opens the new history);
    /// the waiting messages and the tasks' reports reach the new history.
    pub fn compact_every(mut self, turns: u64) -> Self {
        self.input.compact_every = Some(turns);
        self
    }

    /// A child session (or a schedule's): only its final reply reaches its caller, so a turn
    /// held for tasks reports its text with `finishReason: "tool-calls"`.
    pub fn child(mut self) -> Self {
        self.input.child = true;
        self
    }
}

/// The length of a message's delivery id: `message:` and a nonce (43 base64url characters).
const MESSAGE_ID_LEN: usize = "message:".len() + 43;

/// What sessions add to the [`RuntimeBuilder`]: a model, and subagents. In the prelude of eve-tools.
pub trait SessionBuilderExt: Sized {
    /// The model the runtime's sessions talk to. A session's model step fails with a clear error
    /// when none is set.
    fn model(self, model: impl Model) -> Self;

    /// Adds a subagent: sessions offer it as a resumable task (unless it is hidden), and workflow
    /// bodies call it with [`AgentCtxExt::agent`](crate::AgentCtxExt::agent). An agent given twice replaces the first;
    /// [`build`](RuntimeBuilder::build) refuses a name the model could not call or that a tool
    /// already has.
    fn agent(self, agent: Agent) -> Self;
}

impl SessionBuilderExt for RuntimeBuilder {
    fn model(self, model: impl Model) -> Self {
        self.state(SessionModel(Arc::new(model)))
    }

    fn agent(self, agent: Agent) -> Self {
        agents::add(self, agent)
    }
}

/// What sessions add to the [`Runtime`]: starting and opening sessions. In the prelude of
/// eve-tools.
pub trait SessionRuntimeExt {
    /// Starts a session (or, with [`SessionOptions::id`] of one that exists, returns it).
    fn session(&self, options: SessionOptions) -> impl Future<Output = Result<Session, Error>> + Send;

    /// The session with this id, checking that it is one.
    fn open_session(&self, id: &RunId) -> impl Future<Output = Result<Session, Error>> + Send;
}

impl SessionRuntimeExt for Runtime {
    async fn session(&self, mut options: SessionOptions) -> Result<Session, Error> {
        let agents = self.state::<agents::Agents>().map(|agents| agents.offered()).unwrap_or_default();
        for name in options.input.tools.iter().flatten() {
            if eve_runtime::registry::tool(name).is_none() && !agents.iter().any(|agent| &agent.name == name) {
                return Err(eve_runtime::registry::unknown_tool(name).into());
            }
        }
        let only = options.input.tools.as_deref();
        options.input.agents =
            agents.into_iter().filter(|agent| only.is_none_or(|names| names.contains(&agent.name))).collect();
        let input = serde_json::to_value(&options.input).expect("session options always serialize");
        let mut start = StartOptions::new();
        if let Some(id) = options.id {
            start = start.id(id);
        }
        let handle = self.start_descriptor(&SESSION, input, start).await?;
        Ok(Session { runtime: self.clone(), id: handle.id().clone() })
    }

    async fn open_session(&self, id: &RunId) -> Result<Session, Error> {
        let record = self.journal(id).await?;
        if record.summary.tool != SESSION.name {
            return Err(Error::NotASession(id.clone()));
        }
        Ok(Session { runtime: self.clone(), id: id.clone() })
    }
}

/// A handle to a session: send it messages, cancel its turn, answer its tasks' questions, and
/// read its event feed.
#[derive(Clone)]
pub struct Session {
    runtime: Runtime,
    id: RunId,
}

impl Session {
    /// The session's id (its run's).
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// Sends the model a message from an anonymous caller that steers the open turn, or opens a
    /// turn when none is open.
    pub async fn send(&self, text: impl Into<String>) -> Result<(), Error> {
        self.send_message(UserMessage::new(text)).await
    }

    /// Sends a message with its policy and caller.
    pub async fn send_message(&self, message: UserMessage) -> Result<(), Error> {
        // `message:` and a nonce, made in one allocation.
        let mut id = String::with_capacity(MESSAGE_ID_LEN);
        id.push_str("message:");
        eve_runtime::random::push_nonce(&mut id);
        self.deliver(&id, SessionInbound::Message(message)).await
    }

    /// Sends a message at most once per `delivery_id`: a client that retries after a lost reply
    /// sends it again with the same id, and the session reads it once.
    pub async fn send_message_once(&self, message: UserMessage, delivery_id: &str) -> Result<(), Error> {
        self.deliver(&format!("message:{delivery_id}"), SessionInbound::Message(message)).await
    }

    /// Cancels the open turn, the `#[workflow_tool]` calls it waits on and every working task
    /// (`cancel.reason` `turn_cancelled`). An idle resumable task stays and can be continued.
    pub async fn cancel(&self) -> Result<(), Error> {
        self.deliver(&format!("cancel:{}", eve_runtime::random::nonce()), SessionInbound::Cancel).await
    }

    /// Ends the session: every task ends (`cancel.reason` `turn_ended`), then the session's run.
    pub async fn close(&self) -> Result<(), Error> {
        self.deliver("close", SessionInbound::Close).await
    }

    /// Answers a question a task asked: `request_id` as the feed's `input.requested` gives it.
    pub async fn answer(&self, request_id: &str, answer: Answer) -> Result<(), Error> {
        let unknown = || {
            eve_runtime::Error::Answer(eve_runtime::ask::AnswerError::NotOpen {
                run: self.id.clone(),
                request: request_id.to_owned(),
            })
        };
        let (run, request) = request_id.rsplit_once(':').ok_or_else(unknown)?;
        let run: RunId = run.parse().map_err(|_| unknown())?;
        // Only the runs this session started are its children.
        if !run.as_str().strip_prefix(self.id.as_str()).is_some_and(|rest| rest.starts_with('.')) {
            return Err(unknown().into());
        }
        Ok(self.runtime.answer(&run, request, answer).await?)
    }

    /// The feed's events after sequence number `after` (0 for all), then each new one as the
    /// session commits it. A client that reconnects passes the last sequence it saw and misses
    /// nothing, also across restarts, as long as the session has not compacted its journal since
    /// (every [`compact_every`](SessionOptions::compact_every) turns): the events before a
    /// `session.compacted` are no longer kept. The stream ends when the session's run ends.
    pub fn events(&self, after: u64) -> BoxStream<'static, Result<SessionEvent, Error>> {
        feed::follow(self.runtime.clone(), self.id.clone(), after).boxed()
    }

    /// The events the feed holds now, after sequence number `after`: those since the session's
    /// last compaction (`session.compacted` first).
    pub async fn history(&self, after: u64) -> Result<Vec<SessionEvent>, Error> {
        Ok(feed::journaled(&self.runtime.journal(&self.id).await?.entries, after))
    }

    async fn deliver(&self, delivery_id: &str, inbound: SessionInbound) -> Result<(), Error> {
        let payload: Value = serde_json::to_value(inbound).expect("what a session receives always serializes");
        match self.runtime.deliver_to(&self.id, SESSION_HOOK, delivery_id, payload).await {
            // The run exists but took nothing: it has finished.
            Err(eve_runtime::Error::RunNotFound(_)) if self.runtime.journal(&self.id).await.is_ok() => {
                Err(Error::Ended(self.id.clone()))
            }
            delivered => Ok(delivered?),
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}
