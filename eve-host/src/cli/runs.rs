//! `runs`: the runs a store holds, newest first, as a table with a header and aligned columns;
//! and `runs fork`, which forks one.
//!
//! The store keeps four statuses (active, completed, failed, cancelled); the table splits active
//! runs into `parked` (waiting on durable waits only, holding no task) and `running` (an activation
//! was under way when the store was last written), which is what a person asks about, and shows
//! `held` for a run this build holds (its journal does not replay here: see
//! [`Runtime::held_runs`]). The `BUILD` column is the build each run's history runs on: its
//! version and the first eight characters of its body's fingerprint.

use std::time::Duration;

use std::collections::HashSet;

use eve_runtime::Runtime;
use eve_runtime::journal::{BuildStamp, Op, Position, RunId, RunStatus};
use eve_runtime::store::{RUN_STATES, RunQuery, RunSummary};

/// `runs fork <run> --from <op>`: forks `run` from op `from`, prints the fork's id, and follows
/// the fork (its steps on stderr) until it parks or ends, as `call` follows a run.
pub(super) async fn fork(runtime: &Runtime, run: &RunId, from: Op, wait: Duration) -> Result<(), String> {
    // On a shared store this process is a client: the workers run the fork.
    if !runtime.store().is_shared() {
        runtime.recover().await.map_err(|error| error.to_string())?;
    }
    let original = runtime.journal(run).await.map_err(|error| error.to_string())?;
    let handle = runtime.fork(run, from).await.map_err(|error| error.to_string())?;
    println!("{}", handle.id());
    let kept = original.entries.iter().filter(|entry| entry.op().is_some_and(|op| op < from)).count() as u64;
    let kept_ops = match from.0 {
        0 => "no op kept".to_owned(),
        1 => "op 0 kept".to_owned(),
        n => format!("ops 0 to {} kept", n - 1),
    };
    eprintln!("forked {run} from {from} as {} ({kept_ops})", handle.id());
    // The kept entries were journaled by the original: only what the fork does is shown.
    let after_kept = Position::new(0, kept + 1);
    super::with_steps(runtime, handle.id(), after_kept, super::follow_run(runtime, &handle, wait)).await
}

/// The state `runs --status` names for the runs this build holds, which the store does not keep.
const HELD: &str = "held";

/// The runs `runs [--status <state>] [--limit <n>]` lists, newest first, and which of them this
/// build holds; or a sentence listing the states a person can name.
pub(super) async fn list(
    runtime: &Runtime,
    state: Option<&str>,
    limit: usize,
) -> Result<(Vec<RunSummary>, HashSet<RunId>), String> {
    let query = query(state, limit)?;
    let mut listing = Listing::new(state, limit);
    // Workers of a shared store hold no runs: a run whose build they lack waits for a worker of
    // its own build (see `runs upgrade`).
    if state == Some(HELD) && runtime.store().is_shared() {
        return Ok(listing.finish());
    }
    let mut page = runtime.list_runs(&query).await.map_err(|error| error.to_string())?;
    loop {
        for summary in page.runs {
            let held = runtime.held(&summary).await.map_err(|error| error.to_string())?.is_some();
            listing.add(summary, held);
        }
        match page.next.filter(|_| listing.wants_more()) {
            Some(next) => {
                page = runtime.list_runs(&query.clone().before(next)).await.map_err(|error| error.to_string())?
            }
            None => return Ok(listing.finish()),
        }
    }
}

/// A listing being gathered page by page, by a runtime or from a snapshot beside the store's
/// owner.
///
/// Held runs are active in the store: `--status held` reads pages of active runs until it has
/// `limit` held ones, and `parked` and `running` leave them out, as nothing advances them here.
pub(super) struct Listing<'a> {
    state: Option<&'a str>,
    limit: usize,
    runs: Vec<RunSummary>,
    held: HashSet<RunId>,
}

impl<'a> Listing<'a> {
    pub(super) fn new(state: Option<&'a str>, limit: usize) -> Self {
        Listing { state, limit, runs: Vec::new(), held: HashSet::new() }
    }

    /// Adds a run the store listed; `held` says whether this build holds it.
    pub(super) fn add(&mut self, summary: RunSummary, held: bool) {
        match (self.state, held) {
            (Some(HELD), false) | (Some("parked" | "running"), true) => return,
            _ => {}
        }
        if held {
            self.held.insert(summary.id.clone());
        }
        self.runs.push(summary);
    }

    /// Whether the listing reads the store's next page: only `--status held` does, as the store
    /// cannot filter by it.
    pub(super) fn wants_more(&self) -> bool {
        self.state == Some(HELD) && self.runs.len() < self.limit
    }

