//! Held runs on the host's surfaces: a run whose journal does not replay on this build is shown
//! as `held` (with where it diverges) by `host runs`, `host inspect` and the run API, every run
//! with its build; and a start-up (`call`, `serve`, …) warns about each held run and says what to
//! do.

use crate::host;
use std::time::Duration;

use eve_tests::World;
use eve_tests::http::{Seen, serve};
use eve_tools::Entry;
use eve_tools::RunId;
use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn stamp(_ctx: &StepCtx) -> Result<u32, StepError> {
    Ok(7)
}

/// A step (op 0), then a day's wait (op 1).
#[workflow_tool]
pub async fn stamp_then_wait(_input: Nothing, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let stamped = stamp(ctx).await?;
    sleep(Duration::from_secs(86_400)).await?;
    Ok(stamped)
}

/// A day's wait (op 0), then a step (op 1): a journal of `stamp_then_wait` diverges here at op 0.
#[workflow_tool]
pub async fn wait_then_stamp(_input: Nothing, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    sleep(Duration::from_secs(86_400)).await?;
    Ok(stamp(ctx).await?)
}

/// The entries after the start of a run of `stamp_then_wait` parked at its wait.
async fn stamped_history() -> Vec<Entry> {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("stamp_then_wait", json!({})).await.unwrap();
    run.parked().await.unwrap();
    runtime.journal(run.id()).await.unwrap().entries[1..].to_vec()
}

/// Writes `history` into `world`'s store as a run of `workflow_id` (tool `tool`) that an older
/// build started, recording no build.
async fn import(world: &World, workflow_id: &str, tool: &str, input: Value, history: Vec<Entry>) -> RunId {
    world.import_run(workflow_id, tool, input, history).await
}

/// The line of `listing` that lists `run`.
fn line_of<'a>(listing: &'a str, run: &str) -> &'a str {
    listing.lines().find(|line| line.starts_with(run)).unwrap_or_else(|| panic!("{run} is listed: {listing}"))
}

#[tokio::test]
async fn the_command_line_shows_a_held_run_and_start_up_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let held = {
        let world = World::sqlite(dir.path());
        // The host binary's `greet_later` waits first; this journal has a step at op 0.
        let history = stamped_history().await;
        let held = import(&world, "host::greet_later", "greet_later", json!({ "name": "Ada" }), history).await;
        world.close().await;
        held
    };

    // Before any start-up, `runs` reads the journal of the run of another build and checks it.
    let (ok, stdout, stderr) = host(dir.path(), &["runs"]);
    assert!(ok, "{stderr}");
    assert!(stdout.lines().next().unwrap().contains("BUILD"), "{stdout}");
    let line = line_of(&stdout, held.as_str());
    assert!(line.contains(" held ") && line.contains(" - "), "held, and no build recorded: {line}");

    // A start-up warns about the held run, names it and says what to do; its own run goes on.
    let (ok, stdout, stderr) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Bo"}"#, "--id", "bo"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stderr.contains(&format!("warning: held (not failed), as this build cannot replay its journal: {held}")));
    assert!(
        stderr.contains("1 run is held: run the build that started it") && stderr.contains("runs fork"),
        "{stderr}"
    );

    let (ok, stdout, _) = host(dir.path(), &["runs"]);
    assert!(ok && line_of(&stdout, held.as_str()).contains(" held "), "still held, not failed: {stdout}");
    let greeted = line_of(&stdout, "bo");
    assert!(greeted.contains(" completed ") && greeted.contains('@'), "a run of this build shows it: {greeted}");

    // `--status held` lists the held runs only; `--status parked` leaves them out, as they are
    // not parked here: nothing advances them on this build.
    let (ok, stdout, stderr) = host(dir.path(), &["runs", "--status", "held"]);
    assert!(ok, "{stderr}");
    assert!(line_of(&stdout, held.as_str()).contains(" held "), "{stdout}");
    assert_eq!(stdout.lines().count(), 2, "the header and the held run: {stdout}");
    let (ok, stdout, _) = host(dir.path(), &["runs", "--status", "parked"]);
    assert!(ok && !stdout.contains(held.as_str()), "a held run is not listed as parked: {stdout}");
    let (ok, _, stderr) = host(dir.path(), &["runs", "--status", "stuck"]);
    assert!(!ok && stderr.contains("cancelled or held"), "the states a person can name: {stderr}");

    let (ok, stdout, _) = host(dir.path(), &["inspect", held.as_str()]);
    assert!(ok && stdout.contains("status held"), "{stdout}");
    assert!(stdout.contains("cannot replay its journal: diverges"), "{stdout}");
}

#[tokio::test]
async fn the_run_api_shows_a_held_run_and_every_runs_build() {
    let served = serve().await;
    let history = stamped_history().await;
    let held = import(&served.world, "host::held::wait_then_stamp", "wait_then_stamp", json!({}), history).await;
    served.runtime.recover().await.unwrap();
    let current = served.runtime.start("stamp_then_wait", json!({})).await.unwrap();
    current.parked().await.unwrap();

    let listed = Seen::of(served.client.get(served.url("/v1/runs")).send().await.unwrap()).await.json();
    let runs = listed["runs"].as_array().unwrap();
    let find = |run: &RunId| runs.iter().find(|listed| listed["runId"] == json!(run)).unwrap().clone();
    let held_listing = find(&held);
    assert_eq!(held_listing["status"], json!("held"), "{held_listing}");
    assert_eq!(held_listing["held"]["verdict"], json!("diverges"), "{held_listing}");
    assert_eq!(held_listing["held"]["op"], json!(0), "{held_listing}");
    let current_listing = find(current.id());
    assert_eq!(current_listing["status"], json!("parked"));
    assert!(current_listing["build"]["fingerprint"].is_string(), "{current_listing}");
    assert!(current_listing["build"]["version"].is_string(), "{current_listing}");

    let view = Seen::of(served.client.get(served.url(&format!("/v1/runs/{held}"))).send().await.unwrap()).await;
    let view = view.json();
    assert_eq!(view["status"], json!("held"), "{view}");
    assert!(view["held"]["message"].as_str().unwrap().contains("op 0"), "{view}");
}
