//! Changing a workflow while runs of it are in flight, with `ctx.patched` and
//! `ctx.deprecate_patch`: journals recorded from a v1 body (`tests/journals/patches/`) resume on
//! a v2 body that adds a step behind a patch, each taking the branch its history allows, with the
//! runtime restarted at every wait; a run of v2 takes the new branch on every replay; dropping the
//! old branch or the patch while runs need them is caught by `replay` before a deploy.
//!
//! The journals were recorded by this file: `EVE_RECORD_JOURNALS=1 cargo test -p eve-tests
//! --test core patches` writes them again (only on purpose: a re-recorded corpus guards nothing
//! recorded before).

use std::path::{Path, PathBuf};
use std::time::Duration;

use eve_tests::{START, World, executed, executions};
use eve_tools::journal::{Entry, OpKind, RecordKind};
use eve_tools::prelude::*;
use eve_tools::store::NewRun;
use eve_tools::testing::{JournalFile, ReplayVerdict, replay};
use eve_tools::{Clock, RunHandle, RunId, RunOutcome, Runtime};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// An order.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// Its id.
    pub id: u32,
}

const HOUR: Duration = Duration::from_secs(3600);

#[step]
async fn pack(ctx: &StepCtx, order: u32) -> Result<String, StepError> {
    executed(ctx, "pack");
    Ok(format!("packed {order}"))
}

#[step]
async fn insure(ctx: &StepCtx, order: u32) -> Result<String, StepError> {
    executed(ctx, "insure");
    Ok(format!("insured {order}"))
}

#[step]
async fn ship(ctx: &StepCtx, order: u32) -> Result<String, StepError> {
    executed(ctx, "ship");
    Ok(format!("shipped {order}"))
}

#[step]
async fn bill(ctx: &StepCtx, order: u32) -> Result<String, StepError> {
    executed(ctx, "bill");
    Ok(format!("billed {order}"))
}

/// v1, the build the corpus was recorded from: pack, wait, ship, wait, bill.
#[workflow_tool]
pub async fn fulfil(order: Order, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let packed = pack(ctx, order.id).await?;
    sleep(HOUR).await?;
    let shipped = ship(ctx, order.id).await?;
    sleep(HOUR).await?;
    let billed = bill(ctx, order.id).await?;
    Ok(json!([packed, shipped, billed]))
}

/// v2: insures the parcel before shipping it, for runs that have not shipped yet.
#[workflow_tool]
pub async fn fulfil_v2(order: Order, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let packed = pack(ctx, order.id).await?;
    sleep(HOUR).await?;
    let insured = if ctx.patched("insure-parcels") { Some(insure(ctx, order.id).await?) } else { None };
    let shipped = ship(ctx, order.id).await?;
    sleep(HOUR).await?;
    let billed = bill(ctx, order.id).await?;
    Ok(json!([packed, insured, shipped, billed]))
}

/// v3, once no run that shipped uninsured is in flight: the new branch alone.
#[workflow_tool]
pub async fn fulfil_v3(order: Order, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let packed = pack(ctx, order.id).await?;
    sleep(HOUR).await?;
    ctx.deprecate_patch("insure-parcels");
    let insured = Some(insure(ctx, order.id).await?);
    let shipped = ship(ctx, order.id).await?;
    sleep(HOUR).await?;
    let billed = bill(ctx, order.id).await?;
    Ok(json!([packed, insured, shipped, billed]))
}

/// A v3 that dropped the patch's marker too early, while runs that took the patch are in flight.
#[workflow_tool]
pub async fn fulfil_unmarked(order: Order, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let packed = pack(ctx, order.id).await?;
    sleep(HOUR).await?;
    let insured = Some(insure(ctx, order.id).await?);
    let shipped = ship(ctx, order.id).await?;
    sleep(HOUR).await?;
    let billed = bill(ctx, order.id).await?;
    Ok(json!([packed, insured, shipped, billed]))
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("journals").join("patches")
}

/// The v1 journals: parked on the first wait (before the patch's point), and on the second (past it).
fn recorded(name: &str) -> JournalFile {
    JournalFile::read(&corpus().join(format!("{name}.journal.json"))).expect("the corpus reads")
}

/// `journal`, as if its run had been started by `workflow` of a later build.
fn as_if(journal: &JournalFile, workflow: &str) -> JournalFile {
    let mut journal = journal.clone();
    if let Entry::RunStarted { workflow_id, .. } = &mut journal.entries[0] {
        *workflow_id = format!("core::patches::{workflow}").into();
    }
    journal
}

