//! The worker process of the multi-worker tests: the eve host CLI (`pg-worker worker ...`,
//! `pg-worker answer ...`) with the workflows those tests run.
//!
//! Steps record every attempt in the table `attempts` (run, op, step, worker, attempt) and apply
//! their external effect through their idempotency key, into `effects` (whose primary key is that
//! key), as an API that deduplicates by key would: so a test can count how often a step ran and
//! check that each effect was applied exactly once. Both tables live in the schema
//! `EVE_DATABASE_SCHEMA` names, next to eve's own, reached with `EVE_DATABASE_URL`.
//!
//! With `EVE_LOG` set (`info`, `debug`, ...), the runtime's logs go to stderr; with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set, its spans go to that collector.

use std::sync::Arc;
use std::time::Duration;

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The name of this worker, as the attempts table records it.
fn worker_name() -> String {
    std::env::var("EVE_WORKER_ID").unwrap_or_else(|_| format!("client-{}", std::process::id()))
}

/// One connection for the steps' bookkeeping, opened again after the server restarts.
static EFFECTS: Mutex<Option<Arc<tokio_postgres::Client>>> = Mutex::const_new(None);

async fn effects() -> Result<Arc<tokio_postgres::Client>, StepError> {
    let mut held = EFFECTS.lock().await;
    if let Some(client) = held.as_ref().filter(|client| !client.is_closed()) {
        return Ok(client.clone());
    }
    let unreachable = |error: tokio_postgres::Error| -> StepError {
        RetryableError::new(format!("the effects database is unreachable: {error}"))
            .retry_after(Duration::from_millis(250))
            .into()
    };
    let url = std::env::var("EVE_DATABASE_URL").map_err(|_| FatalError::new("EVE_DATABASE_URL is not set"))?;
    let schema = std::env::var("EVE_DATABASE_SCHEMA").unwrap_or_else(|_| "eve".into());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.map_err(unreachable)?;
    tokio::spawn(connection);
    // On its own: a batch runs as one transaction, so a lost race below would roll the setting
    // back with it and leave this connection on the wrong schema for good.
    client.batch_execute(&format!("SET search_path = {schema}")).await.map_err(unreachable)?;
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS attempts (run_id text, op bigint, step text, worker text, attempt bigint);
             CREATE TABLE IF NOT EXISTS effects (key text PRIMARY KEY, value bigint NOT NULL)",
        )
        .await
        .or_else(|error| {
            // Two workers creating the tables at once: the loser finds them made.
            if error.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) { Ok(()) } else { Err(error) }
        })
        .map_err(unreachable)?;
    let client = Arc::new(client);
    *held = Some(client.clone());
    Ok(client)
}

/// Records that this attempt of `step` ran here.
async fn record_attempt(ctx: &StepCtx, step: &str) -> Result<(), StepError> {
    let client = effects().await?;
    let (run, op) =
        (ctx.run_id().map(ToString::to_string).unwrap_or_default(), ctx.op().map_or(-1, |op| i64::from(op.0)));
    let sql = "INSERT INTO attempts (run_id, op, step, worker, attempt) VALUES ($1, $2, $3, $4, $5)";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&run, &op, &step, &worker_name(), &i64::from(ctx.attempt())];
    client.execute(sql, &params).await.map_err(retry)?;
    Ok(())
}

/// Applies `value` once per idempotency key.
async fn apply_effect(ctx: &StepCtx, value: u64) -> Result<(), StepError> {
    let client = effects().await?;
    let sql = "INSERT INTO effects (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
    client.execute(sql, &[&ctx.idempotency_key(), &(value as i64 & i64::MAX)]).await.map_err(retry)?;
    Ok(())
}

fn retry(error: tokio_postgres::Error) -> StepError {
    RetryableError::new(format!("the effects database failed: {error}")).retry_after(Duration::from_millis(250)).into()
}

/// The value `churn` computes; the tests compute expected outputs with it.
pub fn mix(round: u64, acc: u64) -> u64 {
    acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(round + 1) >> 1
}

/// One step of the chaos runs: records its attempt and applies its effect once.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn churn(ctx: &StepCtx, round: u64, acc: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "churn").await?;
    let value = mix(round, acc);
    apply_effect(ctx, value).await?;
    Ok(value)
}

/// The input of a chaos run.
#[derive(Deserialize, JsonSchema)]
pub struct ChaosInput {
    /// Where the computation starts.
    seed: u64,
    /// How long the durable sleep lasts, in milliseconds.
    sleep_ms: u64,
}

/// Ten steps, with a durable sleep after the fifth and a hook (token `chaos-<run id>`) whose
/// payload the outside world sends, mixed in before the last five.
#[workflow_tool]
pub async fn chaos(input: ChaosInput, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut acc = input.seed;
    for round in 0..5 {
        acc = churn(ctx, round, acc).await?;
    }
    sleep(Duration::from_millis(input.sleep_ms)).await?;
    let mut hook = create_hook_with_token::<u64>(format!("chaos-{}", ctx.run_id()));
    acc ^= hook.recv().await?;
    for round in 5..10 {
        acc = churn(ctx, round, acc).await?;
    }
    Ok(acc)
}

/// A step that takes `millis` of wall time, recording when it starts and when it ends.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn slow(ctx: &StepCtx, millis: u64) -> Result<String, StepError> {
    record_attempt(ctx, "slow started").await?;
    tokio::time::sleep(Duration::from_millis(millis)).await;
    record_attempt(ctx, "slow finished").await?;
    Ok(worker_name())
}

/// Names the worker it runs on.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn whoami(ctx: &StepCtx) -> Result<String, StepError> {
    record_attempt(ctx, "whoami").await?;
    Ok(worker_name())
}

