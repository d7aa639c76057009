//! One view of where a run stands, folded from its journal entry by entry.
//!
//! The journal is a list of facts in the order they became durable; the people and programs that
//! watch a run want the other view: each operation the body asked for (a step, a sleep, a hook, a
//! question, a recorded value) with where it stands, what the run waits for now, the questions and
//! sign-ins open, and how it ended. [`RunView`] is that view, kept up to date one entry at a time
//! ([`RunView::apply`]), so a follower of the run ([`Runtime::follow`](crate::Runtime::follow))
//! keeps it current at the cost of each new entry, and a reader of the whole journal builds it in
//! one pass ([`RunView::of`]). The inspector's timeline, `host inspect`, the open questions of the
//! run API and MCP's tasks all read it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::journal::ask::{Ask, AskOutcome};
use crate::journal::{Entry, Op, Position, RecordKind, RunStatus, StepOutcome};
use crate::time::Timestamp;

/// A question a run has open.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpenQuestion {
    /// The id to answer it by.
    pub request_id: String,
    /// The question.
    pub request: Ask,
}

/// A sign-in a step waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitingSignIn {
    /// The step's op.
    pub op: Op,
    /// The provider to sign in with.
    pub provider: String,
    /// What the callback's `state` is derived from (see [`Runtime::sign_in_url`]); not for
    /// people, so not shown.
    ///
    /// [`Runtime::sign_in_url`]: crate::Runtime::sign_in_url
    #[serde(skip)]
    pub nonce: String,
}

/// One operation of a run, as its entries so far tell it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
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
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "crate::time::iso_opt")]
    pub deadline: Option<Timestamp>,
    /// What it gave: a step's result or error, a hook's payloads, a question and its answer, a
    /// recorded value. A sign-in's tokens are never in the journal, so never here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// The sequence numbers of the entries that tell its story.
    pub entries: Vec<u64>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl OpView {
    /// What this op makes the run wait for, in words, if it is an open wait.
    pub fn waits_for(&self) -> Option<String> {
        let op = self.op;
        match (self.kind, self.state) {
            ("sleep", "open") => Some(match self.deadline {
                Some(deadline) => format!("{op}: a timer, until {deadline}"),
                None => format!("{op}: a timer"),
            }),
            ("ask", "open") => Some(format!("{op}: an answer to {} ({})", self.name, self.details.first()?)),
            ("hook" | "webhook", "open") => Some(format!("{op}: a {} delivery", self.kind)),
            ("step", "retrying") => {
                Some(format!("{op}: step {} again, at {}", self.name, self.deadline.map(|at| at.to_string())?))
            }
            ("step", "signing-in") => Some(format!("{op}: a sign-in, so step {} runs again", self.name)),
            _ => None,
        }
    }
}

/// Where a run stands, as of the entries applied so far: see the module documentation.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RunView {
    /// The position of the next entry: after the last one applied.
    pub next: Position,
    /// The tool.
    pub tool: String,
    /// The input of the current history.
    pub input: Value,
    /// When the current history started.
    pub started_at: Option<Timestamp>,
    /// The build the current history runs on (the one that started it, or the one it was last
    /// upgraded to), when its journal records it.
    pub build: Option<crate::journal::BuildStamp>,
    /// The run and op this run was forked from, when it is a fork (see `Runtime::fork`).
    pub forked_from: Option<crate::journal::ForkedFrom>,
    /// Every operation the body of the current history asked for, by op number.
    pub ops: BTreeMap<Op, OpView>,
    /// The questions open, oldest first.
    pub questions: Vec<OpenQuestion>,
    /// The sign-ins steps wait for, oldest first.
    pub sign_ins: Vec<WaitingSignIn>,
    /// The reason of the cancellation, if one was requested.
    pub cancel: Option<String>,
    /// The entry that ended the run, if it has ended.
    pub end: Option<Entry>,
}

impl RunView {
    /// The view of a run whose journal nothing was read of yet.
    pub fn new() -> Self {
        RunView::default()
    }

    /// The view of one history of a run, `entries` from its entry 0.
    pub fn of(entries: &[Entry]) -> Self {
        let mut view = RunView::new();
        for (seq, entry) in entries.iter().enumerate() {
            view.apply(Position::new(view.next.history, seq as u64), entry);
        }
        view
    }

