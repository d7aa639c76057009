//! Pinned runs: a run is advanced only by a build whose code replays its journal, so a rolling
//! deploy never fails a run in flight with a divergence.
//!
//! # The rule
//!
//! A history runs on one build: the one its `RunStarted` records, or the one the last
//! `RunUpgraded` names (`store::kit::build`). A runtime on a shared store may advance a run when
//!
//! - the run's recorded fingerprint is this binary's fingerprint for the run's workflow (it was
//!   started, or upgraded, by a build with the same body: an unchanged workflow moves freely
//!   between versions), or
//! - failing that (another body, or a journal that records no build), the journal replays cleanly
//!   here, checked without running anything, as `replay` checks it.
//!
//! The check is made on the journal a claim reads, before anything is replayed for real. A run
//! that fails it is **passed over**: its claim is given back untouched (nothing is written, the
//! run is not failed), so a worker of its own build takes it, and this runtime remembers it with
//! the fingerprint it had, leaving it out of its polls ([`Store::claimable_except`]) and ignoring
//! its wake-ups while that fingerprint stays. So each worker looks at such a run once, not in a
//! loop; a run that no live worker can take waits, unfailed, until a worker of its build comes
//! back or [`Runtime::upgrade_runs`] moves it. A run whose fingerprint changes (it was upgraded)
//! is listed by the next poll and looked at again.
//!
//! # Upgrades
//!
//! When no worker of an old build is left, [`Runtime::upgrade_runs`] (`host runs upgrade`) moves
//! every unfinished run whose journal replays on this build to it, journaling `RunUpgraded` (the
//! store keeps the new fingerprint beside the run in the same commit), and lists those it cannot
//! move with their divergence.
//!
//! # Held runs
//!
//! Single-process stores (memory, SQLite) have no other workers to leave a run to. There
//! [`Runtime::recover`] looks at every unfinished run once, as `upgrade_runs` does: a run of
//! this build's body goes on; one whose journal replays here is moved to this build
//! (`RunUpgraded`) and goes on; one whose journal does not replay is **held**. A held run is not
//! loaded, not failed, and nothing is appended to it; its timers are not armed and its wake-ups
//! (deliveries, answers, timers) are kept in the store but wake nothing. It stays held until it
//! is forked onto this build ([`Runtime::fork`]), cancelled (ended at once, its cleanup not run:
//! see [`Runtime::cancel`]), or a build that replays it starts. An activation that finds a run
//! whose journal does not replay (a runtime that did not recover) holds it too, rather than fail it.
//!
//! Which runs are held is a fact about a journal and a build, so it is kept in memory only and
//! found again at every start-up. The check is cheap when nothing changed: the store keeps each
//! run's build beside it ([`RunSummary::build`]), and a run whose fingerprint is this build's is
//! not replayed to know it.
//!
//! [`Store::claimable_except`]: crate::store::Store::claimable_except

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use super::{Runtime, Shared, lock};
use crate::error::Error;
use crate::executor::check::{ReplayVerdict, check};
use crate::journal::{BuildStamp, Entry, RunId, RunStatus};
use crate::store::{Append, Claimed, PassedOver, RunQuery, RunRecord, RunSummary, StoreError, kit};

/// Whether this build may advance a run, as its journal says.
#[derive(Debug)]
pub(super) enum Pin {
    /// The run's history runs on this build's body.
    Current,
    /// Another body (or none recorded), but the journal replays on this one.
    Replays,
    /// The journal does not replay here.
    Refused(ReplayVerdict),
}

/// Whether this build may advance `run`, whose current history is `entries`: see the module
/// documentation.
pub(super) fn pin(run: &RunId, entries: &[Entry]) -> Pin {
    let Some(Entry::RunStarted { workflow_id, .. }) = entries.first() else {
        // Not a journal a body can replay: the activation reports it as corrupt.
        return Pin::Replays;
    };
    let here = crate::registry::workflow(workflow_id).map(|tool| tool.fingerprint);
    if here.is_some() && here == kit::build(entries).map(|build| build.fingerprint.as_str()) {
        return Pin::Current;
    }
    match check(run, entries) {
        verdict if verdict.replays() => Pin::Replays,
        verdict => Pin::Refused(verdict),
    }
}