/// Writes `journal` into `world`'s store under a fresh id, as the run in flight of another build,
/// unclaimed, for the next runtime to resume.
async fn import(world: &World, journal: &JournalFile) -> RunId {
    let Entry::RunStarted { workflow_id, tool, input, at, .. } = &journal.entries[0] else {
        panic!("a journal starts with its run")
    };
    let new = NewRun {
        id: RunId::generate(),
        workflow_id: workflow_id.to_string(),
        tool: tool.to_string(),
        input: input.to_value().into_owned(),
        created_at: *at,
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    };
    world.write_run(new, journal.entries[1..].to_vec()).await
}

/// Runs `run` to its end, a new runtime (a restarted process) at every wait, each replaying the
/// journal from the start.
async fn finish_with_restarts(world: &World, run: &RunId) -> Value {
    for _ in 0..4 {
        let runtime = world.runtime(0);
        runtime.recover().await.unwrap();
        runtime.settle().await;
        let handle = runtime.handle(run.clone());
        handle.parked().await.unwrap();
        let outcome = ended(&runtime, &handle).await;
        // The process stops before the clock moves, so only the next one fires the timer.
        runtime.shutdown().await;
        if let Some(outcome) = outcome {
            return outcome;
        }
        world.clock.advance(HOUR + Duration::from_secs(1));
    }
    panic!("run {run} did not end after four waits")
}

async fn ended(runtime: &Runtime, handle: &RunHandle) -> Option<Value> {
    let record = runtime.journal(handle.id()).await.unwrap();
    record.entries.last().filter(|entry| entry.is_terminal())?;
    match handle.outcome().await.unwrap() {
        RunOutcome::Completed(value) => Some(value),
        other => panic!("run {} ended {other:?}", handle.id()),
    }
}

fn markers(journal: &[Entry]) -> Vec<String> {
    let marker = |entry: &Entry| match entry {
        Entry::Recorded { kind: RecordKind::Patch, value, .. } => value.to_value().as_str().map(str::to_owned),
        _ => None,
    };
    journal.iter().filter_map(marker).collect()
}

#[tokio::test]
async fn a_run_recorded_before_the_patch_point_takes_the_new_branch() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let run = import(&world, &as_if(&recorded("fulfil-packed"), "fulfil_v2")).await;
    let output = finish_with_restarts(&world, &run).await;
    assert_eq!(output, json!(["packed 7", "insured 7", "shipped 7", "billed 7"]));
    assert_eq!(executions(&run, "pack"), Vec::<u32>::new(), "packing was recorded by v1, and is not done again");
    assert_eq!((executions(&run, "insure"), executions(&run, "ship")), (vec![1], vec![1]), "each step once");
    let journal = world.runtime(0).journal(&run).await.unwrap().entries;
    assert_eq!(markers(&journal), ["insure-parcels"], "the marker is journaled once, where the patch is");
}

#[tokio::test]
async fn a_run_recorded_past_the_patch_point_keeps_the_old_branch() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let run = import(&world, &as_if(&recorded("fulfil-shipped"), "fulfil_v2")).await;
    let output = finish_with_restarts(&world, &run).await;
    assert_eq!(output, json!(["packed 7", null, "shipped 7", "billed 7"]), "shipped uninsured, as v1 did");
    assert!(executions(&run, "insure").is_empty(), "the old branch never insures");
    assert_eq!(executions(&run, "bill"), [1]);
    let journal = world.runtime(0).journal(&run).await.unwrap().entries;
    assert!(markers(&journal).is_empty(), "no marker: the run took the old branch");
}

#[tokio::test]
async fn a_new_run_takes_the_new_branch_on_every_replay() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let first = world.runtime(0);
    let started = first.start("fulfil_v2", json!({ "id": 8 })).await.unwrap();
    started.parked().await.unwrap();
    let run = started.id().clone();
    drop(started);
    first.shutdown().await;
    let output = finish_with_restarts(&world, &run).await;
    assert_eq!(output, json!(["packed 8", "insured 8", "shipped 8", "billed 8"]));
    for step in ["pack", "insure", "ship", "bill"] {
        assert_eq!(executions(&run, step), [1], "{step} ran once across four processes");
    }
    let record = world.runtime(0).journal(&run).await.unwrap();
    assert_eq!(markers(&record.entries), ["insure-parcels"]);
    // Its journal replays on v2 and on v3, which keeps the marker; not on a build without it.
    let journal = JournalFile::of(&record, world.clock.now());
    assert!(replay(&as_if(&journal, "fulfil_v3")).replays(), "v3 replays runs that took the patch");
    let unmarked = replay(&as_if(&journal, "fulfil_unmarked"));
    let ReplayVerdict::Diverges { op, expected, message, .. } = &unmarked.verdict else { panic!("{unmarked}") };
    assert_eq!(op.0, 2);
    assert_eq!(expected.as_ref().map(|signature| signature.kind), Some(OpKind::Patch));
    assert!(message.contains("took patch `insure-parcels`"), "{message}");
    assert!(message.contains("keep `ctx.deprecate_patch(\"insure-parcels\")`"), "{message}");
    assert!(message.contains("tests/core/patches.rs"), "the divergence names the line: {message}");
}

