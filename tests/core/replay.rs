//! Replay: a run rebuilt from its journal sees exactly what the original run saw, and a body that
//! asks for something else than its journal recorded fails with a typed divergence error.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use eve_tests::{World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::{RunFailure, RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn note(ctx: &StepCtx, text: String) -> Result<String, StepError> {
    executed(ctx, "note");
    Ok(text)
}

/// Waits for an approval or a minute, whichever comes first, and records which won.
#[workflow_tool]
pub async fn race(_input: Nothing, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let mut approval = create_hook_with_token::<String>(format!("approval-{}", ctx.run_id()));
    let winner = tokio::select! {
        biased;
        answer = approval.recv() => format!("approval: {}", answer?),
        fired = sleep(Duration::from_secs(60)) => { fired?; "deadline".to_owned() }
    };
    let winner = note(ctx, winner).await?;
    let mut release = create_hook_with_token::<String>(format!("release-{}", ctx.run_id()));
    let release = release.recv().await?;
    Ok(json!({ "winner": winner, "release": release }))
}

#[tokio::test]
async fn select_replays_to_the_same_winner_when_the_delivery_came_after_the_timer() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("race", json!({})).await.unwrap();
    let id = run.id().clone();
    run.parked().await.unwrap();

    // The deadline passes first; the approval arrives a little later. Both are journaled.
    world.clock.advance(Duration::from_secs(60));
    runtime.settle().await;
    runtime.resume_hook(&format!("approval-{id}"), json!("yes")).await.unwrap();
    runtime.settle().await;
    assert_eq!(executions(&id, "note"), [1]);
    drop(runtime);

    // A new process replays the run from its journal: the select must pick the deadline again,
    // although both the timer and the approval are now recorded.
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    runtime.resume_hook(&format!("release-{id}"), json!("go")).await.unwrap();
    let outcome = runtime.handle(id.clone()).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "winner": "deadline", "release": "go" })));
    assert_eq!(executions(&id, "note"), [1], "the recorded step was replayed, not executed again");
}

/// Which "build" of `purchase` each run is on: a test changes it between two activations of a
/// run, as a deploy changes the code while runs are in flight.
static BUILDS: Mutex<Option<HashMap<RunId, &'static str>>> = Mutex::new(None);

fn build_of(run: &RunId) -> &'static str {
    BUILDS.lock().unwrap().as_ref().and_then(|builds| builds.get(run).copied()).unwrap_or("original")
}

fn deploy(run: &RunId, build: &'static str) {
    BUILDS.lock().unwrap().get_or_insert_with(HashMap::new).insert(run.clone(), build);
}

#[step]
async fn reserve(ctx: &StepCtx, item: String) -> Result<String, StepError> {
    executed(ctx, "reserve");
    Ok(format!("reserved {item}"))
}

#[step]
async fn charge(ctx: &StepCtx, cents: u64) -> Result<String, StepError> {
    executed(ctx, "charge");
    Ok(format!("charged {cents}"))
}

#[step]
async fn charge_card(ctx: &StepCtx, cents: u64) -> Result<String, StepError> {
    executed(ctx, "charge_card");
    Ok(format!("charged {cents}"))
}

/// Reserves, charges, then waits for the shipping confirmation. Its steps change with the build.
#[workflow_tool]
pub async fn purchase(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let done = match build_of(ctx.run_id()) {
        "original" => vec![reserve(ctx, "book".into()).await?, charge(ctx, 500).await?],
        "reordered" => vec![charge(ctx, 500).await?, reserve(ctx, "book".into()).await?],
        "renamed" => vec![reserve(ctx, "book".into()).await?, charge_card(ctx, 500).await?],
        "removed" => vec![charge(ctx, 500).await?],
        "reargued" => vec![reserve(ctx, "book".into()).await?, charge(ctx, 700).await?],
        other => return Err(ToolError::new(format!("no build {other}"))),
    };
    let mut shipped = create_hook_with_token::<String>(format!("shipped-{}", ctx.run_id()));
    let mut done = done;
    done.push(shipped.recv().await?);
    Ok(done)
}

#[tokio::test]
async fn changing_the_steps_of_an_in_flight_run_fails_it_with_a_divergence_error() {
    // (build deployed while the run waits, op, what the journal recorded, what the code asked for)
    let cases = [
        ("reordered", 0, "reserve", "charge"),
        ("renamed", 1, "charge", "charge_card"),
        ("removed", 0, "reserve", "charge"),
        ("reargued", 1, "charge", "charge"),
    ];
    for (build, op, recorded, asked) in cases {
        let world = World::in_memory();
        let runtime = world.runtime(0);
        let run = runtime.start("purchase", json!({})).await.unwrap();
        run.parked().await.unwrap();
        deploy(run.id(), build);
        runtime.resume_hook(&format!("shipped-{}", run.id()), json!("shipped")).await.unwrap();
        let outcome = run.outcome().await.unwrap();
        let RunOutcome::Failed(RunFailure::NonDeterminism { op: at, expected, found, at: location }) = &outcome else {
            panic!("{build}: expected a divergence, got {outcome:?}");
        };
        // The body's own line that asked for the diverging step.
        let location = location.as_ref().unwrap_or_else(|| panic!("{build}: no source location in {outcome:?}"));
        assert!(location.file.ends_with("replay.rs"), "{build}: {location}");
        let line = include_str!("replay.rs").lines().nth(location.line as usize - 1).unwrap();
        assert!(line.contains(&format!("\"{build}\" =>")), "{build}: {location} is `{line}`");
        assert_eq!(at.0, op, "{build}");
        assert_eq!(expected.as_ref().unwrap().name, recorded, "{build}");
        assert_eq!(found.as_ref().unwrap().name, asked, "{build}");
        if build == "reargued" {
            assert_ne!(expected.as_ref().unwrap().input_hash, found.as_ref().unwrap().input_hash);
        }
        assert_eq!(executions(run.id(), "reserve").len() + executions(run.id(), "charge").len(), 2, "{build}");
        let error = eve_tools::NonDeterminismError {
            run: run.id().clone(),
            op: *at,
            expected: expected.clone(),
            found: found.clone(),
            at: Some(location.clone()),
        };
        let message = error.to_string();
        assert!(message.contains(&format!("run {} diverged from its journal at op {op}", run.id())), "{message}");
        assert!(message.contains(&format!("(at {location})")), "{message}");
    }
}

