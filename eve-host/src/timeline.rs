//! A run's timeline: what its journal says, op by op, as of any entry.
//!
//! The journal is a list of facts in the order they became durable; a person wants the other
//! view: each operation the body asked for (a step, a sleep, a hook, a question, a recorded value)
//! with where it stands, and what the run waits for now. The core's [`RunView`] folds the journal
//! into that view; [`Timeline::of`] gives it as of the journal's end or as of entry `at` (time
//! travel: which ops were done then, which waits were open). `host inspect` prints it; `--json`
//! gives it to scripts.

use serde::Serialize;
use serde_json::Value;

use eve_runtime::RefusedRun;
use eve_runtime::journal::{BuildStamp, Entry, ForkedFrom, RunId, RunStatus};
use eve_runtime::store::{Delivery, InboxItem, RunRecord, RunSummary};
use eve_runtime::testing::ReplayVerdict;
use eve_runtime::time::Timestamp;
pub use eve_runtime::view::OpView;
use eve_runtime::view::RunView;

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
    /// The build that started the run's current history (its body's fingerprint and the build's
    /// version), when its journal records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStamp>,
    /// The run and op this run was forked from, when it is a fork (`host runs fork`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// Where the run stood as of `at`, in the words of [`RunSummary::state`]: `running`, `parked`
    /// (waiting on durable waits), `completed`, `failed` or `cancelled`.
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

impl Timeline {
    /// The timeline of `entries` as of entry `at` (the last one when `None` or past the end).
    pub fn of(entries: &[Entry], at: Option<u64>) -> Timeline {
        let last = entries.len().saturating_sub(1) as u64;
        let at = at.map_or(last, |at| at.min(last));
        let view = RunView::of(&entries[..(at as usize + 1).min(entries.len())]);
        let waiting_for = view.waiting_for();
        let status = match view.status() {
            RunStatus::Active if waiting_for.is_empty() => "running",
            RunStatus::Active => "parked",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        };
        let outcome = view.outcome();
        Timeline {
            at,
            entries: entries.len() as u64,
            tool: view.tool,
            input: view.input,
            started_at: view.started_at,
            build: view.build,
            forked_from: view.forked_from,
            status,
            ops: view.ops.into_values().collect(),
            waiting_for,
            cancel: view.cancel,
            outcome,
        }
    }
}

/// A run as the inspector and `host runs` show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunListing {
    /// The run id.
    pub run_id: RunId,
    /// The tool.
    pub tool: String,
    /// The workflow id of its body.
    pub workflow_id: String,
    /// Where it stands, in the one vocabulary the CLI, HTTP and the inspector share
    /// ([`RunSummary::state`]): `parked` (waiting on durable waits only), `running`,
    /// `completed`, `failed` or `cancelled`; or `held` when this build holds it (see
    /// [`RunListing::held`]).
    pub status: &'static str,
    /// Whether it waits on durable waits only.
    pub parked: bool,
    /// When it was created.
    #[serde(serialize_with = "eve_runtime::time::iso")]
    pub created_at: Timestamp,
    /// How many journal entries it has.
    pub entries: u64,
    /// The build its history runs on (version and body fingerprint), as the store keeps it;
    /// absent when its journal records none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStamp>,
    /// Why this build holds it (status `held`): where its journal diverges from this build's
    /// code (the op, what the journal records, what this build asks for, and at which line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<ReplayVerdict>,
}

impl RunListing {
    /// The listing of `summary`.
    pub fn of(summary: &RunSummary) -> Self {
        RunListing {
            run_id: summary.id.clone(),
            tool: summary.tool.clone(),
            workflow_id: summary.workflow_id.clone(),
            status: summary.state(),
            parked: summary.parked,
            created_at: summary.created_at,
            entries: summary.entries,
            build: summary.build.clone(),
            held: None,
        }
    }

    /// The listing as this build sees it: `held`, with why, when `held` says this build holds
    /// the run (what [`Runtime::held`](eve_runtime::Runtime::held) answers); unchanged otherwise.
    pub fn held(mut self, held: Option<RefusedRun>) -> Self {
        if let Some(held) = held {
            self.status = "held";
            self.held = Some(held.verdict);
        }
        self
    }
}

/// What a person can do about `held` runs this build holds (see
/// [`Runtime::held_runs`](eve_runtime::Runtime::held_runs)), in one line: what the host says at
/// start-up after naming each.
pub fn held_advice(held: usize) -> String {
    let (are, them, they_finish) = match held {
        1 => ("1 run is".to_owned(), "it", "it finishes"),
        n => (format!("{n} runs are"), "them", "they finish"),
    };
    format!(
        "{are} held: run the build that started {them} until {they_finish}, fork {them} onto this build from the op \
         before the divergence (`runs fork <run> --from <op>`), cancel {them} (`cancel <run>`; the cleanup cannot run \
         on this build), or ship a build that replays {them} (a `ctx.patched(\"id\")` at the line each divergence \
         names)"
    )
}

/// Everything `host inspect --json` and the inspector's `GET /v1/runs/{run}/timeline` tell about
/// a run as of one journal entry: the run, its timeline, its journal up to that entry, and (as of
/// the end only) the deliveries it has not taken yet.
#[derive(Clone, Debug, Serialize)]
pub struct Inspection<'a> {
    /// The run.
    pub run: RunListing,
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
        Ok(Inspection { run: RunListing::of(&record.summary), timeline, journal, pending })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use eve_runtime::journal::{InputHash, Op, StepOutcome};

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
            traceparent: None,
            build: None,
            forked_from: None,
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
        assert_eq!(then.status, "parked");
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
