//! Approve with a deadline and an escalation, on a controllable clock: the same tool the
//! `approve_with_deadline` example runs.

use std::time::Duration;

use eve_examples::approve_with_deadline::{Deployed, GIVE_UP_AFTER, PAGE_AFTER};
use eve_tests::World;
use eve_tools::{Answer, Entry, RunId, RunOutcome, Runtime};
use serde_json::json;

const HOUR: Duration = Duration::from_secs(3600);

fn steps_run(entries: &[Entry]) -> Vec<String> {
    let names = entries.iter().filter_map(|entry| match entry {
        Entry::StepCompleted { name, .. } => Some(name.to_string()),
        _ => None,
    });
    names.collect()
}

async fn start(world: &World, runtime: &Runtime) -> (RunId, String) {
    let run = runtime.start("deploy_with_deadline", json!({ "service": "api" })).await.unwrap();
    runtime.settle().await;
    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    let _ = world;
    (run.id().clone(), question.request_id)
}

async fn advance(world: &World, runtime: &Runtime, by: Duration) {
    world.clock.advance(by);
    runtime.settle().await;
}

async fn outcome(runtime: &Runtime, run: &RunId) -> Deployed {
    let RunOutcome::Completed(output) = runtime.handle(run.clone()).outcome().await.unwrap() else { panic!() };
    serde_json::from_value(output).unwrap()
}

#[tokio::test]
async fn approved_before_the_deadline_deploys_without_paging() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let (run, request) = start(&world, &runtime).await;
    advance(&world, &runtime, PAGE_AFTER - HOUR).await;
    runtime.answer(&run, &request, Answer::option("approve")).await.unwrap();
    let deployed = outcome(&runtime, &run).await;
    assert_eq!(deployed.url.as_deref(), Some("https://api.example.com"));
    let steps = steps_run(&runtime.journal(&run).await.unwrap().entries);
    assert_eq!(steps, ["plan_deploy", "apply_deploy"]);
}

#[tokio::test]
async fn silence_pages_on_call_and_a_late_approval_still_deploys_after_a_restart() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let (run, request) = start(&world, &runtime).await;
    advance(&world, &runtime, PAGE_AFTER).await;
    assert_eq!(steps_run(&runtime.journal(&run).await.unwrap().entries), ["plan_deploy", "page_on_call"]);
    advance(&world, &runtime, 2 * HOUR).await;
    drop(runtime);
    // A new process: the run replays (page included, not executed again) and takes the answer.
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    runtime.answer(&run, &request, Answer::option("approve")).await.unwrap();
    assert!(outcome(&runtime, &run).await.deployed);
    let steps = steps_run(&runtime.journal(&run).await.unwrap().entries);
    assert_eq!(steps, ["plan_deploy", "page_on_call", "apply_deploy"], "one page, one deploy");
}

#[tokio::test]
async fn no_answer_in_twenty_four_hours_gives_up_and_withdraws_the_question() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let (run, request) = start(&world, &runtime).await;
    advance(&world, &runtime, PAGE_AFTER).await;
    advance(&world, &runtime, GIVE_UP_AFTER - HOUR).await;
    assert!(!runtime.journal(&run).await.unwrap().summary.status.is_finished(), "still waiting at 23 h");
    advance(&world, &runtime, HOUR).await;
    let deployed = outcome(&runtime, &run).await;
    assert_eq!(deployed, Deployed { deployed: false, reason: Some("timed out".into()), url: None });
    assert!(runtime.answer(&run, &request, Answer::option("approve")).await.is_err(), "withdrawn when the run ended");
}

#[tokio::test]
async fn a_rejection_deploys_nothing() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let (run, request) = start(&world, &runtime).await;
    runtime.answer(&run, &request, Answer::option("cancel")).await.unwrap();
    assert_eq!(outcome(&runtime, &run).await.reason.as_deref(), Some("rejected"));
    assert_eq!(steps_run(&runtime.journal(&run).await.unwrap().entries), ["plan_deploy"]);
}