/// Whether the run `summary` describes runs on this build's body, as the store says: its
/// recorded fingerprint is this build's for its workflow. Such a run is not replayed to know it.
fn runs_here(summary: &RunSummary) -> bool {
    let here = crate::registry::workflow(&summary.workflow_id).map(|tool| tool.fingerprint);
    here.is_some() && here == summary.build.as_ref().map(|build| build.fingerprint.as_str())
}

/// The runs a worker passed over, with the fingerprint each had then.
#[derive(Default)]
pub(super) struct PassedOverRuns(std::sync::Mutex<HashMap<RunId, Option<String>>>);

/// The runs a runtime on a single-process store holds, and whether it has looked at every
/// unfinished run (at start-up) so that a run it does not hold is known to be fine.
#[derive(Default)]
pub(super) struct HeldRuns {
    runs: std::sync::Mutex<HashMap<RunId, RefusedRun>>,
    checked: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Admits a claim this runtime made to rebuild a run, or, when this build cannot replay it,
    /// gives the claim back untouched: on a shared store the run is passed over (left to a worker
    /// of its own build), on a single-process store it is held.
    pub(super) async fn admit(&self, run: &RunId, claimed: Claimed) -> Option<Claimed> {
        let finished = claimed.entries.last().is_some_and(Entry::is_terminal);
        if finished {
            return Some(claimed);
        }
        if !self.store.is_shared() {
            return self.admit_alone(run, claimed).await;
        }
        let Pin::Refused(verdict) = pin(run, &claimed.entries) else { return Some(claimed) };
        let fingerprint = kit::build(&claimed.entries).map(|build| build.fingerprint.clone());
        lock(&self.passed_over.0).insert(run.clone(), fingerprint);
        self.deactivate(run);
        tracing::info!(%run, "this build cannot replay the run, so it is left to a worker of the build that started it \
                              (or to `host runs upgrade`): {}", Verdict(&verdict));
        if let Err(error) = self.store.release(run, claimed.fence).await {
            tracing::warn!(%run, "cannot give the run back; another worker takes it when the lease expires: {error}");
        }
        None
    }

    /// [`Shared::admit`] on a single-process store: a run held already, or whose journal does
    /// not replay here, is held and its claim given back.
    async fn admit_alone(&self, run: &RunId, claimed: Claimed) -> Option<Claimed> {
        if !self.is_held(run) {
            let Some(Entry::RunStarted { tool, .. }) = claimed.entries.first() else { return Some(claimed) };
            let Pin::Refused(verdict) = pin(run, &claimed.entries) else { return Some(claimed) };
            let build = kit::build(&claimed.entries).cloned();
            self.hold_run(RefusedRun { run: run.clone(), tool: tool.to_string(), build, verdict });
        }
        self.deactivate(run);
        if let Err(error) = self.store.release(run, claimed.fence).await {
            tracing::warn!(%run, "cannot give the held run back: {error}");
        }
        None
    }

    /// Holds `refused`: its wake-ups are ignored from now on, and whoever waits on it is told.
    fn hold_run(&self, refused: RefusedRun) {
        tracing::warn!(run = %refused.run, "held: {refused}");
        let run = refused.run.clone();
        lock(&self.held.runs).insert(run.clone(), refused);
        // Waiters wait for a phase this run will not reach here: dropping its sender wakes them
        // to look again, and they find it held.
        lock(&self.phases).remove(&run);
    }

    /// Whether this runtime holds `run`.
    pub(super) fn is_held(&self, run: &RunId) -> bool {
        lock(&self.held.runs).contains_key(run)
    }

    /// Why this runtime holds `run`, if it does.
    pub(super) fn held_run(&self, run: &RunId) -> Option<RefusedRun> {
        lock(&self.held.runs).get(run).cloned()
    }

    /// Whether this runtime passed `run` over and leaves it to other workers.
    pub(super) fn is_passed_over(&self, run: &RunId) -> bool {
        lock(&self.passed_over.0).contains_key(run)
    }

    /// The runs this runtime passed over, for [`Store::claimable_except`](crate::store::Store::claimable_except).
    pub(super) fn passed_over(&self) -> Vec<PassedOver> {
        let passed = lock(&self.passed_over.0);
        passed
            .iter()
            .map(|(run, fingerprint)| PassedOver { run: run.clone(), fingerprint: fingerprint.clone() })
            .collect()
    }

