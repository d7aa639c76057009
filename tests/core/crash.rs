//! Crash tests: a real child process running steps, a sleep, a retried step, a hook and a question
//! is killed with SIGKILL at every durability boundary in turn (and at random instants), restarted,
//! and must finish with the expected output, without ever executing a step whose result was
//! already recorded, and applying its guarded effect once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use eve_tools::store::{SqliteStore, Store};
use eve_tools::{Entry, RunId};

const WORKER: &str = env!("CARGO_BIN_EXE_crash-worker");

/// Starts the worker on `dir` as generation `generation`, pausing at boundary `pause` if given.
fn worker(dir: &Path, generation: u32, pause: Option<u32>) -> Child {
    let mut command = Command::new(WORKER);
    command.arg(dir).env("EVE_CRASH_GENERATION", generation.to_string());
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(pause) = pause {
        command.env("EVE_FAILPOINT_PAUSE", pause.to_string());
    }
    command.spawn().expect("the crash worker starts")
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

/// Runs a worker to completion and returns what it printed.
fn finish(dir: &Path, generation: u32) -> String {
    let output = worker(dir, generation, None).wait_with_output().expect("the worker runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "generation {generation} failed: {stderr}");
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// The ops whose step completion is durable in the store right now (the worker is dead).
fn recorded_steps(dir: &Path) -> BTreeSet<u32> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(dir.join("eve.db")).expect("the store reopens after a kill");
        let run: RunId = "crash-run".parse().unwrap();
        let Some(record) = store.load(&run).await.unwrap() else { return BTreeSet::new() };
        let completed = record.entries.into_iter().filter_map(|entry| match entry {
            Entry::StepCompleted { op, .. } => Some(op.0),
            _ => None,
        });
        completed.collect()
    })
}

/// Every step execution the worker logged: (generation, op, step, attempt).
fn executions(dir: &Path) -> Vec<(u32, u32, String, u32)> {
    let log = std::fs::read_to_string(dir.join("effects.log")).unwrap_or_default();
    log.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            (fields[0].parse().unwrap(), fields[1].parse().unwrap(), fields[2].to_owned(), fields[3].parse().unwrap())
        })
        .collect()
}

fn check_restart(dir: &Path, recorded_before_restart: &BTreeSet<u32>, expected: &str, label: &str) {
    let output = finish(dir, 2);
    assert_eq!(output, expected, "{label}: the restarted run finishes with the expected output");
    let executions = executions(dir);
    for (generation, op, step, attempt) in &executions {
        let replayed = *generation == 2 && recorded_before_restart.contains(op);
        assert!(!replayed, "{label}: step {step} (op {op}, attempt {attempt}) was recorded, yet executed again");
    }
    let mut per_op: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, op, step, _) in &executions {
        if step != "flaky" {
            *per_op.entry(*op).or_default() += 1;
        }
    }
    assert_eq!(per_op.len(), 19, "{label}: every non-retried step executed");
    assert!(per_op.values().all(|count| *count <= 2), "{label}: at most once per process: {per_op:?}");
    let ledger: Vec<_> = std::fs::read_dir(dir.join("ledger")).unwrap().collect();
    assert_eq!(ledger.len(), 1, "{label}: the guarded transfer applied its effect exactly once");
}

#[test]
fn sigkill_at_every_durability_boundary() {
    let baseline = tempfile::tempdir().unwrap();
    let expected = finish(baseline.path(), 1);
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
        let recorded = recorded_steps(dir.path());
        check_restart(dir.path(), &recorded, &expected, &format!("killed at boundary {boundary}"));
    }
    eprintln!("killed and restarted at {kill_points} durability boundaries");
    assert!(kill_points >= 40, "the pipeline crosses at least 40 durability boundaries, found {kill_points}");
}

#[test]
fn repeated_sigkill_at_random_instants() {
    let baseline = tempfile::tempdir().unwrap();
    let expected = finish(baseline.path(), 1);
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ std::process::id() as u64;
    for round in 1..=8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = worker(dir.path(), 1, None);
        std::thread::sleep(Duration::from_millis(5 + seed % 60));
        child.kill().expect("SIGKILL the worker");
        let status = child.wait().unwrap();
        if status.success() {
            eprintln!("round {round}: the worker finished before the kill");
        }
    }
    let recorded = recorded_steps(dir.path());
    let output = finish(dir.path(), 2);
    assert_eq!(output, expected, "after repeated kills the run finishes with the expected output");
    let re_executed =
        executions(dir.path()).into_iter().any(|(generation, op, _, _)| generation == 2 && recorded.contains(&op));
    assert!(!re_executed, "no recorded step executed again after the kills");
    assert_eq!(std::fs::read_dir(dir.path().join("ledger")).unwrap().count(), 1);
}
