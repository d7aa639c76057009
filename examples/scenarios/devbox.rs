//! Devbox as a background durable tool (the seed's tool-lifetime design, §3.3).
//!
//! One run owns a whole api-devbox task. The body registers one webhook before the task exists,
//! creates the task with the webhook's URL (a step that signs in as the person who started the
//! run), then follows every state change the service posts to it:
//!
//! - `pending`, `running`: nothing to do;
//! - `attention-required`: ask the person (free text; the question itself is on the task page),
//!   then send their answer to the devbox as a follow-up prompt (a step);
//! - `complete`: read the result (a step: the service is authoritative, not the webhook); for a
//!   review (`pr: false`) ask "Apply these findings?" and, on apply, prompt the fix and keep
//!   following the same task; otherwise return the summary and pull requests;
//! - `errored`: read the result and fail with its error ([`FatalError`]).
//!
//! Posts about other tasks and posts that are not state changes are skipped, so duplicate and
//! out-of-order deliveries are harmless (a repeated `attention-required` asks again, as the seed
//! says), and a post after the run ended gets `404`. Cancelling the run (`task_cancel`) resolves
//! the pending wait at once; the cleanup after it stops the devbox (a step), then the run ends
//! cancelled.
//!
//! The service's address comes from the application's configuration ([`use_api`]), and its
//! tokens from the auth provider registered as `devbox`; the examples and tests use
//! [`crate::fakes::devbox`] for both.

use std::sync::RwLock;

use eve_tools::prelude::*;
use eve_tools::{AccessToken, Webhook};
use reqwest::{Method, StatusCode};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The sign-in the Devbox API needs; register its provider as `devbox`.
pub const DEVBOX: Provider = Provider::new("devbox");

/// The follow-up prompt sent when a person chooses to apply a review's findings.
pub const APPLY_FINDINGS: &str = "Apply the review findings and open a PR.";

/// What to do in which repositories.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DevboxInput {
    /// The repositories to work in, as `owner/name`.
    pub repos: Vec<String>,
    /// What the coding assistant should do.
    pub prompt: String,
    /// A short title for the task (default: the prompt's first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Which coding assistant to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant: Option<String>,
    /// Which model the assistant uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `false` asks for a review (findings, no pull request); the default opens one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr: Option<bool>,
}

/// The task the run follows, as created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevboxTask {
    /// The task's id at api-devbox.
    pub task_id: String,
    /// The sandbox it runs in.
    pub devbox_id: String,
    /// Its title.
    pub title: String,
    /// Its page, where people see what it is doing and asking.
    pub task_url: String,
}

/// What the task produced.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevboxOutcome {
    /// The assistant's summary.
    pub summary: String,
    /// The pull requests it opened.
    pub prs: Vec<String>,
    /// The task's page.
    pub task_url: String,
}

/// A task's result, as `getTask` returns it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// What the assistant did or found.
    pub summary: String,
    /// The assistant's exit status.
    pub exit_status: i32,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The pull requests it opened, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prs: Option<Vec<String>>,
}

/// A `taskStateChange` post.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskStateChange {
    task_id: String,
    state: TaskState,
}

/// The states api-devbox reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum TaskState {
    Pending,
    Running,
    AttentionRequired,
    Complete,
    Errored,
}

/// Start repository work in api-devbox and see it through. Use once per task.
#[task]
pub async fn devbox(input: DevboxInput, ctx: &TaskCtx) -> Result<DevboxOutcome, ToolError> {
    let mut events = create_webhook(); // registered before the task exists
    let devbox = create_devbox_task(ctx, input.clone(), events.url()).await?;
    let outcome = see_through(&input, &devbox, &mut events, ctx).await;
    // The `finally`: a cancelled run's waits resolve at once, so this runs before the run ends.
    if ctx.is_cancelled() {
        stop_devbox(ctx, devbox.devbox_id.clone()).await?;
    }
    outcome
}

