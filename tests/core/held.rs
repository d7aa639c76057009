//! Held runs: on the embedded store, a runtime that starts on a new build looks at every
//! unfinished run once. A run of this build's body goes on; one whose journal replays on this
//! build is moved to it (`RunUpgraded`) and goes on; one whose journal does not replay is held:
//! not loaded, not failed, nothing appended, its timers and deliveries kept but waking nothing,
//! until it is forked onto this build, cancelled, or a build that replays it starts.
//!
//! The old build is `mail`; its journals are written into the store as runs of `mail_patched`
//! (a change behind `ctx.patched`, which replays them) and `mail_stamped` (the same change
//! unguarded, which does not), as a deploy of either would find them.

use std::time::Duration;

use eve_tests::{World, executed, executions};
use eve_tools::journal::{Entry, RunStatus};
use eve_tools::prelude::*;
use eve_tools::store::RunQuery;
use eve_tools::testing::ReplayVerdict;
use eve_tools::{Error, Op, RunId, RunOutcome, Runtime};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A letter.
#[derive(Deserialize, JsonSchema)]
pub struct Letter {
    /// Who it is for.
    pub to: String,
}

const HOUR: Duration = Duration::from_secs(3600);

#[step]
async fn weigh(ctx: &StepCtx, to: String) -> Result<String, StepError> {
    executed(ctx, "weigh");
    Ok(format!("weighed for {to}"))
}

#[step]
async fn stamp(ctx: &StepCtx, to: String) -> Result<String, StepError> {
    executed(ctx, "stamp");
    Ok(format!("stamped for {to}"))
}

#[step]
async fn post(ctx: &StepCtx, to: String) -> Result<String, StepError> {
    executed(ctx, "post");
    Ok(format!("posted to {to}"))
}

