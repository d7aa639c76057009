//! A run's timeline: what its journal says, op by op, as of any entry.
//!
//! The journal is a list of facts in the order they became durable; a person wants the other
//! view: each operation the body asked for (a step, a sleep, a hook, a question, a recorded value)
//! with where it stands, and what the run waits for now. [`Timeline::of`] folds the journal into
//! that view, as of its end or as of entry `at` (time travel: which ops were done then, which
//! waits were open). `host inspect` prints it; `--json` gives it to scripts.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use eve_runtime::ask::AskOutcome;
use eve_runtime::journal::{Entry, Op, RecordKind, RunId, RunStatus, StepOutcome};
use eve_runtime::store::{Delivery, InboxItem, RunRecord, RunSummary};
use eve_runtime::time::Timestamp;

/// A run's operations as of one entry of its journal.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// The entry the timeline is as of (the journal's last unless asked otherwise).
    pub at: u64,
    /// How many entries the journal holds.
    pub entries: u64,
    /// The tool, its input and when the run started.
    pub tool: String,
    /// The run's input.
    pub input: Value,
    /// When the run started.
    #[serde(serialize_with = "eve_runtime::time::iso_opt")]
    pub started_at: Option<Timestamp>,
    /// Where the run stands: `running`, `waiting`, `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// Every operation the body asked for, by op number.
    pub ops: Vec<OpView>,
    /// What the run waits for as of `at`, one sentence each.
    pub waiting_for: Vec<String>,
    /// The cancellation, if one was requested: its reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel: Option<String>,
    /// How the run ended, if it had: its output or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Value>,
}

/// One operation of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpView {
    /// Its number.
    pub op: Op,
    /// `step`, `sleep`, `hook`, `webhook`, `ask` or `recorded`.
    pub kind: &'static str,
    /// The step's name, the recorded value's kind, or the question's request id.
    pub name: String,
    /// `done`, `failed`, `open` (still waited on), `retrying` or `signing-in`.
    pub state: &'static str,
    /// The attempts a step made (failed ones included).
    #[serde(skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// How long a finished step's last attempt ran, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<u64>,
    /// When a sleep ends, or a retried step's next attempt starts.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "eve_runtime::time::iso_opt")]
    pub deadline: Option<Timestamp>,
    /// What it gave: a step's result or error, a hook's payloads, a question and its answer, a
    /// recorded value. A sign-in's tokens are never in the journal, so never here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// The entries that tell its story.
    pub entries: Vec<u64>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl Timeline {
    /// The timeline of `entries` as of entry `at` (the last one when `None` or past the end).
    pub fn of(entries: &[Entry], at: Option<u64>) -> Timeline {
        let last = entries.len().saturating_sub(1) as u64;
        let at = at.map_or(last, |at| at.min(last));
        let mut timeline = Timeline {
            at,
            entries: entries.len() as u64,
            tool: String::new(),
            input: Value::Null,
            started_at: None,
            status: "running",
            ops: Vec::new(),
            waiting_for: Vec::new(),
            cancel: None,
            outcome: None,
        };
        let mut ops: BTreeMap<Op, OpView> = BTreeMap::new();
        for (seq, entry) in entries.iter().enumerate().take(at as usize + 1) {
            timeline.take(&mut ops, seq as u64, entry);
        }
        timeline.ops = ops.into_values().collect();
        if timeline.outcome.is_none() {
            timeline.waiting_for = timeline.ops.iter().filter_map(waits_for).collect();
            if !timeline.waiting_for.is_empty() {
                timeline.status = "waiting";
            }
        }
        timeline
    }

    fn take(&mut self, ops: &mut BTreeMap<Op, OpView>, seq: u64, entry: &Entry) {
        match entry {
            Entry::RunStarted { tool, input, at, .. } => {
                self.tool = tool.clone();
                self.input = input.to_value().into_owned();
                self.started_at = Some(*at);
            }
            Entry::Recorded { op, kind, value } => {
                let view = view_of(ops, seq, *op, "recorded", record_name(*kind));
                view.state = "done";
                view.details.push(value.to_string());
            }
            Entry::TimerScheduled { op, deadline } => {
                view_of(ops, seq, *op, "sleep", "sleep").deadline = Some(*deadline)
            }
            Entry::TimerFired { op } => view_of(ops, seq, *op, "sleep", "sleep").state = "done",
            Entry::HookCreated { op, webhook, conflict, .. } => {
                let view = view_of(ops, seq, *op, if webhook.is_some() { "webhook" } else { "hook" }, "hook");
                if *conflict {
                    view.state = "failed";
                    view.details.push("its token is held by another run".into());
                }
            }
            Entry::HookReceived { op, payload } => {
                view_of(ops, seq, *op, "hook", "hook").details.push(format!("received {payload}"))
            }
            Entry::HookTokenTaken { op } => view_of(ops, seq, *op, "hook", "hook").state = "failed",
            Entry::AskCreated { op, request_id, request } => {
                view_of(ops, seq, *op, "ask", request_id).details.push(format!("asked {:?}", request.prompt))
            }
            Entry::AskResolved { op, outcome } => {
                let view = view_of(ops, seq, *op, "ask", &eve_runtime::ask::request_id(*op));
                view.state = "done";
                view.details.push(answer(outcome));
            }
            Entry::AuthRequired { op, provider, attempt, .. } => {
                let view = view_of(ops, seq, *op, "step", "step");
                view.state = "signing-in";
                view.attempts = view.attempts.max(*attempt);
                view.details.push(format!("attempt {attempt} waits for a sign-in with {provider}"));
            }
            Entry::AuthCompleted { op } => {
                let view = view_of(ops, seq, *op, "step", "step");
                view.state = "open";
                view.details.push("signed in; the step runs again".into());
            }
            Entry::StepRetrying { op, name, attempt, error, next_attempt_at, .. } => {
                let view = view_of(ops, seq, *op, "step", name);
                name.as_ref().clone_into(&mut view.name);
                view.state = "retrying";
                view.attempts = *attempt;
                view.deadline = Some(*next_attempt_at);
                view.details.push(format!("attempt {attempt} failed: {error}"));
            }
            Entry::StepCompleted { op, name, attempt, outcome, took_ms, .. } => {
                let view = view_of(ops, seq, *op, "step", name);
                name.as_ref().clone_into(&mut view.name);
                view.attempts = *attempt;
                view.took_ms = *took_ms;
                view.deadline = None;
                match outcome {
                    StepOutcome::Ok { value } => {
                        view.state = "done";
                        view.details.push(format!("returned {value}"));
                    }
                    StepOutcome::Err { message, .. } => {
                        view.state = "failed";
                        view.details.push(format!("failed: {message}"));
                    }
                }
            }
            Entry::CancelRequested { reason, .. } => self.cancel = Some(reason.clone()),
            Entry::RunCompleted { output } => {
                self.status = "completed";
                self.outcome = Some(output.clone());
            }
            Entry::RunFailed { failure } => {
                self.status = "failed";
                self.outcome = Some(serde_json::to_value(failure).unwrap_or(Value::Null));
            }
            Entry::RunCancelled {} => {
                self.status = "cancelled";
                self.outcome = Some(Value::Null);
            }
        }
    }
}

