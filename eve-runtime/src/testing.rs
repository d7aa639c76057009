//! Will a new build still replay the runs in flight? Recorded journals, replayed against the code
//! in this binary without running anything.
//!
//! `host export <run>` writes a run's journal as a [`JournalFile`]; keep such files in a folder
//! of your repository and replay them in CI, so a build whose workflows would no longer replay
//! the runs in flight fails before it ships:
//!
//! ```no_run
//! use eve_runtime::testing::{JournalFile, replay};
//!
//! for file in std::fs::read_dir("tests/journals").unwrap() {
//!     let journal = JournalFile::read(&file.unwrap().path()).unwrap();
//!     let report = replay(&journal);
//!     assert!(report.replays(), "{report}");
//! }
//! ```
//!
//! A replay feeds the recorded deliveries (step results, timers, hook payloads, answers) to the
//! body in journal order, as a restart does, and checks every operation the body asks for against
//! the journal: kind, name and input hash. No step runs, no timer is armed, nothing is written.
//! Steps added after the last recorded operation are fine: a run in flight reaches them live.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::executor::check::ReplayVerdict;
use crate::journal::{Entry, RunId, RunStatus};
use crate::store::RunRecord;
use crate::time::Timestamp;

/// The version of the journal file format this build writes and reads.
pub const JOURNAL_FORMAT: u32 = 1;

/// A run's journal as a file: what `host export` writes and `host replay` reads (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalFile {
    /// The format's version, [`JOURNAL_FORMAT`].
    pub eve_journal: u32,
    /// The run.
    pub run: RunId,
    /// The model-facing name of its tool.
    pub tool: String,
    /// The run's status when it was exported.
    pub status: RunStatus,
    /// When it was exported.
    pub exported_at: Timestamp,
    /// The journal, entry 0 (`run_started`) first.
    pub entries: Vec<Entry>,
}

impl JournalFile {
    /// The file of a run's journal, as a store loaded it.
    pub fn of(record: &RunRecord, exported_at: Timestamp) -> Self {
        JournalFile {
            eve_journal: JOURNAL_FORMAT,
            run: record.summary.id.clone(),
            tool: record.summary.tool.clone(),
            status: record.summary.status,
            exported_at,
            entries: record.entries.clone(),
        }
    }

    /// Reads a journal file, saying what is wrong with one that is not.
    pub fn read(path: &Path) -> Result<Self, JournalFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| JournalFileError { path: path.display().to_string(), reason: error.to_string() })?;
        Self::parse(&text).map_err(|reason| JournalFileError { path: path.display().to_string(), reason })
    }

    /// Parses a journal file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            crate::journal::depth::from_slice(text.as_bytes()).map_err(|error| format!("not JSON: {error}"))?;
        match value.get("eveJournal").and_then(serde_json::Value::as_u64) {
            None => return Err("not an eve journal file: it has no `eveJournal` version".into()),
            Some(version) if version != u64::from(JOURNAL_FORMAT) => {
                return Err(format!(
                    "it is journal format {version}, and this build reads format {JOURNAL_FORMAT}; export it again with this build's `host export`"
                ));
            }
            Some(_) => {}
        }
        let mut track = serde_path_to_error::Track::new();
        let file = JournalFile::deserialize(serde_path_to_error::Deserializer::new(value, &mut track))
            .map_err(|error| format!("at `{}`: {error}", track.path()))?;
        if !matches!(file.entries.first(), Some(Entry::RunStarted { .. })) {
            return Err("its first entry is not `run_started`".into());
        }
        Ok(file)
    }

    /// The file's text: pretty JSON, one key per line, so a diff of two exports reads well.
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).expect("a journal always serializes")
    }
}

/// A journal file that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the journal file {path}: {reason}")]
pub struct JournalFileError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

/// How one journal replays: [`replay`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// The run.
    pub run: RunId,
    /// Its tool.
    pub tool: String,
    /// How many entries the journal holds.
    pub entries: usize,
    /// The build the journal's history runs on (the one that started it, or the one it was last
    /// upgraded to), when the journal records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::journal::BuildStamp>,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: ReplayVerdict,
}

impl ReplayReport {
    /// Whether the code in this binary replays the journal.
    pub fn replays(&self) -> bool {
        self.verdict.replays()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ReplayReport { run, tool, entries, verdict, .. } = self;
        match verdict {
            ReplayVerdict::Replays { ops, finished } => {
                let end = if *finished { ", and the body finishes as it did" } else { "" };
                let (entries, ops) =
                    (plural(*entries as u64, "entry", "entries"), plural(u64::from(*ops), "operation", "operations"));
                write!(f, "{run} ({tool}): replays cleanly ({entries}, {ops}{end})")
            }
            ReplayVerdict::Diverges { message, .. } => write!(f, "{run} ({tool}): DIVERGES: {message}"),
            ReplayVerdict::UnknownWorkflow { workflow_id } => write!(
                f,
                "{run} ({tool}): DIVERGES: this build has no workflow `{workflow_id}` (was the tool renamed, moved or removed?)"
            ),
            ReplayVerdict::Panicked { message } => {
                write!(f, "{run} ({tool}): the body panicked while replaying: {message}")
            }
            ReplayVerdict::Unreadable { reason } => write!(f, "{run} ({tool}): cannot be replayed: {reason}"),
        }
    }
}

fn plural(count: u64, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// Replays `journal` against the code in this binary, running nothing: see the module
/// documentation.
pub fn replay(journal: &JournalFile) -> ReplayReport {
    report(&journal.run, &journal.tool, &journal.entries)
}

/// Replays a journal a store holds.
pub fn replay_record(record: &RunRecord) -> ReplayReport {
    report(&record.summary.id, &record.summary.tool, &record.entries)
}

fn report(run: &RunId, tool: &str, entries: &[Entry]) -> ReplayReport {
    let verdict = crate::executor::check::check(run, entries);
    let build = crate::store::kit::build(entries).cloned();
    ReplayReport { run: run.clone(), tool: tool.to_owned(), entries: entries.len(), build, verdict }
}
