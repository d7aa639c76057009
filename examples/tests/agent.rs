//! The README's main job, `cargo run --example agent`, run three times as a new user runs it: the
//! first process leaves turn 1 waiting on a durable timer, the second finishes it and asks the
//! researcher subagent a follow-up it remembers, the third reads the feed back from the journal.

use std::path::PathBuf;
use std::process::Command;

/// The example's binary, which `cargo test` (or `scripts/test.sh`) builds beside this test.
fn example() -> PathBuf {
    let deps = std::env::current_exe().expect("the test knows where it runs from");
    let debug = deps.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps");
    debug.join("examples").join(format!("agent{}", std::env::consts::EXE_SUFFIX))
}

fn run(dir: &tempfile::TempDir) -> String {
    let example = example();
    let output = Command::new(&example).current_dir(dir.path()).output().unwrap_or_else(|error| {
        panic!(
            "cannot run {} ({error}): build it first with `cargo build --example agent`, as `cargo test` and \
             scripts/test.sh do",
            example.display()
        )
    });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the example failed:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn the_agent_example_survives_its_process_exiting_and_its_researcher_remembers() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(&dir);
    for expected in [
        "task.started       researcher-",
        "(agent researcher)",
        "researcher works in its own session agent-demo.",
        "Roll back by promoting the previous build",
        "this process exits now",
    ] {
        assert!(first.contains(expected), "the first run shows {expected:?}:\n{first}");
    }
    assert!(!first.contains("turn.completed"), "turn 1 waits on the deploy:\n{first}");

    let second = run(&dir);
    for expected in [
        "resuming turn 1",
        "turn-1 completed",
        "Sent to task researcher-",
        "(Following up on: \"How do we roll back api?\")",
        "turn-2 completed",
    ] {
        assert!(second.contains(expected), "the second run shows {expected:?}:\n{second}");
    }
    assert_eq!(second.matches("agent.started").count(), 0, "the follow-up reaches the same session:\n{second}");

    let third = run(&dir);
    assert!(third.contains("the session is done") && third.contains("turn-2 completed"), "{third}");
}
