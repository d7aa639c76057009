//! The session's tasks: which work, which are idle, and which calls each still owes a result.
//!
//! A call settles once: the first outcome wins (a reply, the run's end, a cancel), and every
//! later one finds nothing left to settle. The table is part of the session body's state, so it
//! is rebuilt exactly on replay from what the journal holds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::strings::{self, NoteTask};
use eve_runtime::journal::RunId;

/// How a task runs: once (`#[task]`), or taking calls until its session ends (`#[task(serve)]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum TaskKind {
    Task,
    Serve,
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum TaskStatus {
    /// It owes at least one call a result: it holds the turn and counts toward the limit.
    Working,
    /// A resumable task with no call to answer: a later call by its `taskId` continues it.
    Idle,
    /// Its run ended; nothing reaches it any more.
    Finished,
}

/// A call waiting for its task's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PendingCall {
    call: String,
    turn: Value,
}

/// A tool's (or agent's) model-facing name, kept for the life of the process. (An alias, so
/// serde does not take the field for a borrowed string.)
pub(super) type ToolName = &'static str;

/// One task of the session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Task {
    pub id: String,
    #[serde(with = "interned")]
    pub tool: ToolName,
    pub run: RunId,
    pub kind: TaskKind,
    /// Whether it is an agent's task (`kind` `"agent"` on its events).
    #[serde(default)]
    pub agent: bool,
    pub status: TaskStatus,
    /// The stretch of work its calls belong to (a resumable task's next call after it was idle
    /// or stopped opens a new one).
    pub stretch: u64,
    pending: Vec<PendingCall>,
    /// When it was last called, to list the most recently used idle tasks first.
    used: u64,
}

impl Task {
    /// A task started by the call `call` of turn `turn`.
    pub fn new(id: String, tool: &'static str, run: RunId, kind: TaskKind, call: &str, turn: Value) -> Self {
        let pending = vec![PendingCall { call: call.to_owned(), turn }];
        Task { id, tool, run, kind, agent: false, status: TaskStatus::Working, stretch: 1, pending, used: 0 }
    }

    /// The same task, as an agent's.
    pub fn of_agent(mut self) -> Self {
        self.agent = true;
        self
    }

    /// What its events call its kind.
    pub fn kind_name(&self) -> &'static str {
        if self.agent { "agent" } else { "tool" }
    }

    /// The call still waiting for a result that came first, with its turn.
    pub fn first_pending(&self) -> Option<(&str, &Value)> {
        self.pending.first().map(|pending| (pending.call.as_str(), &pending.turn))
    }
}

/// One call settled: what `task.settled` and the `<task_result>` block name.
#[derive(Clone, Debug)]
pub(super) struct Settled {
    pub task: String,
    pub tool: &'static str,
    /// `"agent"` or `"tool"`.
    pub kind: &'static str,
    pub call: String,
    pub turn: Value,
}

/// The session's tasks, in the order they started. Serialized into the state a session carries
/// into a new history.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Tasks {
    tasks: Vec<Task>,
    /// Every call that settled with a result (not cancelled), in order: what `task_wait` reports.
    #[serde(with = "interned_log")]
    log: Vec<(String, &'static str)>,
    /// A clock for `used`.
    clock: u64,
}

impl Tasks {
    /// Adds a task that has just started.
    pub fn start(&mut self, mut task: Task) {
        self.clock += 1;
        task.used = self.clock;
        self.tasks.push(task);
    }

    pub fn working_count(&self) -> usize {
        self.tasks.iter().filter(|task| task.status == TaskStatus::Working).count()
    }

    /// The ids of the working tasks, in the order they started.
    pub fn working_ids(&self) -> Vec<String> {
        self.working().map(|task| task.id.clone()).collect()
    }

