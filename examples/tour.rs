//! The eve tour: a durable tool that survives its process exiting.
//!
//! ```text
//! cargo run --example tour            # starts the run; it parks on a durable sleep and the process exits
//! cargo run --example tour            # resumes it from the journal and finishes
//! cargo run --example tour -- --reset # deletes the tour's store, forgetting its run
//! ```
//!
//! The tool onboards a customer: it creates an account, sends a welcome email (the mail server
//! fails the first attempt, so the step is retried), waits five seconds durably, then sends a
//! follow-up. The first process exits while the run waits; the second replays the journal (the
//! recorded steps are not executed again), waits out what is left of the sleep, and finishes.

use std::path::Path;
use std::time::Duration;

use eve_tools::prelude::*;
use eve_tools::{Entry, RunEvent, RunId, RunOutcome, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Who to onboard.
#[derive(Deserialize, JsonSchema)]
pub struct OnboardInput {
    /// The customer's name.
    customer: String,
}

/// What onboarding did.
#[derive(Serialize)]
pub struct Onboarded {
    account: String,
    emails: Vec<String>,
}

/// Onboard a customer: create their account, send a welcome email, wait, then follow up.
#[workflow_tool]
pub async fn onboard(input: OnboardInput, ctx: &WorkflowCtx) -> Result<Onboarded, ToolError> {
    let account = create_account(input.customer).await?;
    let welcome = send_email(ctx, account.clone(), "welcome".into()).await?;
    sleep(Duration::from_secs(5)).await?;
    let follow_up = send_email(ctx, account.clone(), "follow-up".into()).await?;
    Ok(Onboarded { account, emails: vec![welcome, follow_up] })
}

#[step]
async fn create_account(customer: String) -> Result<String, StepError> {
    Ok(format!("acct-{}", customer.to_lowercase().replace(' ', "-")))
}

#[step(backoff = "200ms")]
async fn send_email(ctx: &StepCtx, account: String, kind: String) -> Result<String, StepError> {
    if kind == "welcome" && ctx.attempt() == 1 {
        return Err(RetryableError::new("smtp: connection reset by the mail server").into());
    }
    Ok(format!("{kind} email to {account} (message id {})", ctx.idempotency_key()))
}

const DATA_DIR: &str = ".eve/tour";

const USAGE: &str = "usage: cargo run --example tour [-- --reset]

  (no arguments)  start the tour's run, or resume it where the last process stopped
  --reset         delete the tour's store (.eve/tour), forgetting its run, so the next run starts over";

/// `--reset`: deletes the tour's data directory and says what that did.
fn reset() -> Result<(), Box<dyn std::error::Error>> {
    match std::fs::remove_dir_all(DATA_DIR) {
        Ok(()) => println!("deleted {DATA_DIR} (the tour's store and key), forgetting its run"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            println!("{DATA_DIR} does not exist; nothing to forget")
        }
        Err(error) => return Err(format!("cannot delete {DATA_DIR}: {error}").into()),
    }
    println!("run `cargo run --example tour` to start a new run");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => {}
        ["--reset"] => return reset(),
        _ => {
            eprintln!("error: unexpected arguments {args:?}\n\n{USAGE}");
            std::process::exit(2);
        }
    }
    let runtime = Runtime::builder().data_dir(DATA_DIR).build()?;
    let run: RunId = "tour-run".parse()?;
    println!(
        "eve tour: a durable tool that survives a restart (store: {})\n",
        Path::new(DATA_DIR).join("eve.db").display()
    );
    let events = runtime.events();
    match runtime.journal(&run).await {
        Err(eve_tools::Error::RunNotFound(_)) => start(&runtime, run, events).await,
        Ok(record) => match record.entries.last().and_then(RunOutcome::from_terminal) {
            Some(outcome) => {
                println!("run {run} already finished: {}", describe(&outcome));
                println!("\nRun `cargo run --example tour -- --reset` to start over.");
                Ok(())
            }
            None => resume(&runtime, run, &record.entries, events).await,
        },
        Err(error) => Err(error.into()),
    }
}