/// The input of a fencing probe.
#[derive(Deserialize, JsonSchema)]
pub struct ProbeInput {
    /// How long its slow step takes, in milliseconds.
    millis: u64,
}

/// A quick step, a slow one, a quick one: each returns the worker it ran on.
#[workflow_tool]
pub async fn probe(input: ProbeInput, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let first = whoami(ctx).await?;
    let slow = slow(ctx, input.millis).await?;
    let last = whoami(ctx).await?;
    Ok(json!([first, slow, last]))
}

/// How many steps a long run takes, resting every so often so it lasts a while.
#[derive(Deserialize, JsonSchema)]
pub struct TicksInput {
    steps: u32,
    rest_every: u32,
}

#[step]
async fn tick(_ctx: &StepCtx, n: u32, rest: bool) -> Result<u32, StepError> {
    if rest {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    Ok(n)
}

/// Takes `steps` steps, one journal entry each, for a follower in another process to read.
#[workflow_tool]
pub async fn ticks(input: TicksInput, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    for n in 0..input.steps {
        tick(ctx, n, n.is_multiple_of(input.rest_every)).await?;
    }
    Ok(input.steps)
}

/// The input of a hammered run.
#[derive(Deserialize, JsonSchema)]
pub struct HammerInput {
    /// How many payloads its hook takes before it asks its question.
    payloads: u64,
}

/// Adds the payload in a step.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn tally(ctx: &StepCtx, sum: u64, payload: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "tally").await?;
    apply_effect(ctx, sum + payload).await?;
    Ok(sum + payload)
}

/// Takes `payloads` payloads from its hook (token `hammer-<run id>`), adding each in a step, then
/// asks whether to double the sum, and returns it; cancelled, it returns what it had.
#[workflow_tool]
pub async fn hammer(input: HammerInput, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let mut hook = create_hook_with_token::<u64>(format!("hammer-{}", ctx.run_id()));
    let mut sum = 0;
    for _ in 0..input.payloads {
        match hook.recv().await {
            Ok(payload) => sum = tally(ctx, sum, payload).await?,
            Err(_) => return Ok(json!({ "cancelled_at": sum })),
        }
    }
    let answer = ctx.ask(Ask::select("Double it?").option("double", "Double").option("keep", "Keep")).await;
    if answer.chose("double") {
        sum *= 2;
    }
    Ok(json!({ "sum": sum }))
}

/// The input of a run of the rolling deploy.
#[derive(Deserialize, JsonSchema)]
pub struct RollingInput {
    n: u64,
}

/// Records where it ran and returns `value`.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn first(ctx: &StepCtx, value: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "first").await?;
    Ok(value)
}

/// The step the first build takes after the gate.
#[cfg(not(feature = "v2"))]
#[step(max_attempts = 1000, backoff = "100ms")]
async fn second(ctx: &StepCtx, value: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "second").await?;
    Ok(value + 1)
}

/// The step the second build takes after the gate instead.
#[cfg(feature = "v2")]
#[step(max_attempts = 1000, backoff = "100ms")]
async fn second_v2(ctx: &StepCtx, value: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "second_v2").await?;
    Ok(value + 2)
}

/// Records where the run finished and returns `value`.
#[step(max_attempts = 1000, backoff = "100ms")]
async fn last(ctx: &StepCtx, value: u64) -> Result<u64, StepError> {
    record_attempt(ctx, "last").await?;
    Ok(value)
}

/// A step, a wait on the hook `gate-<run id>`, a step that the second build changes, a wait on
/// the hook `done-<run id>`, and a last step: a run waiting at the gate replays on either build,
/// one waiting for `done` only on the build that took its second step.
#[cfg(not(feature = "v2"))]
#[workflow_tool]
pub async fn rolling(input: RollingInput, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let x = first(ctx, input.n).await?;
    let gate = create_hook_with_token::<u64>(format!("gate-{}", ctx.run_id())).recv().await?;
    let y = second(ctx, x + gate).await?;
    let done = create_hook_with_token::<u64>(format!("done-{}", ctx.run_id())).recv().await?;
    Ok(last(ctx, y + done).await?)
}

/// The second build's `rolling`: `second_v2` where the first build calls `second`.
#[cfg(feature = "v2")]
#[workflow_tool]
pub async fn rolling(input: RollingInput, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let x = first(ctx, input.n).await?;
    let gate = create_hook_with_token::<u64>(format!("gate-{}", ctx.run_id())).recv().await?;
    let y = second_v2(ctx, x + gate).await?;
    let done = create_hook_with_token::<u64>(format!("done-{}", ctx.run_id())).recv().await?;
    Ok(last(ctx, y + done).await?)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Traces go to the collector OTEL_EXPORTER_OTLP_ENDPOINT names, as the service this worker's
    // name names (the trace tests tell the workers apart by it); the exporter's layer sits beside
    // the logs' in one subscriber, so the host installs none of its own.
    let traces = std::env::var_os(eve_tools::otel::ENDPOINT_VARIABLE).map(|_| {
        eve_tools::otel::Traces::builder().service_name(worker_name()).build().expect("the trace exporter builds")
    });
    let logs = std::env::var("EVE_LOG").ok().map(|level| {
        let level = level.parse().unwrap_or(tracing::Level::INFO);
        let filter = tracing_subscriber::filter::LevelFilter::from_level(level);
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false).with_filter(filter)
    });
    tracing_subscriber::registry().with(logs).with(traces.as_ref().map(|traces| traces.layer())).init();
    let code = eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await;
    if let Some(Err(error)) = traces.map(eve_tools::otel::Traces::shutdown) {
        eprintln!("warning: {error}");
    }
    code
}
