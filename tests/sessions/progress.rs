//! Progress reports (the seed's `yield`), end to end: a `#[workflow_tool]`'s snapshots reach the
//! session's feed as `action.partial` for the pending call and never the model's history; a body
//! that returns nothing settles with its last snapshot; a restart replays the snapshots already
//! made without publishing them again; a `#[task]` consumes its snapshots without a trace.

use eve_tests::World;
use eve_tests::feed::{all, names, read_while};
use eve_tools::journal::RecordKind;
use eve_tools::prelude::*;
use eve_tools::session::{Message, ModelRequest, ModelResponse, ScriptedModel, Session, SessionEvent, SessionOptions};
use eve_tools::{Entry, RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

// ---- the tools

/// What to build.
#[derive(Deserialize, JsonSchema)]
pub struct BuildInput {
    /// The target.
    pub target: String,
}

/// Builds a target: reports three stages, waits for the hook `build-<target>`, reports a fourth,
/// and returns an output of its own.
#[workflow_tool]
pub async fn build(input: BuildInput, _ctx: &WorkflowCtx, progress: Progress) -> Result<Value, ToolError> {
    for stage in ["fetch", "compile", "link"] {
        progress.report(json!({ "stage": stage })).await?;
    }
    let payload = create_hook_with_token::<Value>(format!("build-{}", input.target)).recv().await?;
    progress.report(json!({ "stage": "package" })).await?;
    Ok(json!({ "built": input.target, "payload": payload }))
}

/// How many hosts to check.
#[derive(Deserialize, JsonSchema)]
pub struct SurveyInput {
    /// The count.
    pub count: u32,
}

/// Checks hosts one by one and returns nothing: its last snapshot is its output.
#[workflow_tool]
pub async fn survey(input: SurveyInput, progress: Progress) -> Result<(), ToolError> {
    for checked in 1..=input.count {
        progress.report(json!({ "checked": checked, "of": input.count })).await?;
    }
    Ok(())
}

/// What to index.
#[derive(Deserialize, JsonSchema)]
pub struct IndexInput {
    /// The corpus.
    pub corpus: String,
}

/// Indexes a corpus in the background: reports progress around the hook `index-<corpus>`, and
/// returns nothing, which stays its result.
#[task]
pub async fn index(input: IndexInput, _ctx: &TaskCtx, progress: Progress) -> Result<(), ToolError> {
    progress.report(json!({ "indexed": 1 })).await?;
    create_hook_with_token::<Value>(format!("index-{}", input.corpus)).recv().await?;
    progress.report(json!({ "indexed": 2 })).await?;
    Ok(())
}

// ---- helpers

/// What the model was shown since its last answer, joined.
fn shown(request: &ModelRequest) -> String {
    let from = request.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
    let new = &request.messages[from.map_or(0, |at| at + 1)..];
    new.iter().map(Message::content).collect::<Vec<_>>().join("\n")
}

/// Every message the model was ever shown, joined.
fn history(request: &ModelRequest) -> String {
    request.messages.iter().map(Message::content).collect::<Vec<_>>().join("\n")
}

/// A runtime over `world` whose model answers with `script`, and the requests it was shown.
fn scripted(
    world: &World,
    script: impl Fn(&ModelRequest) -> ModelResponse + Send + Sync + 'static,
) -> (Runtime, std::sync::Arc<std::sync::Mutex<Vec<ModelRequest>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let model = ScriptedModel::new(move |request: &ModelRequest| {
        log.lock().unwrap().push(request.clone());
        script(request)
    });
    (world.builder(16).model(model).build().unwrap(), seen)
}

async fn session(runtime: &Runtime, tools: &[&str]) -> Session {
    runtime.session(SessionOptions::new().system("You build things.").tools(tools.iter().copied())).await.unwrap()
}

/// Read on until an event named `name`.
fn until(name: &'static str) -> impl Fn(&[SessionEvent]) -> bool {
    move |events| !events.iter().any(|event| event.name == name)
}

/// Read on until `count` `action.partial` events.
fn until_partials(count: usize) -> impl Fn(&[SessionEvent]) -> bool {
    move |events| all(events, "action.partial").len() < count
}

/// The snapshots of the `action.partial` events in `events`.
fn snapshots(events: &[SessionEvent]) -> Vec<Value> {
    all(events, "action.partial").iter().map(|event| event.data["partial"].clone()).collect()
}

/// The values `run` published as progress, from its journal.
async fn journaled_partials(runtime: &Runtime, run: &RunId) -> Vec<Value> {
    let journal = runtime.journal(run).await.unwrap();
    let published = journal.entries.into_iter().filter_map(|entry| match entry {
        Entry::Recorded { kind: RecordKind::Published, value, .. } => value.to_value().get("partial").cloned(),
        _ => None,
    });
    published.collect()
}

fn stage(name: &str) -> Value {
    json!({ "stage": name })
}

/// The `build` tool's model: build `api`, then say what the tool answered.
fn build_script(request: &ModelRequest) -> ModelResponse {
    let shown = shown(request);
    if shown.contains("\"built\"") {
        ModelResponse::text(format!("Done: {shown}"))
    } else {
        ModelResponse::call("build", json!({ "target": "api" }))
    }
}

// ---- scenarios

/// Each snapshot is an `action.partial` for the pending call, in order; the model's next request
/// holds the tool's output and none of the snapshots.
#[tokio::test]
async fn a_workflow_tools_snapshots_are_action_partials_for_its_call_and_never_reach_the_model() {
    let world = World::in_memory();
    let (runtime, seen) = scripted(&world, build_script);
    let session = session(&runtime, &["build"]).await;
    session.send("Build api").await.unwrap();

    let before = read_while(&session, 0, until_partials(3)).await;
    let call = all(&before, "actions.requested")[0].data["actions"][0]["callId"].clone();
    assert!(call.is_string(), "{call}");
    assert_eq!(snapshots(&before), [stage("fetch"), stage("compile"), stage("link")]);
    for partial in all(&before, "action.partial") {
        assert_eq!(partial.data["callId"], call);
        assert_eq!(partial.field("name"), Some("build"));
        assert!(partial.data["turnId"].is_string(), "{:?}", partial.data);
    }
    assert!(all(&before, "action.result").is_empty(), "the call is still pending");

    runtime.settle().await;
    runtime.resume_hook("build-api", json!({ "ok": true })).await.unwrap();
    let after = read_while(&session, before.last().unwrap().sequence, until("session.waiting")).await;
    let partial_then_result: Vec<&str> = names(&after).into_iter().filter(|name| name.starts_with("action.")).collect();
    assert_eq!(partial_then_result, ["action.partial", "action.result"]);
    assert_eq!(snapshots(&after), [stage("package")], "the last snapshot comes last");
    let result = all(&after, "action.result")[0];
    assert_eq!(result.data["callId"], call);
    let output: Value = serde_json::from_str(result.field("output").unwrap()).unwrap();
    assert_eq!(output, json!({ "built": "api", "payload": { "ok": true } }), "an explicit output wins");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one request to call the tool, one with its result");
    let history = history(&seen[1]);
    assert!(history.contains("\"built\":\"api\""), "{history}");
    for name in ["fetch", "compile", "link", "package", "stage"] {
        assert!(!history.contains(name), "`{name}` reached the model's history: {history}");
    }
}

/// A body that returns nothing settles with its last snapshot, which the model sees as the tool
/// result; with no snapshot its output is `null`.
#[tokio::test]
async fn a_body_that_returns_nothing_settles_with_its_last_snapshot() {
    let world = World::in_memory();
    let (runtime, seen) = scripted(&world, |request| {
        if request.tool_results().is_empty() {
            ModelResponse::call("survey", json!({ "count": 3 }))
        } else {
            ModelResponse::text("Surveyed.")
        }
    });
    let session = session(&runtime, &["survey"]).await;
    session.send("Survey the hosts").await.unwrap();
    let events = read_while(&session, 0, until("session.waiting")).await;
    assert_eq!(snapshots(&events).len(), 3);
    let seen = seen.lock().unwrap().clone();
    let results: Vec<String> = seen[1].tool_results().values().map(|result| result.to_string()).collect();
    let result: Vec<Value> = results.iter().map(|result| serde_json::from_str(result).unwrap()).collect();
    assert_eq!(result, [json!({ "checked": 3, "of": 3 })]);

    let run = runtime.start("survey", json!({ "count": 0 })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(Value::Null), "no snapshot: `null`");
    let run = runtime.start("survey", json!({ "count": 2 })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!({ "checked": 2, "of": 2 })));
}

