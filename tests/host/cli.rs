//! The host CLI, driven as a person drives it: the manifest as JSON, calls, listings, journals,
//! and one-sentence errors with a non-zero exit code.

use crate::host;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

#[test]
fn the_manifest_lists_every_tool_with_its_shape_and_every_step_with_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, _) = host(dir.path(), &["manifest"]);
    assert!(ok);
    let manifest: Value = serde_json::from_str(&stdout).unwrap();
    let all = manifest["tools"].as_array().unwrap();
    let names: Vec<_> = all.iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    let expected = [
        "ask_question",
        "await_approval",
        "fail_on_purpose",
        "greet",
        "greet_durably",
        "greet_later",
        "plan_release",
        "sleep",
        "tally_votes",
        "write_note",
    ];
    assert_eq!(names, expected, "sorted by name");
    assert_eq!(all[0]["shape"], json!({ "lifetime": "step", "suspend": "workflow" }), "the provided ask_question");
    let tools = &all[3..6];
    assert_eq!(tools[0]["shape"], json!({ "lifetime": "step", "suspend": "none" }));
    assert_eq!(tools[1]["shape"], json!({ "lifetime": "step", "suspend": "workflow" }));
    assert_eq!(tools[2]["shape"], json!({ "lifetime": "task", "suspend": "workflow" }));
    assert_eq!(
        (&tools[0]["entry"], &tools[1]["entry"], &tools[2]["entry"]),
        (&json!("execute"), &json!("execute"), &json!("task"))
    );
    assert_eq!(tools[1]["description"], "Greet someone durably: the greeting is composed in a step.");
    assert_eq!(
        tools[2]["description"],
        "Greet someone after a long durable wait: an hour passes before the greeting is composed.\n\nThe wait survives restarts.",
        "hard-wrapped lines are unwrapped; paragraphs stay"
    );
    assert_eq!(tools[1]["workflowId"], "host::greet_durably");
    assert_eq!(tools[0]["inputSchema"]["properties"]["name"]["type"], "string");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["name"]));
    let step = &manifest["steps"][0];
    assert_eq!(
        step,
        &json!({ "id": "host::compose", "name": "compose", "maxAttempts": 4, "backoff": { "initialMs": 250, "factor": 2 } })
    );
}

/// The column each header word starts at, in a table's header line.
fn columns(header: &str) -> Vec<usize> {
    header.split_whitespace().map(|word| header.find(word).unwrap()).collect()
}