/// Follows the task's state changes until it completes or errors.
async fn see_through(
    input: &DevboxInput,
    devbox: &DevboxTask,
    events: &mut Webhook,
    ctx: &WorkflowCtx,
) -> Result<DevboxOutcome, ToolError> {
    loop {
        // Only a cancellation ends the webhook's stream; `?` then leaves for the cleanup.
        let request = events.recv().await?;
        let Some(change) = parse_task_state_change(&request) else { continue };
        if change.task_id != devbox.task_id {
            continue;
        }
        match change.state {
            TaskState::Pending | TaskState::Running => {}
            TaskState::AttentionRequired => {
                let reply = ask_for_input(ctx, devbox).await?;
                prompt_devbox(ctx, devbox.task_id.clone(), reply).await?;
            }
            TaskState::Complete => {
                let result = read_devbox_task(ctx, devbox.task_id.clone()).await?; // authoritative
                if input.pr == Some(false) && apply_findings(ctx, &result).await {
                    prompt_devbox(ctx, devbox.task_id.clone(), APPLY_FINDINGS.to_owned()).await?;
                    continue;
                }
                let prs = result.prs.unwrap_or_default();
                return Ok(DevboxOutcome { summary: result.summary, prs, task_url: devbox.task_url.clone() });
            }
            TaskState::Errored => {
                let result = read_devbox_task(ctx, devbox.task_id.clone()).await?;
                let error = result.error.unwrap_or_else(|| format!("Devbox task {} errored", devbox.task_id));
                return Err(FatalError::new(error).into());
            }
        }
    }
}

/// Asks the person what the task needs. api-devbox does not carry the question in the webhook;
/// the task page does. A question withdrawn by a cancellation, or that nobody can answer, ends
/// the follow-up.
async fn ask_for_input(ctx: &WorkflowCtx, devbox: &DevboxTask) -> Result<String, ToolError> {
    let (title, page) = (&devbox.title, &devbox.task_url);
    let prompt = format!(
        "Devbox needs your input to continue \"{title}\".\nOpen {page} to see what it is asking, then reply here."
    );
    match ctx.ask(Ask::text(prompt)).await {
        AskOutcome::Answered { text, .. } => Ok(text.unwrap_or_default()),
        other => Err(FatalError::new(format!("Devbox task {} needs input: {}", devbox.task_id, other.status())).into()),
    }
}

/// Asks whether to apply a finished review's findings.
async fn apply_findings(ctx: &WorkflowCtx, result: &TaskResult) -> bool {
    let question = Ask::confirmation(format!("Review finished:\n\n{}\n\nApply these findings?", result.summary))
        .option("apply", "Apply the findings")
        .primary()
        .option("done", "Done");
    ctx.ask(question).await.chose("apply")
}

/// A state change, or `None` for a post that is not one (it is skipped, not fatal).
fn parse_task_state_change(request: &WebhookRequest) -> Option<TaskStateChange> {
    request.json().ok()
}

/// The Devbox API's base URL; see [`use_api`].
static DEVBOX_API: RwLock<Option<String>> = RwLock::new(None);

/// Points the tool at an api-devbox deployment. An application does this once at startup, from
/// its configuration; steps read it when they run.
pub fn use_api(base_url: impl Into<String>) {
    *DEVBOX_API.write().expect("the Devbox API setting is never poisoned") = Some(base_url.into());
}

/// Creates a task set and a task that posts its state changes to `webhook_url`.
#[step(max_attempts = 5, backoff = "500ms")]
async fn create_devbox_task(ctx: &StepCtx, input: DevboxInput, webhook_url: String) -> Result<DevboxTask, StepError> {
    let api = Api::connect(ctx).await?; // parks the run on sign-in, before any side effect
    let title = input.title.clone().unwrap_or_else(|| derive_title(&input.prompt));
    let set: TaskSet = api.call(Method::POST, "/v1/task-sets", Some(json!({ "title": title }))).await?;
    let body = json!({
        "setId": set.set_id,
        "repos": input.repos,
        "prompt": prompt_with_deliverable(&input),
        "assistant": input.assistant,
        "model": input.model,
        "webhookUrl": webhook_url,
    });
    let created: CreatedTask = api.call(Method::POST, "/v1/tasks", Some(body)).await?;
    let task_url = format!("{}/tasks/{}", api.base, created.task_id);
    Ok(DevboxTask { task_id: created.task_id, devbox_id: created.devbox_id, title, task_url })
}

