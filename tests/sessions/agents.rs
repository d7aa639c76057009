//! Subagents: an agent a session calls is a resumable task with a session of its own
//! (`agent.started`, a held turn in the child reported with `finishReason: "tool-calls"`), and a
//! workflow body calls an agent with `ctx.agent(..).send(..)`, its reply checked against an output
//! schema.

use std::time::Duration;

use eve_tests::World;
use eve_tests::feed::{find, names, read_until};
use eve_tools::prelude::*;
use eve_tools::session::{Agent, Message, ModelRequest, ModelResponse, ScriptedModel, SessionEvent, SessionOptions};
use eve_tools::{Answer, RunId, RunOutcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

// ---- the tools

/// What to dig into.
#[derive(Deserialize, JsonSchema)]
pub struct Topic {
    /// The topic.
    pub topic: String,
}

/// Digs into a topic in the background: done when the test resumes the hook `dig-<topic>`.
#[task]
pub async fn dig(input: Topic, _ctx: &TaskCtx) -> Result<String, ToolError> {
    let mut done = create_hook_with_token::<String>(format!("dig-{}", input.topic));
    Ok(done.recv().await?)
}

/// Asks the person before it checks a topic.
#[task]
pub async fn check_with_person(input: Topic, ctx: &TaskCtx) -> Result<String, ToolError> {
    let ask = Ask::confirmation(format!("May I check {}?", input.topic)).option("yes", "Yes").option("no", "No");
    let answer = ctx.ask(ask).await;
    Ok(if answer.chose("yes") { format!("{} checked", input.topic) } else { "not allowed".to_owned() })
}

/// Release notes to publish.
#[derive(Deserialize, JsonSchema)]
pub struct Notes {
    /// The notes.
    pub notes: String,
}

/// Has the reviewer check the notes, then publishes them if approved.
#[workflow_tool]
pub async fn publish_reviewed(input: Notes, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let review = ctx
        .agent("reviewer")
        .output_schema(json!({
            "type": "object",
            "properties": { "approved": { "type": "boolean" }, "reason": { "type": "string" } },
            "required": ["approved", "reason"]
        }))
        .send(format!("Review these release notes:\n\n{}", input.notes))
        .await?;
    let output = review.output().cloned().unwrap_or_default();
    Ok(json!({ "published": output["approved"], "reason": output["reason"], "session": review.session_id() }))
}

/// No input.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Lists the agents a body can call.
#[workflow_tool]
pub async fn list_agents(_input: Nothing, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    Ok(serde_json::to_value(ctx.agents()).expect("a map serializes"))
}

/// Sends an agent that does not exist a message.
#[workflow_tool]
pub async fn ask_nobody(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(ctx.agent("nobody").send("hello").await?.text().to_owned())
}

// ---- the model

const SCHOLAR: &str = "You are the scholar.";
const REVIEWER: &str = "You review release notes.";
const CHECKER: &str = "You check things, with permission.";

/// What the model was shown since its last answer, joined.
fn shown(request: &ModelRequest) -> String {
    let from = request.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
    let new = &request.messages[from.map_or(0, |at| at + 1)..];
    new.iter().map(Message::content).collect::<Vec<_>>().join("\n")
}

/// One scripted model for the root session and both agents, told apart by their system prompts.
fn model(request: &ModelRequest) -> ModelResponse {
    let shown = shown(request);
    if request.system.starts_with(SCHOLAR) {
        return if shown.contains("<task_result id=") {
            ModelResponse::text("Rust 1.0 came out on 15 May 2015.")
        } else if shown.starts_with("Started task dig-") {
            ModelResponse::text("Digging into it.")
        } else {
            ModelResponse::call("dig", json!({ "topic": "rust" }))
        };
    }
    if request.system.starts_with(CHECKER) {
        return if shown.contains("<task_result id=") {
            ModelResponse::text(format!("Checker: {shown}"))
        } else if shown.starts_with("Started task check_with_person-") {
            ModelResponse::call("task_wait", json!({}))
        } else {
            ModelResponse::call("check_with_person", json!({ "topic": "the build" }))
        };
    }
    if request.system.starts_with(REVIEWER) {
        return if shown.contains("BAD") {
            ModelResponse::call("final_output", json!({ "approved": "yes", "reason": "looks fine" }))
        } else {
            ModelResponse::call("final_output", json!({ "approved": true, "reason": "clear and complete" }))
        };
    }
    if shown.contains("<task_result id=") {
        ModelResponse::text(format!("Done: {shown}"))
    } else if shown.starts_with("Started task ") {
        ModelResponse::call("task_wait", json!({}))
    } else if shown.contains("checker") {
        ModelResponse::call("checker", json!({ "message": "Check the build." }))
    } else {
        ModelResponse::call("scholar", json!({ "message": "When did Rust 1.0 come out?" }))
    }
}

// An agent may not have the name of a tool of this binary: `researcher` is a tool of `scenarios.rs`.
fn build(world: &World) -> Runtime {
    let scholar = Agent::new("scholar")
        .description("Finds facts and says where each comes from.")
        .instructions(format!("{SCHOLAR} Cite your sources."))
        .tools(["dig"]);
    let reviewer = Agent::new("reviewer").instructions(REVIEWER).hidden();
    let checker = Agent::new("checker")
        .description("Checks things, after asking.")
        .instructions(CHECKER)
        .tools(["check_with_person"]);
    let builder = world.builder(16).model(ScriptedModel::new(model));
    builder.agent(scholar).agent(reviewer).agent(checker).build().unwrap()
}

async fn finished(runtime: &Runtime, run: &RunId) -> RunOutcome {
    tokio::time::timeout(Duration::from_secs(20), runtime.handle(run.clone()).outcome())
        .await
        .expect("in time")
        .unwrap()
}

// ---- scenarios

/// The model calls an agent: a task of kind `agent` whose run opens a child session
/// (`agent.started`), where the agent's turn is held for its own task and reported with
/// `finishReason: "tool-calls"`; the agent's final reply is the task's result.
#[tokio::test]
async fn an_agent_call_is_a_task_with_its_own_child_session() {
    let world = World::in_memory();
    let runtime = build(&world);
    let session = runtime.session(SessionOptions::new().tools(["scholar"])).await.unwrap();
    session.send("Ask the scholar").await.unwrap();
    let root = read_until(&session, 0, "agent.started").await;
    let started = find(&root, "task.started");
    assert_eq!(started.data["kind"], "agent");
    assert_eq!(started.data["name"], "scholar");
    let task_id = started.data["taskId"].as_str().unwrap().to_owned();
    assert!(task_id.starts_with("scholar-"), "{task_id}");
    let agent = find(&root, "agent.started");
    assert_eq!(agent.data["taskId"], task_id.as_str());
    assert_eq!(agent.data["callId"], started.data["callId"]);
    assert_eq!(agent.data["turnId"], "turn-1");
    assert_eq!(agent.data["name"], "scholar");
    let child_id: RunId = agent.data["sessionId"].as_str().unwrap().parse().unwrap();
    assert_eq!(agent.data["streamPath"], format!("/v1/sessions/{child_id}/events"));

    // In the child session the agent starts its own task, and its turn is held for it.
    let child = runtime.open_session(&child_id).await.unwrap();
    let held = read_until(&child, 0, "turn.waiting").await;
    let text = held.iter().find(|event| event.name == "message.completed").expect("the text before the wait");
    assert_eq!(text.data["text"], "Digging into it.");
    assert_eq!(text.data["finishReason"], "tool-calls", "a child session's held text is not its reply");

    runtime.resume_hook("dig-rust", json!("rust-lang.org/blog/2015/05/15")).await.unwrap();
    let rest = read_until(&session, root.last().unwrap().sequence, "turn.completed").await;
    let settled = find(&rest, "task.settled");
    assert_eq!(settled.data["kind"], "agent");
    assert_eq!(settled.data["status"], "completed");
    assert_eq!(settled.data["output"], "Rust 1.0 came out on 15 May 2015.");
    let reply = rest.iter().rev().find(|event| event.name == "message.completed").unwrap();
    let reply = reply.data["text"].as_str().unwrap();
    assert!(reply.contains("<task_result") && reply.contains("Rust 1.0 came out on 15 May 2015."), "{reply}");

    // The child's turn ended with the agent's reply, as an ordinary message.
    let child_events = child.history(0).await.unwrap();
    let last = child_events.iter().rev().find(|event| event.name == "message.completed").unwrap();
    assert_eq!(last.data["text"], "Rust 1.0 came out on 15 May 2015.");
    assert_eq!(last.data["finishReason"], "stop");

    // Closing the root session ends the agent's task, and with it the agent's session.
    session.close().await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), runtime.handle(child_id.clone()).outcome()).await;
    assert!(ended.expect("the agent's session ends").is_ok());
}

