//! The child process of the crash tests.
//!
//! `crash-worker <data dir>` runs (or resumes) the run `crash-run` of `pipeline` on the embedded
//! SQLite store in `<data dir>` and prints its outcome as JSON. The process also plays the outside
//! world: in every generation it delivers the hook's payload (under one delivery id, so a repeat
//! is observed once) and answers the run's open question. Every step attempt appends a line
//! to `<data dir>/effects.log`; the guarded `transfer` step applies its effect through its
//! idempotency key, as an external API that deduplicates by key would. With the `failpoints`
//! feature and `EVE_FAILPOINT_PAUSE=N`, the store pauses at its N-th durability boundary so the
//! parent can SIGKILL the process exactly there.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use eve_tools::prelude::*;
use eve_tools::store::SqliteStore;
use eve_tools::{Answer, RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The pipeline's input.
#[derive(Deserialize, JsonSchema)]
pub struct PipelineInput {
    seed: u64,
}

fn data_dir() -> PathBuf {
    PathBuf::from(std::env::args().nth(1).expect("usage: crash-worker <data dir>"))
}

/// Appends one line per step attempt: `<generation> <op> <step> <attempt>`.
fn log_execution(ctx: &StepCtx, step: &str) -> Result<(), StepError> {
    let generation = std::env::var("EVE_CRASH_GENERATION").unwrap_or_else(|_| "0".into());
    let op = ctx.op().map_or(u32::MAX, |op| op.0);
    let line = format!("{generation} {op} {step} {}\n", ctx.attempt());
    let mut log = OpenOptions::new().create(true).append(true).open(data_dir().join("effects.log"))?;
    log.write_all(line.as_bytes())?;
    Ok(())
}

#[step]
async fn mix(ctx: &StepCtx, round: u64, acc: u64) -> Result<u64, StepError> {
    log_execution(ctx, "mix")?;
    Ok(acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(round + 1) >> 1)
}

#[step(backoff = "50ms")]
async fn flaky(ctx: &StepCtx, acc: u64) -> Result<u64, StepError> {
    log_execution(ctx, "flaky")?;
    if ctx.attempt() == 1 {
        return Err(RetryableError::new("the first attempt always fails").into());
    }
    Ok(acc ^ 0xdead_beef)
}

/// Moves money once: the ledger keeps one file per idempotency key, as a payment API would.
#[step]
async fn transfer(ctx: &StepCtx, amount: u64) -> Result<String, StepError> {
    log_execution(ctx, "transfer")?;
    let ledger = data_dir().join("ledger");
    std::fs::create_dir_all(&ledger)?;
    let entry = ledger.join(ctx.idempotency_key().replace(':', "_"));
    match OpenOptions::new().write(true).create_new(true).open(&entry) {
        Ok(mut file) => file.write_all(amount.to_string().as_bytes())?,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error.into()),
    }
    Ok(format!("transferred {amount}"))
}

/// The token of the hook the pipeline waits on; the worker's outside world delivers to it.
const HOOK_TOKEN: &str = "crash-hook";

/// What the outside world sends to the hook, and the option it answers the question with.
const PAYLOAD: u64 = 1_000;
const CHOICE: &str = "double";

/// Twenty steps, a durable sleep, a retried step, a hook and a question.
#[workflow_tool]
pub async fn pipeline(input: PipelineInput, ctx: &WorkflowCtx) -> Result<serde_json::Value, ToolError> {
    let mut acc = input.seed;
    for round in 0..9 {
        acc = mix(ctx, round, acc).await?;
    }
    sleep(Duration::from_millis(100)).await?;
    acc = flaky(ctx, acc).await?;
    let mut hook = create_hook_with_token::<u64>(HOOK_TOKEN);
    let bonus = hook.recv().await?;
    for round in 9..18 {
        acc = mix(ctx, round, acc).await?;
    }
    let question = Ask::select("How much should move?").option("single", "The amount").option(CHOICE, "Twice it");
    let factor = if ctx.ask(question).await.chose(CHOICE) { 2 } else { 1 };
    let receipt = transfer(ctx, (acc % 1_000 + bonus) * factor).await?;
    Ok(json!({ "acc": acc, "receipt": receipt }))
}

/// The output `pipeline` must produce for `seed`, computed without the runtime.
pub fn expected(seed: u64) -> serde_json::Value {
    let mix = |round: u64, acc: u64| acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(round + 1) >> 1;
    let mut acc = (0..9).fold(seed, |acc, round| mix(round, acc));
    acc ^= 0xdead_beef;
    acc = (9..18).fold(acc, |acc, round| mix(round, acc));
    json!({ "acc": acc, "receipt": format!("transferred {}", (acc % 1_000 + PAYLOAD) * 2) })
}

/// The outside world: delivers the hook's payload and answers the open question, again in every
/// generation, until the run ends. Refusals (no such hook yet, already answered) are expected.
async fn outside_world(runtime: Runtime, run: RunId) {
    loop {
        let _ = runtime.resume_hook_once(HOOK_TOKEN, "the-payload", json!(PAYLOAD)).await;
        for question in runtime.open_questions(&run).await.unwrap_or_default() {
            let _ = runtime.answer(&run, &question.request_id, Answer::option(CHOICE)).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = data_dir();
    let store = SqliteStore::open(dir.join("eve.db"))?;
    let runtime = Runtime::builder().store(store).data_dir(&dir).build()?;
    runtime.recover().await?;
    let id: RunId = "crash-run".parse()?;
    let world = tokio::spawn(outside_world(runtime.clone(), id.clone()));
    let run = runtime.start_with_id(id, "pipeline", json!({ "seed": 7 })).await?;
    let outcome = run.outcome().await?;
    let RunOutcome::Completed(output) = outcome else { return Err(format!("the run ended {outcome:?}").into()) };
    assert_eq!(output, expected(7), "the pipeline computes the expected value");
    world.abort();
    println!("{output}");
    Ok(())
}