    /// The runs listed, at most `limit`, and which of them are held.
    pub(super) fn finish(mut self) -> (Vec<RunSummary>, HashSet<RunId>) {
        self.runs.truncate(self.limit);
        (self.runs, self.held)
    }
}

/// The store's query for `runs --status <state>`, or a sentence listing the states a person can
/// name. The store keeps held runs as active ones.
pub(super) fn query(state: Option<&str>, limit: usize) -> Result<RunQuery, String> {
    let query = RunQuery::newest(limit);
    match state {
        None => Ok(query),
        Some(HELD) => Ok(query.status(RunStatus::Active)),
        Some(state) => query
            .state(state)
            .ok_or_else(|| format!("unknown status `{state}`; use {} or {HELD}", RUN_STATES.join(", "))),
    }
}

/// Prints `listed` as a table, or says there are no runs (in `state`, if one was asked for).
/// `held` names the runs this build holds.
pub(super) fn print(listed: &[RunSummary], held: &HashSet<RunId>, state: Option<&str>) {
    match (listed.is_empty(), state) {
        (true, Some(state)) => println!("no {state} runs"),
        (true, None) => println!("no runs"),
        (false, _) => println!("{}", table(listed, held)),
    }
}

/// The runs as a table: a header, then one line per run, each column as wide as its widest cell
/// (entries right-aligned), times in ISO 8601.
pub(super) fn table(runs: &[RunSummary], held: &HashSet<RunId>) -> String {
    let header = ["RUN", "STATUS", "TOOL", "BUILD", "ENTRIES", "CREATED"].map(str::to_owned);
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|run| {
            let status = if held.contains(&run.id) { "held" } else { run.state() };
            [
                run.id.to_string(),
                status.to_owned(),
                run.tool.clone(),
                build(run.build.as_ref()),
                run.entries.to_string(),
                run.created_at.to_string(),
            ]
        })
        .collect();
    let width = |column: usize| rows.iter().chain([&header]).map(|row| row[column].chars().count()).max().unwrap_or(0);
    let widths = [width(0), width(1), width(2), width(3), width(4)];
    let line = |row: &[String; 6]| {
        let [id, status, tool, build, entries, created] = row;
        let [w0, w1, w2, w3, w4] = widths;
        format!("{id:<w0$}  {status:<w1$}  {tool:<w2$}  {build:<w3$}  {entries:>w4$}  {created}")
    };
    std::iter::once(&header).chain(&rows).map(line).collect::<Vec<_>>().join("\n")
}

/// A build in one word: `1.4.0@3fa9c2d1` (its version and the start of its body's fingerprint,
/// enough to tell builds apart), or `-` when the journal records none.
fn build(build: Option<&BuildStamp>) -> String {
    build.map_or_else(
        || "-".to_owned(),
        |build| format!("{}@{}", build.version, build.fingerprint.chars().take(8).collect::<String>()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use eve_runtime::journal::RunStatus;
    use eve_runtime::time::Timestamp;

    fn run(id: &str, status: RunStatus, parked: bool) -> RunSummary {
        RunSummary {
            id: id.parse().unwrap(),
            workflow_id: "host::greet".into(),
            tool: "greet".into(),
            status,
            created_at: Timestamp::from_millis(1_500),
            entries: 12,
            parked,
            build: Some(BuildStamp { fingerprint: "3fa9c2d1e0b4a577".into(), version: "1.4.0".into() }),
        }
    }

    #[test]
    fn columns_line_up_under_their_headers() {
        let mut old = run("r", RunStatus::Completed, false);
        old.build = None;
        let runs = [run("run-long-id", RunStatus::Active, true), old, run("h", RunStatus::Active, true)];
        let table = table(&runs, &HashSet::from(["h".parse().unwrap()]));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "RUN          STATUS     TOOL   BUILD           ENTRIES  CREATED");
        assert_eq!(lines[1], "run-long-id  parked     greet  1.4.0@3fa9c2d1       12  1970-01-01T00:00:01.500Z");
        assert_eq!(lines[2], "r            completed  greet  -                    12  1970-01-01T00:00:01.500Z");
        assert_eq!(lines[3], "h            held       greet  1.4.0@3fa9c2d1       12  1970-01-01T00:00:01.500Z");
    }

    #[test]
    fn active_runs_are_parked_or_running() {
        assert_eq!(run("a", RunStatus::Active, false).state(), "running");
        let parked = query(Some("parked"), 10).unwrap();
        assert!(parked.keeps(&run("a", RunStatus::Active, true)));
        assert!(!parked.keeps(&run("a", RunStatus::Active, false)));
        assert!(!query(Some("running"), 10).unwrap().keeps(&run("a", RunStatus::Active, true)));
        let unknown = query(Some("sleeping"), 10).unwrap_err();
        assert!(unknown.contains("use active, parked, running") && unknown.ends_with("cancelled or held"), "{unknown}");
    }
}
