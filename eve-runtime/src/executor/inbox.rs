//! Deliveries from outside, and the body's withdrawals, turned into journal entries.
//!
//! The inbox holds what arrived durably while the run may not have been active: hook payloads,
//! answers, sign-in completions and cancellations. Reading it yields entries in arrival order.
//! A withdrawal of an ask is resolved only after the inbox is read, so an answer that reached
//! the runtime before the withdrawal wins.

use super::Driver;
use super::Engine;
use crate::ask::AskOutcome;
use crate::journal::{Entry, Op};
use crate::run_core::{Slot, signal};
use crate::store::{Delivery, InboxItem, StoreError};
use crate::time::Timestamp;

impl Driver {
    /// Moves inbox deliveries into journal entries.
    pub(super) async fn read_inbox(
        &mut self,
        rt: &Engine,
        entries: &mut Vec<Entry>,
        consumed: &mut Vec<u64>,
    ) -> Result<(), StoreError> {
        let mut backoff = super::StoreBackoff::default();
        while self.inbox.is_empty() {
            // Other events of the batch (a step's completion) wait in memory while the store recovers.
            let read = rt.store.inbox(&self.core.run).await;
            if let Ok(items) = &read {
                crate::metrics::inbox_read(items.len());
            }
            match read {
                Ok(items) if items.is_empty() => break,
                Ok(items) => self.inbox.extend(items),
                Err(error) if error.is_transient() => backoff.wait(rt, &self.core.run, error).await?,
                Err(error) => return Err(error),
            }
        }
        let mut cancelled =
            self.core.is_cancelled() || entries.iter().any(|entry| matches!(entry, Entry::CancelRequested { .. }));
        let items: Vec<InboxItem> = self.inbox.drain(..).collect();
        for item in items {
            if consumed.contains(&item.id) {
                continue;
            }
            if let Delivery::Hook { op, .. } = &item.delivery
                && self.hook_is_full(*op, rt.hook_buffer, entries)
            {
                // Left in the inbox until the body takes payloads: a sender that outpaces the
                // body meets the inbox's limit instead of growing the journal.
                self.backlog.insert(*op, ());
                continue;
            }
            consumed.push(item.id);
            match item.delivery {
                Delivery::Hook { op, payload } => entries.push(Entry::HookReceived { op, payload }),
                Delivery::Answer { op, answer } => {
                    if self.ask_is_open(op, entries) {
                        entries.push(Entry::AskResolved { op, outcome: answer.into() });
                    }
                }
                Delivery::AuthCompleted { op } => entries.extend(self.sign_in_completed(op)),
                Delivery::Cancel { reason, keep_output } if !cancelled => {
                    cancelled = true;
                    let grace_until = Some(rt.services.clock.now().saturating_add(rt.grace));
                    entries.push(Entry::CancelRequested { reason, grace_until, keep_output });
                    entries.extend(self.cancel_waiting_steps());
                }
                Delivery::Cancel { .. } => {}
            }
        }
        Ok(())
    }

    /// Whether the hook at `op` holds `limit` payloads the body has not taken, counting those
    /// about to be journaled.
    fn hook_is_full(&self, op: Op, limit: usize, pending: &[Entry]) -> bool {
        let state = self.core.lock();
        let held = match state.ops.get(op.0 as usize).map(|slot| &slot.slot) {
            Some(Slot::Hook(hook)) => hook.queue.len(),
            _ => 0,
        };
        let coming = pending.iter().filter(|entry| matches!(entry, Entry::HookReceived { op: to, .. } if *to == op));
        held + coming.count() >= limit
    }

    /// Whether a hook whose deliveries were left in the inbox has room again.
    pub(super) fn backlog_has_room(&self, limit: usize) -> bool {
        self.backlog.keys().any(|op| !self.hook_is_full(*op, limit, &[]))
    }

    /// Resolves the asks the body withdrew as cancelled, unless they resolved otherwise first.
    pub(super) fn withdrawals(&mut self, entries: &mut Vec<Entry>) {
        if self.core.signals() & signal::WITHDRAWALS == 0 {
            return;
        }
        let withdrawn = std::mem::take(&mut self.core.lock().withdrawals);
        for op in withdrawn {
            let recorded = self.core.lock().index.asks_resolved.contains_key(&op);
            if !recorded && self.ask_is_open(op, entries) {
                entries.push(Entry::AskResolved { op, outcome: AskOutcome::Cancelled });
            }
        }
    }

    /// Whether the ask at `op` has not resolved, counting entries about to be appended.
    fn ask_is_open(&self, op: Op, pending: &[Entry]) -> bool {
        let state = self.core.lock();
        let open = matches!(state.ops.get(op.0 as usize).map(|slot| &slot.slot), Some(Slot::Ask { outcome: None }));
        let resolving =
            pending.iter().any(|entry| matches!(entry, Entry::AskResolved { op: resolved, .. } if *resolved == op));
        open && !resolving
    }

    /// `TimerFired` for a sleep that has not fired yet and whose deadline has come (a timer fires
    /// exactly once, and never early).
    pub(super) fn timer_fired(&self, op: Op, now: Timestamp, pending: &[Entry]) -> Option<Entry> {
        let state = self.core.lock();
        let slot = state.ops.get(op.0 as usize).map(|slot| &slot.slot);
        let unfired = matches!(slot, Some(Slot::Sleep { fired: false, deadline }) if *deadline <= now);
        let queued = pending.iter().any(|entry| matches!(entry, Entry::TimerFired { op: queued } if *queued == op));
        (unfired && !queued).then_some(Entry::TimerFired { op })
    }

    /// The asks still open, for withdrawing them when the run ends.
    pub(super) fn open_asks(&self) -> Vec<Op> {
        let state = self.core.lock();
        let open = state.ops.iter().enumerate().filter(|(_, slot)| matches!(slot.slot, Slot::Ask { outcome: None }));
        open.map(|(op, _)| Op(op as u32)).collect()
    }
}
