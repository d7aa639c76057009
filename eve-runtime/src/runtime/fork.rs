//! Forking a run: a new run of the same tool on this build that takes the journaled results of
//! a finished run's first ops and runs the rest live (DBOS calls it fork).
//!
//! A run that failed at op 7 because of a bug, or that diverged from a changed body, is forked
//! from op 5 once the bug is fixed: the fork's journal is a fresh `RunStarted` (this build's
//! workflow id and stamp, the original's input, and a [`ForkedFrom`] link) followed by the
//! original's entries of ops 0 to 4, and nothing else. Its first activation replays those entries,
//! so their steps are not executed again, and its body asks for op 5 live.
//!
//! Invariants:
//! - The original is never written: it stays as it ended, for the record.
//! - Only whole ops are kept: every entry of an op below `from`, in journal order, wherever it
//!   sits (a retry, an answer or a timer that came after an entry of a later op is still kept),
//!   and no entry that belongs to no op (a cancellation, the end): replay needs no more.
//! - Nothing is created unless the kept entries replay on this build's body (the replay check
//!   of [`crate::testing`]), so a fork never fails on its own history.

use crate::events::RunEvent;
use crate::executor::Msg;
use crate::executor::check::{ReplayVerdict, check};
use crate::journal::{Entry, ForkedFrom, Op, RecordKind, RunFailure, RunId};
use crate::registry::{self, EntryPoint, ToolDescriptor};
use crate::store::{Append, Created, NewRun, RunRecord, StoreError};

use super::{Error, RunHandle, Runtime};
use crate::error::ForkError;

impl Runtime {
    /// Forks the finished run `run` from op `from`: creates a new run of the same tool on this
    /// build whose journal keeps `run`'s entries of the ops before `from`, and starts it. A run
    /// this build holds (see [`Runtime::held_runs`]) may be forked too, unfinished: it is the way
    /// to carry it on on this build (from the op before its divergence); it stays held. Those
    /// ops are replayed, not executed again; from `from` on the body runs live. The original stays
    /// as it is; the fork's first entry names it ([`ForkedFrom`]).
    ///
    /// `from` may be any op the run recorded, or the number of ops it recorded to keep them all.
    /// A run that continued as new is forked from its current history.
    ///
    /// ```
    /// # async fn fix(runtime: eve_runtime::Runtime, failed: eve_runtime::RunId) -> Result<(), eve_runtime::Error> {
    /// use eve_runtime::Op;
    /// // Op 7 failed on a bug, now fixed: keep ops 0 to 4, run op 5 on again.
    /// let fork = runtime.fork(&failed, Op(5)).await?;
    /// let outcome = fork.outcome().await?;
    /// # let _ = outcome; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`] for an unknown run, and an [`Error::Fork`] that says what to do for
    /// a run still active, an op past the run's ops, a tool this build does not have, a kept op
    /// that started a child run, and kept ops that do not replay on this build.
    pub async fn fork(&self, run: &RunId, from: Op) -> Result<RunHandle, Error> {
        let record = self.shared.store.load(run).await?.ok_or_else(|| Error::RunNotFound(run.clone()))?;
        let held = self.held(&record.summary).await?.is_some();
        let descriptor = forkable(&record, from, held)?;
        let Some(Entry::RunStarted { input, principal, interactive, .. }) = record.entries.first() else {
            let reason = format!("run {run}'s journal does not start with run_started");
            return Err(StoreError::Corrupt { path: "the journal".into(), reason }.into());
        };
        let id = RunId::generate();
        let span =
            tracing::info_span!("fork", eve.run.id = %id, gen_ai.tool.name = descriptor.name, eve.forked_from = %run);
        let new = NewRun {
            id: id.clone(),
            workflow_id: descriptor.workflow_id.to_owned(),
            tool: descriptor.name.to_owned(),
            input: input.to_value().into_owned(),
            created_at: self.shared.services.clock.now(),
            principal: principal.as_deref().map(str::to_owned),
            interactive: *interactive,
            // The original's parent has moved on: a fork reports to nobody.
            parent: None,
            traceparent: crate::trace::traceparent(&span),
            build: Some(descriptor.build()),
            forked_from: Some(ForkedFrom { run: run.clone(), op: from }),
        };
        let kept = kept(&record, from)?;
        replays(run, from, &new, &kept)?;
        tracing::Instrument::instrument(self.create_fork(new, kept, descriptor), span).await
    }

