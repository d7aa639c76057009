//! Wait for an external system to call back (the seed's `render_video`).
//!
//! The body creates a webhook, hands its URL to the render farm with the job (a step), and parks
//! until the farm posts `{status, url}` to it. Nothing runs in between. A status other than `ok`
//! fails the run with a [`FatalError`]. Once the run has ended its webhook is gone: a late or
//! repeated callback gets `404`.
//!
//! Where the render farm is comes from the application's configuration ([`use_render_farm`]),
//! read inside the step; the examples and tests point it at [`crate::fakes::render_farm`].

use std::sync::RwLock;

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The project to render.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderInput {
    /// The video project's id.
    pub project_id: String,
}

/// Where the rendered video is.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// The video's URL.
    pub url: String,
}

/// What the render farm posts to the webhook when a job ends.
#[derive(Debug, Deserialize)]
struct RenderCallback {
    status: String,
    #[serde(default)]
    url: Option<String>,
}

/// Render a video. Returns the URL once the render farm finishes.
#[workflow_tool]
pub async fn render_video(input: RenderInput, ctx: &WorkflowCtx) -> Result<Rendered, ToolError> {
    let mut done = create_webhook();
    let job_id = submit_render(ctx, input.project_id, done.url()).await?;
    let callback = done.recv().await?;
    let RenderCallback { status, url } = callback.json()?;
    if status != "ok" {
        return Err(FatalError::new(format!("Render {job_id} failed: {status}")).into());
    }
    let url = url.ok_or_else(|| FatalError::new(format!("Render {job_id} reported ok without a url")))?;
    Ok(Rendered { url })
}

/// The render farm's base URL; see [`use_render_farm`].
static RENDER_FARM: RwLock<Option<String>> = RwLock::new(None);

/// Points the tool at a render farm's API. An application does this once at startup, from its
/// configuration; steps read it when they run.
pub fn use_render_farm(base_url: impl Into<String>) {
    *RENDER_FARM.write().expect("the render farm setting is never poisoned") = Some(base_url.into());
}

/// The job id the farm returns.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Job {
    job_id: String,
}

/// Submits the render; the farm calls `callback_url` when it is done. The idempotency key makes a
/// retried submission (after a timeout or a crash) the same job.
#[step(max_attempts = 5, backoff = "500ms")]
async fn submit_render(ctx: &StepCtx, project_id: String, callback_url: String) -> Result<String, StepError> {
    let farm = RENDER_FARM.read().expect("the render farm setting is never poisoned").clone();
    let farm =
        farm.ok_or_else(|| FatalError::new("no render farm is configured: call `use_render_farm` at startup"))?;
    // The examples' farm is on loopback; a client for a real one keeps the system proxy settings.
    let client = reqwest::Client::builder().no_proxy().build()?;
    let request = client
        .post(format!("{farm}/jobs"))
        .header("idempotency-key", ctx.idempotency_key())
        .json(&json!({ "projectId": project_id, "callbackUrl": callback_url }));
    let response = request.send().await?;
    let status = response.status();
    if status.is_client_error() {
        let body = response.text().await.unwrap_or_default();
        return Err(FatalError::new(format!("the render farm refused the job ({status}): {body}")).into());
    }
    let job: Job = response.error_for_status()?.json().await?;
    Ok(job.job_id)
}
