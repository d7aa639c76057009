//! A run as an MCP task, read from its journal.
//!
//! | the journal | the task |
//! | --- | --- |
//! | ends `RunCompleted` | `completed`, the output as the tool result |
//! | ends `RunFailed` with a tool error | `completed`, `isError: true`, the error's message |
//! | ends `RunFailed` otherwise (panic, divergence, history limit, unknown workflow) | `failed`, a JSON-RPC error `-32603` |
//! | ends `RunCancelled` | `cancelled` |
//! | has open questions or sign-ins with a known link | `input_required`, one input request each |
//! | anything else | `working` (with a status message while a cancellation's cleanup runs) |

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, DetailedTask, InputRequests, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::Value;

use super::questions::{input_request, question_input, sign_in_key, sign_in_request};
use super::tools::{completed, failed};
use eve_runtime::OpenQuestion;
use eve_runtime::journal::{Position, RunFailure, RunId};
use eve_runtime::store::RunRecord;
use eve_runtime::time::Timestamp;
use eve_runtime::view::RunView;
use eve_runtime::{RunOutcome, Runtime};

/// What a run's journal says, as far as MCP cares.
pub(crate) struct Snapshot {
    pub run: RunId,
    pub created_at: Timestamp,
    /// Where the journal it was read from ends: a change of state always adds an entry.
    pub next: Position,
    pub outcome: Option<RunOutcome>,
    /// Open questions, oldest first.
    pub questions: Vec<OpenQuestion>,
    /// Sign-ins steps wait for.
    pub sign_ins: Vec<SignIn>,
    /// Whether a cancellation was requested (cleanup may be running).
    pub cancelling: bool,
}

/// A sign-in a step of the run waits for.
pub(crate) struct SignIn {
    /// The step's op.
    pub op: u32,
    pub provider: String,
    /// Where to sign in, or why this server cannot say.
    pub link: Result<String, String>,
}

impl Snapshot {
    /// The snapshot of a run's whole journal, as the store holds it.
    pub fn of(runtime: &Runtime, record: RunRecord) -> Snapshot {
        let view = RunView::of(&record.entries);
        let summary = record.summary;
        Snapshot::new(runtime, summary.id, &view, summary.created_at)
    }

    /// The snapshot `view` shows of `run`, created at `created_at`.
    pub fn new(runtime: &Runtime, run: RunId, view: &RunView, created_at: Timestamp) -> Snapshot {
        let sign_ins = view.sign_ins.iter().map(|waiting| SignIn {
            op: waiting.op.0,
            provider: waiting.provider.clone(),
            link: runtime.sign_in_url(&run, waiting).map_err(|error| error.to_string()),
        });
        Snapshot {
            created_at,
            next: view.next,
            outcome: view.end.as_ref().and_then(RunOutcome::from_terminal),
            questions: view.questions.clone(),
            sign_ins: sign_ins.collect(),
            cancelling: view.cancel.is_some(),
            run,
        }
    }

    /// The input requests the run waits on, leaving out the keys in `skip` (answered or
    /// acknowledged, but not yet taken in by the run). A sign-in whose link this server cannot
    /// build is left out too.
    pub fn input_requests(&self, skip: &HashSet<String>) -> Result<InputRequests, ErrorData> {
        let mut requests = InputRequests::new();
        for question in &self.questions {
            if !skip.contains(&question.request_id) {
                let request = question_input(&question.request)?;
                requests.insert(question.request_id.clone(), request);
            }
        }
        for SignIn { op, provider, link } in &self.sign_ins {
            let key = sign_in_key(*op);
            if let (false, Ok(url)) = (skip.contains(&key), link) {
                requests.insert(key, input_request(sign_in_request(provider, url, format!("{}:{op}", self.run))));
            }
        }
        Ok(requests)
    }

    /// A line for people on what the run waits for, when the status alone does not say.
    fn status_message(&self, input_required: bool) -> Option<String> {
        if self.outcome.is_some() {
            return None;
        }
        if self.cancelling {
            return Some("cancelled; its cleanup is running".to_owned());
        }
        if input_required {
            return self.questions.first().map(|question| question.request.prompt.clone());
        }
        let unknown = self.sign_ins.iter().find_map(|sign_in| Some((&sign_in.provider, sign_in.link.as_ref().err()?)));
        unknown.map(|(provider, error)| {
            format!("waiting for a sign-in with {provider}, whose link cannot be made: {error}")
        })
    }
}

