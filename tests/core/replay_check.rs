//! The replay check: a journal recorded by one build, replayed against another build's code
//! without running anything. A changed step order, name or argument is caught at the op where it
//! happens; a step added after the last recorded op is fine, since a run in flight reaches it live.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eve_tests::World;
use eve_tools::Clock;
use eve_tools::journal::Entry;
use eve_tools::prelude::*;
use eve_tools::testing::{JournalFile, ReplayVerdict, replay};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// An order.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// Its id.
    pub id: u32,
}

/// How many times any step of this file ran: a replay check runs none.
static RAN: AtomicUsize = AtomicUsize::new(0);

/// Held shared while a test records a journal (its steps run then), and alone by the test that
/// counts [`RAN`] around a replay check, so the other tests' recordings do not count.
static RECORDING: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

#[step]
async fn reserve(order: u32) -> Result<String, StepError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("reserved {order}"))
}

#[step]
async fn charge(order: u32) -> Result<String, StepError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("charged {order}"))
}

#[step]
async fn invoice(order: u32) -> Result<String, StepError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("invoiced {order}"))
}

/// The build that recorded the journals: reserve, charge, then wait a day to ship.
#[workflow_tool]
pub async fn checkout(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let reserved = reserve(order.id).await?;
    let charged = charge(order.id).await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(json!([reserved, charged]))
}

/// A later build that charges before it reserves.
#[workflow_tool]
pub async fn checkout_reordered(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let charged = charge(order.id).await?;
    let reserved = reserve(order.id).await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(json!([reserved, charged]))
}

/// A later build that invoices where it charged.
#[workflow_tool]
pub async fn checkout_renamed(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let reserved = reserve(order.id).await?;
    let invoiced = invoice(order.id).await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(json!([reserved, invoiced]))
}

/// A later build that charges a different order number.
#[workflow_tool]
pub async fn checkout_argument(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let reserved = reserve(order.id).await?;
    let charged = charge(order.id + 1).await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(json!([reserved, charged]))
}

/// A later build that invoices after the wait: after the last recorded op, so runs in flight
/// reach it live.
#[workflow_tool]
pub async fn checkout_added(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let reserved = reserve(order.id).await?;
    let charged = charge(order.id).await?;
    sleep(Duration::from_secs(86_400)).await?;
    let invoiced = invoice(order.id).await?;
    Ok(json!([reserved, charged, invoiced]))
}

/// A later build that returns before the wait the journal records.
#[workflow_tool]
pub async fn checkout_shortened(order: Order, _ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let reserved = reserve(order.id).await?;
    let charged = charge(order.id).await?;
    Ok(json!([reserved, charged]))
}

/// The journal of a `checkout` run parked on its day-long wait, as `host export` writes it.
async fn recorded() -> JournalFile {
    let _recording = RECORDING.read().await;
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("checkout", json!({ "id": 7 })).await.unwrap();
    run.parked().await.unwrap();
    let record = runtime.journal(run.id()).await.unwrap();
    JournalFile::of(&record, world.clock.now())
}

/// The same journal, as if the run had been started by `tool` of a later build.
fn as_if(journal: &JournalFile, workflow_id: &str) -> JournalFile {
    let mut journal = journal.clone();
    if let Entry::RunStarted { workflow_id: recorded, .. } = &mut journal.entries[0] {
        *recorded = workflow_id.into();
    }
    journal
}

fn diverges_at(verdict: &ReplayVerdict) -> (u32, String, String) {
    match verdict {
        ReplayVerdict::Diverges { op, expected, found, .. } => (
            op.0,
            expected.as_ref().map_or("nothing".into(), |signature| signature.name.to_string()),
            found.as_ref().map_or("nothing".into(), |signature| signature.name.to_string()),
        ),
        other => panic!("expected a divergence, got {other:?}"),
    }
}

#[tokio::test]
async fn the_recording_build_replays_its_own_journal_and_runs_nothing() {
    let journal = recorded().await;
    let _alone = RECORDING.write().await;
    let ran = RAN.load(Ordering::SeqCst);
    let report = replay(&journal);
    assert!(report.replays(), "{report}");
    assert_eq!(report.verdict, ReplayVerdict::Replays { ops: 3, finished: false });
    assert!(report.to_string().contains("replays cleanly"), "{report}");
    assert_eq!(RAN.load(Ordering::SeqCst), ran, "a replay check runs no step");
}