#[tokio::test]
async fn an_unchanged_build_replays_without_executing_recorded_steps() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("purchase", json!({})).await.unwrap();
    run.parked().await.unwrap();
    drop(runtime);
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    runtime.resume_hook(&format!("shipped-{}", run.id()), json!("shipped")).await.unwrap();
    let outcome = runtime.handle(run.id().clone()).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!(["reserved book", "charged 500", "shipped"])));
    assert_eq!(executions(run.id(), "reserve"), [1]);
    assert_eq!(executions(run.id(), "charge"), [1]);
}

/// Reads the clock and randomness, then waits; replay must hand back the recorded values.
#[workflow_tool]
pub async fn stamp(_input: Nothing, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let (now, random, uuid) = (ctx.now(), ctx.random(), ctx.uuid());
    let mut go = create_hook_with_token::<bool>(format!("go-{}", ctx.run_id()));
    go.recv().await?;
    Ok(json!({ "now": now, "random": random, "uuid": uuid }))
}

#[tokio::test]
async fn clock_and_randomness_are_recorded_and_replayed() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("stamp", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let recorded = runtime.journal(run.id()).await.unwrap().entries;
    world.clock.advance(Duration::from_secs(86_400));
    runtime.resume_hook(&format!("go-{}", run.id()), json!(true)).await.unwrap();
    let output = run.outcome().await.unwrap().output().cloned().unwrap();
    assert_eq!(output["now"], json!(eve_tests::START.as_millis()));
    let values: Vec<_> = recorded
        .iter()
        .filter_map(|entry| match entry {
            eve_tools::Entry::Recorded { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(values, [output["now"].clone(), output["random"].clone(), output["uuid"].clone()]);
}

/// Creates two steps, then awaits the second before the first.
#[workflow_tool]
pub async fn created_then_awaited_backwards(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let first = note(ctx, "first".to_owned());
    let second = note(ctx, "second".to_owned());
    let second = second.await?;
    let first = first.await?;
    Ok(vec![first, second])
}

/// Op numbers are taken when a step future is created (when the step fn is called), not when it
/// is first polled: the step created first is op 0 although it was awaited last, and a replay
/// that polls in the same order hands each its own result.
#[tokio::test]
async fn op_numbers_follow_creation_not_polling() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("created_then_awaited_backwards", json!({})).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output().unwrap(), &json!(["first", "second"]));
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let ops: Vec<(u32, serde_json::Value)> = entries
        .iter()
        .filter_map(|entry| match entry {
            eve_tools::Entry::StepCompleted { op, outcome: eve_tools::journal::StepOutcome::Ok { value }, .. } => {
                Some((op.0, value.to_value().into_owned()))
            }
            _ => None,
        })
        .collect();
    let mut by_op = ops.clone();
    by_op.sort_by_key(|(op, _)| *op);
    assert_eq!(by_op, [(0, json!("first")), (1, json!("second"))], "op 0 is the step created first");
    assert_eq!(ops[0].1, json!("second"), "the step awaited first completed first, under op 1");
    drop(runtime);

    let runtime = world.runtime(0);
    let replayed = runtime.handle(run.id().clone());
    runtime.recover().await.unwrap();
    assert_eq!(replayed.outcome().await.unwrap().output().unwrap(), &json!(["first", "second"]));
    assert_eq!(executions(run.id(), "note").len(), 2, "the replay executed nothing");
}

/// How many of each thing to tally.
#[derive(Deserialize, JsonSchema)]
pub struct Counts {
    counts: HashMap<String, u32>,
}

#[step]
async fn tally(ctx: &StepCtx, counts: HashMap<String, u32>) -> Result<u32, StepError> {
    executed(ctx, "tally");
    Ok(counts.values().sum())
}

/// Tallies a map in a step, then sleeps.
#[workflow_tool]
pub async fn tally_then_nap(input: Counts, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let total = tally(ctx, input.counts).await?;
    sleep(Duration::from_secs(10)).await?;
    Ok(total)
}

/// A step taking a `HashMap` matches its own journal on a cold replay (no warm cache): the map's
/// order does not change what the step's call recorded.
#[tokio::test]
async fn a_step_taking_a_hash_map_replays_without_divergence() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let counts: HashMap<String, u32> = (0..16).map(|n| (format!("item-{n}"), n)).collect();
    let run = runtime.start("tally_then_nap", json!({ "counts": counts })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(120)));
    assert_eq!(executions(run.id(), "tally"), [1]);
}
