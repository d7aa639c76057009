//! Remind me later: `remind` is a background task that sleeps durably and returns the reminder.
//! The example moves a manual clock itself, so hours pass in an instant: first a reminder due in
//! 90 seconds, then one due in 2 hours that falls due while no process is running.
//!
//! ```text
//! cargo run --example remind
//! ```

use std::time::Duration;

use eve_examples::remind::Reminder;
use eve_tools::store::MemoryStore;
use eve_tools::{Entry, ManualClock, RunId, RunOutcome, Runtime, Timestamp};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("eve example: remind, a background task that sleeps durably (on a manual clock)\n");
    let clock = ManualClock::new(Timestamp::from_millis(0));

    println!("— in 90 seconds");
    let runtime = Runtime::builder().store(MemoryStore::new()).clock(clock.clone()).build()?;
    let input = json!({ "note": "stand up and stretch", "delay": "90s" });
    println!("    the model calls remind {input}");
    let run = runtime.start("remind", input).await?;
    run.parked().await?;
    println!("    the run parked on its timer, holding no task");
    for (step, at) in [(60_000, "1 min"), (29_999, "1 min 29.999 s"), (1, "1 min 30 s")] {
        clock.advance(Duration::from_millis(step));
        runtime.settle().await;
        println!("    at {at}: {}", status(&runtime, run.id()).await?);
    }

    println!("\n— in 2 hours, due while no process runs");
    let dir = tempfile::tempdir()?;
    let process = || Runtime::builder().data_dir(dir.path()).clock(clock.clone()).build();
    let first = process()?;
    let input = json!({ "note": "water the plants", "delay": "2h" });
    let run = first.start("remind", input.clone()).await?;
    run.parked().await?;
    println!("    process 1: remind {input}, then the process stops");
    let id = run.id().clone();
    drop(run);
    stop(first).await;
    clock.advance(Duration::from_secs(3 * 3600));
    println!("    3 hours pass with no process running");
    let second = process()?;
    println!("    process 2 recovers {} unfinished run(s)", second.recover().await?);
    second.settle().await;
    println!("    {}", status(&second, &id).await?);
    let entries = second.journal(&id).await?.entries;
    let fired = entries.iter().filter(|entry| matches!(entry, Entry::TimerFired { .. })).count();
    println!("    the journal records the timer firing {fired} time(s)");
    Ok(())
}

/// What the run has to show: nothing yet, or its reminder.
async fn status(runtime: &Runtime, run: &RunId) -> Result<String, Box<dyn std::error::Error>> {
    let record = runtime.journal(run).await?;
    Ok(match record.entries.last().and_then(RunOutcome::from_terminal) {
        None => "nothing yet".to_owned(),
        Some(RunOutcome::Completed(output)) => {
            let Reminder { reminder } = serde_json::from_value(output)?;
            format!("the agent is woken with the reminder: {reminder:?}")
        }
        Some(other) => format!("the task ended {other:?}"),
    })
}

/// Stops a process: drops its runtime and waits until the store has closed and released its file
/// lock, as it does when a binary exits.
async fn stop(runtime: Runtime) {
    runtime.shutdown().await;
}
