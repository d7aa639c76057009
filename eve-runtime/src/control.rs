//! What a step may ask of the runtime that runs it: [`RunControl`], and how a run starts
//! ([`StartOptions`]).
//!
//! The core's lower layers do not know the [`Runtime`](crate::Runtime), which sits at the top of the
//! ladder. A part built on the core (sessions, say) still needs its steps to start other runs,
//! send them deliveries and stop them. The runtime implements this trait and every step reaches
//! it, typed, with [`StepCtx::control`](crate::StepCtx::control): the seam is one small trait
//! defined low and implemented high, never a pointer to the runtime's own type.
//!
//! ```no_run
//! use eve_tools::prelude::*;
//! use eve_tools::journal::{Op, RunId};
//!
//! /// Sends a child run's hook at op 1 a payload, once per delivery id.
//! #[step]
//! async fn nudge(ctx: &StepCtx, child: RunId) -> Result<(), StepError> {
//!     let delivery = format!("nudge:{child}");
//!     ctx.control()?.deliver(&child, Op(1), &delivery, serde_json::json!("go")).await?;
//!     Ok(())
//! }
//! ```

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Error;
use crate::events::RunEvent;
use crate::journal::{BuildStamp, Op, ParentLink, RunId, TraceParent};
use crate::store::NewRun;
use crate::time::Timestamp;

/// What a step may ask of the runtime running its run: start a run, deliver to one, cancel or
/// interrupt one, and publish a live event. Implemented by the [`Runtime`](crate::Runtime);
/// reached from a step with [`StepCtx::control`](crate::StepCtx::control).
///
/// A step runs at least once per crash or retry, so each call must be safe to repeat: a start
/// names its run's id (a second start of the same call finds the run), and a delivery its
/// delivery id (a second delivery changes nothing).
#[async_trait]
pub trait RunControl: Send + Sync {
    /// Starts a run of the workflow `workflow_id` (a tool of the manifest, or a workflow a part
    /// registered) with `input`, as `options` say, and returns its id. A run with the options' id
    /// that is the same call is returned unchanged.
    async fn start(&self, workflow_id: &str, input: Value, options: StartOptions) -> Result<RunId, Error>;

    /// Delivers `payload` to the hook at `op` of `run`, at most once per `delivery_id`, and wakes
    /// the run. [`Error::RunNotFound`] if no unfinished run has that hook.
    async fn deliver(&self, run: &RunId, op: Op, delivery_id: &str, payload: Value) -> Result<(), Error>;

    /// Cancels `run`: its waits resolve cancelled, its cleanup runs, and it ends cancelled.
    /// [`Error::RunFinished`] if it has already ended.
    async fn cancel(&self, run: &RunId, reason: &str) -> Result<(), Error>;

    /// Fires `run`'s abort signal as [`cancel`](RunControl::cancel) does, but lets it end with what
    /// its body returns: how a new message interrupts a call a session's turn waits on.
    async fn interrupt(&self, run: &RunId, reason: &str) -> Result<(), Error>;

    /// Whether anyone listens to the runtime's events, so an event would be seen.
    fn listening(&self) -> bool;

    /// Publishes a live event (not durable) to whoever listens: a model's text as it streams, say.
    fn publish(&self, event: RunEvent);
}

/// How to start a run: see [`Runtime::start_with`](crate::Runtime::start_with).
#[derive(Clone, Debug)]
pub struct StartOptions {
    pub(crate) id: Option<RunId>,
    pub(crate) principal: Option<String>,
    pub(crate) interactive: bool,
    pub(crate) parent: Option<ParentLink>,
    pub(crate) traceparent: Option<TraceParent>,
}

impl StartOptions {
    /// A fresh run id, an anonymous caller, and someone to answer questions.
    pub fn new() -> Self {
        StartOptions { id: None, principal: None, interactive: true, parent: None, traceparent: None }
    }

    /// Uses this run id; a run with an existing id is returned unchanged.
    pub fn id(mut self, id: RunId) -> Self {
        self.id = Some(id);
        self
    }

    /// The identity starting the run; steps' tokens resolve under it.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Makes the run a child of another, which it reports to on the hook the link names (see
    /// [`ParentLink`]).
    pub fn parent(mut self, link: ParentLink) -> Self {
        self.parent = Some(link);
        self
    }

    /// Makes the span `traceparent` names (a caller's, from its request's `traceparent` header)
    /// the parent of the run's trace, when traces are exported (see [`crate::trace`]); otherwise
    /// the run's trace is a child of the span current where it starts, if any.
    pub fn traceparent(mut self, traceparent: TraceParent) -> Self {
        self.traceparent = Some(traceparent);
        self
    }

    /// Nobody can answer this run's questions (a scheduled run, say): `ctx.ask` resolves
    /// `unavailable` at once.
    pub fn non_interactive(mut self) -> Self {
        self.interactive = false;
        self
    }

    /// The run these options start: `id`, of the workflow `workflow_id` offered as `tool` and
    /// compiled as `build`, with
    /// `input`, created at `created_at`, its activations children of `traceparent`.
    pub(crate) fn new_run(
        &self,
        id: RunId,
        (workflow_id, tool, build): (&str, &str, BuildStamp),
        input: Value,
        (created_at, traceparent): (Timestamp, Option<TraceParent>),
    ) -> NewRun {
        NewRun {
            id,
            workflow_id: workflow_id.to_owned(),
            tool: tool.to_owned(),
            build: Some(build),
            input,
            created_at,
            principal: self.principal.clone(),
            interactive: self.interactive,
            parent: self.parent.clone(),
            traceparent,
            forked_from: None,
        }
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions::new()
    }
}
