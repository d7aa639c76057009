//! `inspect`: a run's journal in words, and the deliveries it has not taken yet.
//!
//! A delivery (a hook payload, an answer, a cancellation, a completed sign-in) is accepted into the
//! run's inbox in the store before anyone is told so; the run journals it when it next runs. Until
//! then it is *pending*, and a person wondering why a run has not moved wants to see it.

use std::time::Duration;

use crate::timeline::{Inspection, Timeline};
use eve_runtime::RefusedRun;
use eve_runtime::store::{Delivery, InboxItem, RunRecord};
use eve_runtime::time::{Clock, SystemClock, Timestamp};

/// Prints the run as of entry `at` (its end by default): in words with its pending deliveries,
/// or as one JSON object (`timeline`, `journal`, `pending`).
/// `held` says why this build holds the run, if it does.
pub(super) fn print(
    record: &RunRecord,
    pending: &[InboxItem],
    held: Option<RefusedRun>,
    at: Option<u64>,
    json: bool,
) -> Result<(), String> {
    let mut inspection =
        Inspection::of(record, pending, at).map_err(|error| format!("{error}; give --at one of them"))?;
    if json {
        inspection.run = inspection.run.held(held);
        println!("{}", serde_json::to_string(&inspection).map_err(|error| error.to_string())?);
    } else {
        let pending = if at.is_some() { &[] } else { pending };
        println!("{}", text(record, held.as_ref(), &inspection.timeline, pending, SystemClock.now()));
    }
    Ok(())
}

/// The run's summary line, its timeline, its journal one entry a line (up to the timeline's
/// entry), and its pending deliveries.
pub(super) fn text(
    record: &RunRecord,
    held: Option<&RefusedRun>,
    timeline: &Timeline,
    pending: &[InboxItem],
    now: Timestamp,
) -> String {
    let summary = &record.summary;
    let mut lines = vec![format!(
        "run {}  tool {}  status {}  created {}  workflow {}",
        summary.id,
        summary.tool,
        if held.is_some() { "held" } else { summary.state() },
        summary.created_at,
        summary.workflow_id
    )];
    if let Some(held) = held {
        lines.push(format!(
            "held (not failed): this build cannot replay its journal: {}; fork it from the op before the divergence \
             (`runs fork {} --from <op>`), cancel it, or run the build that started it",
            held.reason(),
            summary.id
        ));
    }
    if let Some(build) = &timeline.build {
        lines.push(format!("started by build {}  body fingerprint {}", build.version, build.fingerprint));
    }
    if let Some(forked_from) = &timeline.forked_from {
        lines.push(forked_from.to_string());
    }
    let last = record.entries.len().saturating_sub(1) as u64;
    if timeline.at < last {
        lines.push(format!("as of entry {} of 0..={last}: {}", timeline.at, timeline.status));
    }
    if let Some(reason) = &timeline.cancel {
        lines.push(format!("cancel requested: {reason}"));
    }
    if !timeline.waiting_for.is_empty() {
        lines.push("waiting for:".into());
        for op in &timeline.ops {
            let Some(wait) = op.waits_for() else { continue };
            let deadline = op.deadline.map(|deadline| format!(" ({})", from_now(deadline, now))).unwrap_or_default();
            lines.push(format!("  {wait}{deadline}"));
        }
    }
    lines.push("timeline:".into());
    for op in &timeline.ops {
        let attempts = if op.attempts > 1 { format!(" after {} attempts", op.attempts) } else { String::new() };
        let took = op.took_ms.map(|ms| format!(" in {ms} ms")).unwrap_or_default();
        let deadline =
            op.deadline.map(|deadline| format!(" until {deadline} ({})", from_now(deadline, now))).unwrap_or_default();
        lines.push(format!(
            "  {:<6} {:<8} {:<24} {}{took}{attempts}{deadline}",
            op.op.to_string(),
            op.kind,
            op.name,
            op.state
        ));
        lines.extend(op.details.iter().map(|detail| format!("           {detail}")));
    }
    lines.push("journal:".into());
    let shown = record.entries.iter().enumerate().take(timeline.at as usize + 1);
    lines.extend(shown.map(|(seq, entry)| format!("{seq:>4}  {}", super::describe(entry))));
    if !pending.is_empty() {
        let count = super::plural(pending.len(), "delivery", "deliveries");
        lines.push(format!("{count} waiting, taken in when the run next runs:"));
        lines.extend(pending.iter().map(|item| format!("      {}", delivery(&item.delivery))));
    }
    lines.join("\n")
}

/// `deadline` relative to `now`: "in 59m 58s" or "3h 2m ago".
fn from_now(deadline: Timestamp, now: Timestamp) -> String {
    let seconds = |millis: u64| Duration::from_secs(millis / 1_000);
    if deadline >= now {
        format!("in {}", humantime::format_duration(seconds(deadline.as_millis() - now.as_millis())))
    } else {
        format!("{} ago", humantime::format_duration(seconds(now.as_millis() - deadline.as_millis())))
    }
}

/// One pending delivery in words.
fn delivery(delivery: &Delivery) -> String {
    match delivery {
        Delivery::Hook { op, payload } => format!("{op}: hook payload {payload}"),
        Delivery::Answer { op, answer } => {
            let chosen = answer.option_id.as_deref().map(|id| format!(" `{id}`")).unwrap_or_default();
            let typed = answer.text.as_deref().map(|text| format!(" {text:?}")).unwrap_or_default();
            format!("{op}: answer{chosen}{typed} to {}", eve_runtime::ask::request_id(*op))
        }
        Delivery::Cancel { reason, .. } => format!("cancel: {reason}"),
        Delivery::AuthCompleted { op } => format!("{op}: sign-in completed"),
        other => format!("a {} delivery", other.kind()),
    }
}
