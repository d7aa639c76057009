//! `runs`, `inspect`, `export` and `replay --store` while another process (`serve`, say) holds the embedded store: they read
//! it through a [`SqliteSnapshot`], which takes no lock and never writes, so they work beside
//! its owner and show what it has committed.

use std::path::Path;

use super::{Command, inspect, parse_run, replay, runs};
use eve_runtime::store::{RunQuery, RunSummary};
use eve_runtime::{Error, RefusedRun};
use eve_sqlite::SqliteSnapshot;

/// Runs the read-only `command` against the store at `path`.
pub(super) fn read(path: &Path, command: &Command) -> Result<(), String> {
    let mut snapshot = SqliteSnapshot::open(path).map_err(|error| error.to_string())?;
    match command {
        Command::Runs { status, limit, .. } => {
            let query = runs::query(status.as_deref(), *limit)?;
            let mut listing = runs::Listing::new(status.as_deref(), *limit);
            let mut page = snapshot.list_runs(&query).map_err(|error| error.to_string())?;
            loop {
                for summary in page.runs {
                    let held = holds(&mut snapshot, &summary).map_err(|error| error.to_string())?;
                    listing.add(summary, held);
                }
                match page.next.filter(|_| listing.wants_more()) {
                    Some(next) => {
                        page = snapshot.list_runs(&query.clone().before(next)).map_err(|error| error.to_string())?
                    }
                    None => break,
                }
            }
            let (listed, held) = listing.finish();
            runs::print(&listed, &held, status.as_deref());
            Ok(())
        }
        Command::Inspect { run, at, json } => {
            let run = parse_run(run)?;
            let loaded = snapshot.load(&run).map_err(|error| error.to_string())?;
            let record = loaded.ok_or_else(|| Error::RunNotFound(run.clone()).to_string())?;
            let pending = snapshot.inbox(&run).map_err(|error| error.to_string())?;
            inspect::print(&record, &pending, RefusedRun::check(&record), *at, *json)
        }
        Command::Export { run, out } => {
            let run = parse_run(run)?;
            let loaded = snapshot.load(&run).map_err(|error| error.to_string())?;
            let record = loaded.ok_or_else(|| Error::RunNotFound(run.clone()).to_string())?;
            replay::export(&record, out.as_deref())
        }
        Command::Replay { json, .. } => {
            let unfinished = snapshot
                .list_runs(&RunQuery::newest(usize::MAX).status(eve_runtime::journal::RunStatus::Active))
                .map_err(|error| error.to_string())?
                .runs;
            let mut records = Vec::with_capacity(unfinished.len());
            for run in unfinished {
                records.extend(snapshot.load(&run.id).map_err(|error| error.to_string())?);
            }
            replay::records(&records, *json)
        }
        _ => unreachable!("only `runs`, `inspect`, `export` and `replay` read beside the store's owner"),
    }
}

/// Whether this build holds the run, as `Runtime::held` finds it in a runtime that did not
/// recover: the journal of an unfinished run of another build is read and checked, running nothing.
fn holds(snapshot: &mut SqliteSnapshot, summary: &RunSummary) -> Result<bool, eve_runtime::error::StoreError> {
    if summary.status.is_finished() || !RefusedRun::needs_check(summary) {
        return Ok(false);
    }
    Ok(snapshot.load(&summary.id)?.as_ref().and_then(RefusedRun::check).is_some())
}
