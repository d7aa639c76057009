//! An agent session on the embedded store: a model calls a task and a researcher subagent, and
//! the session survives its process exiting mid-turn.
//!
//! ```text
//! cargo run --example agent            # turn 1: a deploy (a task) and the researcher (a subagent, working
//!                                      # in a session of its own) start; the researcher answers, the turn
//!                                      # waits on the deploy, the process exits
//! cargo run --example agent            # the deploy finishes, turn 1 completes; turn 2 asks the same
//!                                      # researcher a follow-up, and it remembers the first question
//! cargo run --example agent            # prints the session's whole feed from its journal
//! cargo run --example agent -- --reset # forgets the session
//! ```
//!
//! The model is scripted (no network, no key): it reacts to what it is shown, as a real model
//! would. Every line printed is an event of the session's feed (`turn.started`, `task.started`,
//! `task.settled`, `turn.completed`, …) or text the model reads (`model reads:`), such as the
//! receipts and `<task_result>` blocks.

use std::time::Duration;

use eve_tools::prelude::*;
use eve_tools::session::{
    Agent, Message, ModelRequest, ModelResponse, ScriptedModel, Session, SessionEvent, SessionOptions,
};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What to deploy.
#[derive(Deserialize, JsonSchema)]
pub struct DeployInput {
    /// The service to deploy, such as `api`.
    pub service: String,
}

/// Where a deployed service lives.
#[derive(Serialize)]
pub struct Deployed {
    url: String,
    build: String,
}

/// Deploy a service: build it, wait for its health checks, then promote it. Takes a while, so it
/// runs as a task: the conversation goes on meanwhile.
#[task]
pub async fn deploy(input: DeployInput, _ctx: &TaskCtx) -> Result<Deployed, ToolError> {
    let build = build(input.service.clone()).await?;
    sleep(Duration::from_secs(5)).await?; // the health checks: a durable timer, no process needed
    let url = promote(input.service).await?;
    Ok(Deployed { url, build })
}

#[step]
async fn build(service: String) -> Result<String, StepError> {
    Ok(format!("{service}@2026.12.1"))
}

#[step]
async fn promote(service: String) -> Result<String, StepError> {
    Ok(format!("https://{service}.example.com"))
}

/// A question to look up.
#[derive(Deserialize, JsonSchema)]
pub struct LookUp {
    /// What to find out.
    pub question: String,
}

/// Look a question about our services up in the runbooks.
#[tool]
pub async fn look_up(input: LookUp, _ctx: &ToolCtx) -> Result<String, ToolError> {
    Ok(if input.question.contains("database") {
        "Database migrations are forward-only: a rollback redeploys the previous build against the same schema."
    } else {
        "Roll back by promoting the previous build; traffic moves within a minute."
    }
    .to_owned())
}

/// The researcher: a subagent with its own instructions and tools. The session offers it as a
/// resumable task; it works in a session of its own, which remembers the conversation, so a
/// follow-up with its `taskId` continues it.
fn researcher() -> Agent {
    Agent::new("researcher")
        .description(
            "Research a question about our services. Call it again with its taskId for a follow-up: it remembers.",
        )
        .instructions(RESEARCHER)
        .tools(["look_up"])
}

const RESEARCHER: &str = "You are the researcher. Answer from what look_up finds in the runbooks.";

const DATA_DIR: &str = ".eve/agent";
const SESSION: &str = "agent-demo";
const FIRST: &str = "Deploy api, and ask the researcher how we roll it back.";
const SECOND: &str = "Does that rollback cover the database too? Ask the same researcher.";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--reset") {
        let _ = std::fs::remove_dir_all(DATA_DIR);
        println!("forgot the agent's session; run `cargo run --example agent` to start a new one");
        return Ok(());
    }
    let runtime = Runtime::builder().data_dir(DATA_DIR).model(ScriptedModel::new(model)).agent(researcher()).build()?;
    runtime.recover().await?;
    let options =
        SessionOptions::new().id(SESSION.parse()?).system("You run our services.").tools(["deploy", "researcher"]);
    let session = runtime.session(options).await?;
    let history = session.history(0).await?;
    let turns_done = history.iter().filter(|event| event.name == "turn.completed").count();
    let after = history.last().map_or(0, |event| event.sequence);
    println!(
        "eve agent: session {SESSION} on the embedded store ({DATA_DIR}/eve.db), {} events so far\n",
        history.len()
    );
    match turns_done {
        0 if history.is_empty() => {
            println!("you: {FIRST}");
            session.send_message_once(eve_tools::session::UserMessage::new(FIRST), "first").await?;
            follow_first_turn(&session, after).await?;
        }
        0 => {
            println!("resuming turn 1 where the last process left it\n");
            follow(&session, after, |event| event.name == "session.waiting").await?;
            second_turn(&session).await?;
        }
        1 => second_turn(&session).await?,
        _ => {
            println!("the session is done; its feed, read from the journal:\n");
            history.iter().for_each(print_event);
            println!("\n`cargo run --example agent -- --reset` starts over");
        }
    }
    runtime.shutdown().await;
    Ok(())
}