/// The first process: start the run and follow it until it parks, then exit.
async fn start(
    runtime: &Runtime,
    run: RunId,
    mut events: tokio::sync::broadcast::Receiver<RunEvent>,
) -> Result<(), Box<dyn std::error::Error>> {
    let input = json!({ "customer": "Ada Lovelace" });
    println!("▶ starting run {run}: onboard {input}");
    runtime.start_with_id(run.clone(), "onboard", input).await?;
    let mut sleeping = false;
    loop {
        let event = events.recv().await?;
        narrate(runtime, &event);
        match event {
            RunEvent::TimerScheduled { .. } => sleeping = true,
            // A retry backoff parks the run too; this process stays to retry it (its timers are
            // in memory), and exits once the run waits on the five-second sleep.
            RunEvent::Parked { .. } if sleeping => {
                println!("⏸ parked: the run now lives in the journal, not in this process, which exits.");
                println!("\nRun `cargo run --example tour` again to resume it.");
                return Ok(());
            }
            RunEvent::Finished { .. } => return finish(runtime, &run).await,
            _ => {}
        }
    }
}

/// A later process: replay the run from its journal and follow it to the end.
async fn resume(
    runtime: &Runtime,
    run: RunId,
    entries: &[Entry],
    mut events: tokio::sync::broadcast::Receiver<RunEvent>,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("▶ resuming run {run} from its journal ({} entries)", entries.len());
    let pending = pending_sleep(entries);
    if let Some(deadline) = pending {
        println!("  it was waiting for  a durable sleep until {deadline} ({})", from_now(runtime, deadline));
    }
    // A sleep that is already due fires at once: the run does not park for it, so say nothing of parking.
    let mut due = pending.is_some_and(|deadline| deadline <= runtime.clock().now());
    runtime.recover().await?;
    loop {
        let event = events.recv().await?;
        if !(due && matches!(event, RunEvent::Parked { .. })) {
            narrate(runtime, &event);
        }
        due &= !matches!(event, RunEvent::TimerFired { .. });
        if let RunEvent::Finished { .. } = event {
            return finish(runtime, &run).await;
        }
    }
}

/// The deadline of the sleep the journal shows the run waiting on, if any.
fn pending_sleep(entries: &[Entry]) -> Option<Timestamp> {
    let fired = |op| entries.iter().any(|entry| matches!(entry, Entry::TimerFired { op: fired } if *fired == op));
    entries.iter().find_map(|entry| match entry {
        Entry::TimerScheduled { op, deadline } if !fired(*op) => Some(*deadline),
        _ => None,
    })
}

fn from_now(runtime: &Runtime, deadline: Timestamp) -> String {
    let left = deadline.duration_since(runtime.clock().now());
    if left.is_zero() { "already due".into() } else { format!("{:.1} s from now", left.as_secs_f64()) }
}

/// Prints one event as a line of the account.
fn narrate(runtime: &Runtime, event: &RunEvent) {
    match event {
        RunEvent::Resumed { replayed, from_cache: false, .. } => {
            println!("  replaying           {replayed} journal entries to rebuild the body's state")
        }
        RunEvent::Parked { .. } => {
            println!("  parked              (holding no task until its next durable wait resolves)")
        }
        RunEvent::StepReplayed { op, step, .. } => {
            println!("  replayed step       {step} ({op}): its recorded result was reused, the step did not run")
        }
        RunEvent::StepStarted { op, step, attempt, .. } => {
            println!("  running step        {step} ({op}, attempt {attempt})")
        }
        RunEvent::StepSucceeded { step, .. } => println!("  ✓ step done         {step}: result recorded"),
        RunEvent::StepFailed { step, error, retry_at: Some(at), .. } => {
            println!("  ✗ step failed       {step}: {error}; retry {}", from_now(runtime, *at))
        }
        RunEvent::StepFailed { step, error, retry_at: None, .. } => {
            println!("  ✗ step failed       {step} for good: {error}")
        }
        RunEvent::TimerScheduled { deadline, .. } => {
            println!("  waiting for         a durable sleep until {deadline} ({})", from_now(runtime, *deadline))
        }
        RunEvent::TimerFired { op, .. } => println!("  timer fired         ({op}): the sleep is over"),
        _ => {}
    }
}

async fn finish(runtime: &Runtime, run: &RunId) -> Result<(), Box<dyn std::error::Error>> {
    let outcome = runtime.handle(run.clone()).outcome().await?;
    println!("■ {}", describe(&outcome));
    let record = runtime.journal(run).await?;
    println!("\nThe run's journal, the only state that survived the restart:");
    for (seq, entry) in record.entries.iter().enumerate() {
        println!("  {seq:>2}  {}", eve_tools::cli::describe(entry));
    }
    println!("\nRun `cargo run --example tour -- --reset` to start over.");
    Ok(())
}

fn describe(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Completed(output) => format!("completed: {output}"),
        RunOutcome::Failed(failure) => format!("failed: {failure}"),
        RunOutcome::Cancelled => "cancelled".into(),
    }
}