/// The old build: weigh (op 0), wait (op 1), post (op 2), wait (op 3).
#[workflow_tool]
pub async fn mail(letter: Letter, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let weighed = weigh(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    let posted = post(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    Ok(json!([weighed, posted]))
}

/// The new build, guarded: runs that posted already skip the stamp.
#[workflow_tool]
pub async fn mail_patched(letter: Letter, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let weighed = weigh(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    let stamped = if ctx.patched("stamp-letters") { Some(stamp(ctx, letter.to.clone()).await?) } else { None };
    let posted = post(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    Ok(json!([weighed, stamped, posted]))
}

/// The new build, unguarded: a run that posted already diverges at op 2.
#[workflow_tool]
pub async fn mail_stamped(letter: Letter, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let weighed = weigh(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    let stamped = stamp(ctx, letter.to.clone()).await?;
    let posted = post(ctx, letter.to.clone()).await?;
    sleep(HOUR).await?;
    Ok(json!([weighed, stamped, posted]))
}

/// The entries after the start of a run of the old build, parked at its second wait (it posted).
async fn old_history(to: &str) -> Vec<Entry> {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("mail", json!({ "to": to })).await.unwrap();
    runtime.settle().await;
    world.clock.advance(HOUR + Duration::from_secs(1));
    runtime.settle().await;
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    assert!(entries.iter().any(|entry| matches!(entry, Entry::StepCompleted { name, .. } if name == "post")));
    entries[1..].to_vec()
}

/// Writes `history` into `world`'s store as an unfinished run of `tool`, started by a build that
/// recorded no stamp (so only its journal says whether it replays here).
async fn import(world: &World, tool: &str, to: &str, history: Vec<Entry>) -> RunId {
    world.import_run(&format!("core::held::{tool}"), tool, json!({ "to": to }), history).await
}

/// The state a person sees for `run` on `runtime`: `held`, or the store's word.
async fn state(runtime: &Runtime, run: &RunId) -> String {
    let summary = runtime.journal(run).await.unwrap().summary;
    match runtime.held(&summary).await.unwrap() {
        Some(_) => "held".to_owned(),
        None => summary.state().to_owned(),
    }
}

#[tokio::test]
async fn a_run_that_diverges_on_this_build_is_held_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let replays = import(&world, "mail_patched", "held-replays", old_history("held-replays").await).await;
    let diverges = import(&world, "mail_stamped", "held-diverges", old_history("held-diverges").await).await;
    let before = world.store.load(&diverges).await.unwrap().unwrap().entries;
    let unchanged = {
        let runtime = world.runtime(0);
        let run = runtime.start("mail_stamped", json!({ "to": "held-unchanged" })).await.unwrap();
        runtime.settle().await;
        run.id().clone()
    };

    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    let held = runtime.held_runs();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].run, diverges);
    let ReplayVerdict::Diverges { op, expected, found, .. } = &held[0].verdict else { panic!("{:?}", held[0]) };
    assert_eq!(*op, Op(2));
    assert_eq!(expected.as_ref().map(|signature| signature.name.to_string()), Some("post".to_owned()));
    assert_eq!(found.as_ref().map(|signature| signature.name.to_string()), Some("stamp".to_owned()));
    let moved = world.store.load(&replays).await.unwrap().unwrap().entries;
    assert!(moved.iter().any(|entry| matches!(entry, Entry::RunUpgraded { .. })), "the run that replays was moved");

    // Both waits come due; a hook delivery is sent to the held run as well.
    world.clock.advance(2 * HOUR + Duration::from_secs(2));
    runtime.deliver_to(&diverges, Op(3), "held-delivery", json!("a late parcel")).await.unwrap();
    runtime.settle().await;
    // The unchanged run stamped and posted since, and waits once more.
    world.clock.advance(HOUR + Duration::from_secs(1));
    runtime.settle().await;
    let replayed = runtime.handle(replays.clone()).outcome().await.unwrap();
    assert_eq!(replayed, RunOutcome::Completed(json!(["weighed for held-replays", null, "posted to held-replays"])));
    let fresh = runtime.handle(unchanged.clone()).outcome().await.unwrap();
    assert!(matches!(fresh, RunOutcome::Completed(_)), "{fresh:?}");

    assert_eq!(state(&runtime, &diverges).await, "held");
    let record = world.store.load(&diverges).await.unwrap().unwrap();
    assert_eq!(record.summary.status, RunStatus::Active, "a held run is not failed");
    assert_eq!(record.entries, before, "nothing is appended to a held run");
    assert_eq!(world.store.inbox(&diverges).await.unwrap().len(), 1, "its delivery is kept for it");
    assert_eq!(executions(&diverges, "stamp"), Vec::<u32>::new(), "nothing of the held run ran");
    match runtime.handle(diverges.clone()).outcome().await {
        Err(error @ Error::Held { .. }) => {
            let message = error.to_string();
            assert!(message.contains(diverges.as_str()) && message.contains("fork"), "{message}");
        }
        other => panic!("waiting on a held run says it is held: {other:?}"),
    }
    let listed = runtime.list_runs(&RunQuery::newest(10)).await.unwrap().runs;
    let summary = listed.iter().find(|summary| summary.id == unchanged).unwrap();
    let Some(Entry::RunStarted { build: Some(started_by), .. }) =
        runtime.journal(&unchanged).await.unwrap().entries.first().cloned()
    else {
        panic!("a run of this build records its build")
    };
    assert_eq!(summary.build.as_ref(), Some(&*started_by), "the listing carries the run's build");

    // The way out: a fork from the op before the divergence runs on this build.
    let fork = runtime.fork(&diverges, Op(2)).await.unwrap();
    runtime.settle().await;
    world.clock.advance(HOUR + Duration::from_secs(1));
    runtime.settle().await;
    let forked = fork.outcome().await.unwrap();
    let stamped = json!(["weighed for held-diverges", "stamped for held-diverges", "posted to held-diverges"]);
    assert_eq!(forked, RunOutcome::Completed(stamped));
    assert_eq!(world.store.load(&diverges).await.unwrap().unwrap().entries, before, "the original stays held");
    runtime.shutdown().await;

    // A restart gives the same answer.
    let again = world.runtime(0);
    again.recover().await.unwrap();
    let held_again = again.held_runs();
    assert_eq!(held_again.len(), 1);
    assert_eq!(held_again[0].run, diverges);
    assert_eq!(held_again[0].verdict, held[0].verdict);
    assert_eq!(state(&again, &diverges).await, "held");
}

#[tokio::test]
async fn a_held_run_cancelled_ends_without_its_cleanup() {
    let world = World::in_memory();
    let diverges = import(&world, "mail_stamped", "held-cancelled", old_history("held-cancelled").await).await;
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    assert_eq!(runtime.held_runs().len(), 1, "the memory store holds runs too");

    runtime.cancel(&diverges, "no longer wanted").await.unwrap();
    let outcome = runtime.handle(diverges.clone()).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Cancelled);
    let entries = world.store.load(&diverges).await.unwrap().unwrap().entries;
    let requested = entries.iter().find_map(|entry| match entry {
        Entry::CancelRequested { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let reason = requested.expect("the cancellation is journaled");
    assert!(reason.contains("no longer wanted") && reason.contains("cleanup did not run"), "{reason}");
    assert!(runtime.held_runs().is_empty(), "an ended run is held no more");
    assert_eq!(executions(&diverges, "stamp"), Vec::<u32>::new());
}
