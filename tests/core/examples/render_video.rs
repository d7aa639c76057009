//! Wait for an external system to call back: the `render_video` example's tool against the fake
//! render farm, over real HTTP on loopback. The farm is in manual mode, so each test decides when
//! it calls back.

use std::sync::LazyLock;

use eve_examples::fakes::Mode;
use eve_examples::fakes::render_farm::{FakeRenderFarm, Job};
use eve_examples::render_video::use_render_farm;
use eve_tests::http::{Served, serve};
use eve_tools::http::WEBHOOK_PATH;
use eve_tools::{RunFailure, RunHandle, RunOutcome};
use serde_json::json;

use super::support::steps_run;

/// One farm for the whole test binary, as the tool's setting is one per process.
static FARM: LazyLock<FakeRenderFarm> = LazyLock::new(|| {
    let farm = FakeRenderFarm::start(Mode::Manual);
    use_render_farm(farm.base());
    farm
});

/// Starts a render of `project` and returns the run and the job the farm accepted for it.
async fn render(served: &Served, project: &str) -> (RunHandle, Job) {
    LazyLock::force(&FARM); // the farm is up and the tool points at it before the step runs
    let run = served.runtime.start("render_video", json!({ "projectId": project })).await.unwrap();
    run.parked().await.unwrap();
    let job = FARM.job_for(project).expect("the render was submitted");
    (run, job)
}

#[tokio::test]
async fn the_farm_calls_back_ok_and_the_run_returns_the_video_url() {
    let served = serve().await;
    let (run, job) = render(&served, "launch-teaser").await;
    assert!(job.callback_url.starts_with(&served.url(WEBHOOK_PATH)), "the farm got the webhook's URL");
    assert!(job.callbacks.is_empty());

    assert_eq!(FARM.finish(&job.job_id, "ok").await, 202);
    let url = format!("https://cdn.example.com/renders/{}.mp4", job.job_id);
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!({ "url": url })));
    assert_eq!(steps_run(&served.runtime.journal(run.id()).await.unwrap().entries), ["submit_render"]);
}

#[tokio::test]
async fn a_failed_render_fails_the_run_with_the_farms_status() {
    let served = serve().await;
    let (run, job) = render(&served, "holiday-reel").await;
    assert_eq!(FARM.finish(&job.job_id, "out-of-memory").await, 202);
    let message = format!("Render {} failed: out-of-memory", job.job_id);
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Failed(RunFailure::Tool { message }));
}

#[tokio::test]
async fn a_duplicate_or_late_callback_after_the_run_ended_gets_404_and_changes_nothing() {
    let served = serve().await;
    let (run, job) = render(&served, "product-demo").await;
    assert_eq!(FARM.finish(&job.job_id, "ok").await, 202);
    let outcome = run.outcome().await.unwrap();

    assert_eq!(FARM.call_back_again(&job.job_id).await, 404, "a retried delivery of the same callback");
    assert_eq!(FARM.finish(&job.job_id, "late").await, 404, "a different, late callback");
    assert_eq!(served.runtime.handle(run.id().clone()).outcome().await.unwrap(), outcome);
    let statuses: Vec<_> = FARM.job_for("product-demo").unwrap().callbacks.iter().map(|sent| sent.status).collect();
    assert_eq!(statuses, [202, 404, 404]);
}
