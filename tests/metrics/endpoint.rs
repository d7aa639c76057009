//! `/metrics` on an in-process server: refused without the key as `/v1` is, answered in the text
//! format with it; and the gauges of runs, right after a restart because they are read from what
//! the runtime knows rather than counted.

use std::sync::Arc;

use eve_tests::World;
use eve_tests::http::{Seen, serve_with};
use eve_tools::prelude::*;
use eve_tools::store::{MemoryStore, Store};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Waits for a word on the hook `word-{run id}`, then says it in a step.
#[workflow_tool]
pub async fn metrics_wait_for_word(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut word = create_hook_with_token::<String>(format!("word-{}", ctx.run_id()));
    let word = word.recv().await?;
    Ok(metrics_say(word).await?)
}

/// Says a word.
#[step]
async fn metrics_say(word: String) -> Result<String, StepError> {
    Ok(format!("said {word}"))
}

/// A word to shout.
#[derive(Deserialize, JsonSchema)]
pub struct Word {
    /// The word.
    pub word: String,
}

/// Shouts a word, at once.
#[tool]
pub async fn metrics_shout(input: Word) -> Result<String, ToolError> {
    Ok(input.word.to_uppercase())
}

/// Waits on the hook `park-{run id}`: a run that stays parked.
#[workflow_tool]
pub async fn metrics_stay_parked(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let mut woken = create_hook_with_token::<()>(format!("park-{}", ctx.run_id()));
    Ok(woken.recv().await?)
}

/// The recorder and the gauges are the process's: under `cargo test`, which runs these tests in
/// one process, they take turns (`cargo nextest` gives each a process anyway).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The value of the sample `series` (a name with its labels, as the exposition writes them).
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

const KEY: &str = "correct horse battery staple";

#[tokio::test]
async fn the_endpoint_is_refused_without_the_key_as_the_run_api_is_and_answers_the_text_format_with_it() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let metrics = eve_tools::metrics::install().expect("the recorder installs");
    let served = serve_with(|runtime| runtime, |server| server.api_key(KEY).metrics(metrics)).await;
    let client = &served.client;
    for key in [None, Some("Bearer wrong"), Some("Basic Y29ycmVjdA==")] {
        let refused = |path: &str| {
            let request = client.get(served.url(path));
            let request = match key {
                Some(key) => request.header("authorization", key),
                None => request,
            };
            async move { Seen::of(request.send().await.unwrap()).await }
        };
        let (metrics, runs) = (refused("/metrics").await, refused("/v1/runs").await);
        assert_eq!(metrics.status, 401, "{key:?}");
        assert_eq!(metrics.header("www-authenticate"), Some("Bearer"));
        assert_eq!((metrics.status, metrics.error()), (runs.status, runs.error()), "{key:?}: refused as /v1 is");
    }
    let foreign = client.get(served.url("/metrics")).header("origin", "https://elsewhere.example");
    let foreign = Seen::of(foreign.header("authorization", format!("Bearer {KEY}")).send().await.unwrap()).await;
    assert_eq!(foreign.status, 403, "a page of another origin is refused, key or not");

    let run = served.runtime.start("metrics_wait_for_word", json!({})).await.unwrap();
    run.parked().await.unwrap();
    served.runtime.resume_hook(&format!("word-{}", run.id()), json!("hello")).await.unwrap();
    run.outcome().await.unwrap();
    served.runtime.call_tool("metrics_shout", json!({ "word": "hey" })).await.unwrap();
    let keyed = client.get(served.url("/metrics")).header("authorization", format!("Bearer {KEY}"));
    let seen = Seen::of(keyed.send().await.unwrap()).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let text = String::from_utf8(seen.body).unwrap();
    let tool = "metrics_wait_for_word";
    assert_eq!(sample(&text, &format!("eve_runs_started_total{{tool=\"{tool}\"}}")), Some(1.0), "{text}");
    let finished = format!("eve_runs_finished_total{{tool=\"{tool}\",outcome=\"completed\"}}");
    assert_eq!(sample(&text, &finished), Some(1.0), "{text}");
    assert_eq!(sample(&text, "eve_step_attempts_total{step=\"metrics_say\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "eve_step_duration_seconds_count{step=\"metrics_say\"}"), Some(1.0), "{text}");
    let shouted = "eve_tool_call_duration_seconds_count{tool=\"metrics_shout\",outcome=\"ok\"}";
    assert_eq!(sample(&text, shouted), Some(1.0), "{text}");
    assert!(text.contains("# TYPE eve_step_duration_seconds histogram"), "a histogram, not a summary: {text}");
    assert!(text.contains("# HELP eve_runs_started_total "), "described: {text}");
}

#[tokio::test]
async fn a_server_without_a_recorder_says_how_to_give_it_one() {
    let served = serve_with(|runtime| runtime, |server| server).await;
    let seen = Seen::of(served.client.get(served.url("/metrics")).send().await.unwrap()).await;
    assert_eq!(seen.status, 404);
    let (message, _) = seen.error();
    assert!(message.contains("Server::metrics"), "{message}");
}

#[tokio::test]
async fn the_gauges_of_runs_are_right_after_a_restart() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let metrics = eve_tools::metrics::install().expect("the recorder installs");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let world = World::over(store.clone());
    let runtime = world.runtime(16);
    runtime.recover().await.unwrap();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let run = runtime.start("metrics_stay_parked", json!({})).await.unwrap();
        run.parked().await.unwrap();
        runs.push(run.id().clone());
    }
    runtime.settle().await;
    let text = metrics.render();
    assert_eq!((sample(&text, "eve_runs_parked"), sample(&text, "eve_runs_active")), (Some(3.0), Some(0.0)), "{text}");
    runtime.shutdown().await;

    // A new process would start its gauges from nothing; this one is set again from the store.
    let runtime = World::over(store).runtime(16);
    assert_eq!(runtime.recover().await.unwrap(), 3);
    let text = metrics.render();
    assert_eq!((sample(&text, "eve_runs_parked"), sample(&text, "eve_runs_active")), (Some(3.0), Some(0.0)), "{text}");
    runtime.resume_hook(&format!("park-{}", runs[0]), json!(null)).await.unwrap();
    runtime.handle(runs[0].clone()).outcome().await.unwrap();
    runtime.settle().await;
    let text = metrics.render();
    assert_eq!((sample(&text, "eve_runs_parked"), sample(&text, "eve_runs_active")), (Some(2.0), Some(0.0)), "{text}");
}
