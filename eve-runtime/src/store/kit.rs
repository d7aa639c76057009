//! The driver kit: what a store needs besides the [`Store`](super::Store) trait to keep the journal
//! and its indexes as every store does, so a store written outside this crate passes the
//! conformance suites (feature `testkit`). The SQLite and Postgres stores are written with it
//! alone.
//!
//! - [`IndexChanges`]: the timer, hook and status index changes that entries imply.
//! - [`continued`]: a history's number, from its first entry; [`build`]: the build it runs on.
//! - [`decode_entry`] and [`from_str`]: a journal entry or delivery read back from the JSON text a
//!   store wrote, within the journal's depth limit; [`fits`] and [`MAX_DEPTH`] check a value
//!   before it is written.
//! - [`RunPage::of`](super::RunPage::of), [`RunCursor::at`](super::RunCursor::at) and
//!   [`RunQuery::keeps`](super::RunQuery::keeps): pages of a listing.
//! - [`StoreError::MismatchedTarget`](super::StoreError::MismatchedTarget) and the other errors a
//!   store reports, and [`crate::failpoint::hit`] for crash tests at its durability boundaries.

pub use crate::journal::decode::entry as decode_entry;
pub use crate::journal::depth::{MAX_DEPTH, fits, from_str};
use crate::journal::{BuildStamp, Entry, Op, RunStatus, StepOutcome};
use crate::time::Timestamp;

use super::{HookMeta, TimerKind};

/// The `continued` of a history's entry 0: how many histories came before it.
pub fn continued(journal: &[Entry]) -> u32 {
    match journal.first() {
        Some(Entry::RunStarted { continued, .. }) => *continued,
        _ => 0,
    }
}

/// The build a history runs on: the one the last [`Entry::RunUpgraded`] names, else the one its
/// [`Entry::RunStarted`] records (`None` for a journal written before runs recorded their build).
pub fn build(journal: &[Entry]) -> Option<&BuildStamp> {
    journal.iter().rev().find_map(|entry| match entry {
        Entry::RunUpgraded { build, .. } => Some(Some(&**build)),
        Entry::RunStarted { build, .. } => Some(build.as_deref()),
        _ => None,
    })?
}

/// The index changes entries imply: every store applies them in the transaction that appends the
/// entries, so the indexes agree with the journal, and agree between stores.
#[derive(Debug, Default)]
pub struct IndexChanges {
    /// Timers to add: a sleep's deadline, or a step's next attempt.
    pub timers_added: Vec<(Op, Timestamp, TimerKind)>,
    /// Timers that fired or whose step completed.
    pub timers_removed: Vec<(Op, TimerKind)>,
    /// Hooks to index by token (or sign-in `state`) hash.
    pub hooks_added: Vec<(Op, String, HookMeta)>,
    /// Hooks of the run that stop accepting deliveries (a completed sign-in's callback).
    pub hooks_removed: Vec<Op>,
    /// The run's new status, when an entry ends it.
    pub status: Option<RunStatus>,
    /// The build the run's history runs on from now on, when an entry names one (a `RunStarted`
    /// that records its build, a `RunUpgraded`): a store keeps it beside the run
    /// ([`RunSummary::build`](super::RunSummary::build)), so a worker can tell the runs its own
    /// build started, and a listing can show each run's build, without reading their journals.
    /// Boxed, as in the entries: every append makes one of these, and few name a build.
    pub build: Option<Box<BuildStamp>>,
}

impl IndexChanges {
    /// The index changes `entries` imply.
    pub fn of(entries: &[Entry]) -> Self {
        let mut changes = IndexChanges::default();
        for entry in entries {
            match entry {
                Entry::TimerScheduled { op, deadline } => {
                    changes.timers_added.push((*op, *deadline, TimerKind::Sleep));
                }
                Entry::TimerFired { op } => changes.timers_removed.push((*op, TimerKind::Sleep)),
                Entry::StepRetrying { op, next_attempt_at, .. } => {
                    changes.timers_added.push((*op, *next_attempt_at, TimerKind::Retry));
                }
                // Only a step that waited to retry has a retry timer: it completes on a later attempt,
                // or with an error when cancelled while waiting. The common case writes nothing.
                Entry::StepCompleted { op, attempt, outcome, .. }
                    if *attempt > 1 || matches!(outcome, StepOutcome::Err { .. }) =>
                {
                    changes.timers_removed.push((*op, TimerKind::Retry));
                }
                Entry::HookCreated { op, token_hash, conflict: false, webhook, .. } => {
                    let meta = match webhook {
                        Some(options) => {
                            HookMeta::Webhook { respond: options.respond.clone(), redaction: options.redaction.clone() }
                        }
                        None => HookMeta::Hook,
                    };
                    changes.hooks_added.push((*op, token_hash.clone(), meta));
                }
                Entry::AuthRequired { op, provider, state_hash, nonce, .. } => {
                    let meta = HookMeta::Auth { provider: provider.clone(), nonce: nonce.clone() };
                    changes.hooks_added.push((*op, state_hash.clone(), meta));
                }
                Entry::AuthCompleted { op } => changes.hooks_removed.push(*op),
                Entry::RunStarted { build: Some(build), .. } | Entry::RunUpgraded { build, .. } => {
                    changes.build = Some(build.clone());
                }
                entry if entry.is_terminal() => changes.status = Some(RunStatus::after(entry)),
                _ => {}
            }
        }
        changes
    }
}
