//! The child process of the session crash test.
//!
//! `session-crash-worker <data dir>` opens (or reopens) the session `crash-session` on the embedded
//! SQLite store in `<data dir>`, sends it one message (under one delivery id, so a repeat in a
//! later generation is read once), and follows its feed until the turn completes. The scripted
//! model starts two tasks, then calls `task_wait` until both results are in, and answers with
//! every `<task_result>` block it was shown; the process prints that answer. Every model call and
//! every step attempt of a task appends a line to `<data dir>/effects.log`, and each task's
//! guarded `publish` step applies its effect through its idempotency key. With the `failpoints`
//! feature and `EVE_FAILPOINT_PAUSE=N`, the store pauses at its N-th durability boundary so the
//! parent can SIGKILL the process exactly there.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use eve_tools::prelude::*;
use eve_tools::session::{Message, ModelRequest, ModelResponse, ScriptedModel, SessionOptions, UserMessage};
use eve_tools::store::SqliteStore;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

fn data_dir() -> PathBuf {
    PathBuf::from(std::env::args().nth(1).expect("usage: session-crash-worker <data dir>"))
}

/// Appends `<generation> <what>` to the effects log.
fn log(what: &str) {
    let generation = std::env::var("EVE_CRASH_GENERATION").unwrap_or_else(|_| "0".into());
    let mut log = OpenOptions::new().create(true).append(true).open(data_dir().join("effects.log")).unwrap();
    log.write_all(format!("{generation} {what}\n").as_bytes()).unwrap();
}

/// What to build.
#[derive(Deserialize, JsonSchema)]
pub struct BuildInput {
    /// Which part.
    pub part: u64,
}

#[step]
async fn compile(ctx: &StepCtx, part: u64) -> Result<u64, StepError> {
    log(&format!("compile {part} {}", ctx.attempt()));
    Ok(part * 1_000 + 7)
}

/// Publishes once: one file per idempotency key, as an API that deduplicates by key would.
#[step]
async fn publish(ctx: &StepCtx, artifact: u64) -> Result<String, StepError> {
    log(&format!("publish {artifact} {}", ctx.attempt()));
    let ledger = data_dir().join("ledger");
    std::fs::create_dir_all(&ledger)?;
    let entry = ledger.join(ctx.idempotency_key().replace(':', "_"));
    match OpenOptions::new().write(true).create_new(true).open(&entry) {
        Ok(mut file) => file.write_all(artifact.to_string().as_bytes())?,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error.into()),
    }
    Ok(format!("published {artifact}"))
}

/// Builds a part: a step, a durable sleep, a guarded publish.
#[task]
pub async fn build(input: BuildInput, ctx: &TaskCtx) -> Result<String, ToolError> {
    let artifact = compile(ctx, input.part).await?;
    sleep(Duration::from_millis(30 * input.part)).await?;
    Ok(publish(ctx, artifact).await?)
}

/// The model: two builds, `task_wait` until both results are in, then every block it saw.
fn script(request: &ModelRequest) -> ModelResponse {
    let answered = request.messages.iter().filter(|message| matches!(message, Message::Assistant { .. })).count();
    log(&format!("model {answered}"));
    let blocks: Vec<&str> = request
        .messages
        .iter()
        .flat_map(|message| message.content().lines())
        .filter(|line| line.starts_with("<task_result id="))
        .collect();
    if answered == 0 {
        ModelResponse::call("build", json!({ "part": 1 })).and_call("build", json!({ "part": 2 }))
    } else if blocks.len() < 2 {
        ModelResponse::call("task_wait", json!({}))
    } else {
        ModelResponse::text(blocks.join("\n"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = data_dir();
    let store = SqliteStore::open(dir.join("eve.db"))?;
    let runtime = Runtime::builder().store(store).data_dir(&dir).model(ScriptedModel::new(script)).build()?;
    runtime.recover().await?;
    let options = SessionOptions::new().id("crash-session".parse()?).tools(["build"]);
    let session = runtime.session(options).await?;
    session.send_message_once(UserMessage::new("Build both parts"), "the-message").await?;
    let mut events = session.events(0);
    let mut text = None;
    while let Some(event) = events.next().await {
        let event = event?;
        if event.name == "message.completed" {
            text = event.field("text").map(str::to_owned);
        }
        if event.name == "turn.completed" {
            break;
        }
    }
    println!("{}", text.ok_or("the turn completed without a message")?);
    Ok(())
}
