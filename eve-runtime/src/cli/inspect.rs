//! `inspect`: a run's journal in words, and the deliveries it has not taken yet.
//!
//! A delivery (a hook payload, an answer, a cancellation, a completed sign-in) is accepted into the
//! run's inbox in the store before anyone is told so; the run journals it when it next runs. Until
//! then it is *pending*, and a person wondering why a run has not moved wants to see it.

use crate::store::{Delivery, InboxItem, RunRecord};

/// Prints the run: in words with its pending deliveries, or its raw entries as JSON lines.
pub(super) fn print(record: &RunRecord, pending: &[InboxItem], json: bool) -> Result<(), String> {
    if !json {
        println!("{}", text(record, pending));
        return Ok(());
    }
    for entry in &record.entries {
        println!("{}", serde_json::to_string(entry).map_err(|error| error.to_string())?);
    }
    Ok(())
}

/// The run's summary line, its journal one entry a line, and its pending deliveries.
pub(super) fn text(record: &RunRecord, pending: &[InboxItem]) -> String {
    let summary = &record.summary;
    let mut lines = vec![format!(
        "run {}  tool {}  status {}  created {}  workflow {}",
        summary.id,
        summary.tool,
        super::runs::status(summary),
        summary.created_at,
        summary.workflow_id
    )];
    lines.extend(record.entries.iter().enumerate().map(|(seq, entry)| format!("{seq:>4}  {}", super::describe(entry))));
    if !pending.is_empty() {
        let count = super::plural(pending.len(), "delivery", "deliveries");
        lines.push(format!("{count} waiting, taken in when the run next runs:"));
        lines.extend(pending.iter().map(|item| format!("      {}", delivery(&item.delivery))));
    }
    lines.join("\n")
}

/// One pending delivery in words.
fn delivery(delivery: &Delivery) -> String {
    match delivery {
        Delivery::Hook { op, payload } => format!("{op}: hook payload {payload}"),
        Delivery::Answer { op, answer } => {
            let chosen = answer.option_id.as_deref().map(|id| format!(" `{id}`")).unwrap_or_default();
            let typed = answer.text.as_deref().map(|text| format!(" {text:?}")).unwrap_or_default();
            format!("{op}: answer{chosen}{typed} to {}", crate::ask::request_id(*op))
        }
        Delivery::Cancel { reason, .. } => format!("cancel: {reason}"),
        Delivery::AuthCompleted { op } => format!("{op}: sign-in completed"),
    }
}