    /// Forgets that `run` was passed over: a poll listed it again, so its build changed.
    pub(super) fn look_again(&self, run: &RunId) {
        lock(&self.passed_over.0).remove(run);
    }
}

/// What [`Runtime::upgrade_runs`] did with the unfinished runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Upgrade {
    /// How many runs run on this build's body already (nothing to do).
    pub current: usize,
    /// The runs moved to this build: their journals replay on it.
    pub upgraded: Vec<UpgradedRun>,
    /// The runs left on their build: their journals do not replay on this one.
    pub refused: Vec<RefusedRun>,
    /// The runs a worker was advancing, so they could not be looked at: they run on that worker's
    /// build; upgrade again once they park.
    pub busy: Vec<RunId>,
}

/// A run [`Runtime::upgrade_runs`] moved to this build.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradedRun {
    /// The run.
    pub run: RunId,
    /// Its tool.
    pub tool: String,
    /// The build it ran on before, if its journal recorded one.
    pub from: Option<BuildStamp>,
    /// The build it runs on now.
    pub to: BuildStamp,
}

/// A run [`Runtime::upgrade_runs`] left on its build, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedRun {
    /// The run.
    pub run: RunId,
    /// Its tool.
    pub tool: String,
    /// The build it runs on, if its journal records one.
    pub build: Option<BuildStamp>,
    /// How its journal replays on this build: where it diverges (the op, what the journal records
    /// there, what this build asks for and at which line).
    pub verdict: ReplayVerdict,
}

impl fmt::Display for RefusedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RefusedRun { run, tool, build, verdict } = self;
        let on = build.as_ref().map_or_else(
            || "a build its journal does not record".to_owned(),
            |build| format!("build {} (body {})", build.version, build.fingerprint),
        );
        write!(f, "{run} ({tool}, on {on}): {}", Verdict(verdict))
    }
}

impl RefusedRun {
    /// Whether this build must read the journal of the run `summary` describes to know whether
    /// it replays here: the run is unfinished and its recorded build's fingerprint is not this
    /// build's for its workflow. When it is, the run runs on this build's body and is not held.
    pub fn needs_check(summary: &RunSummary) -> bool {
        !summary.status.is_finished() && !runs_here(summary)
    }

    /// The run `record` holds, refused by this build, if its journal does not replay here; `None`
    /// for a finished run, and for one that runs on this build's body or replays on it. This is
    /// what makes a run held on a single-process store (see [`Runtime::held_runs`]).
    pub fn check(record: &RunRecord) -> Option<RefusedRun> {
        let entries = &record.entries;
        if entries.last().is_some_and(Entry::is_terminal) {
            return None;
        }
        let Pin::Refused(verdict) = pin(&record.summary.id, entries) else { return None };
        let (run, tool) = (record.summary.id.clone(), record.summary.tool.clone());
        Some(RefusedRun { run, tool, build: kit::build(entries).cloned(), verdict })
    }

    /// Why this build refuses the run, in a sentence: where its journal diverges.
    pub fn reason(&self) -> String {
        Verdict(&self.verdict).to_string()
    }
}

/// A verdict that refuses a run, in a sentence.
struct Verdict<'a>(&'a ReplayVerdict);

impl fmt::Display for Verdict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ReplayVerdict::Replays { .. } => f.write_str("replays cleanly"),
            ReplayVerdict::Diverges { message, .. } => write!(f, "diverges: {message}"),
            ReplayVerdict::UnknownWorkflow { workflow_id } => {
                write!(f, "this build has no workflow `{workflow_id}` (was the tool renamed, moved or removed?)")
            }
            ReplayVerdict::Panicked { message } => write!(f, "the body panicked while it replayed: {message}"),
            ReplayVerdict::Unreadable { reason } => write!(f, "the journal cannot be replayed: {reason}"),
        }
    }
}

/// How many runs a page of the upgrade's listing holds.
const UPGRADE_PAGE: usize = 200;