#[tokio::test]
async fn a_changed_order_name_or_argument_is_caught_where_it_happens() {
    let journal = recorded().await;
    let reordered = replay(&as_if(&journal, "core::replay_check::checkout_reordered"));
    assert_eq!(diverges_at(&reordered.verdict), (0, "reserve".into(), "charge".into()), "{reordered}");
    let renamed = replay(&as_if(&journal, "core::replay_check::checkout_renamed"));
    assert_eq!(diverges_at(&renamed.verdict), (1, "charge".into(), "invoice".into()), "{renamed}");
    let argument = replay(&as_if(&journal, "core::replay_check::checkout_argument"));
    assert_eq!(diverges_at(&argument.verdict), (1, "charge".into(), "charge".into()), "the input hash differs");
    assert!(argument.to_string().contains("DIVERGES") && argument.to_string().contains("op 1"), "{argument}");
    let shortened = replay(&as_if(&journal, "core::replay_check::checkout_shortened"));
    assert_eq!(diverges_at(&shortened.verdict), (2, "sleep".into(), "nothing".into()), "{shortened}");

    // Where the new build asks for the diverging step: its own line, in the report too.
    for (report, call) in [(&reordered, "let charged = charge(order.id).await?;"), (&renamed, "invoice(order.id)")] {
        let ReplayVerdict::Diverges { at: Some(at), .. } = &report.verdict else { panic!("no location: {report}") };
        assert!(at.file.ends_with("replay_check.rs"), "{at}");
        let line = include_str!("replay_check.rs").lines().nth(at.line as usize - 1).unwrap();
        assert!(line.contains(call), "{at} is `{line}`, not the call of `{call}`");
        assert!(report.to_string().contains(&format!("(at {at})")), "{report}");
    }
    let ReplayVerdict::Diverges { at, .. } = &shortened.verdict else { unreachable!() };
    assert_eq!(*at, None, "a body that asks for nothing more has no call to point at");
}

#[tokio::test]
async fn a_step_added_after_the_last_recorded_op_replays() {
    let journal = recorded().await;
    let report = replay(&as_if(&journal, "core::replay_check::checkout_added"));
    assert!(report.replays(), "{report}");
}

#[tokio::test]
async fn a_workflow_this_build_does_not_have_is_named() {
    let journal = recorded().await;
    let report = replay(&as_if(&journal, "core::replay_check::checkout_gone"));
    assert_eq!(
        report.verdict,
        ReplayVerdict::UnknownWorkflow { workflow_id: "core::replay_check::checkout_gone".into() }
    );
    assert!(!report.replays());
    assert!(report.to_string().contains("no workflow `core::replay_check::checkout_gone`"), "{report}");
}

#[tokio::test]
async fn a_finished_run_replays_to_its_end() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("checkout", json!({ "id": 8 })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(86_400));
    runtime.handle(run.id().clone()).outcome().await.unwrap();
    let journal = JournalFile::of(&runtime.journal(run.id()).await.unwrap(), world.clock.now());
    assert_eq!(replay(&journal).verdict, ReplayVerdict::Replays { ops: 3, finished: true });
    let added = replay(&as_if(&journal, "core::replay_check::checkout_added"));
    assert!(added.replays(), "a finished run never reaches the added step: {added}");
}

#[tokio::test]
async fn journal_files_round_trip_and_bad_ones_say_what_is_wrong() {
    let journal = recorded().await;
    assert_eq!(JournalFile::parse(&journal.to_text()).unwrap(), journal);
    let mut newer: Value = serde_json::from_str(&journal.to_text()).unwrap();
    newer["eveJournal"] = json!(2);
    let error = JournalFile::parse(&newer.to_string()).unwrap_err();
    assert!(error.contains("journal format 2") && error.contains("format 1"), "{error}");
    assert!(JournalFile::parse("{}").unwrap_err().contains("no `eveJournal` version"));
    assert!(JournalFile::parse("not json").unwrap_err().starts_with("not JSON"));
    let mut headless: Value = serde_json::from_str(&journal.to_text()).unwrap();
    headless["entries"].as_array_mut().unwrap().remove(0);
    assert!(JournalFile::parse(&headless.to_string()).unwrap_err().contains("not `run_started`"));
    let mut broken: Value = serde_json::from_str(&journal.to_text()).unwrap();
    broken["run"] = json!("no spaces allowed");
    let error = JournalFile::parse(&broken.to_string()).unwrap_err();
    assert!(error.starts_with("at `run`"), "{error}");
}
