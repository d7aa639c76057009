//! Progress a body reports while it runs: the seed's `yield`.
//!
//! A `#[workflow_tool]` or `#[task]` body that declares a [`Progress`] parameter reports
//! snapshots with [`Progress::report`]. The body runs as a generator (genawaiter's `sync` flavour,
//! so the body's future stays `Send`): each report hands its snapshot to [`drive`], which deals
//! with it and resumes the body at once, in the same poll. A report never suspends the run; a
//! body that must wait awaits a durable wait.
//!
//! What happens to a snapshot depends on the cell, as in the seed's table:
//!
//! | | `#[workflow_tool]` | `#[task]` |
//! |---|---|---|
//! | a report | recorded as a published value `{"partial": snapshot}`: once, never again on replay; a session shows it as `action.partial` for the call, an MCP client as a progress notification | dropped: nothing is published or journaled |
//! | an output of `null` (`Ok(())`, `None`) | the last snapshot is the output (`null` without one) | the output stays `null` |
//!
//! Replay stays deterministic: a workflow tool's report takes the next op number when the body
//! makes it (in program order, like every recorded value), and replay reads the recorded
//! snapshot back instead of publishing it again; a task's report takes no op at all.

use std::future::Future;

use genawaiter::GeneratorState;
use genawaiter::sync::{Co, Gen};
use serde::Serialize;
use serde_json::Value;

use crate::context::WorkflowCtx;
use crate::error::ToolError;

/// The progress channel of a `#[workflow_tool]` or `#[task]` body: declare `progress: Progress`
/// as its last parameter, and report snapshots of the work as it goes.
///
/// In a `#[workflow_tool]`, each snapshot is shown for the pending call (a session's
/// `action.partial` event, an MCP progress notification), the last one winning; snapshots never
/// enter the model's history. A body whose output is `null` (one returning `Ok(())`) settles
/// with its last snapshot as its output. In a `#[task]`, snapshots are consumed silently; use
/// [`TaskCtx::post_message`](crate::context::TaskCtx::post_message) for what the session should
/// act on. See the module documentation for the whole contract.
///
/// ```
/// use eve_runtime::error::ToolError;
/// use eve_runtime::progress::Progress;
///
/// async fn copy_files(files: &[String], progress: &Progress) -> Result<(), ToolError> {
///     for (done, file) in files.iter().enumerate() {
///         // … copy `file` in a `#[step]` …
///         progress.report(serde_json::json!({ "copied": done + 1, "of": files.len(), "last": file })).await?;
///     }
///     Ok(())
/// }
/// ```
pub struct Progress {
    co: Co<Value>,
}

impl Progress {
    /// Reports `snapshot`, a JSON-serializable picture of the work so far, and goes on at once.
    ///
    /// Await each report before making the next: two reports pending at once (say, from two
    /// branches of a `join!`) are a bug in the body. In a `#[workflow_tool]` every report is one
    /// journal entry, so report milestones, not every byte.
    ///
    /// # Errors
    ///
    /// When `snapshot` cannot be serialized to JSON (a map whose keys are not strings, say);
    /// nothing is reported then.
    pub async fn report(&self, snapshot: impl Serialize) -> Result<(), ToolError> {
        let snapshot = serde_json::to_value(snapshot)
            .map_err(|error| ToolError::new(format!("the progress snapshot cannot be serialized to JSON: {error}")))?;
        self.co.yield_(snapshot).await;
        Ok(())
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}

/// Where a body's snapshots go: published for a workflow tool, dropped for a task. For the
/// macros, through `eve_tools::__private`; not public API.
#[doc(hidden)]
pub struct Sink {
    publish: Option<WorkflowCtx>,
}

impl Sink {
    /// A `#[workflow_tool]`'s: snapshots are published, and the last stands in for a `null` output.
    pub fn publish(ctx: &WorkflowCtx) -> Sink {
        Sink { publish: Some(ctx.clone()) }
    }

    /// A `#[task]`'s: snapshots are consumed without a trace.
    pub fn discard() -> Sink {
        Sink { publish: None }
    }

    fn accept(&self, snapshot: &Value) {
        if let Some(ctx) = &self.publish {
            ctx.publish(serde_json::json!({ "partial": snapshot }));
        }
    }

    fn finish(&self, output: Result<Value, ToolError>, last: Option<Value>) -> Result<Value, ToolError> {
        match output {
            Ok(Value::Null) if self.publish.is_some() => Ok(last.unwrap_or(Value::Null)),
            output => output,
        }
    }
}

/// Runs `body` as a generator, handing each snapshot it reports to `sink`, and returns the
/// body's output (or, per the sink, its last snapshot). For the macros, through
/// `eve_tools::__private`; not public API.
#[doc(hidden)]
pub async fn drive<F, Fut>(sink: Sink, body: F) -> Result<Value, ToolError>
where
    F: FnOnce(Progress) -> Fut,
    Fut: Future<Output = Result<Value, ToolError>>,
{
    let mut generator = Gen::new(|co| body(Progress { co }));
    let mut last = None;
    loop {
        match generator.async_resume().await {
            GeneratorState::Yielded(snapshot) => {
                sink.accept(&snapshot);
                last = Some(snapshot);
            }
            GeneratorState::Complete(output) => return sink.finish(output, last),
        }
    }
}
