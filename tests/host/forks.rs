//! Forking a run over the run API (`POST /v1/runs/{run}/fork`) and the command line
//! (`host runs fork <run> --from <op>`): the fork's id answers, the ops before `from` are not
//! executed again, a refusal says what to do, and the route keeps the run API's key.

use crate::host;

use eve_tests::executions;
use eve_tests::http::{Seen, serve, serve_with};
use eve_tools::prelude::*;
use eve_tools::{RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn weigh(ctx: &StepCtx, parcel: u32) -> Result<u32, StepError> {
    eve_tests::executed(ctx, "weigh");
    Ok(parcel * 3)
}

/// Weighs two parcels, one step each (ops 0 and 1).
#[workflow_tool]
pub async fn weigh_two(_input: Nothing, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    Ok(weigh(ctx, 1).await? + weigh(ctx, 2).await?)
}

/// Waits a day for nothing.
#[workflow_tool]
pub async fn wait_a_day(_input: Nothing, _ctx: &WorkflowCtx) -> Result<(), ToolError> {
    sleep(std::time::Duration::from_secs(86_400)).await?;
    Ok(())
}

#[tokio::test]
async fn a_run_is_forked_over_the_run_api() {
    let served = serve().await;
    let run = served.runtime.start("weigh_two", json!({})).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(9)));
    let fork =
        |run: &RunId, body: Value| served.client.post(served.url(&format!("/v1/runs/{run}/fork"))).json(&body).send();

    let seen = Seen::of(fork(run.id(), json!({ "from": 1 })).await.unwrap()).await;
    assert_eq!(seen.status, 201, "{:?}", seen.json());
    let created = seen.json();
    assert_eq!(created["forkedFrom"], json!({ "runId": run.id(), "op": 1 }));
    let forked: RunId = created["runId"].as_str().unwrap().parse().unwrap();
    assert_eq!(seen.header("location"), Some(format!("/v1/runs/{forked}").as_str()));
    let outcome = served.runtime.handle(forked.clone()).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!(9)));
    assert_eq!(executions(&forked, "weigh"), [1], "op 0 was the original's; op 1 ran again");

    // The inspector's timeline names the fork's origin.
    let timeline = served.client.get(served.url(&format!("/v1/runs/{forked}/timeline"))).send();
    let timeline = Seen::of(timeline.await.unwrap()).await.json();
    assert_eq!(timeline["timeline"]["forkedFrom"], json!({ "run": run.id(), "op": 1 }));

    let past = Seen::of(fork(run.id(), json!({ "from": 3 })).await.unwrap()).await;
    let (message, field) = past.error();
    assert_eq!((past.status, field), (422, json!("from")), "{message}");
    assert!(message.contains("records 2 ops (0 to 1)"), "{message}");

    let waiting = served.runtime.start("wait_a_day", json!({})).await.unwrap();
    waiting.parked().await.unwrap();
    let active = Seen::of(fork(waiting.id(), json!({ "from": 0 })).await.unwrap()).await;
    let (message, _) = active.error();
    assert_eq!(active.status, 409, "{message}");
    assert!(message.contains("cancel it first"), "{message}");

    let nobody = Seen::of(fork(&"run-nobody".parse().unwrap(), json!({ "from": 0 })).await.unwrap()).await;
    assert_eq!(nobody.status, 404);
    let malformed = Seen::of(fork(run.id(), json!({ "from": "five" })).await.unwrap()).await;
    assert_eq!(malformed.status, 422, "{:?}", malformed.json());
}

#[tokio::test]
async fn the_fork_route_keeps_the_run_apis_key() {
    let served = serve_with(|runtime| runtime, |server| server.api_key("sesame")).await;
    let run = served.runtime.start("weigh_two", json!({})).await.unwrap();
    run.outcome().await.unwrap();
    let url = served.url(&format!("/v1/runs/{}/fork", run.id()));
    let refused = Seen::of(served.client.post(&url).json(&json!({ "from": 0 })).send().await.unwrap()).await;
    assert_eq!(refused.status, 401);
    let keyed = served.client.post(&url).bearer_auth("sesame").json(&json!({ "from": 0 }));
    assert_eq!(Seen::of(keyed.send().await.unwrap()).await.status, 201);
    assert_eq!(served.runtime.runs(None, 10).await.unwrap().len(), 2, "one fork, by the keyed request");
}

/// `host runs fork` prints the fork's id, then follows it as `call` does; `inspect` names the
/// fork's origin; refusals are one sentence and a failing exit code.
#[test]
fn a_run_is_forked_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Ada"}"#, "--id", "greeting-1"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["runs", "fork", "greeting-1", "--from", "1"]);
    assert!(ok, "{stdout}{stderr}");
    let mut lines = stdout.lines();
    let forked = lines.next().expect("the fork's id first").to_owned();
    assert!(forked.starts_with("run_"), "{stdout}");
    assert_eq!(lines.next(), Some(r#""hello, Ada""#), "then its output: {stdout}");
    assert!(stderr.contains(&format!("forked greeting-1 from op 1 as {forked} (op 0 kept)")), "{stderr}");
    assert!(!stderr.contains("compose"), "the kept step is not shown as run again: {stderr}");
    let (ok, stdout, _) = host(dir.path(), &["inspect", &forked]);
    assert!(ok && stdout.contains("forked from greeting-1 at op 1"), "{stdout}");

    // Forked from op 0, the step runs again and says so.
    let (ok, stdout, stderr) = host(dir.path(), &["runs", "fork", "greeting-1", "--from", "0"]);
    assert!(ok && stderr.contains("compose"), "{stdout}{stderr}");

    let (ok, _, stderr) = host(dir.path(), &["runs", "fork", "greeting-1", "--from", "5"]);
    assert!(!ok && stderr.contains("error: run greeting-1 records 1 ops (0 to 0)"), "{stderr}");
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_later", r#"{"name":"Ada"}"#, "--id", "later-1"]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = host(dir.path(), &["runs", "fork", "later-1", "--from", "0"]);
    assert!(!ok && stderr.contains("run later-1 is still active; cancel it first"), "{stderr}");
    let (ok, stdout, _) = host(dir.path(), &["runs"]);
    assert!(ok && stdout.lines().count() == 5, "a header and four runs, the refusals made none: {stdout}");
}