#[test]
fn calls_runs_and_journals_survive_between_invocations() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, _) = host(dir.path(), &["call", "greet", r#"{"name":"Ada"}"#]);
    assert!(ok);
    assert_eq!(stdout.trim(), r#""hello, Ada""#);

    let (ok, stdout, stderr) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Grace"}"#, "--id", "run-1"]);
    assert!(ok);
    assert_eq!(stdout.trim(), r#""hello, Grace""#);
    assert_eq!(stderr, "  step compose: done\n", "each step as the journal records it, on stderr");

    let (ok, stdout, _) = host(dir.path(), &["call", "greet_later", r#"{"name":"Alan"}"#, "--id", "run-2"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-2 is parked on a durable wait; `serve` keeps it moving");

    let (ok, stdout, _) = host(dir.path(), &["runs"]);
    assert!(ok);
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two runs: {stdout}");
    let header = ["RUN", "STATUS", "TOOL", "BUILD", "ENTRIES", "CREATED"];
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), header);
    let at = columns(lines[0]);
    for line in &lines[1..] {
        let cells: Vec<_> = line.split_whitespace().collect();
        assert_eq!(cells.len(), 6, "{line}");
        for (cell, column) in
            [(cells[0], at[0]), (cells[1], at[1]), (cells[2], at[2]), (cells[3], at[3]), (cells[5], at[5])]
        {
            assert_eq!(line.find(cell), Some(column), "`{cell}` is aligned under its header: {stdout}");
        }
        assert!(cells[3].contains('@'), "the build, as version@fingerprint: {line}");
        assert!(cells[5].ends_with('Z') && cells[5].contains('T'), "an ISO 8601 time: {line}");
    }
    assert!(lines[1].starts_with("run-2") && lines[1].contains(" parked "), "parked apart from running: {stdout}");
    assert!(lines[2].starts_with("run-1") && lines[2].contains(" completed "), "{stdout}");

    let (ok, stdout, _) = host(dir.path(), &["inspect", "run-1"]);
    assert!(ok);
    assert!(stdout.contains(r#"op 0: step compose returned "hello, Grace" (attempt 1)"#), "{stdout}");

    let (ok, stdout, stderr) = host(dir.path(), &["cancel", "run-2"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "run run-2 cancelled; its cleanup ran");
    let (ok, stdout, _) = host(dir.path(), &["cancel", "run-1"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-1 had already completed; nothing changed");
    let (ok, stdout, _) = host(dir.path(), &["runs", "--status", "parked"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "no parked runs");
}

#[test]
fn mistakes_get_one_clear_sentence_and_a_failing_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Ada"}"#, "--id", "taken"]);
    assert!(ok, "{stderr}");
    let cases: [(&[&str], &str); 9] = [
        (&["call", "greet_latr"], "error: no tool named `greet_latr` (did you mean `greet_later`?); this binary has: "),
        (
            &["call", "nope"],
            "error: no tool named `nope`; this binary has: ask_question, await_approval, fail_on_purpose, greet, \
             greet_durably, greet_later, plan_release, sleep, tally_votes, write_note. A library's tools are in a \
             binary only if the binary links the library: name it in the host with `eve_tools::tools!(my_tools)`",
        ),
        (&["call", "greet", "{name: Ada}"], "error: the input is not valid JSON (key must be a string"),
        (
            &["call", "greet", r#"{"nom":"Ada"}"#],
            "error: invalid input for tool `greet`: the input has a field `nom` that the tool does not take; remove it \
             (the tool takes `name`)",
        ),
        (
            &["call", "greet_durably", r#"{"name":"Grace"}"#, "--id", "taken"],
            "error: run id `taken` is taken by a run of `greet_durably` with another input; give another --id, or none",
        ),
        (
            &["call", "greet_later", r#"{"name":"Ada"}"#, "--id", "taken"],
            "error: run id `taken` is taken by a run of `greet_durably`, not `greet_later`; give another --id, or none",
        ),
        (&["call", "fail_on_purpose", "--id", "failing"], "error: run failing failed: the warehouse is closed\n"),
        (&["inspect", "no-such-run"], "error: no run with id no-such-run; list runs to see the ids this store holds"),
        (
            &["runs", "--status", "sleeping"],
            "error: unknown status `sleeping`; use active, parked, running, completed, failed, cancelled or held",
        ),
    ];
    for (args, expected) in cases {
        let (ok, _, stderr) = host(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains(" { "), "{args:?}: no Debug output: {stderr}");
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
        (
            &["answer", "run-q", "ask-0"],
            "error: the answer is empty: give --option <id>, --text '...', --json '{...}' for a form or a completion, or \
             --decline",
        ),
        (
            &["answer", "run-q", "ask-0", "--option", "later"],
            "error: --option \"later\" is not one of the question's options: ship, wait",
        ),
        (
            &["answer", "run-q", "ask-0", "--text", "sure"],
            "error: --text is not accepted: this question takes one of its options",
        ),
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
    assert_eq!(output, json!({ "status": "answered", "optionId": "ship" }));

    let (ok, stdout, _) = host(dir.path(), &["questions", "run-q"]);
    assert!(ok);
    assert_eq!(stdout.trim(), "run run-q has no open questions");
    let (ok, _, stderr) = host(dir.path(), &["answer", "run-q", "ask-0", "--option", "ship"]);
    assert!(!ok && stderr.starts_with("error: run run-q has no open question ask-0"), "answered once: {stderr}");

    let text = json!({ "prompt": "Why?" }).to_string();
    let (ok, _, stderr) = host(dir.path(), &["call", "ask_question", &text, "--id", "run-t"]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = host(dir.path(), &["answer", "run-t", "ask-0", "--option", "yes"]);
    assert!(!ok);
    assert!(
        stderr.starts_with("error: --option is not accepted: this question takes text; answer with --text"),
        "{stderr}"
    );
}

/// A form is listed with its fields and answered with `--json`; a value that does not fit is
/// refused naming the field, and `--decline` declines it.
#[test]
fn forms_are_answered_with_json_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "plan_release", "--id", "run-f"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("ask-0  Release what?"), "{stdout}");
    let (ok, stdout, _) = host(dir.path(), &["questions", "run-f"]);
    assert!(ok);
    assert!(stdout.contains("--json with the fields:"), "{stdout}");
    assert!(stdout.contains("replicas     integer, default 2  How many replicas."), "{stdout}");
    assert!(stdout.contains("version      string, required  The version to release."), "{stdout}");
    assert!(stdout.contains("answer with: answer run-f ask-0 --json '{...}' (or --decline)"), "{stdout}");

    let refused: [(&[&str], &str); 3] = [
        (
            &["answer", "run-f", "ask-0", "--json", r#"{"replicas": 3}"#],
            "error: --json does not fit the form: field `version` is required",
        ),
        (&["answer", "run-f", "ask-0", "--json", "{version"], "error: the value (--json) is not valid JSON"),
        (
            &["answer", "run-f", "ask-0", "--text", "1.2"],
            "error: this question is a form: answer with --json '{...}', an object of its fields",
        ),
    ];
    for (args, expected) in refused {
        let (ok, _, stderr) = host(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
    let (ok, stdout, stderr) = host(dir.path(), &["answer", "run-f", "ask-0", "--json", r#"{"version": "1.2"}"#]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "\"releasing 1.2 on 2 replicas\"");

    let (ok, _, stderr) = host(dir.path(), &["call", "plan_release", "--id", "run-d"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["answer", "run-d", "ask-0", "--decline"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "\"not releasing: declined\"");
}

/// A request for the client's model is listed as what it sends the model (system prompt,
/// messages, token limit) with the completion's shape, and answered with `--json` holding a
/// completion; anything else is refused saying what a completion is, and `--decline` declines it.
/// Seen failing: `questions` offered `--text '...'`, which the runtime refuses for a completion.
#[test]
fn a_request_for_the_clients_model_is_answered_with_a_completion_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "write_note", r#"{"topic": "the launch"}"#, "--id", "run-s"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("ask-0  A completion from the client's model for: Write a note about the launch."),
        "{stdout}"
    );
    let (ok, stdout, _) = host(dir.path(), &["questions", "run-s"]);
    assert!(ok);
    let shape = r#"{"role": "assistant", "content": {"type": "text", "text": "..."}, "model": "..."}"#;
    for line in [
        "    system: Be brief.".to_owned(),
        "    user: Write a note about the launch.".to_owned(),
        "    at most 200 tokens".to_owned(),
        format!("    --json with the completion: {shape}"),
        format!("answer with: answer run-s ask-0 --json '{shape}' (or --decline)"),
    ] {
        assert!(stdout.lines().any(|shown| shown == line), "{line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("--text"), "a completion is not typed text: {stdout}");

    let refused: [(&[&str], String); 3] = [
        (
            &["answer", "run-s", "ask-0", "--text", "Launch is Monday."],
            format!("error: this request is for the client's model: answer with --json '{shape}', its completion"),
        ),
        (
            &["answer", "run-s", "ask-0", "--json", r#"{"role": "assistant", "model": "me"}"#],
            "error: --json is not a completion: missing field `content`".to_owned(),
        ),
        (
            &[
                "answer",
                "run-s",
                "ask-0",
                "--json",
                r#"{"role": "assistant", "content": {"type": "txt"}, "model": "m"}"#,
            ],
            "error: --json is not a completion at `content.type`: unknown variant `txt`".to_owned(),
        ),
    ];
    for (args, expected) in refused {
        let (ok, _, stderr) = host(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.starts_with(&expected), "{args:?}: {stderr}");
    }
    let completion =
        r#"{"role": "assistant", "content": {"type": "text", "text": "Launch is Monday."}, "model": "ada"}"#;
    let (ok, stdout, stderr) = host(dir.path(), &["answer", "run-s", "ask-0", "--json", completion]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "\"Launch is Monday. (by ada)\"");

    let (ok, _, stderr) = host(dir.path(), &["call", "write_note", r#"{"topic": "x"}"#, "--id", "run-d"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["answer", "run-d", "ask-0", "--decline"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "\"no note: declined\"");
}

/// `resume-hook` follows the run as `answer` does, and `inspect` shows deliveries the run has not
/// taken yet.
#[tokio::test]
async fn a_hook_is_resumed_and_its_pending_deliveries_inspected_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "await_approval", "--id", "run-h"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("run run-h is parked"), "{stdout}");

    // A delivery the run has not taken: accepted by the store while no process runs the run.
    {
        use eve_tools::store::{DeliveryPayload, SqliteStore, Store, Target};
        let store = SqliteStore::open(dir.path().join("eve.db")).unwrap();
        let target = Target::Hook(eve_tools::secret::TokenHash::of("approve-run-h"));
        store.deliver(target, None, DeliveryPayload::Hook(json!({ "by": "Ada" }))).await.unwrap();
    }
    let (ok, stdout, _) = host(dir.path(), &["inspect", "run-h"]);
    assert!(ok);
    assert!(stdout.contains("1 delivery waiting"), "{stdout}");
    assert!(stdout.contains(r#"op 0: hook payload {"by":"Ada"}"#), "{stdout}");

    let (ok, stdout, stderr) = host(dir.path(), &["resume-hook", "approve-run-h", r#"{"by":"Grace"}"#]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), r#""approved by Ada""#, "the run took the waiting delivery first and finished");
    let (ok, stdout, _) = host(dir.path(), &["inspect", "run-h"]);
    assert!(ok);
    assert!(!stdout.contains("waiting"), "{stdout}");

    let (ok, _, stderr) = host(dir.path(), &["resume-hook", "approve-run-h", r#"{"by":"Grace"}"#]);
    assert!(!ok && stderr.starts_with("error: no open hook has this token"), "{stderr}");
}

/// `resume-hook --idempotency-key` delivers once: the same command with the same key again,
/// as after a write whose outcome was unknown, says the run had it already and succeeds, as HTTP
/// answers a repeated `Idempotency-Key`; another key delivers again.
#[test]
fn a_hook_payload_with_an_idempotency_key_is_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "tally_votes", "--id", "run-v"]);
    assert!(ok && stdout.contains("run run-v is parked"), "{stdout}{stderr}");
    let vote = ["resume-hook", "votes-run-v", r#"{"vote":"yes"}"#, "--idempotency-key", "ballot-1"];
    let (ok, stdout, stderr) = host(dir.path(), &vote);
    assert!(ok && stdout.contains("run run-v is parked"), "the first delivery is taken in: {stdout}{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &vote);
    assert!(ok, "a repeated key is not an error: {stderr}");
    assert_eq!(stdout.trim(), "run run-v had this delivery already; nothing changed");
    let (ok, stdout, stderr) =
        host(dir.path(), &["resume-hook", "votes-run-v", r#"{"vote":"no"}"#, "--idempotency-key", "ballot-2"]);
    assert!(ok && stdout.contains("parked"), "{stdout}{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["resume-hook", "votes-run-v", r#"{"done":true}"#]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), r#"["yes","no"]"#, "the repeated vote was counted once");
}

/// A `host serve` child with its output read line by line.
struct Serving {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Serving {
    fn start(dir: &Path) -> Serving {
        let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .env("EVE_DATA_DIR", dir)
            .env_remove("EVE_API_KEY")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, lines) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| sender.send(line)));
        Serving { child, lines }
    }

    fn line(&self) -> String {
        self.lines.recv_timeout(Duration::from_secs(30)).expect("the server prints a line")
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve` says what it serves and, stopped by SIGTERM, drains and says goodbye; while it runs,
/// read-only commands still read the store, and a command that writes says to use the HTTP API
/// instead.
#[test]
fn serve_says_what_it_serves_and_read_only_commands_work_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_later", r#"{"name":"Alan"}"#, "--id", "run-1"]);
    assert!(ok, "{stderr}");

    let mut serving = Serving::start(dir.path());
    let mut banner = Vec::new();
    while banner.last().is_none_or(|line: &String| !line.contains("Ctrl-C")) {
        banner.push(serving.line());
    }
    let banner = banner.join("\n");
    assert!(
        banner.contains("recovered 1 unfinished run;") || banner.contains("recovered 1 unfinished run "),
        "{banner}"
    );
    assert!(banner.contains("serving http://127.0.0.1:"), "{banner}");
    for route in [
        "GET /ui ",
        "/v1/tools ",
        "/v1/tools/{tool}/runs",
        "GET /v1/runs ",
        "/v1/runs/{run}/timeline",
        "/v1/events",
        "/.well-known/workflow/v1/webhook/{token}",
    ] {
        assert!(banner.contains(route), "{route} in {banner}");
    }
    let first = banner.lines().nth(banner.lines().position(|line| line.starts_with("serving")).unwrap() + 1);
    assert!(first.is_some_and(|line| line.contains("/ui")), "the inspector is listed first: {banner}");
    assert!(banner.contains("no key is required"), "{banner}");

    let (ok, stdout, stderr) = host(dir.path(), &["runs"]);
    assert!(ok, "runs reads the store while serve runs: {stderr}");
    assert!(stdout.contains("run-1") && stdout.starts_with("RUN"), "{stdout}");
    let (ok, stdout, stderr) = host(dir.path(), &["runs", "--status", "parked"]);
    assert!(ok && stdout.contains("run-1"), "{stdout}{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["runs", "--status", "held"]);
    assert!(ok && stdout.trim() == "no held runs", "this build holds none: {stdout}{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["inspect", "run-1"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("sleep until"), "{stdout}");
    let (ok, _, stderr) = host(dir.path(), &["inspect", "run-2"]);
    assert!(!ok && stderr.starts_with("error: no run with id run-2"), "{stderr}");
    let (ok, _, stderr) = host(dir.path(), &["manifest"]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = host(dir.path(), &["cancel", "run-1"]);
    assert!(!ok && stderr.contains("`serve`") && stderr.contains("HTTP"), "a write says what to do instead: {stderr}");

    let pid = serving.child.id().to_string();
    // SIGTERM, as a service manager or an orchestrator stops it: the runs under way park first.
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(serving.line(), "stopped: every run under way parked; goodbye");
    assert!(serving.child.wait().unwrap().success(), "a drained server exits 0");
}

/// `serve` prints each run that finishes in one line with its outcome: the result as compact JSON
/// (cut short with an ellipsis when long), a failure's message, or that it was cancelled.
#[tokio::test]
async fn serve_prints_each_finished_run_with_its_outcome_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let serving = Serving::start(dir.path());
    let mut base = None;
    while base.is_none() {
        let line = serving.line();
        base = line.strip_prefix("serving ").map(str::to_owned);
    }
    let base = base.unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let start = |tool: &str, body: Value| {
        let request = client.post(format!("{base}/v1/tools/{tool}/runs")).json(&body);
        async move { assert_eq!(request.send().await.unwrap().status(), 201) }
    };
    let long = "a".repeat(400);
    start("greet_durably", json!({ "runId": "short", "input": { "name": "Ada" } })).await;
    start("greet_durably", json!({ "runId": "long", "input": { "name": long } })).await;
    start("fail_on_purpose", json!({ "runId": "broken", "input": {} })).await;
    start("greet_later", json!({ "runId": "called-off", "input": { "name": "Alan" } })).await;
    let cancelled = client.post(format!("{base}/v1/runs/called-off/cancel")).send().await.unwrap();
    assert_eq!(cancelled.status(), 202);

    let mut finished = std::collections::BTreeMap::new();
    while finished.len() < 4 {
        let line = serving.line();
        if let Some(rest) = line.strip_prefix("run ") {
            let (run, outcome) = rest.split_once(' ').unwrap();
            finished.insert(run.to_owned(), outcome.to_owned());
        }
    }
    assert_eq!(finished["short"], r#"completed: "hello, Ada""#);
    let cut = &finished["long"];
    assert!(cut.starts_with(r#"completed: "hello, aaaa"#) && cut.ends_with('…'), "{cut}");
    assert!(cut.chars().count() < 230, "a long result is cut short: {cut}");
    assert_eq!(finished["broken"], "failed: the warehouse is closed");
    assert_eq!(finished["called-off"], "cancelled");
}

/// `export` writes a parked run's journal; `replay` checks it (and `--store` every unfinished run)
/// against this binary's tools, and fails, naming the op, when the code no longer matches.
#[test]
fn export_and_replay_check_a_build_against_the_runs_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_later", r#"{"name":"Ada"}"#, "--id", "later-1"]);
    assert!(ok, "{stderr}");
    let file = dir.path().join("later-1.journal.json");
    let (ok, _, stderr) = host(dir.path(), &["export", "later-1", "--out", file.to_str().unwrap()]);
    assert!(ok && stderr.contains("wrote the journal of later-1"), "{stderr}");
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!((exported["eveJournal"].as_u64(), exported["tool"].as_str()), (Some(1), Some("greet_later")));

    let (ok, stdout, stderr) = host(dir.path(), &["replay", file.to_str().unwrap()]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("later-1 (greet_later): replays cleanly"), "{stdout}");
    let (ok, stdout, stderr) = host(dir.path(), &["replay", "--store", "--json"]);
    assert!(ok, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!((report["run"].as_str(), report["verdict"].as_str()), (Some("later-1"), Some("replays")));
    // The run recorded the build that started it, and the text groups runs by it.
    let fingerprint = report["build"]["fingerprint"].as_str().expect("the report carries the run's build").to_owned();
    assert_eq!(fingerprint.len(), 16, "{report}");
    assert_eq!(report["build"]["version"], env!("CARGO_PKG_VERSION"));
    let (ok, stdout, stderr) = host(dir.path(), &["replay", "--store"]);
    assert!(ok, "{stdout}{stderr}");
    let header = format!(
        "greet_later (1 run started by build {} (body {fingerprint}): the same body as this build):",
        env!("CARGO_PKG_VERSION")
    );
    assert!(stdout.contains(&header), "{stdout}");
    let (ok, stdout, stderr) = host(dir.path(), &["inspect", "later-1"]);
    assert!(ok && stdout.contains(&format!("body fingerprint {fingerprint}")), "{stdout}{stderr}");

    // The same journal, as if a later build had changed what the tool does first.
    let mut changed = exported.clone();
    changed["entries"][0]["run_started"]["workflow_id"] = json!("host::greet_durably");
    let changed_file = dir.path().join("changed.journal.json");
    std::fs::write(&changed_file, changed.to_string()).unwrap();
    let (ok, stdout, stderr) = host(dir.path(), &["replay", file.to_str().unwrap(), changed_file.to_str().unwrap()]);
    assert!(!ok, "a divergence fails the command");
    assert!(stdout.contains("replays cleanly") && stdout.contains("DIVERGES") && stdout.contains("op 0"), "{stdout}");
    assert!(stderr.contains("error: 1 of 2 journal files would not replay on this build"), "{stderr}");

    let (ok, _, stderr) = host(dir.path(), &["replay", dir.path().join("missing.json").to_str().unwrap()]);
    assert!(!ok && stderr.contains("cannot read the journal file"), "{stderr}");
}

/// `inspect` shows a timeline: each op with where it stands, what the run waits for (ISO 8601
/// deadlines, and how far they are), and `--at` the same as of an earlier entry; `--json` gives it
/// to scripts.
#[test]
fn inspect_shows_a_timeline_and_travels_back_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_later", r#"{"name":"Ada"}"#, "--id", "later-2"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = host(dir.path(), &["inspect", "later-2"]);
    assert!(ok, "{stderr}");
    let waiting = stdout.lines().skip_while(|line| *line != "waiting for:").nth(1).expect("a wait");
    assert!(waiting.starts_with("  op 0: a timer, until 20") && waiting.contains("Z (in 59m"), "{stdout}");
    let op = stdout.lines().skip_while(|line| *line != "timeline:").nth(1).expect("an op");
    let words: Vec<&str> = op.split_whitespace().collect();
    assert_eq!(words[..5], ["op", "0", "sleep", "sleep", "open"], "{stdout}");

    let (ok, stdout, stderr) = host(dir.path(), &["inspect", "later-2", "--at", "0", "--json"]);
    assert!(ok, "{stderr}");
    let view: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(view["timeline"]["at"], 0);
    assert_eq!(view["timeline"]["ops"], json!([]), "nothing was asked for before entry 1");
    assert_eq!(view["journal"].as_array().unwrap().len(), 1);
    let (ok, stdout, _) = host(dir.path(), &["inspect", "later-2", "--json"]);
    assert!(ok);
    let view: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(view["timeline"]["status"], "parked");
    assert_eq!((view["run"]["runId"].as_str(), view["run"]["status"].as_str()), (Some("later-2"), Some("parked")));
    let deadline = view["timeline"]["ops"][0]["deadline"].as_str().unwrap();
    assert!(deadline.ends_with('Z') && deadline.contains('T'), "ISO 8601: {deadline}");

    let (ok, _, stderr) = host(dir.path(), &["inspect", "later-2", "--at", "99"]);
    assert!(!ok && stderr.contains("give --at one of them"), "{stderr}");
}

/// `call` follows a run that waits only on its own timer to its end and prints the result; given
/// less `--wait` than the timer needs, or a run that waits on a person, it reports the run parked
/// with what moves it.
#[test]
fn call_waits_out_a_runs_own_timers_within_its_wait() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "sleep", r#"{"seconds":1}"#]);
    assert!(ok, "{stderr}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "the sleep ran its course");
    assert!(stdout.contains("Slept 1 second."), "the result is printed: {stdout}");
    assert!(!stdout.contains("parked"), "{stdout}");

    let (ok, stdout, stderr) = host(dir.path(), &["call", "sleep", r#"{"seconds":30}"#, "--wait", "1s"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("is parked on a durable wait"), "30 s is past the wait: {stdout}");

    let question = r#"{"prompt":"Ship it?","options":[{"id":"ship","label":"Ship"}]}"#;
    let started = std::time::Instant::now();
    let (ok, stdout, stderr) = host(dir.path(), &["call", "ask_question", question]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("is parked on a durable wait") && stdout.contains("Ship it?"), "{stdout}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "a question is not waited for");
}

/// A data folder that is a file is named as the problem, with no advice about `serve`, which has
/// nothing to do with it.
#[test]
fn a_data_folder_that_is_a_file_is_named_as_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "not a folder").unwrap();
    for args in [&["runs"][..], &["call", "sleep", r#"{"seconds":1}"#]] {
        let (ok, _, stderr) = host(&file, args);
        assert!(!ok, "{args:?}");
        assert!(stderr.contains(&format!("{} is a file, not a folder", file.display())), "{args:?}: {stderr}");
        assert!(!stderr.contains("serve"), "{args:?}: no advice about serve: {stderr}");
    }
}

/// Runs the host binary as [`host`] does on the data folder `dir`, with `read_only` (the folder,
/// or a file in it) readable but not writable: in a mount namespace of its own where `read_only`
/// is bound read-only when this runs as root (root writes through any file mode), else with its
/// write bits cleared, restored after.
fn host_read_only(dir: &Path, read_only: &Path, args: &[&str]) -> (bool, String, String) {
    let root = Command::new("id").arg("-u").output().is_ok_and(|id| id.stdout.starts_with(b"0\n"));
    let output = if root {
        let bind = r#"mount --bind -o ro "$0" "$0" && exec "$@""#;
        Command::new("unshare")
            .args(["-m", "sh", "-c", bind])
            .arg(read_only)
            .arg(env!("CARGO_BIN_EXE_host"))
            .args(args)
            .env("EVE_DATA_DIR", dir)
            .output()
            .expect("unshare runs (a read-only bind mount needs it when the tests run as root)")
    } else {
        let chmod =
            |mode: &str| assert!(Command::new("chmod").args(["-R", mode]).arg(read_only).status().unwrap().success());
        chmod("a-w");
        let output = Command::new(env!("CARGO_BIN_EXE_host")).args(args).env("EVE_DATA_DIR", dir).output();
        chmod("u+w");
        output.expect("the host binary runs")
    };
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8 output");
    (output.status.success(), text(output.stdout), text(output.stderr))
}

/// A data folder, or a store file, this process may not write is named as read-only, with what to
/// do about it, not as SQLite's "attempt to write a readonly database"; the commands that only
/// read still read.
#[test]
fn a_read_only_store_says_so_and_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = host(dir.path(), &["call", "greet_durably", r#"{"name":"Ada"}"#, "--id", "run-1"]);
    assert!(ok, "{stderr}");

    let file = dir.path().join("eve.db");
    for read_only in [dir.path(), file.as_path()] {
        let (ok, _, stderr) = host_read_only(dir.path(), read_only, &["call", "greet_durably", r#"{"name":"Grace"}"#]);
        assert!(!ok, "a write fails");
        let named = format!("{} is read-only", read_only.display());
        assert!(stderr.contains(&named), "{named:?} in {stderr}");
        assert!(stderr.contains("--data-dir") && stderr.contains("EVE_DATA_DIR"), "what to do: {stderr}");
        assert!(!stderr.contains("readonly database") && !stderr.contains("serve"), "{stderr}");

        let (ok, stdout, stderr) = host_read_only(dir.path(), read_only, &["runs"]);
        assert!(ok, "runs reads a read-only store: {stderr}");
        assert!(stdout.contains("run-1"), "{stdout}");
        let (ok, stdout, stderr) = host_read_only(dir.path(), read_only, &["inspect", "run-1"]);
        assert!(ok, "{stderr}");
        assert!(stdout.contains(r#"returned "hello, Ada""#), "{stdout}");
    }
}
