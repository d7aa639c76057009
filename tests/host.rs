//! The host CLI, driven as a person drives it: the manifest as JSON, calls, listings, journals,
//! and one-sentence errors with a non-zero exit code.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn host(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(args)
        .env("EVE_DATA_DIR", dir)
        .output()
        .expect("the host binary runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8 output");
    (output.status.success(), text(output.stdout), text(output.stderr))
}

#[test]
fn the_manifest_lists_every_tool_with_its_shape_and_every_step_with_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, _) = host(dir.path(), &["manifest"]);
    assert!(ok);
    let manifest: Value = serde_json::from_str(&stdout).unwrap();
    let all = manifest["tools"].as_array().unwrap();
    let names: Vec<_> = all.iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ask_question", "greet", "greet_durably", "greet_later", "sleep"], "sorted by name");
    assert_eq!(all[0]["shape"], json!({ "lifetime": "step", "suspend": "workflow" }), "the provided ask_question");
    let tools = &all[1..4];
    assert_eq!(tools[0]["shape"], json!({ "lifetime": "step", "suspend": "none" }));
    assert_eq!(tools[1]["shape"], json!({ "lifetime": "step", "suspend": "workflow" }));
    assert_eq!(tools[2]["shape"], json!({ "lifetime": "task", "suspend": "workflow" }));
    assert_eq!(tools[2]["entry"], "task");
    assert_eq!(tools[1]["description"], "Greet someone durably: the greeting is composed in a step.");
    assert_eq!(tools[1]["workflow_id"], "host::greet_durably");
    assert_eq!(tools[0]["input_schema"]["properties"]["name"]["type"], "string");
    assert_eq!(tools[0]["input_schema"]["required"], json!(["name"]));
    let step = &manifest["steps"][0];
    assert_eq!(step["id"], "host::compose");
    assert_eq!((step["max_attempts"].as_u64(), step["backoff_initial_ms"].as_u64()), (Some(4), Some(250)));
}

#[test]
fn calls_runs_and_journals_survive_between_invocations() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, _) = host(dir.path(), &["call", "greet", r#"{"name":"Ada"}"#]);
    assert!(ok);
    assert_eq!(stdout.trim(), r#""hello, Ada""#);

    let (ok, stdout, _) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Grace"}"#, "--id", "run-1"]);
    assert!(ok);
    assert_eq!(stdout.trim(), r#""hello, Grace""#);

    let (ok, stdout, _) = host(dir.path(), &["call", "greet_later", r#"{"name":"Alan"}"#, "--id", "run-2"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-2 is parked on a durable wait; `serve` keeps it moving");

    let (ok, stdout, _) = host(dir.path(), &["runs"]);
    assert!(ok);
    let lines: Vec<_> = stdout.lines().collect();
    assert!(lines[0].starts_with("run-2  active") && lines[1].starts_with("run-1  completed"), "{stdout}");

    let (ok, stdout, _) = host(dir.path(), &["inspect", "run-1"]);
    assert!(ok);
    assert!(stdout.contains(r#"op 0: step compose returned "hello, Grace" (attempt 1)"#), "{stdout}");

    let (ok, stdout, stderr) = host(dir.path(), &["cancel", "run-2"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "run run-2 cancelled; its cleanup ran");
    let (ok, stdout, _) = host(dir.path(), &["cancel", "run-1"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-1 had already completed; nothing changed");
}

#[test]
fn mistakes_get_one_clear_sentence_and_a_failing_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["call", "nope"],
            "error: no tool named `nope`; this binary has: ask_question, greet, greet_durably, greet_later, sleep",
        ),
        (&["call", "greet", "{name: Ada}"], "error: the input is not valid JSON (key must be a string"),
        (&["call", "greet", r#"{"nom":"Ada"}"#], "error: invalid input for tool `greet`: missing field `name`"),
        (&["inspect", "no-such-run"], "error: no run with id no-such-run; list runs to see the ids this store holds"),
        (
            &["runs", "--status", "sleeping"],
            "error: unknown status `sleeping`; use active, completed, failed or cancelled",
        ),
    ];
    for (args, expected) in cases {
        let (ok, _, stderr) = host(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
}

/// A question asked by a run started from the command line is listed, answered and followed to
/// the run's output from later invocations; answers that do not fit are refused.
#[test]
fn questions_are_listed_and_answered_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let question = json!({
        "prompt": "Ship it?",
        "options": [{ "id": "ship", "label": "Ship", "description": "to production" }, { "id": "wait", "label": "Wait" }],
    });
    let (ok, stdout, stderr) = host(dir.path(), &["call", "ask_question", &question.to_string(), "--id", "run-q"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("run run-q is parked on a durable wait"), "{stdout}");
    assert!(stdout.contains("ask-0  Ship it?"), "the parked call shows the question: {stdout}");

    let (ok, stdout, _) = host(dir.path(), &["questions", "run-q"]);
    assert!(ok);
    assert!(stdout.contains("ask-0  Ship it?"), "{stdout}");
    assert!(stdout.contains("--option ship") && stdout.contains("Ship (to production)"), "{stdout}");
    assert!(stdout.contains("answer with: answer run-q ask-0 --option <id>"), "{stdout}");

    let refused: [(&[&str], &str); 4] = [
        (&["answer", "run-q", "ask-0"], "error: the answer is empty: give --option <id>, --text '...', or both"),
        (&["answer", "run-q", "ask-0", "--option", "later"], "error: `option_id` \"later\" is not one of"),
        (&["answer", "run-q", "ask-0", "--text", "sure"], "error: `text` is not accepted"),
        (&["answer", "run-q", "ask-9", "--option", "ship"], "error: run run-q has no open question ask-9"),
    ];
    for (args, expected) in refused {
        let (ok, _, stderr) = host(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }

    let (ok, stdout, stderr) = host(dir.path(), &["answer", "run-q", "ask-0", "--option", "ship"]);
    assert!(ok, "{stderr}");
    let output: Value = serde_json::from_str(stdout.trim()).expect("the run's output is printed");
    assert_eq!(output, json!({ "status": "answered", "option_id": "ship" }));

    let (ok, stdout, _) = host(dir.path(), &["questions", "run-q"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-q has no open questions");
    let (ok, _, stderr) = host(dir.path(), &["answer", "run-q", "ask-0", "--option", "ship"]);
    assert!(!ok && stderr.starts_with("error: run run-q has no open question ask-0"), "answered once: {stderr}");
}
