//! What the runtime reports as runs progress, for people and tests to follow along.
//!
//! Events are best-effort observations, not the durable record: the journal is. They are public
//! JSON (the HTTP event stream sends them as they serialize), so they speak its dialect: dotted
//! names in `event` (`step.started`, `input.requested`), camelCase keys with the run as `runId`,
//! and ISO 8601 times. A subscriber
//! that falls behind by more than the channel capacity misses events (and is told how many).

use std::sync::OnceLock;

use serde::Serialize;
use tokio::sync::broadcast;

use crate::journal::{Entry, Op, RecordKind, RunId, RunStatus, StepOutcome};
use crate::time::Timestamp;

/// Something that happened to a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum RunEvent {
    /// A new run was created and started.
    #[serde(rename = "run.started")]
    Started {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The tool it runs.
        tool: String,
    },
    /// A run that had stopped was picked up again.
    #[serde(rename = "run.resumed")]
    Resumed {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// How many journal entries were replayed (0 when resumed from the warm cache).
        replayed: usize,
        /// Whether it resumed from the warm cache without replaying.
        from_cache: bool,
    },
    /// A step attempt started executing.
    #[serde(rename = "step.started")]
    StepStarted {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The step's name.
        step: String,
        /// The attempt number, from 1.
        attempt: u32,
    },
    /// A step attempt succeeded and its result was recorded.
    #[serde(rename = "step.succeeded")]
    StepSucceeded {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The step's name.
        step: String,
        /// The attempt number.
        attempt: u32,
    },
    /// A step attempt failed.
    #[serde(rename = "step.failed")]
    StepFailed {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The step's name.
        step: String,
        /// The attempt number.
        attempt: u32,
        /// The error message.
        error: String,
        /// When the next attempt is due, or `None` if the step has failed for good.
        #[serde(serialize_with = "crate::time::iso_opt")]
        retry_at: Option<Timestamp>,
    },
    /// Replay handed a step's recorded result back to the body without executing the step.
    #[serde(rename = "step.replayed")]
    StepReplayed {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The step's name.
        step: String,
    },
    /// A durable sleep was scheduled.
    #[serde(rename = "timer.scheduled")]
    TimerScheduled {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The sleep's op number.
        op: Op,
        /// When it fires, in ISO 8601.
        #[serde(serialize_with = "crate::time::iso")]
        deadline: Timestamp,
    },
    /// A durable sleep fired.
    #[serde(rename = "timer.fired")]
    TimerFired {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The sleep's op number.
        op: Op,
    },
    /// A hook received a payload.
    #[serde(rename = "hook.received")]
    HookReceived {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The hook's op number.
        op: Op,
    },
    /// The run's abort signal fired.
    #[serde(rename = "cancel.requested")]
    CancelRequested {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
    },
    /// The body asked a person a question.
    #[serde(rename = "input.requested")]
    InputRequested {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The id to answer it by.
        request_id: String,
        /// The task id, when the run is a task.
        #[serde(skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// The question.
        request: crate::journal::ask::Ask,
    },
    /// A question resolved: answered, withdrawn or cancelled.
    #[serde(rename = "input.resolved")]
    InputResolved {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The question's id.
        request_id: String,
        /// The task id, when the run is a task.
        #[serde(skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// How it resolved.
        outcome: crate::journal::ask::AskOutcome,
    },
    /// A step waits for a person to sign in at `url`.
    #[serde(rename = "authorization.required")]
    AuthorizationRequired {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The task id, when the run is a task.
        #[serde(skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// The provider id.
        provider: String,
        /// Where to sign in.
        url: String,
    },
    /// The sign-in a step waited for completed; the step runs again.
    #[serde(rename = "authorization.completed")]
    AuthorizationCompleted {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The step's op number.
        op: Op,
        /// The task id, when the run is a task.
        #[serde(skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// The provider id.
        provider: String,
    },
    /// The run's journal grew long: it fails when it reaches `limit` entries unless the body
    /// continues as new first.
    #[serde(rename = "history.warning")]
    HistoryWarning {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// How many entries its journal has.
        entries: u64,
        /// The history limit.
        limit: u64,
    },
    /// The run ended its history and goes on with a fresh journal (`continue_as_new`).
    #[serde(rename = "run.continued")]
    ContinuedAsNew {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// How many histories came before the new one.
        continued: u32,
    },
    /// The body published a value (a session's event, a resumable task's reply), now durable.
    #[serde(rename = "value.published")]
    Published {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// The value.
        value: serde_json::Value,
    },
    /// The body can make no progress until a durable wait resolves; the run holds no task.
    #[serde(rename = "run.parked")]
    Parked {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
    },
    /// The run finished.
    #[serde(rename = "run.finished")]
    Finished {
        /// The run (`runId`).
        #[serde(rename = "runId")]
        run: RunId,
        /// `completed`, `failed` or `cancelled`.
        status: crate::journal::RunStatus,
    },
    /// An event of a part built on the core, named by the part: a model's text as it streams in
    /// a session (`model.text`), say. Not durable.
    #[serde(untagged)]
    Custom(CustomEvent),
}