/// Sends a follow-up prompt to the task.
#[step(max_attempts = 5, backoff = "500ms")]
async fn prompt_devbox(ctx: &StepCtx, task_id: String, prompt: String) -> Result<(), StepError> {
    let path = format!("/v1/tasks/{task_id}/prompt");
    let _: Value = Api::connect(ctx).await?.call(Method::POST, &path, Some(json!({ "prompt": prompt }))).await?;
    Ok(())
}

/// Reads the task's result.
#[step(max_attempts = 5, backoff = "500ms")]
async fn read_devbox_task(ctx: &StepCtx, task_id: String) -> Result<TaskResult, StepError> {
    Api::connect(ctx).await?.call(Method::GET, &format!("/v1/tasks/{task_id}"), None).await
}

/// Stops the devbox, ending the task's work.
#[step(max_attempts = 5, backoff = "500ms")]
async fn stop_devbox(ctx: &StepCtx, devbox_id: String) -> Result<(), StepError> {
    let _: Value = Api::connect(ctx).await?.call(Method::POST, &format!("/v1/devboxes/{devbox_id}/stop"), None).await?;
    Ok(())
}

/// The prompt, with what the task must deliver.
fn prompt_with_deliverable(input: &DevboxInput) -> String {
    let deliverable = match input.pr {
        Some(false) => "Report your findings; do not open a pull request.",
        _ => "Open a pull request with the change.",
    };
    format!("{}\n\nDeliverable: {deliverable}", input.prompt)
}

/// A title from the prompt's first line, at most 60 characters.
fn derive_title(prompt: &str) -> String {
    prompt.lines().next().unwrap_or_default().chars().take(60).collect()
}

#[derive(Deserialize)]
struct TaskSet {
    set_id: String,
}

#[derive(Deserialize)]
struct CreatedTask {
    task_id: String,
    devbox_id: String,
}

/// A signed-in client for one step attempt.
struct Api<'a> {
    ctx: &'a StepCtx,
    base: String,
    token: AccessToken,
    http: reqwest::Client,
}

impl<'a> Api<'a> {
    /// Resolves the token of the person who started the run first: without one, the run parks on
    /// sign-in and the whole step runs again afterwards.
    async fn connect(ctx: &'a StepCtx) -> Result<Api<'a>, StepError> {
        let token = ctx.get_token(&DEVBOX).await?;
        let base = DEVBOX_API.read().expect("the Devbox API setting is never poisoned").clone();
        let base =
            base.ok_or_else(|| FatalError::new("no Devbox API is configured: call `devbox::use_api` at startup"))?;
        // The examples' service is on loopback; a client for a real one keeps the proxy settings.
        let http = reqwest::Client::builder().no_proxy().build()?;
        Ok(Api { ctx, base, token, http })
    }

    /// Calls the API with the step's idempotency key, so a retried attempt has one effect. A
    /// rejected token asks for a new sign-in; other refusals are fatal; the rest is retried.
    async fn call<T: DeserializeOwned>(&self, method: Method, path: &str, body: Option<Value>) -> Result<T, StepError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret())
            .header("idempotency-key", self.ctx.idempotency_key());
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        match response.status() {
            StatusCode::UNAUTHORIZED => Err(self.ctx.require_auth(&DEVBOX).await),
            status if status.is_client_error() => {
                let said = response.text().await.unwrap_or_default();
                Err(FatalError::new(format!("api-devbox refused {path} ({status}): {said}")).into())
            }
            _ => Ok(response.error_for_status()?.json().await?),
        }
    }
}