/// A second call with the agent's `taskId` continues the same conversation in the same session.
#[tokio::test]
async fn a_second_call_with_the_task_id_continues_the_agents_session() {
    let world = World::in_memory();
    let second = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = second.clone();
    let script = move |request: &ModelRequest| {
        let shown = shown(request);
        if request.system.starts_with(SCHOLAR) {
            let asked = request.messages.iter().filter(|message| matches!(message, Message::User { .. })).count();
            return ModelResponse::text(format!("answer {asked}"));
        }
        if let Some(at) = shown.find("Started task scholar-") {
            let id: String = shown[at + "Started task ".len()..].chars().take_while(|c| *c != '.').collect();
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            return ModelResponse::call("scholar", json!({ "message": "And then?", "taskId": id }))
                .and_call("task_wait", json!({}));
        }
        if shown.contains("<task_result id=") && shown.contains("answer 2") {
            return ModelResponse::text("Two answers.");
        }
        if shown.contains("<task_result id=") {
            return ModelResponse::call("task_wait", json!({}));
        }
        ModelResponse::call("scholar", json!({ "message": "First?" }))
    };
    let scholar = Agent::new("scholar").description("Researches.").instructions(SCHOLAR).tools(["dig"]);
    let runtime = world.builder(16).model(ScriptedModel::new(script)).agent(scholar).build().unwrap();
    let session = runtime.session(SessionOptions::new().tools(["scholar"])).await.unwrap();
    session.send("Go").await.unwrap();
    let events = read_until(&session, 0, "turn.completed").await;
    assert!(second.load(std::sync::atomic::Ordering::SeqCst));
    let agents: Vec<&SessionEvent> = events.iter().filter(|event| event.name == "agent.started").collect();
    assert_eq!(agents.len(), 1, "one session for both calls: {:?}", names(&events));
    let settled: Vec<&Value> =
        events.iter().filter(|event| event.name == "task.settled").map(|event| &event.data["output"]).collect();
    assert_eq!(settled, [&json!("answer 1"), &json!("answer 2")], "the agent remembers the first message");
}