impl Runtime {
    /// Moves every unfinished run whose journal replays on this build to it, and says which it
    /// could not move and why: what `host runs upgrade` does once no worker of an old build is
    /// left.
    ///
    /// Each run is claimed, its journal checked as `replay` checks it (nothing runs), and, if it
    /// replays and its recorded fingerprint is not this build's, `RunUpgraded` is journaled: from
    /// then on the run is this build's, as if it had started it, and a worker of this build takes
    /// it without checking again. A run whose journal diverges is left as it is (not failed) and
    /// listed in [`Upgrade::refused`] with the op where it diverges. A run a worker is advancing
    /// is listed in [`Upgrade::busy`]: upgrade again once it parks. A parked run stays parked.
    pub async fn upgrade_runs(&self) -> Result<Upgrade, Error> {
        let mut upgrade = Upgrade::default();
        let mut query = RunQuery::newest(UPGRADE_PAGE).status(RunStatus::Active);
        loop {
            let page = self.shared.store.list_runs(&query).await?;
            for summary in &page.runs {
                // The store says it runs on this build's body: nothing to read or move.
                if runs_here(summary) {
                    upgrade.current += 1;
                    continue;
                }
                self.upgrade_run(&summary.id, summary.parked, &mut upgrade).await?;
            }
            match page.next {
                Some(next) => query = query.before(next),
                None => return Ok(upgrade),
            }
        }
    }

    /// Looks at one unfinished run for [`Runtime::upgrade_runs`].
    async fn upgrade_run(&self, run: &RunId, parked: bool, upgrade: &mut Upgrade) -> Result<(), Error> {
        let shared = &self.shared;
        if shared.is_active(run) {
            // This process advances it, so it runs on this build already.
            upgrade.current += 1;
            return Ok(());
        }
        // A parked body kept in memory would append under a claim this one supersedes.
        drop(lock(&shared.cache).take(run));
        let now = shared.services.clock.now();
        let claimed = match shared.store.claim(run, &shared.worker, shared.lease, now, 0).await {
            Ok(claimed) => claimed,
            Err(StoreError::Leased { .. }) => {
                upgrade.busy.push(run.clone());
                return Ok(());
            }
            Err(StoreError::RunNotFound(_)) => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        let moved = self.upgrade_claimed(run, &claimed, upgrade).await;
        let next_seq = claimed.next_seq + u64::from(matches!(moved, Ok(true)));
        // Given back as it was found: a parked run stays parked (no worker loads it before one of
        // its waits resolves), any other is released for a worker to take.
        let given_back = match parked {
            true => shared.store.park(run, claimed.fence, next_seq).await,
            false => shared.store.release(run, claimed.fence).await,
        };
        moved?;
        given_back.map_err(Error::from)
    }

    /// Checks the journal a claim read and journals the move if it replays; returns whether it did.
    async fn upgrade_claimed(&self, run: &RunId, claimed: &Claimed, upgrade: &mut Upgrade) -> Result<bool, Error> {
        let entries = &claimed.entries;
        let Some(Entry::RunStarted { workflow_id, tool, .. }) = entries.first() else { return Ok(false) };
        if entries.last().is_some_and(Entry::is_terminal) {
            return Ok(false);
        }
        let from = kit::build(entries).cloned();
        let to = match (pin(run, entries), crate::registry::workflow(workflow_id)) {
            (Pin::Current, _) => {
                upgrade.current += 1;
                return Ok(false);
            }
            (Pin::Refused(verdict), _) => {
                upgrade.refused.push(RefusedRun { run: run.clone(), tool: tool.to_string(), build: from, verdict });
                return Ok(false);
            }
            (Pin::Replays, Some(here)) => here.build(),
            (Pin::Replays, None) => return Ok(false),
        };
        let at = self.shared.services.clock.now();
        let entry = Entry::RunUpgraded { build: Box::new(to.clone()), from: from.clone().map(Box::new), at };
        let mut append = Append { first_seq: claimed.next_seq, entries: vec![entry], ..Append::default() };
        self.shared.store.append(run, claimed.fence, &mut append).await?;
        upgrade.upgraded.push(UpgradedRun { run: run.clone(), tool: tool.to_string(), from, to });
        Ok(true)
    }
}

impl Runtime {
    /// Looks at every unfinished run of a single-process store once, at start-up (see the module
    /// documentation): moves those whose journals replay here to this build, holds those whose
    /// journals do not, and returns the held ones.
    pub(super) async fn check_runs(&self) -> Result<Vec<RefusedRun>, Error> {
        let upgrade = self.upgrade_runs().await?;
        for moved in &upgrade.upgraded {
            tracing::info!(run = %moved.run, "moved the run to this build: its journal replays on it");
        }
        for refused in &upgrade.refused {
            self.shared.hold_run(refused.clone());
        }
        self.shared.held.checked.store(true, std::sync::atomic::Ordering::Release);
        Ok(upgrade.refused)
    }

