//! `chat`: an agent session in the terminal, over every tool of the binary.
//!
//! The model is the OpenAI-compatible endpoint when `OPENAI_BASE_URL` is set (with
//! `OPENAI_API_KEY` and `EVE_MODEL`), else a demo model that calls a tool when the person writes
//! its name and a JSON input. Each line the person writes is a message; `chat` shows the feed of
//! its turn (the model's text, tasks starting and settling, sign-in links), asks a task's
//! questions in place and reads the answer from the next line, and returns to the prompt when
//! the session waits again. The session's id is kept in the data directory, so `chat` continues
//! the last session (or `--session ID`) after a restart. With `--json` every event is printed as
//! one JSON line, for scripts.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines, Stdin};

use eve_runtime::ask::Answer;
use eve_runtime::journal::RunId;
use eve_runtime::{Error, Runtime, RuntimeBuilder};
use eve_sessions::{
    Message, ModelRequest, ModelResponse, ScriptedModel, Session, SessionBuilderExt, SessionEvent, SessionOptions,
    SessionRuntimeExt,
};

/// The file in the data directory that names the last session `chat` talked in.
const LAST_SESSION: &str = "last-session";

/// `builder` with the model `chat` talks to.
pub(super) fn with_model(builder: RuntimeBuilder) -> Result<RuntimeBuilder, String> {
    let configured = std::env::var("OPENAI_BASE_URL").is_ok_and(|url| !url.trim().is_empty());
    if !configured {
        return Ok(builder.model(demo_model()));
    }
    #[cfg(feature = "openai")]
    {
        let model = eve_sessions::openai::OpenAiModel::from_env().map_err(|error| error.to_string())?;
        Ok(builder.model(model))
    }
    #[cfg(not(feature = "openai"))]
    Err("OPENAI_BASE_URL is set, but this binary was built without the `openai` feature of eve-tools".into())
}

/// Runs `chat`.
pub(super) async fn chat(runtime: &Runtime, data_dir: &Path, id: Option<&str>, json: bool) -> Result<(), String> {
    runtime.recover().await.map_err(|error| error.to_string())?;
    super::warn_held(runtime);
    let session = open(runtime, data_dir, id).await?;
    let after = session.history(0).await.map_err(|error| error.to_string())?.last().map_or(0, |event| event.sequence);
    let terminal = std::io::stdin().is_terminal();
    let mut out = Printer { json };
    if !json {
        eprintln!("session {} (continue it with `chat --session {}`; Ctrl-D ends)", session.id(), session.id());
    }
    let mut feed = session.events(after);
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        if terminal && !json {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let Some(line) = next_line(&mut lines).await? else { break };
        if line.trim().is_empty() {
            continue;
        }
        session.send(line.trim()).await.map_err(|error| error.to_string())?;
        follow_turn(&session, &mut feed, &mut lines, &mut out).await?;
    }
    runtime.clone().shutdown().await;
    Ok(())
}

