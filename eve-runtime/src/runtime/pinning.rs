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
//! Single-process stores (memory, SQLite) have no other workers to leave a run to, so their
//! runtimes advance every run as before (a divergence fails it); `upgrade_runs` serves them too.
//!
//! [`Store::claimable_except`]: crate::store::Store::claimable_except

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use super::{Runtime, Shared, lock};
use crate::error::Error;
use crate::executor::check::{ReplayVerdict, check};
use crate::journal::{BuildStamp, Entry, RunId, RunStatus};
use crate::store::{Append, Claimed, PassedOver, RunQuery, StoreError, kit};

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

/// The runs a worker passed over, with the fingerprint each had then.
#[derive(Default)]
pub(super) struct PassedOverRuns(std::sync::Mutex<HashMap<RunId, Option<String>>>);

impl Shared {
    /// Admits a claim this runtime made to rebuild a run, or, on a shared store, passes the run
    /// over (gives the claim back untouched and remembers it) when this build cannot replay it.
    pub(super) async fn admit(&self, run: &RunId, claimed: Claimed) -> Option<Claimed> {
        let finished = claimed.entries.last().is_some_and(Entry::is_terminal);
        if !self.store.is_shared() || finished {
            return Some(claimed);
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
