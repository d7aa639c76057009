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

    let (ok, _, _) = host(dir.path(), &["cancel", "run-2"]);
    assert!(ok);
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