    /// Applies the entry at `position`, the one after those applied before (or entry 0 of a new
    /// history, which starts the view of its body afresh).
    pub fn apply(&mut self, position: Position, entry: &Entry) {
        let seq = position.seq;
        match entry {
            Entry::RunStarted { tool, input, at, continued, build, forked_from, .. } => {
                *self = RunView {
                    tool: tool.to_string(),
                    input: input.to_value().into_owned(),
                    started_at: Some(*at),
                    build: build.as_deref().cloned(),
                    forked_from: forked_from.as_deref().cloned(),
                    next: Position::new(*continued, 0),
                    // A cancellation asked for in an earlier history still stands.
                    cancel: self.cancel.take(),
                    ..RunView::default()
                };
            }
            Entry::RunUpgraded { build, .. } => self.build = Some(build.as_ref().clone()),
            Entry::Recorded { op, kind, value } => {
                let view = self.op(seq, *op, "recorded", record_name(*kind));
                view.state = "done";
                view.details.push(value.to_string());
            }
            Entry::TimerScheduled { op, deadline } => self.op(seq, *op, "sleep", "sleep").deadline = Some(*deadline),
            Entry::TimerFired { op } => self.op(seq, *op, "sleep", "sleep").state = "done",
            Entry::HookCreated { op, webhook, conflict, .. } => {
                let view = self.op(seq, *op, if webhook.is_some() { "webhook" } else { "hook" }, "hook");
                if *conflict {
                    view.state = "failed";
                    view.details.push("its token is held by another run".into());
                }
            }
            Entry::HookReceived { op, payload } => {
                self.op(seq, *op, "hook", "hook").details.push(format!("received {payload}"))
            }
            Entry::HookTokenTaken { op } => self.op(seq, *op, "hook", "hook").state = "failed",
            Entry::AskCreated { op, request_id, request } => {
                self.op(seq, *op, "ask", request_id).details.push(format!("asked {:?}", request.prompt));
                self.questions.push(OpenQuestion { request_id: request_id.clone(), request: request.clone() });
            }
            Entry::AskResolved { op, outcome } => {
                let request_id = crate::journal::ask::request_id(*op);
                self.questions.retain(|open| open.request_id != request_id);
                let view = self.op(seq, *op, "ask", &request_id);
                view.state = "done";
                view.details.push(answer(outcome));
            }
            Entry::AuthRequired { op, provider, attempt, nonce, .. } => {
                self.sign_ins.retain(|waiting| waiting.op != *op);
                self.sign_ins.push(WaitingSignIn { op: *op, provider: provider.clone(), nonce: nonce.clone() });
                let view = self.op(seq, *op, "step", "step");
                view.state = "signing-in";
                view.attempts = view.attempts.max(*attempt);
                view.details.push(format!("attempt {attempt} waits for a sign-in with {provider}"));
            }
            Entry::AuthCompleted { op } => {
                self.sign_ins.retain(|waiting| waiting.op != *op);
                let view = self.op(seq, *op, "step", "step");
                view.state = "open";
                view.details.push("signed in; the step runs again".into());
            }
            Entry::StepRetrying { op, name, attempt, error, next_attempt_at, .. } => {
                let view = self.op(seq, *op, "step", name);
                name.as_ref().clone_into(&mut view.name);
                view.state = "retrying";
                view.attempts = *attempt;
                view.deadline = Some(*next_attempt_at);
                view.details.push(format!("attempt {attempt} failed: {error}"));
            }
            Entry::StepCompleted { op, name, attempt, outcome, took_ms, .. } => {
                self.sign_ins.retain(|waiting| waiting.op != *op);
                let view = self.op(seq, *op, "step", name);
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
            Entry::RunCompleted { .. } | Entry::RunFailed { .. } | Entry::RunCancelled {} => {
                // An ended run has nothing open.
                self.questions.clear();
                self.sign_ins.clear();
                self.end = Some(entry.clone());
            }
        }
        self.next = Position::new(self.next.history, seq + 1);
    }

    /// The view of `op`, made when first seen, with entry `seq` added to its story.
    fn op(&mut self, seq: u64, op: Op, kind: &'static str, name: &str) -> &mut OpView {
        let view = self.ops.entry(op).or_insert_with(|| OpView {
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

    /// The run's status: finished as its end says, or still active.
    pub fn status(&self) -> RunStatus {
        match &self.end {
            Some(Entry::RunCompleted { .. }) => RunStatus::Completed,
            Some(Entry::RunFailed { .. }) => RunStatus::Failed,
            Some(Entry::RunCancelled {}) => RunStatus::Cancelled,
            _ => RunStatus::Active,
        }
    }

    /// What the run waits for, one sentence per open wait; nothing once it has ended.
    pub fn waiting_for(&self) -> Vec<String> {
        if self.end.is_some() {
            return Vec::new();
        }
        self.ops.values().filter_map(OpView::waits_for).collect()
    }

    /// How the run ended, as a value: the output, the failure, or `null` when cancelled.
    pub fn outcome(&self) -> Option<Value> {
        match self.end.as_ref()? {
            Entry::RunCompleted { output } => Some(output.clone()),
            Entry::RunFailed { failure } => Some(serde_json::to_value(failure).unwrap_or(Value::Null)),
            _ => Some(Value::Null),
        }
    }
}

/// What a person following a run is told of `entry`, as one line, if anything: a step done, failed
/// or to be tried again, or a workflow tool's progress report (`progress.report(snapshot)`, the
/// snapshot as JSON text). MCP's progress notifications and `host call` say these lines.
pub fn progress_line(entry: &Entry) -> Option<String> {
    match entry {
        Entry::StepCompleted { name, outcome: StepOutcome::Ok { .. }, .. } => Some(format!("step {name}: done")),
        Entry::StepCompleted { name, outcome: StepOutcome::Err { message, .. }, .. } => {
            Some(format!("step {name}: failed: {message}"))
        }
        Entry::StepRetrying { name, attempt, error, next_attempt_at, .. } => {
            Some(format!("step {name}: attempt {attempt} failed: {error}; the next starts at {next_attempt_at}"))
        }
        Entry::Recorded { kind: RecordKind::Published, value, .. } => {
            let value = value.to_value();
            value.get("partial").map(Value::to_string)
        }
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
        RecordKind::Patch => "patch",
    }
}

fn answer(outcome: &AskOutcome) -> String {
    match serde_json::to_value(outcome) {
        Ok(value) => format!("resolved {value}"),
        Err(_) => "resolved".into(),
    }
}
