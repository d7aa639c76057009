//! Wait for an external system to call back: `render_video` hands a webhook URL to a render farm
//! (a fake on loopback that renders for a moment, then posts `{status, url}` to it) and parks
//! until the farm calls. Run three times: a render that succeeds, one that fails, and a callback
//! that comes again after the run ended.
//!
//! ```text
//! cargo run --example render_video
//! ```

use std::time::Duration;

use eve_examples::fakes::Mode;
use eve_examples::fakes::render_farm::FakeRenderFarm;
use eve_examples::render_video::use_render_farm;
use eve_tools::http::Server;
use eve_tools::store::MemoryStore;
use eve_tools::{RunFailure, RunOutcome, Runtime};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let farm = FakeRenderFarm::start(Mode::Autopilot(Duration::from_millis(300)));
    use_render_farm(farm.base());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let runtime = Runtime::builder().store(MemoryStore::new()).public_url(&base).build()?;
    let server = Server::new(runtime.clone()).serve(listener)?;
    println!("eve example: render_video, a workflow tool that waits for a webhook");
    println!("(runtime at {base}, render farm at {})\n", farm.base());

    for (story, project) in [("a render that succeeds", "launch-teaser"), ("a render that fails", "corrupt-b-roll")] {
        println!("— {story}");
        let run = runtime.start("render_video", json!({ "projectId": project })).await?;
        run.parked().await?;
        let job = farm.job_for(project).ok_or("the job was not submitted")?;
        println!("    submitted {project} as {}; the run parked until the farm calls back", job.job_id);
        let token = job.callback_url.rsplit('/').next().unwrap_or_default();
        println!("    the farm will call {}", job.callback_url.replace(token, "<token>"));
        match run.outcome().await? {
            RunOutcome::Completed(output) => println!("    the tool returns {output}\n"),
            RunOutcome::Failed(RunFailure::Tool { message }) => println!("    the run fails: {message}\n"),
            other => println!("    the run ended {other:?}\n"),
        }
    }

    println!("— a callback that comes again after the run ended");
    let job = farm.job_for("launch-teaser").ok_or("no job")?;
    let status = farm.call_back_again(&job.job_id).await;
    println!("    the farm retries its callback for {}: the webhook answers {status}, nothing changes", job.job_id);

    server.shutdown().await;
    Ok(())
}