/// `ctx.agent(..).send` with an output schema: a matching reply is the call's output, and a reply
/// that does not match fails the call with the field at fault.
#[tokio::test]
async fn ctx_agent_checks_the_reply_against_the_output_schema() {
    let world = World::in_memory();
    let runtime = build(&world);
    let good = runtime.start("publish_reviewed", json!({ "notes": "Faster builds." })).await.unwrap();
    let RunOutcome::Completed(output) = finished(&runtime, good.id()).await else { panic!("the review completes") };
    assert_eq!(output["published"], true);
    assert_eq!(output["reason"], "clear and complete");
    // The agent worked in a session of its own, which is closed once it replied.
    let child: RunId = output["session"].as_str().unwrap().parse().unwrap();
    assert!(child.as_str().starts_with(&format!("{}.reviewer-", good.id())), "{child}");
    let child_events = runtime.open_session(&child).await.unwrap().history(0).await.unwrap();
    let done = child_events.iter().find(|event| event.name == "turn.completed").unwrap();
    assert_eq!(done.data["output"], json!({ "approved": true, "reason": "clear and complete" }));
    assert!(finished(&runtime, &child).await == RunOutcome::Completed(Value::Null));

    let bad = runtime.start("publish_reviewed", json!({ "notes": "BAD notes" })).await.unwrap();
    let RunOutcome::Failed(failure) = finished(&runtime, bad.id()).await else { panic!("the review fails") };
    let failure = serde_json::to_string(&failure).unwrap();
    assert!(
        failure.contains("the reply of the agent `reviewer` does not match its output schema")
            && failure.contains("/approved"),
        "{failure}"
    );
}