    fn working(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|task| task.status == TaskStatus::Working)
    }

    /// The runs of the idle resumable tasks: unfinished, with no call to answer.
    pub fn idle_runs(&self) -> Vec<RunId> {
        self.tasks.iter().filter(|task| task.status == TaskStatus::Idle).map(|task| task.run.clone()).collect()
    }

    /// How many calls have settled with a result so far.
    pub fn settled_count(&self) -> usize {
        self.log.len()
    }

    /// The tasks (and statuses) of the calls that settled with a result since `before` of them had.
    pub fn settled_since(&self, before: usize) -> Vec<(String, &'static str)> {
        let mut settled: Vec<(String, &'static str)> = Vec::new();
        for (task, status) in &self.log[before.min(self.log.len())..] {
            // One line per task, with its latest status.
            settled.retain(|(seen, _)| seen != task);
            settled.push((task.clone(), status));
        }
        settled
    }

    /// An unfinished resumable task of `tool` with the id `id`.
    pub fn resumable(&self, id: &str, tool: &str) -> Option<&Task> {
        self.get(id)
            .filter(|task| task.kind == TaskKind::Serve && task.tool == tool && task.status != TaskStatus::Finished)
    }

    pub fn get(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|task| task.id == id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|task| task.id == id)
    }

    pub fn by_run(&self, run: &RunId) -> Option<&Task> {
        self.tasks.iter().find(|task| &task.run == run)
    }

    fn by_run_mut(&mut self, run: &RunId) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|task| &task.run == run)
    }

    /// Gives the resumable task `id` the call `call`: an idle task works again, in a new stretch.
    /// Returns its run and the stretch the call belongs to.
    pub fn call(&mut self, id: &str, call: &str, turn: Value) -> (RunId, u64) {
        self.clock += 1;
        let clock = self.clock;
        let task = self.get_mut(id).expect("the caller checked that the task is resumable");
        if task.status == TaskStatus::Idle {
            task.stretch += 1;
            task.status = TaskStatus::Working;
        }
        task.used = clock;
        task.pending.push(PendingCall { call: call.to_owned(), turn });
        (task.run.clone(), task.stretch)
    }

    /// Stops the task's current work: its calls settle `cancelled`. A task is finished (its run
    /// is cancelled); a resumable task is idle, and its next call opens a new stretch.
    pub fn cancel(&mut self, id: &str) -> Vec<Settled> {
        let Some(task) = self.get_mut(id) else { return Vec::new() };
        task.status = match task.kind {
            TaskKind::Task => TaskStatus::Finished,
            TaskKind::Serve => TaskStatus::Idle,
        };
        settle_all(task)
    }

    /// A resumable task replied: the named calls settle `completed` (those settled already stay
    /// as they were). Without calls left to answer, the task is idle.
    pub fn reply(&mut self, run: &RunId, calls: &[String]) -> Vec<Settled> {
        let Some(task) = self.by_run_mut(run) else { return Vec::new() };
        let kind = task.kind_name();
        let mut settled = Vec::new();
        task.pending.retain(|pending| {
            if calls.contains(&pending.call) {
                settled.push(Settled {
                    task: task.id.clone(),
                    tool: task.tool,
                    kind,
                    call: pending.call.clone(),
                    turn: pending.turn.clone(),
                });
                false
            } else {
                true
            }
        });
        if task.pending.is_empty() && task.status == TaskStatus::Working {
            task.status = TaskStatus::Idle;
        }
        let id = task.id.clone();
        self.log.extend(settled.iter().map(|_| (id.clone(), "completed")));
        settled
    }

    /// The task's run ended with `status`: it is finished, and its calls settle with that status.
    pub fn end(&mut self, run: &RunId, status: &'static str) -> Vec<Settled> {
        let Some(task) = self.by_run_mut(run) else { return Vec::new() };
        task.status = TaskStatus::Finished;
        let settled = settle_all(task);
        let id = task.id.clone();
        if status != "cancelled" {
            self.log.extend(settled.iter().map(|_| (id.clone(), status)));
        }
        settled
    }

    /// The `[Tasks]` note: the working tasks, and the most recently used idle resumable ones.
    pub fn note(&self) -> String {
        let working: Vec<NoteTask<'_>> =
            self.working().map(|task| NoteTask { id: &task.id, tool: task.tool }).collect();
        let mut idle: Vec<&Task> =
            self.tasks.iter().filter(|task| task.status == TaskStatus::Idle && task.kind == TaskKind::Serve).collect();
        idle.sort_by_key(|task| std::cmp::Reverse(task.used));
        let idle: Vec<NoteTask<'_>> = idle.iter().map(|task| NoteTask { id: &task.id, tool: task.tool }).collect();
        strings::tasks_note(&working, &idle)
    }
}

/// Tool names as strings, read back as the process's `&'static` names.
mod interned {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(name: &&'static str, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(name)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<&'static str, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(eve_runtime::registry::tool(&name).map_or_else(|| super::super::agents::intern(&name), |tool| tool.name))
    }
}

/// The settled log's statuses, read back as the `&'static` names `Tasks` keeps.
mod interned_log {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(log: &[(String, &'static str)], serializer: S) -> Result<S::Ok, S::Error> {
        log.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, &'static str)>, D::Error> {
        let log = Vec::<(String, String)>::deserialize(deserializer)?;
        let status = |status: &str| match status {
            "completed" => "completed",
            "failed" => "failed",
            _ => "cancelled",
        };
        Ok(log.into_iter().map(|(task, state)| (task, status(&state))).collect())
    }
}

fn settle_all(task: &mut Task) -> Vec<Settled> {
    let (id, tool, kind) = (task.id.clone(), task.tool, task.kind_name());
    task.pending
        .drain(..)
        .map(|pending| Settled { task: id.clone(), tool, kind, call: pending.call, turn: pending.turn })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str) -> RunId {
        name.parse().unwrap()
    }

    #[test]
    fn the_first_outcome_of_a_call_wins() {
        let mut tasks = Tasks::default();
        tasks.start(Task::new("r-1".into(), "r", run("s.1"), TaskKind::Serve, "c1", Value::Null));
        assert_eq!(tasks.cancel("r-1").len(), 1);
        assert!(tasks.reply(&run("s.1"), &["c1".into()]).is_empty(), "a reply after the cancel settles nothing");
        assert!(tasks.end(&run("s.1"), "completed").is_empty());
        assert_eq!(tasks.settled_count(), 0, "cancelled work never reports back");
    }

    #[test]
    fn a_resumable_task_idles_and_works_again_in_a_new_stretch() {
        let mut tasks = Tasks::default();
        tasks.start(Task::new("r-1".into(), "r", run("s.1"), TaskKind::Serve, "c1", Value::Null));
        assert_eq!(tasks.reply(&run("s.1"), &["c1".into()]).len(), 1);
        assert_eq!(tasks.get("r-1").unwrap().status, TaskStatus::Idle);
        assert_eq!(tasks.call("r-1", "c2", Value::Null), (run("s.1"), 2));
        assert_eq!(tasks.working_ids(), ["r-1"]);
        assert_eq!(tasks.settled_since(0), [("r-1".to_owned(), "completed")]);
    }

    #[test]
    fn the_note_lists_the_ten_most_recently_used_idle_tasks() {
        let mut tasks = Tasks::default();
        for index in 0..12 {
            let id = format!("r-{index}");
            tasks.start(Task::new(id.clone(), "r", run(&format!("s.{index}")), TaskKind::Serve, "c", Value::Null));
            tasks.cancel(&id);
        }
        let note = tasks.note();
        assert!(
            note.contains("r-11") && note.contains("r-2") && !note.contains("\"r-1\"") && !note.contains("\"r-0\""),
            "{note}"
        );
    }
}