#[tokio::test]
async fn replay_checks_the_corpus_against_each_build() {
    for name in ["fulfil-packed", "fulfil-shipped"] {
        let v1 = recorded(name);
        assert!(replay(&v1).replays(), "{name} replays on the build that recorded it");
        assert!(replay(&as_if(&v1, "fulfil_v2")).replays(), "{name} replays on v2, behind its patch");
    }
    // v3 dropped the old branch: the run recorded before the patch point is fine, the one past it
    // is not, and the divergence says what to do.
    assert!(replay(&as_if(&recorded("fulfil-packed"), "fulfil_v3")).replays());
    let shipped = replay(&as_if(&recorded("fulfil-shipped"), "fulfil_v3"));
    let ReplayVerdict::Diverges { message, .. } = &shipped.verdict else { panic!("{shipped}") };
    assert!(message.contains("took the old branch of patch `insure-parcels`"), "{message}");
    assert!(message.contains("still calls `ctx.patched(\"insure-parcels\")`"), "{message}");
    // A change made without a patch is caught as before, with the advice to patch it.
    let unpatched = replay(&as_if(&recorded("fulfil-shipped"), "fulfil_unmarked"));
    let ReplayVerdict::Diverges { message, .. } = &unpatched.verdict else { panic!("{unpatched}") };
    assert!(message.contains("guard the change with `if ctx.patched("), "{message}");
}

/// Records the corpus again when `EVE_RECORD_JOURNALS` is set; otherwise does nothing.
#[tokio::test]
async fn record_the_corpus_when_asked() {
    if std::env::var_os("EVE_RECORD_JOURNALS").is_none() {
        return;
    }
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let save = |record: eve_tools::store::RunRecord, name: &str| {
        let file = JournalFile::of(&record, START);
        std::fs::create_dir_all(corpus()).unwrap();
        std::fs::write(corpus().join(format!("{name}.journal.json")), file.to_text() + "\n").unwrap();
    };
    let packed = runtime.start("fulfil", json!({ "id": 7 })).await.unwrap();
    packed.parked().await.unwrap();
    save(runtime.journal(packed.id()).await.unwrap(), "fulfil-packed");
    let shipped = runtime.start("fulfil", json!({ "id": 7 })).await.unwrap();
    shipped.parked().await.unwrap();
    world.clock.advance(HOUR + Duration::from_secs(1));
    runtime.settle().await;
    shipped.parked().await.unwrap();
    save(runtime.journal(shipped.id()).await.unwrap(), "fulfil-shipped");
}

/// The same body as `fulfil`, formatted otherwise and commented: the same fingerprint.
#[workflow_tool]
#[rustfmt::skip]
pub async fn fulfil_reformatted(order: Order, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    // Pack first: the warehouse needs the parcel before the carrier comes.
    let packed = pack(ctx, order.id)
        .await?;
    sleep(HOUR).await?;
    let shipped = ship(ctx, order.id).await?;   sleep(HOUR).await?;
    let billed = bill(ctx, order.id).await?;
    Ok(json!([packed, shipped, billed]))
}

#[tokio::test]
async fn a_run_records_the_build_and_body_that_started_it() {
    let manifest = eve_tools::manifest();
    let fingerprint = |name: &str| {
        let tool = manifest.tools.iter().find(|tool| tool.name == name).expect("the tool is in the manifest");
        tool.build.fingerprint.clone()
    };
    assert_eq!(fingerprint("fulfil"), fingerprint("fulfil_reformatted"), "formatting and comments do not count");
    assert_ne!(fingerprint("fulfil"), fingerprint("fulfil_v2"), "the patch changed the body");
    assert!(fingerprint("fulfil").chars().all(|c| c.is_ascii_hexdigit()) && fingerprint("fulfil").len() == 16);

    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("fulfil_v2", json!({ "id": 9 })).await.unwrap();
    run.parked().await.unwrap();
    let journal = runtime.journal(run.id()).await.unwrap().entries;
    let Entry::RunStarted { build: Some(build), .. } = &journal[0] else { panic!("the start records its build") };
    assert_eq!(build.fingerprint, fingerprint("fulfil_v2"));
    assert_eq!(build.version, env!("CARGO_PKG_VERSION"), "the crate's version, as EVE_BUILD_VERSION is not set");
    // A journal written before runs recorded their build still reads, without one.
    let old = recorded("fulfil-packed");
    assert!(matches!(&old.entries[0], Entry::RunStarted { build: None, .. }));
}