/// An agent that does not exist fails the call with the names of those that do.
#[tokio::test]
async fn an_unknown_agent_fails_the_call_and_names_the_known_ones() {
    let world = World::in_memory();
    let runtime = build(&world);
    let run = runtime.start("ask_nobody", json!({})).await.unwrap();
    let RunOutcome::Failed(failure) = finished(&runtime, run.id()).await else { panic!("the call fails") };
    let failure = serde_json::to_string(&failure).unwrap();
    assert!(
        failure.contains("there is no agent named `nobody`") && failure.contains("checker, reviewer, scholar"),
        "{failure}"
    );
}

/// `ctx.agents()` lists every agent with its description, hidden ones included.
#[tokio::test]
async fn ctx_agents_lists_names_and_descriptions() {
    let world = World::in_memory();
    let runtime = build(&world);
    let run = runtime.start("list_agents", json!({})).await.unwrap();
    let RunOutcome::Completed(output) = finished(&runtime, run.id()).await else { panic!("the list completes") };
    assert_eq!(
        output,
        json!({
            "checker": "Checks things, after asking.",
            "scholar": "Finds facts and says where each comes from.",
            "reviewer": ""
        })
    );
}

/// The runtime refuses an agent the model could not call or that is not described.
#[tokio::test]
async fn bad_agent_settings_are_refused_when_the_runtime_is_built() {
    let world = World::in_memory();
    let cases = [
        (Agent::new("two words").description("x"), "is not one a model can call"),
        (Agent::new("dig").description("x"), "has the name of a tool"),
        (Agent::new("quiet"), "has no description"),
        (Agent::new("lost").description("x").tools(["nowhere"]), "names the tool `nowhere`"),
    ];
    for (agent, expected) in cases {
        let error = world.builder(4).agent(agent).build().err().expect("refused");
        assert!(error.to_string().contains(expected), "{error}");
    }
}

/// A restart while the agent works: the new process goes on with the same child session, which
/// was started once and sent the message once.
#[tokio::test]
async fn an_agents_work_survives_a_restart_without_starting_or_sending_twice() {
    let world = World::in_memory();
    let runtime = build(&world);
    let session = runtime.session(SessionOptions::new().tools(["scholar"])).await.unwrap();
    session.send("Ask the scholar").await.unwrap();
    let root = read_until(&session, 0, "agent.started").await;
    let child_id: RunId = find(&root, "agent.started").data["sessionId"].as_str().unwrap().parse().unwrap();
    read_until(&runtime.open_session(&child_id).await.unwrap(), 0, "turn.waiting").await;
    runtime.shutdown().await;

    let runtime = build(&world);
    runtime.recover().await.unwrap();
    runtime.resume_hook("dig-rust", json!("found")).await.unwrap();
    let session = runtime.open_session(session.id()).await.unwrap();
    let events = read_until(&session, 0, "turn.completed").await;
    assert_eq!(events.iter().filter(|event| event.name == "agent.started").count(), 1);
    assert_eq!(find(&events, "task.settled").data["output"], "Rust 1.0 came out on 15 May 2015.");
    let child = runtime.open_session(&child_id).await.unwrap().history(0).await.unwrap();
    assert_eq!(child.iter().filter(|event| event.name == "turn.started").count(), 1, "the message was sent once");
}

/// A question the agent's task asks reaches the person through the root session, naming the
/// agent's task, and the answer given there resumes the agent.
#[tokio::test]
async fn an_agents_question_is_asked_and_answered_through_the_root_session() {
    let world = World::in_memory();
    let runtime = build(&world);
    let session = runtime.session(SessionOptions::new().tools(["checker"])).await.unwrap();
    session.send("Ask the checker").await.unwrap();
    let asked = read_until(&session, 0, "input.requested").await;
    let task = find(&asked, "task.started").data["taskId"].as_str().unwrap().to_owned();
    let question = find(&asked, "input.requested");
    assert_eq!(question.data["taskId"], task.as_str(), "the question names the agent's task");
    assert_eq!(question.data["request"]["prompt"], "May I check the build?");
    let request = question.data["requestId"].as_str().unwrap();
    session.answer(request, Answer::option("yes")).await.unwrap();
    let rest = read_until(&session, asked.last().unwrap().sequence, "turn.completed").await;
    assert_eq!(find(&rest, "input.resolved").data["taskId"], task.as_str());
    let output = find(&rest, "task.settled").data["output"].as_str().unwrap().to_owned();
    assert!(output.contains("the build checked"), "{output}");
}
