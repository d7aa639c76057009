//! Timers survive a failed activation: a timer whose firing the store refuses to append still
//! fires, and a run rebuilt after an activation that could not claim it arms its due timers again,
//! without waiting for the process to restart.

use std::sync::Arc;
use std::time::Duration;

use eve_tests::World;
use eve_tests::faulty::Faulty;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{Entry, RunStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Sleeps ten seconds.
#[workflow_tool]
pub async fn nap(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let _ = ctx;
    sleep(Duration::from_secs(10)).await?;
    Ok("woke".into())
}

#[tokio::test]
async fn a_timer_whose_firing_fails_to_append_still_fires() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    faulty.fail_first(1, |entry| matches!(entry, Entry::TimerFired { .. }));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(16);
    let run = runtime.start("nap", json!({})).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    assert_eq!(faulty.failed(), 1, "the injected failure happened");
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, RunStatus::Completed, "journal: {:?}", journal.entries);
}

#[tokio::test]
async fn a_run_rebuilt_after_a_failed_activation_arms_its_due_timers_again() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(0);
    let run = runtime.start("nap", json!({})).await.unwrap();
    run.parked().await.unwrap();
    // The timer's activation (a cold rebuild: no warm cache) cannot claim the run.
    faulty.fail_claims(1);
    world.clock.advance(Duration::from_secs(10));
    runtime.settle().await;
    for _ in 0..3 {
        world.clock.advance(Duration::from_secs(10));
        runtime.settle().await;
    }
    assert_eq!(faulty.failed(), 1, "the injected failure happened");
    let journal = runtime.journal(run.id()).await.unwrap();
    assert_eq!(journal.summary.status, RunStatus::Completed, "journal: {:?}", journal.entries);
}
