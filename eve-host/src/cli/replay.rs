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

/// Replays the journals of a store's unfinished runs, grouped (as text) by the tool and the build
/// that started them, each group saying whether this build's body is the one they started on.
pub(super) fn records(records: &[RunRecord], json: bool) -> Result<(), String> {
    let mut reports: Vec<ReplayReport> = records.iter().map(replay_record).collect();
    if json {
        return conclude(&reports, json, "unfinished runs");
    }
    reports.sort_by(|a, b| (&a.tool, &a.build).cmp(&(&b.tool, &b.build)));
    for group in reports.chunk_by(|a, b| a.tool == b.tool && a.build == b.build) {
        let first = &group[0];
        println!("{} ({}):", first.tool, group_of(first, group.len()));
        for report in group {
            println!("  {report}");
        }
    }
    conclude_quietly(&reports, "unfinished runs")
}

/// What a group of runs started by one build has in common, against this build's body.
fn group_of(report: &ReplayReport, runs: usize) -> String {
    let runs = if runs == 1 { "1 run".to_owned() } else { format!("{runs} runs") };
    let Some(build) = &report.build else {
        return format!("{runs} started before runs recorded their build");
    };
    let here = eve_runtime::registry::tool(&report.tool);
    let body = match here {
        Some(tool) if tool.fingerprint == build.fingerprint => "the same body as this build".to_owned(),
        Some(tool) => format!("body changed in this build ({} {})", tool.version, tool.fingerprint),
        None => "a tool this build does not have".to_owned(),
    };
    format!("{runs} started by build {} (body {}): {body}", build.version, build.fingerprint)
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
    if json {
        return verdict(reports, what);
    }
    conclude_quietly(reports, what)
}

/// The count, when every report replays; else the error.
fn conclude_quietly(reports: &[ReplayReport], what: &str) -> Result<(), String> {
    verdict(reports, what)?;
    println!("{} {what}: all replay on this build", reports.len());
    Ok(())
}

/// Fails if any report diverges, saying what to do.
fn verdict(reports: &[ReplayReport], what: &str) -> Result<(), String> {
    let failed = reports.iter().filter(|report| !report.replays()).count();
    if failed > 0 {
        return Err(format!(
            "{failed} of {} {what} would not replay on this build: guard the change with `ctx.patched(\"id\")` at the \
             line each divergence names, so those runs keep the old code, or finish them on the build that started them",
            reports.len()
        ));
    }
    Ok(())
}
