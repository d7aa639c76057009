//! A session killed with SIGKILL mid-turn, with two tasks working, at every durability boundary
//! in turn: after the restart the turn completes, each task's result reaches the model exactly
//! once, no model step or task step whose result was recorded runs again, and each task's guarded
//! effect is applied once.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use eve_tools::store::{RunQuery, SqliteStore, Store};
use eve_tools::{Entry, RunStatus};

const WORKER: &str = env!("CARGO_BIN_EXE_session-crash-worker");

fn worker(dir: &Path, generation: u32, pause: Option<u32>) -> Child {
    let mut command = Command::new(WORKER);
    command.arg(dir).env("EVE_CRASH_GENERATION", generation.to_string());
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(pause) = pause {
        command.env("EVE_FAILPOINT_PAUSE", pause.to_string());
    }
    command.spawn().expect("the session crash worker starts")
}

/// Waits until the child reports that it paused at a failpoint (then it is still alive) or exits.
fn paused(child: &mut Child) -> bool {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (found, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let paused =
            BufReader::new(stderr).lines().map_while(Result::ok).any(|line| line.starts_with("eve-failpoint: paused"));
        let _ = found.send(paused);
    });
    receiver.recv_timeout(Duration::from_secs(120)).expect("the worker pauses or exits within two minutes")
}

/// Runs a worker to completion and returns the lines of the model's final answer, sorted (the
/// two results may arrive in either order after a crash).
fn finish(dir: &Path, generation: u32) -> Vec<String> {
    let output = worker(dir, generation, None).wait_with_output().expect("the worker runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "generation {generation} failed: {stderr}");
    let mut lines: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

/// What the store holds as done right now (the worker is dead): how many model steps of the
/// session completed, and the (part, step) pairs the tasks completed.
fn recorded(dir: &Path) -> (usize, BTreeSet<(u64, String)>) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(dir.join("eve.db")).expect("the store reopens after a kill");
        let mut model_steps = 0;
        let mut task_steps = BTreeSet::new();
        for summary in store.list_runs(&RunQuery::newest(100)).await.unwrap().runs {
            let record = store.load(&summary.id).await.unwrap().unwrap();
            let part = match &record.entries[0] {
                Entry::RunStarted { input, .. } => input.to_value().get("part").and_then(serde_json::Value::as_u64),
                _ => None,
            };
            for entry in &record.entries {
                if let Entry::StepCompleted { name, .. } = entry {
                    match part {
                        Some(part) => drop(task_steps.insert((part, name.to_string()))),
                        None if name == "session.model" => model_steps += 1,
                        None => {}
                    }
                }
            }
        }
        (model_steps, task_steps)
    })
}

/// Every line the worker's generation 2 logged.
fn second_generation(dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(dir.join("effects.log")).unwrap_or_default();
    log.lines().filter_map(|line| line.strip_prefix("2 ")).map(str::to_owned).collect()
}

fn check_restart(dir: &Path, expected: &[String], label: &str) {
    let (model_steps, task_steps) = recorded(dir);
    let output = finish(dir, 2);
    assert_eq!(output, expected, "{label}: the turn completes and the model saw each result exactly once");
    for line in second_generation(dir) {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[..] {
            ["model", step] => {
                let step: usize = step.parse().unwrap();
                assert!(step >= model_steps, "{label}: model step {step} was recorded, yet the model was called again");
            }
            [name @ ("compile" | "publish"), value, _attempt] => {
                let part =
                    if name == "compile" { value.parse().unwrap() } else { value.parse::<u64>().unwrap() / 1_000 };
                assert!(
                    !task_steps.contains(&(part, name.to_owned())),
                    "{label}: {name} of part {part} was recorded, yet executed again"
                );
            }
            _ => panic!("{label}: unexpected log line {line}"),
        }
    }
    let ledger = std::fs::read_dir(dir.join("ledger")).unwrap().count();
    assert_eq!(ledger, 2, "{label}: each task's guarded publish applied its effect exactly once");
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let tasks_done = runtime.block_on(async {
        let store = SqliteStore::open(dir.join("eve.db")).unwrap();
        let runs = store.list_runs(&RunQuery::newest(100)).await.unwrap().runs;
        runs.iter().filter(|run| run.tool == "build").all(|run| run.status == RunStatus::Completed)
    });
    assert!(tasks_done, "{label}: both tasks completed");
}

#[test]
fn a_session_killed_mid_turn_at_every_durability_boundary_completes_its_turn_once() {
    let baseline = tempfile::tempdir().unwrap();
    let expected = finish(baseline.path(), 1);
    assert_eq!(expected.len(), 2, "two result blocks: {expected:?}");
    let mut kill_points = 0;
    for boundary in 1.. {
        let dir = tempfile::tempdir().unwrap();
        let mut child = worker(dir.path(), 1, Some(boundary));
        if !paused(&mut child) {
            let status = child.wait().unwrap();
            assert!(status.success(), "without a crash the worker completes");
            break;
        }
        child.kill().expect("SIGKILL the paused worker");
        child.wait().unwrap();
        kill_points += 1;
        check_restart(dir.path(), &expected, &format!("killed at boundary {boundary}"));
    }
    eprintln!("killed and restarted the session at {kill_points} durability boundaries");
    assert!(kill_points >= 30, "a turn with two tasks crosses at least 30 durability boundaries, found {kill_points}");
}