/// The view of `op`, made when first seen, with entry `seq` added to its story.
fn view_of<'a>(ops: &'a mut BTreeMap<Op, OpView>, seq: u64, op: Op, kind: &'static str, name: &str) -> &'a mut OpView {
    let view = ops.entry(op).or_insert_with(|| OpView {
        op,
        kind,
        name: name.to_owned(),
        state: "open",
        attempts: 0,
        took_ms: None,
        deadline: None,
        details: Vec::new(),
        entries: Vec::new(),
    });
    view.entries.push(seq);
    view
}

impl OpView {
    /// What this op makes the run wait for, in words, if it is an open wait.
    pub fn waits_for(&self) -> Option<String> {
        waits_for(self)
    }
}

/// What an open op makes the run wait for, in words.
fn waits_for(view: &OpView) -> Option<String> {
    let op = view.op;
    match (view.kind, view.state) {
        ("sleep", "open") => Some(match view.deadline {
            Some(deadline) => format!("{op}: a timer, until {deadline}"),
            None => format!("{op}: a timer"),
        }),
        ("ask", "open") => Some(format!("{op}: an answer to {} ({})", view.name, view.details.first()?)),
        ("hook" | "webhook", "open") => Some(format!("{op}: a {} delivery", view.kind)),
        ("step", "retrying") => {
            Some(format!("{op}: step {} again, at {}", view.name, view.deadline.map(|at| at.to_string())?))
        }
        ("step", "signing-in") => Some(format!("{op}: a sign-in, so step {} runs again", view.name)),
        _ => None,
    }
}

fn record_name(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Now => "now",
        RecordKind::Random => "random",
        RecordKind::Uuid => "uuid",
        RecordKind::Published => "published",
        RecordKind::Value => "value",
        RecordKind::Started => "started",
    }
}

fn answer(outcome: &AskOutcome) -> String {
    match serde_json::to_value(outcome) {
        Ok(value) => format!("resolved {value}"),
        Err(_) => "resolved".into(),
    }
}