/// A restart mid-run, after snapshots were reported: replay reads them back without publishing
/// them again (each is one entry of the tool's journal and one `action.partial` of the feed),
/// and the run completes.
#[tokio::test]
async fn a_restart_replays_snapshots_already_made_without_publishing_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::sqlite(dir.path());
    let (runtime, _) = scripted(&world, build_script);
    let session = session(&runtime, &["build"]).await;
    let id = session.id().clone();
    session.send("Build api").await.unwrap();
    let before = read_while(&session, 0, until_partials(3)).await;
    let child: RunId = format!("{id}.1").parse().unwrap();
    runtime.settle().await;
    assert_eq!(journaled_partials(&runtime, &child).await.len(), 3);
    drop(session);
    runtime.shutdown().await;
    drop(world);

    // A new process over the same SQLite file.
    let world = World::sqlite(dir.path());
    let (runtime, _) = scripted(&world, build_script);
    let session = runtime.open_session(&id).await.unwrap();
    runtime.resume_hook("build-api", json!({ "ok": true })).await.unwrap();
    let after = read_while(&session, before.last().unwrap().sequence, until("session.waiting")).await;
    assert!(names(&after).contains(&"action.result"), "{:?}", names(&after));
    assert_eq!(snapshots(&after), [stage("package")], "only the snapshot made after the restart");

    let feed = session.history(0).await.unwrap();
    assert_eq!(snapshots(&feed), [stage("fetch"), stage("compile"), stage("link"), stage("package")]);
    let journaled = journaled_partials(&runtime, &child).await;
    assert_eq!(journaled, [stage("fetch"), stage("compile"), stage("link"), stage("package")]);
    let outcome = runtime.journal(&child).await.unwrap().summary.status;
    assert_eq!(outcome, eve_tools::RunStatus::Completed);
}