/// Follows turn 1 until the researcher has answered and the turn waits on the deploy alone, then
/// lets the process exit: the deploy's timer and the open turn are in the journal.
async fn follow_first_turn(session: &Session, after: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut researched = false;
    let last = follow(session, after, |event| {
        researched |= event.name == "task.settled" && event.field("name") == Some("researcher");
        (researched && event.name == "turn.waiting") || event.name == "session.waiting"
    })
    .await?;
    if last.name == "turn.waiting" {
        println!("\nthe turn waits on the deploy's durable timer; this process exits now.");
        println!("run `cargo run --example agent` again: the session goes on from its journal");
    }
    Ok(())
}

/// Turn 2: a follow-up that reaches the idle researcher by its `taskId`.
async fn second_turn(session: &Session) -> Result<(), Box<dyn std::error::Error>> {
    let after = session.history(0).await?.last().map_or(0, |event| event.sequence);
    println!("\nyou: {SECOND}");
    session.send_message_once(eve_tools::session::UserMessage::new(SECOND), "second").await?;
    follow(session, after, |event| event.name == "session.waiting").await?;
    println!("\nrun `cargo run --example agent` again to read the whole feed from the journal");
    Ok(())
}

/// Prints the feed's events after `after` until `done` says so; returns the last one.
async fn follow(
    session: &Session,
    after: u64,
    mut done: impl FnMut(&SessionEvent) -> bool,
) -> Result<SessionEvent, Box<dyn std::error::Error>> {
    let mut events = session.events(after);
    while let Some(event) = events.next().await {
        let event = event?;
        print_event(&event);
        if done(&event) {
            return Ok(event);
        }
    }
    Err("the session ended".into())
}

/// One line per event: its number, its name and what it says.
fn print_event(event: &SessionEvent) {
    let data = &event.data;
    let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or("");
    let detail = match event.name.as_str() {
        "turn.started" | "turn.waiting" | "step.started" => text("turnId").to_owned(),
        "message.completed" => format!("{:?}", text("text")),
        "actions.requested" => {
            let calls = data["actions"].as_array().into_iter().flatten();
            calls.map(|call| format!("{}({})", text_of(&call["name"]), call["input"])).collect::<Vec<_>>().join(", ")
        }
        "action.result" => {
            format!("{} -> {}", text("name"), data.get("output").or(data.get("error")).map_or(String::new(), text_of))
        }
        "task.started" => format!("{} ({} {})", text("taskId"), text("kind"), text("name")),
        "agent.started" => format!("{} works in its own session {}", text("name"), text("sessionId")),
        "task.settled" => format!("{} {}", text("taskId"), text("status")),
        "turn.completed" => format!("{} {}", text("turnId"), text("status")),
        _ => String::new(),
    };
    println!("  #{:<3} {:<18} {detail}", event.sequence, event.name);
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// The scripted model: it reacts to what it is shown, and prints what it reads. The researcher's
/// session talks to it too (its system prompt tells them apart).
fn model(request: &ModelRequest) -> ModelResponse {
    if request.system.starts_with(RESEARCHER) {
        return research(request);
    }
    let from = request.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
    let shown = &request.messages[from.map_or(0, |at| at + 1)..];
    for message in shown {
        for block in message.content().lines().filter(|line| line.starts_with("<task_result")) {
            println!("        model reads: {block}");
        }
    }
    let shown: String = shown.iter().map(Message::content).collect::<Vec<_>>().join("\n");
    let researcher = request
        .messages
        .iter()
        .find_map(|message| message.content().strip_prefix("Started task researcher-"))
        .map(|rest| format!("researcher-{}", &rest[..6]));
    if shown.contains(FIRST) {
        return ModelResponse::call("deploy", json!({ "service": "api" }))
            .and_call("researcher", json!({ "message": "How do we roll back api?" }));
    }
    if shown.contains(SECOND) {
        let task = researcher.unwrap_or_default();
        return ModelResponse::call(
            "researcher",
            json!({ "message": "Does the rollback cover the database?", "taskId": task }),
        );
    }
    if shown.starts_with("Sent to task") {
        return ModelResponse::call("task_wait", json!({ "timeoutSeconds": 60 }));
    }
    if shown.contains("<task_result id=\"deploy-") {
        return ModelResponse::text("api is deployed. Rollbacks promote the previous build.");
    }
    if shown.contains("<task_result id=\"researcher-") && shown.contains("Database migrations") {
        return ModelResponse::text("The researcher says migrations are forward-only; a rollback keeps the schema.");
    }
    if shown.contains("<task_result id=\"researcher-") {
        return ModelResponse::text(
            "The researcher answered: promote the previous build. The deploy is still running.",
        );
    }
    ModelResponse::text("I started the deploy and asked the researcher; I will report back.")
}

/// The researcher's side: look the question up, then answer from what was found, following up on
/// the earlier question its session remembers.
fn research(request: &ModelRequest) -> ModelResponse {
    let questions: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    match request.messages.last() {
        Some(Message::Tool { content, .. }) => match questions.iter().rev().nth(1) {
            Some(before) => ModelResponse::text(format!("{content} (Following up on: {before:?})")),
            None => ModelResponse::text(content.clone()),
        },
        _ => ModelResponse::call("look_up", json!({ "question": questions.last().copied().unwrap_or_default() })),
    }
}