/// A run as the inspector and `host runs` show it: its stored status, and the state a person
/// asks about (`parked` or `running` for an active run).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// The run id.
    pub run_id: RunId,
    /// The tool.
    pub tool: String,
    /// The workflow id of its body.
    pub workflow_id: String,
    /// The stored status: `active`, `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The status, with an active run told as `parked` (waiting on durable waits only) or
    /// `running`.
    pub state: &'static str,
    /// Whether it waits on durable waits only.
    pub parked: bool,
    /// When it was created.
    #[serde(serialize_with = "eve_runtime::time::iso")]
    pub created_at: Timestamp,
    /// How many journal entries it has.
    pub entries: u64,
}

impl RunView {
    /// The view of `summary`.
    pub fn of(summary: &RunSummary) -> Self {
        RunView {
            run_id: summary.id.clone(),
            tool: summary.tool.clone(),
            workflow_id: summary.workflow_id.clone(),
            status: summary.status,
            state: summary.state(),
            parked: summary.parked,
            created_at: summary.created_at,
            entries: summary.entries,
        }
    }
}

/// Everything `host inspect --json` and the inspector's `GET /v1/runs/{run}/timeline` tell about
/// a run as of one journal entry: the run, its timeline, its journal up to that entry, and (as of
/// the end only) the deliveries it has not taken yet.
#[derive(Clone, Debug, Serialize)]
pub struct Inspection<'a> {
    /// The run.
    pub run: RunView,
    /// Its timeline as of the entry.
    pub timeline: Timeline,
    /// Its journal, entry 0 to the entry.
    pub journal: &'a [Entry],
    /// The deliveries accepted into its inbox and not journaled yet; empty when looking back.
    pub pending: Vec<&'a Delivery>,
}

/// An `at` past the end of a run's journal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("run {run} has {entries} journal entries (0 to {last})", last = entries.saturating_sub(1))]
pub struct PastTheEnd {
    /// The run.
    pub run: RunId,
    /// How many entries its journal holds.
    pub entries: u64,
}

impl<'a> Inspection<'a> {
    /// The run of `record` as of entry `at` (its end when `None`), with its `pending` deliveries.
    pub fn of(record: &'a RunRecord, pending: &'a [InboxItem], at: Option<u64>) -> Result<Self, PastTheEnd> {
        let entries = record.entries.len() as u64;
        if at.is_some_and(|at| at >= entries) {
            return Err(PastTheEnd { run: record.summary.id.clone(), entries });
        }
        let timeline = Timeline::of(&record.entries, at);
        let journal = &record.entries[..(timeline.at as usize + 1).min(record.entries.len())];
        let pending = pending.iter().filter(|_| at.is_none()).map(|item| &item.delivery).collect();
        Ok(Inspection { run: RunView::of(&record.summary), timeline, journal, pending })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use eve_runtime::journal::InputHash;

    fn started() -> Entry {
        Entry::RunStarted {
            workflow_id: "w".into(),
            tool: "deploy".into(),
            input: json!({ "service": "api" }).into(),
            at: Timestamp::from_millis(0),
            principal: None,
            interactive: true,
            continued: 0,
            parent: None,
        }
    }

    fn step(op: u32, name: &str) -> Entry {
        let outcome = StepOutcome::Ok { value: json!("ok").into() };
        Entry::StepCompleted {
            op: Op(op),
            name: name.to_owned().into(),
            input_hash: InputHash(1),
            attempt: 1,
            outcome,
            took_ms: Some(7),
        }
    }

    #[test]
    fn time_travel_shows_which_waits_were_open_then() {
        let entries = vec![
            started(),
            step(0, "plan"),
            Entry::TimerScheduled { op: Op(1), deadline: Timestamp::from_millis(60_000) },
            Entry::TimerFired { op: Op(1) },
            step(2, "apply"),
            Entry::RunCompleted { output: json!("done") },
        ];
        let then = Timeline::of(&entries, Some(2));
        assert_eq!(then.status, "waiting");
        assert_eq!(
            then.ops.iter().map(|op| (op.name.as_str(), op.state)).collect::<Vec<_>>(),
            [("plan", "done"), ("sleep", "open")]
        );
        assert_eq!(then.waiting_for.len(), 1);
        assert!(then.waiting_for[0].starts_with("op 1: a timer, until "), "{:?}", then.waiting_for);
        let now = Timeline::of(&entries, None);
        assert_eq!((now.status, now.at, now.ops.len()), ("completed", 5, 3));
        assert!(now.waiting_for.is_empty());
        assert_eq!(Timeline::of(&entries, Some(99)).at, 5, "past the end is the end");
        assert_eq!(now.ops[2].took_ms, Some(7), "a step's duration is its last attempt's");
    }
}