/// The task `snapshot` describes, last updated at `updated`.
pub(crate) fn detailed(snapshot: &Snapshot, updated: Timestamp, poll_ms: u64) -> Result<DetailedTask, ErrorData> {
    let payload = match &snapshot.outcome {
        Some(RunOutcome::Completed(output)) => TaskPayload::Completed { result: object(&completed(output)) },
        Some(RunOutcome::Failed(RunFailure::Tool { message })) => {
            TaskPayload::Completed { result: object(&failed(message.clone())) }
        }
        Some(RunOutcome::Failed(failure)) => TaskPayload::Failed { error: object(&failure_error(failure)) },
        Some(RunOutcome::Cancelled) => TaskPayload::Cancelled,
        None => match snapshot.input_requests(&HashSet::new())? {
            requests if requests.is_empty() => TaskPayload::Working,
            input_requests => TaskPayload::InputRequired { input_requests },
        },
    };
    let input_required = matches!(payload, TaskPayload::InputRequired { .. });
    let mut task =
        Task::new(snapshot.run.to_string(), TaskStatus::Working, snapshot.created_at.to_string(), updated.to_string())
            .with_poll_interval_ms(poll_ms);
    task.status_message = snapshot.status_message(input_required);
    Ok(DetailedTask::new(task, payload))
}

/// The answer to a call that waited for its run: the tool result, or the JSON-RPC error of a
/// run that failed for another reason than its tool's error.
pub(crate) fn call_result(run: &RunId, outcome: &RunOutcome) -> Result<CallToolResult, ErrorData> {
    match outcome {
        RunOutcome::Completed(output) => Ok(completed(output)),
        RunOutcome::Failed(RunFailure::Tool { message }) => Ok(failed(message.clone())),
        RunOutcome::Failed(failure) => Err(failure_error(failure)),
        RunOutcome::Cancelled => Ok(failed(format!("run {run} was cancelled; its cleanup ran"))),
    }
}

/// A failure that is not the tool's own error, as a JSON-RPC internal error carrying the failure.
fn failure_error(failure: &RunFailure) -> ErrorData {
    let message = match failure {
        RunFailure::Tool { message } => message.clone(),
        RunFailure::Panicked { message } => format!("the tool panicked: {message}"),
        RunFailure::NonDeterminism { op, .. } => {
            format!("the run diverged from its journal at op {}; see the run's journal", op.0)
        }
        RunFailure::UnknownWorkflow { workflow_id } => {
            format!("this binary has no workflow `{workflow_id}`, which the run was started with")
        }
        RunFailure::HistoryLimit { limit } => {
            format!("the run reached the history limit of {limit} journal entries")
        }
    };
    ErrorData::internal_error(message, serde_json::to_value(failure).ok())
}

fn object<T: serde::Serialize>(value: &T) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// The most runs whose last change is remembered; past it, the memory starts again.
const REMEMBERED: usize = 10_000;

/// When each task was last seen to change (its journal grew), for `lastUpdatedAt`: the journal
/// does not time every entry.
#[derive(Default)]
pub(crate) struct LastChanges(Mutex<HashMap<RunId, (Position, Timestamp)>>);

impl LastChanges {
    /// When `snapshot`'s run last changed, as far as this server saw: now, if its journal grew
    /// since it was last read; its creation, if it was never read and has only its first entry.
    pub fn of(&self, snapshot: &Snapshot, now: Timestamp) -> Timestamp {
        let mut seen =
            self.0.lock().expect("the last-changes mutex is never poisoned: no code panics while holding it");
        match seen.get(&snapshot.run) {
            Some((next, at)) if *next == snapshot.next => return *at,
            _ => {}
        }
        let first = snapshot.next <= Position::new(0, 1);
        let at = if first && !seen.contains_key(&snapshot.run) { snapshot.created_at } else { now };
        if seen.len() >= REMEMBERED {
            seen.clear();
        }
        seen.insert(snapshot.run.clone(), (snapshot.next, at));
        at
    }
}