/// The session `--session` names (made if new), else the last one, else a new one; remembered as
/// the last one.
async fn open(runtime: &Runtime, data_dir: &Path, id: Option<&str>) -> Result<Session, String> {
    let remembered = std::fs::read_to_string(last_session(data_dir)).ok().map(|id| id.trim().to_owned());
    let wanted = id.map(str::to_owned).or(remembered).filter(|id| !id.is_empty());
    let session = match wanted {
        Some(id) => {
            let run: RunId =
                id.parse().map_err(|_| format!("{id:?} is not a session id; list sessions with `runs`"))?;
            match runtime.open_session(&run).await {
                Ok(session) => session,
                Err(eve_sessions::Error::Runtime(Error::RunNotFound(_))) => {
                    runtime.session(options().id(run)).await.map_err(|error| error.to_string())?
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        None => runtime.session(options()).await.map_err(|error| error.to_string())?,
    };
    std::fs::create_dir_all(data_dir)
        .and_then(|()| std::fs::write(last_session(data_dir), session.id().to_string()))
        .map_err(|error| format!("cannot remember the session in {} ({error})", data_dir.display()))?;
    Ok(session)
}

fn options() -> SessionOptions {
    SessionOptions::new().system("You are an agent with the tools of this binary. Use them to do what the person asks.")
}

fn last_session(data_dir: &Path) -> PathBuf {
    data_dir.join(LAST_SESSION)
}

async fn next_line(lines: &mut Lines<BufReader<Stdin>>) -> Result<Option<String>, String> {
    lines.next_line().await.map_err(|error| format!("cannot read standard input ({error})"))
}

/// Prints the feed until the session waits for the next message; a question is answered from the
/// next line of input.
async fn follow_turn(
    session: &Session,
    feed: &mut BoxStream<'static, Result<SessionEvent, eve_sessions::Error>>,
    lines: &mut Lines<BufReader<Stdin>>,
    out: &mut Printer,
) -> Result<(), String> {
    while let Some(event) = feed.next().await {
        let event = event.map_err(|error| error.to_string())?;
        out.event(&event);
        match event.name.as_str() {
            "session.waiting" => return Ok(()),
            "input.requested" => {
                let Some(line) = next_line(lines).await? else { return Ok(()) };
                let request = event.field("requestId").unwrap_or_default().to_owned();
                let answer = answer_of(&event.data["request"], line.trim());
                if let Err(error) = session.answer(&request, answer).await {
                    eprintln!("the answer was not taken: {error}");
                }
            }
            _ => {}
        }
    }
    Err("the session's feed ended".into())
}

/// The answer a line gives a question: the option it names (by id or label), else text.
fn answer_of(request: &Value, line: &str) -> Answer {
    let options = request["options"].as_array().cloned().unwrap_or_default();
    let chosen = options.iter().find(|option| {
        [&option["id"], &option["label"]]
            .iter()
            .any(|name| name.as_str().is_some_and(|name| name.eq_ignore_ascii_case(line)))
    });
    match chosen.and_then(|option| option["id"].as_str()) {
        Some(id) => Answer::option(id),
        None => Answer::text(line),
    }
}

/// Writes events for a person, or as JSON lines.
struct Printer {
    json: bool,
}

impl Printer {
    fn event(&mut self, event: &SessionEvent) {
        if self.json {
            println!("{}", json!({ "sequence": event.sequence, "type": event.name, "data": event.data }));
            return;
        }
        let field = |name: &str| event.field(name).unwrap_or_default().to_owned();
        match event.name.as_str() {
            "message.completed" if !field("text").is_empty() => println!("{}", field("text")),
            "task.started" => println!("… {} started", field("taskId")),
            "task.settled" => println!("✓ {} {}", field("taskId"), field("status")),
            "input.requested" => {
                let request = &event.data["request"];
                let prompt = request["prompt"].as_str().unwrap_or("A question");
                let options: Vec<String> = request["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|option| option["id"].as_str().map(str::to_owned))
                    .collect();
                match options.is_empty() {
                    true => println!("? {prompt}"),
                    false => println!("? {prompt} [{}]", options.join("/")),
                }
            }
            "authorization.required" => println!("sign in to {}: {}", field("provider"), field("url")),
            "turn.completed" if field("status") == "failed" => println!("error: {}", field("error")),
            _ => {}
        }
    }
}

/// The demo model: calls a tool when the person writes its name and a JSON input
/// (`deploy {"service": "api"}`), reports what tools and tasks answer, and otherwise says how
/// to use it.
fn demo_model() -> ScriptedModel {
    ScriptedModel::new(demo)
}

fn demo(request: &ModelRequest) -> ModelResponse {
    let from = request.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
    let new = &request.messages[from.map_or(0, |at| at + 1)..];
    let results: Vec<&str> = new
        .iter()
        .filter_map(|message| match message {
            Message::User { content } if content.starts_with("<task_") => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !results.is_empty() {
        return ModelResponse::text(results.join("\n"));
    }
    let answers: Vec<&str> = new
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !answers.is_empty() {
        let told: Vec<String> = answers
            .iter()
            .map(|answer| match answer.strip_prefix("Started task ").and_then(|rest| rest.split('.').next()) {
                Some(task) => format!("{task} is working in the background; its result follows when it settles."),
                None => (*answer).to_owned(),
            })
            .collect();
        return ModelResponse::text(told.join("\n"));
    }
    let said = new.iter().rev().find_map(|message| match message {
        Message::User { content } if !content.starts_with("[Tasks]") => Some(content.trim()),
        _ => None,
    });
    let Some(said) = said else { return ModelResponse::text("") };
    let (name, input) = said.split_once(char::is_whitespace).unwrap_or((said, ""));
    if request.tools.iter().any(|tool| tool.name == name) {
        let input = if input.trim().is_empty() { Ok(json!({})) } else { serde_json::from_str::<Value>(input) };
        return match input {
            Ok(input) => ModelResponse::call(name, input),
            Err(error) => ModelResponse::text(format!("The input for `{name}` is not JSON ({error}).")),
        };
    }
    let names: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
    let provided = ["ask_question", "sleep", "task_wait", "task_cancel"];
    let example = names.iter().find(|name| !provided.contains(name)).or(names.first()).copied().unwrap_or("tool");
    ModelResponse::text(format!(
        "This is the demo model: write a tool's name and its JSON input to call it, as in `{example} {{...}}`. \
         Tools: {}. Set OPENAI_BASE_URL, OPENAI_API_KEY and EVE_MODEL to talk to a real model.",
        names.join(", ")
    ))
}
