//! Approve with a deadline and an escalation, run three times on a controllable clock:
//! approved in time, approved after the page, and never approved.
//!
//! ```text
//! cargo run --example approve_with_deadline
//! ```

use std::time::Duration;

use eve_examples::approve_with_deadline::{GIVE_UP_AFTER, PAGE_AFTER};
use eve_tools::store::MemoryStore;
use eve_tools::{Answer, ManualClock, Runtime, Timestamp};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (story, answer_after) in [
        ("approved within the hour", Some(Duration::from_secs(3600))),
        ("approved after the on-call page", Some(PAGE_AFTER + Duration::from_secs(2 * 3600))),
        ("never approved", None),
    ] {
        println!("— {story}");
        let clock = ManualClock::new(Timestamp::from_millis(0));
        let runtime = Runtime::builder().store(MemoryStore::new()).clock(clock.clone()).build()?;
        let run = runtime.start("deploy_with_deadline", json!({ "service": "api" })).await?;
        runtime.settle().await;
        let question = runtime.open_questions(run.id()).await?.remove(0);
        println!("    asked: {:?}", question.request.prompt.lines().next().unwrap_or_default());
        match answer_after {
            Some(after) => {
                advance(&runtime, &clock, after).await;
                runtime.answer(run.id(), &question.request_id, Answer::option("approve")).await?;
                println!("    after {} h: approved", after.as_secs() / 3600);
            }
            None => advance(&runtime, &clock, PAGE_AFTER + GIVE_UP_AFTER).await,
        }
        println!("    result: {}\n", run.outcome().await?.output().cloned().unwrap_or_default());
    }
    Ok(())
}

/// Moves the clock forward an hour at a time, letting the run react at each step.
async fn advance(runtime: &Runtime, clock: &ManualClock, by: Duration) {
    for _ in 0..by.as_secs() / 3600 {
        clock.advance(Duration::from_secs(3600));
        runtime.settle().await;
    }
}