    /// Creates the fork `new` with the `kept` entries after its start, then lets it run.
    async fn create_fork(
        &self,
        new: NewRun,
        kept: Vec<Entry>,
        descriptor: &'static ToolDescriptor,
    ) -> Result<RunHandle, Error> {
        let shared = &self.shared;
        let id = new.id.clone();
        let Created::New(fence) = shared.store.create_run(new, &shared.worker).await? else {
            // A generated id is new; an existing one means the store was written behind our back.
            return Err(StoreError::Backend(format!("the fresh run id {id} is taken")).into());
        };
        if !kept.is_empty() {
            let mut append = Append { first_seq: 1, entries: kept, ..Append::default() };
            if let Err(error) = shared.store.append(&id, fence, &mut append).await {
                // A fork with no history would run its first ops again: end it failed instead.
                let message = format!("the fork could not journal the ops it keeps: {error}");
                let failed = Entry::RunFailed { failure: RunFailure::Tool { message } };
                let mut end = Append { first_seq: 1, entries: vec![failed], ..Append::default() };
                if let Err(again) = shared.store.append(&id, fence, &mut end).await {
                    tracing::error!(run = %id, "a fork without its history could not be ended either: {again}");
                }
                let _ = shared.store.release(&id, fence).await;
                return Err(error.into());
            }
        }
        shared.run_created(descriptor);
        shared.events.emit(|| RunEvent::Started { run: id.clone(), tool: descriptor.name.to_owned() });
        // Given back and woken like a run after a restart: the activation replays the kept ops.
        // On a shared store the release wakes a worker, and `wake` does nothing here.
        shared.store.release(&id, fence).await?;
        shared.wake(&id, Msg::Resume);
        let task_id = matches!(descriptor.entry, EntryPoint::Task(_)).then(|| registry::task_id(descriptor.name, &id));
        Ok(RunHandle { task_id, ..self.handle(id) })
    }
}

/// The tool of `record`'s run in this build, if the run may be forked from `from`: it has ended
/// or this build holds it (`held`: nothing advances it here, so its journal stays as the fork
/// read it), its tool is a workflow of this build, and `from` is at most the number of ops it
/// recorded.
fn forkable(record: &RunRecord, from: Op, held: bool) -> Result<&'static ToolDescriptor, ForkError> {
    let run = &record.summary.id;
    if !record.summary.status.is_finished() && !held {
        return Err(ForkError::Active { run: run.clone() });
    }
    let tool = &record.summary.tool;
    let descriptor = registry::tool(tool)
        .filter(|descriptor| matches!(descriptor.entry, EntryPoint::Workflow(_) | EntryPoint::Task(_)))
        .ok_or_else(|| ForkError::UnknownTool { run: run.clone(), tool: tool.clone() })?;
    let ops = record.entries.iter().filter_map(Entry::op).map(|op| op.0 + 1).max().unwrap_or(0);
    if from.0 > ops {
        return Err(ForkError::PastTheEnd { run: run.clone(), from, ops });
    }
    Ok(descriptor)
}

/// Every entry of an op below `from`, in journal order; refused if one of them started a child
/// run, which reports to the original alone.
fn kept(record: &RunRecord, from: Op) -> Result<Vec<Entry>, ForkError> {
    let kept: Vec<Entry> =
        record.entries.iter().skip(1).filter(|entry| entry.op().is_some_and(|op| op < from)).cloned().collect();
    let started = kept.iter().find_map(|entry| match entry {
        Entry::Recorded { op, kind: RecordKind::Started, value } => Some((*op, value.to_value().into_owned())),
        _ => None,
    });
    match started {
        Some((op, value)) => {
            let child = value.get("run").and_then(|run| run.as_str()).unwrap_or("(unknown)").to_owned();
            Err(ForkError::StartedChild { run: record.summary.id.clone(), op, child })
        }
        None => Ok(kept),
    }
}

/// Checks that the fork's journal, `new`'s start and the `kept` entries, replays on this build.
fn replays(run: &RunId, from: Op, new: &NewRun, kept: &[Entry]) -> Result<(), ForkError> {
    let journal: Vec<Entry> = std::iter::once(new.started_entry()).chain(kept.iter().cloned()).collect();
    // Checked as the original, so that a divergence names the run the person asked to fork.
    let reason = match check(run, &journal) {
        ReplayVerdict::Replays { .. } => return Ok(()),
        ReplayVerdict::Diverges { message, .. } => message,
        ReplayVerdict::Panicked { message } => format!("the body panicked: {message}"),
        ReplayVerdict::UnknownWorkflow { workflow_id } => format!("this build has no workflow `{workflow_id}`"),
        ReplayVerdict::Unreadable { reason } => reason,
    };
    Err(ForkError::Diverges { run: run.clone(), from, reason })
}
