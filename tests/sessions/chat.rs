//! `host chat` driven through a pipe, as a script drives it: the demo model calls a plain tool, a
//! task that starts and settles, and a task whose question is answered from the next line of
//! input; a second process continues the same session.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `chat-host chat <args>` in `dir` with `input` on standard input; returns stdout.
fn chat(dir: &Path, args: &[&str], input: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_chat-host"))
        .arg("chat")
        .args(args)
        .env("EVE_DATA_DIR", dir)
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "chat failed: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"))).collect()
}

fn names(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).filter(|name| *name != "step.started").collect()
}

fn texts(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|event| event["type"] == "message.completed")
        .filter_map(|event| event["data"]["text"].as_str())
        .collect()
}

#[test]
fn chat_runs_tools_tasks_and_questions_from_a_pipe_and_continues_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let input = "greet {\"name\": \"Ada\"}\ndeploy {\"service\": \"api\"}\nconfirm {\"service\": \"web\"}\nyes\n";
    let first = events(&chat(dir.path(), &["--json"], input));
    let story = names(&first);
    for expected in
        ["turn.started", "task.started", "task.settled", "input.requested", "input.resolved", "turn.completed"]
    {
        assert!(story.contains(&expected), "no {expected} in {story:?}");
    }
    assert_eq!(story.iter().filter(|name| **name == "session.waiting").count(), 3, "three turns, each to the end");
    let said = texts(&first);
    assert!(said.contains(&"hello, Ada"), "{said:?}");
    assert!(said.iter().any(|text| text.contains("deployed api") && text.contains("<task_result")), "{said:?}");
    assert!(said.iter().any(|text| text.contains("web: confirmed")), "{said:?}");
    let sequences: Vec<u64> = first.iter().map(|event| event["sequence"].as_u64().unwrap()).collect();
    assert_eq!(sequences, (1..=sequences.len() as u64).collect::<Vec<_>>());

    // A new process continues the last session: its events number on from the first run's.
    let second = events(&chat(dir.path(), &["--json"], "greet {\"name\": \"Bo\"}\n"));
    assert_eq!(second[0]["sequence"].as_u64().unwrap(), sequences.len() as u64 + 1);
    assert_eq!(texts(&second), ["hello, Bo"]);

    // For a person: the text, and tasks as they start and settle.
    let human = chat(dir.path(), &[], "deploy {\"service\": \"db\"}\n");
    assert!(human.lines().any(|line| line.starts_with("… deploy-") && line.ends_with(" started")), "{human}");
    assert!(human.lines().any(|line| line.starts_with("✓ deploy-") && line.ends_with(" completed")), "{human}");

    // Without a tool name the demo model says how to use it.
    let help = texts(&events(&chat(dir.path(), &["--json"], "hi\n"))).join("");
    assert!(help.contains("This is the demo model") && help.contains("greet"), "{help}");
}
