//! `export` and `replay`: a run's journal as a file, and recorded journals replayed against the
//! tools in this binary (see [`eve_runtime::testing`]).

use std::path::{Path, PathBuf};

use eve_runtime::store::RunRecord;
use eve_runtime::testing::{JournalFile, ReplayReport, replay, replay_record};

/// Writes `record` as a journal file: to `out`, standard output for `-`, or `<run>.journal.json`.
pub(super) fn export(record: &RunRecord, out: Option<&Path>) -> Result<(), String> {
    let file = JournalFile::of(record, eve_runtime::time::Clock::now(&eve_runtime::time::SystemClock));
    let text = file.to_text();
    match out {
        Some(path) if path == Path::new("-") => println!("{text}"),
        _ => {
            let path =
                out.map_or_else(|| PathBuf::from(format!("{}.journal.json", record.summary.id)), Path::to_path_buf);
            std::fs::write(&path, text + "\n")
                .map_err(|error| format!("cannot write {}: {error}; pick another file with --out", path.display()))?;
            eprintln!(
                "wrote the journal of {} ({} entries) to {}; `replay {}` checks a build against it",
                record.summary.id,
                record.entries.len(),
                path.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Replays journal files.
pub(super) fn files(paths: &[PathBuf], json: bool) -> Result<(), String> {
    let mut reports = Vec::with_capacity(paths.len());
    for path in paths {
        let journal = JournalFile::read(path).map_err(|error| error.to_string())?;
        reports.push(replay(&journal));
    }
    conclude(&reports, json, "journal files")
}

/// Replays the journals of a store's unfinished runs.
pub(super) fn records(records: &[RunRecord], json: bool) -> Result<(), String> {
    let reports: Vec<ReplayReport> = records.iter().map(replay_record).collect();
    conclude(&reports, json, "unfinished runs")
}

/// Prints one line per report, then the count; fails if any diverges.
fn conclude(reports: &[ReplayReport], json: bool, what: &str) -> Result<(), String> {
    for report in reports {
        if json {
            println!("{}", serde_json::to_string(report).expect("a report always serializes"));
        } else {
            println!("{report}");
        }
    }
    let failed = reports.iter().filter(|report| !report.replays()).count();
    if failed > 0 {
        return Err(format!(
            "{failed} of {} {what} would not replay on this build: finish those runs on the build that started them, or \
             keep the old code path for them",
            reports.len()
        ));
    }
    if !json {
        println!("{} {what}: all replay on this build", reports.len());
    }
    Ok(())
}