    /// The runs this runtime holds: unfinished runs whose journals do not replay on this build,
    /// found by [`Runtime::recover`] on a single-process store (memory, SQLite), or when an
    /// activation found one. A held run is not advanced, not failed, and nothing is appended to
    /// it; deliveries to it are kept in the store. Fork it onto this build ([`Runtime::fork`],
    /// from the op before its divergence), cancel it ([`Runtime::cancel`]), run the build that
    /// started it, or ship a build that replays it (a `ctx.patched("id")` at the line its
    /// divergence names). Always empty on a shared store, whose workers leave such runs to workers
    /// of their own build.
    pub fn held_runs(&self) -> Vec<RefusedRun> {
        let mut held: Vec<RefusedRun> = lock(&self.shared.held.runs).values().cloned().collect();
        held.sort_by(|a, b| a.run.as_str().cmp(b.run.as_str()));
        held
    }

    /// Whether this build holds the run `summary` describes, and why: `Some` for an unfinished
    /// run whose journal does not replay on this build, on a single-process store. A runtime that
    /// recovered answers from what it found then; one that did not (a command that only reads)
    /// reads the journal of a run whose recorded build is not this one's and checks it, running
    /// nothing. Always `None` on a shared store.
    pub async fn held(&self, summary: &RunSummary) -> Result<Option<RefusedRun>, Error> {
        let shared = &self.shared;
        if shared.store.is_shared() || summary.status.is_finished() {
            return Ok(None);
        }
        if let Some(held) = shared.held_run(&summary.id) {
            return Ok(Some(held));
        }
        if shared.held.checked.load(std::sync::atomic::Ordering::Acquire) || !RefusedRun::needs_check(summary) {
            return Ok(None);
        }
        Ok(RefusedRun::check(&self.journal(&summary.id).await?))
    }

    /// Whether this build holds `run` (see [`Runtime::held`]), reading its summary from the store.
    pub(super) async fn holds(&self, run: &RunId) -> Result<Option<RefusedRun>, Error> {
        if self.shared.store.is_shared() {
            return Ok(None);
        }
        match self.shared.store.tail(run).await? {
            Some((summary, _)) => self.held(&summary).await,
            None => Ok(None),
        }
    }

    /// Ends the held run `run` cancelled at once: its body cannot run on this build, so its
    /// cleanup does not run, and the journal says so. Its parent, if any, is told as usual.
    pub(super) async fn end_held(&self, run: &RunId, reason: &str) -> Result<(), Error> {
        let shared = &self.shared;
        let now = shared.services.clock.now();
        let claimed = shared.store.claim(run, &shared.worker, shared.lease, now, 0).await?;
        let Some(Entry::RunStarted { tool, parent, .. }) = claimed.entries.first() else {
            let _ = shared.store.release(run, claimed.fence).await;
            return Err(Error::RunNotFound(run.clone()));
        };
        let tool = tool.to_string();
        let reason =
            format!("{reason} (the run was held: this build cannot replay its journal, so its cleanup did not run)");
        let entries =
            vec![Entry::CancelRequested { reason, keep_output: false, grace_until: None }, Entry::RunCancelled {}];
        let mut append = Append { first_seq: claimed.next_seq, entries, ..Append::default() };
        append.notices = crate::executor::child_reports(run, parent.as_deref(), &append);
        if let Err(error) = shared.store.append(run, claimed.fence, &mut append).await {
            let _ = shared.store.release(run, claimed.fence).await;
            return Err(error.into());
        }
        lock(&shared.held.runs).remove(run);
        tracing::info!(%run, "cancelled the held run; its cleanup did not run");
        if let Some(descriptor) = crate::registry::tool(&tool) {
            crate::metrics::run_finished(descriptor.name, "cancelled");
        }
        shared.gauges.created(-1);
        shared.finish(run, crate::journal::RunOutcome::Cancelled);
        Ok(())
    }
}