/// An event a part publishes about a run (see [`RunEvent::Custom`]), serialized as the core's
/// are: `{"event": name, "runId": run, ...data}`.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomEvent {
    /// The run it is about.
    pub run: RunId,
    /// The event's dotted name (`model.text`).
    pub name: &'static str,
    /// Its fields besides `event` and `runId`, camelCase.
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl Serialize for CustomEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.data.len() + 2))?;
        map.serialize_entry("event", self.name)?;
        map.serialize_entry("runId", &self.run)?;
        for (key, value) in &self.data {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl RunEvent {
    /// The run the event is about.
    pub fn run(&self) -> &RunId {
        match self {
            RunEvent::Started { run, .. }
            | RunEvent::Resumed { run, .. }
            | RunEvent::StepStarted { run, .. }
            | RunEvent::StepSucceeded { run, .. }
            | RunEvent::StepFailed { run, .. }
            | RunEvent::StepReplayed { run, .. }
            | RunEvent::TimerScheduled { run, .. }
            | RunEvent::TimerFired { run, .. }
            | RunEvent::HookReceived { run, .. }
            | RunEvent::CancelRequested { run }
            | RunEvent::InputRequested { run, .. }
            | RunEvent::InputResolved { run, .. }
            | RunEvent::AuthorizationRequired { run, .. }
            | RunEvent::AuthorizationCompleted { run, .. }
            | RunEvent::HistoryWarning { run, .. }
            | RunEvent::ContinuedAsNew { run, .. }
            | RunEvent::Published { run, .. }
            | RunEvent::Parked { run }
            | RunEvent::Finished { run, .. }
            | RunEvent::Custom(CustomEvent { run, .. }) => run,
        }
    }
}

impl RunEvent {
    /// The event a journaled entry of `run` stands for, if any: what a follower of the run's
    /// journal reports as it reads (see [`Runtime::follow`](crate::Runtime::follow)). `task_id`
    /// is the run's task id, when it is a task. A step's start is not journaled, nor are the
    /// sign-in links (which [`Runtime::event_of`](crate::Runtime::event_of) adds), so neither comes
    /// from here.
    pub fn of_entry(run: &RunId, entry: &Entry, task_id: Option<&str>) -> Option<RunEvent> {
        let run = run.clone();
        let task_id = task_id.map(str::to_owned);
        Some(match entry {
            Entry::RunStarted { tool, continued: 0, .. } => RunEvent::Started { run, tool: tool.to_string() },
            Entry::RunStarted { continued, .. } => RunEvent::ContinuedAsNew { run, continued: *continued },
            Entry::TimerScheduled { op, deadline, .. } => {
                RunEvent::TimerScheduled { run, op: *op, deadline: *deadline }
            }
            Entry::AskCreated { request_id, request, .. } => {
                RunEvent::InputRequested { run, request_id: request_id.clone(), task_id, request: request.clone() }
            }
            Entry::AskResolved { op, outcome } => RunEvent::InputResolved {
                run,
                request_id: crate::journal::ask::request_id(*op),
                task_id,
                outcome: outcome.clone(),
            },
            Entry::StepCompleted { op, name, attempt, outcome: StepOutcome::Ok { .. }, .. } => {
                RunEvent::StepSucceeded { run, op: *op, step: name.to_string(), attempt: *attempt }
            }
            Entry::StepCompleted { op, name, attempt, outcome: StepOutcome::Err { message, .. }, .. } => {
                let (op, step, attempt, error) = (*op, name.to_string(), *attempt, message.clone());
                RunEvent::StepFailed { run, op, step, attempt, error, retry_at: None }
            }
            Entry::StepRetrying { op, name, attempt, error, next_attempt_at, .. } => {
                let (op, step, attempt, error) = (*op, name.to_string(), *attempt, error.clone());
                RunEvent::StepFailed { run, op, step, attempt, error, retry_at: Some(*next_attempt_at) }
            }
            Entry::TimerFired { op } => RunEvent::TimerFired { run, op: *op },
            Entry::HookReceived { op, .. } => RunEvent::HookReceived { run, op: *op },
            Entry::CancelRequested { .. } => RunEvent::CancelRequested { run },
            Entry::Recorded { kind: RecordKind::Published, value, .. } => {
                RunEvent::Published { run, value: value.to_value().into_owned() }
            }
            Entry::RunCompleted { .. } => RunEvent::Finished { run, status: RunStatus::Completed },
            Entry::RunFailed { .. } => RunEvent::Finished { run, status: RunStatus::Failed },
            Entry::RunCancelled {} => RunEvent::Finished { run, status: RunStatus::Cancelled },
            _ => return None,
        })
    }
}

/// The broadcast channel events travel on, made when the first listener subscribes.
///
/// The channel fills its `capacity` slots when it is made (half a megabyte at the default 4,096),
/// and each look at how many listen takes its lock: a runtime nobody listens to pays for neither.
#[derive(Debug)]
pub(crate) struct EventBus {
    capacity: usize,
    sender: OnceLock<broadcast::Sender<RunEvent>>,
}

impl EventBus {
    pub fn new(capacity: usize) -> Self {
        EventBus { capacity, sender: OnceLock::new() }
    }

    /// Sends the event `make` builds, building it only if someone listens.
    pub fn emit(&self, make: impl FnOnce() -> RunEvent) {
        if let Some(sender) = self.listeners() {
            let _ = sender.send(make());
        }
    }

    /// Whether anyone listens, so events would be built and sent.
    pub fn listening(&self) -> bool {
        self.listeners().is_some()
    }

    /// The channel, if someone listens on it now.
    fn listeners(&self) -> Option<&broadcast::Sender<RunEvent>> {
        self.sender.get().filter(|sender| sender.receiver_count() > 0)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.sender.get_or_init(|| broadcast::channel(self.capacity).0).subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_is_made_for_the_first_listener_and_events_are_built_only_while_one_listens() {
        let bus = EventBus::new(4);
        bus.emit(|| unreachable!("an event is built with no one listening"));
        assert!(bus.sender.get().is_none(), "no channel before anyone subscribes");
        assert!(!bus.listening());

        let mut first = bus.subscribe();
        let run = RunId::generate();
        bus.emit(|| RunEvent::Parked { run: run.clone() });
        assert_eq!(first.try_recv().unwrap(), RunEvent::Parked { run: run.clone() });

        // A second listener shares the channel: it sees what is sent from now on.
        let mut second = bus.subscribe();
        bus.emit(|| RunEvent::Parked { run: run.clone() });
        assert_eq!(first.try_recv().unwrap(), RunEvent::Parked { run: run.clone() });
        assert_eq!(second.try_recv().unwrap(), RunEvent::Parked { run: run.clone() });

        drop((first, second));
        assert!(!bus.listening(), "no one listens once every listener is gone");
        bus.emit(|| unreachable!("an event is built after every listener left"));
    }
}