/// A task's snapshots are consumed: no `action.partial`, nothing journaled, and its result is
/// what it returned (`null`), not its last snapshot.
#[tokio::test]
async fn a_tasks_snapshots_are_consumed_without_a_trace_and_its_result_is_its_own() {
    let world = World::in_memory();
    let (runtime, seen) = scripted(&world, |request| {
        let shown = shown(request);
        if shown.contains("<task_result") {
            ModelResponse::text("Indexed.")
        } else if shown.starts_with("Started task") {
            ModelResponse::call("task_wait", json!({}))
        } else {
            ModelResponse::call("index", json!({ "corpus": "docs" }))
        }
    });
    let session = session(&runtime, &["index"]).await;
    session.send("Index the docs").await.unwrap();
    let before = read_while(&session, 0, until("turn.waiting")).await;
    runtime.settle().await;
    runtime.resume_hook("index-docs", json!({})).await.unwrap();
    let after = read_while(&session, before.last().unwrap().sequence, until("session.waiting")).await;
    let feed = session.history(0).await.unwrap();
    assert!(all(&feed, "action.partial").is_empty(), "{:?}", names(&feed));
    let settled = all(&after, "task.settled")[0];
    assert_eq!((settled.field("status"), &settled.data["output"]), (Some("completed"), &Value::Null));
    let child: RunId = format!("{}.1", session.id()).parse().unwrap();
    assert!(journaled_partials(&runtime, &child).await.is_empty(), "a task journals no progress");
    let seen = seen.lock().unwrap().clone();
    let history = history(seen.last().unwrap());
    assert!(history.contains("<task_result") && !history.contains("indexed"), "{history}");

    let run = runtime.start("index", json!({ "corpus": "direct" })).await.unwrap();
    run.parked().await.unwrap();
    runtime.resume_hook("index-direct", json!({})).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(Value::Null));
    assert!(journaled_partials(&runtime, run.id()).await.is_empty());
}
