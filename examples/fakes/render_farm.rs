//! A fake render farm: it accepts a job with a callback URL and later posts `{status, url}` to it.
//!
//! - `POST /jobs` `{projectId, callbackUrl}` answers `201 {"jobId"}`. A repeated
//!   `Idempotency-Key` gets the same job back, as a real job API does for retried submissions.
//! - The callback is a `POST` of `{"status": "ok", "url": …}` or `{"status": "<why it failed>"}`,
//!   with an `Idempotency-Key` naming the delivery (a retried delivery repeats it).
//! - On autopilot the farm renders for the pause it was given, then calls back; a project whose id
//!   starts with `corrupt-` fails with status `source-corrupt`, like a payment sandbox's test
//!   cards. In manual mode [`FakeRenderFarm::finish`] calls back with the status it is given.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::Mode;

/// A job the farm accepted, as the farm saw it.
#[derive(Clone, Debug)]
pub struct Job {
    /// The farm's id for it.
    pub job_id: String,
    /// The project rendered.
    pub project_id: String,
    /// Where the farm calls back.
    pub callback_url: String,
    /// Every callback sent, in order.
    pub callbacks: Vec<Callback>,
}

/// One callback the farm sent, and how the webhook answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Callback {
    /// The JSON posted.
    pub body: Value,
    /// Its `Idempotency-Key`.
    pub key: String,
    /// The webhook's status code (0 when it could not be reached).
    pub status: u16,
}

/// A running fake render farm. Clones share it.
#[derive(Clone)]
pub struct FakeRenderFarm {
    base: String,
    shared: Arc<Shared>,
}

struct Shared {
    mode: Mode,
    books: Mutex<Books>,
}

#[derive(Default)]
struct Books {
    jobs: Vec<Job>,
    /// Submission idempotency keys, to the index of the job they created.
    submissions: HashMap<String, usize>,
}

impl Shared {
    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().expect("the render farm's books are never poisoned")
    }
}

impl FakeRenderFarm {
    /// Starts a farm on a free loopback port, for the rest of the process.
    pub fn start(mode: Mode) -> FakeRenderFarm {
        let shared = Arc::new(Shared { mode, books: Mutex::default() });
        let router = Router::new().route("/jobs", post(submit)).with_state(shared.clone());
        FakeRenderFarm { base: super::serve_detached("fake-render-farm", router), shared }
    }

    /// The farm's base URL, `http://127.0.0.1:port`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The latest job submitted for `project_id`, if any.
    pub fn job_for(&self, project_id: &str) -> Option<Job> {
        self.shared.books().jobs.iter().rev().find(|job| job.project_id == project_id).cloned()
    }

    /// Ends `job_id` with `status` and calls back (with the video's URL when `status` is `ok`).
    /// Returns the webhook's status code.
    pub async fn finish(&self, job_id: &str, status: &str) -> u16 {
        call_back(&self.shared, job_id, outcome(job_id, status), None).await
    }

    /// Sends the last callback of `job_id` again, with the same idempotency key, as a farm does
    /// when it did not see the first response. Returns the webhook's status code.
    pub async fn call_back_again(&self, job_id: &str) -> u16 {
        let last = job(&self.shared, job_id).callbacks.last().cloned().expect("the job has called back before");
        call_back(&self.shared, job_id, last.body, Some(last.key)).await
    }
}

/// The callback body for a job that ended with `status`.
fn outcome(job_id: &str, status: &str) -> Value {
    match status {
        "ok" => json!({ "status": "ok", "url": format!("https://cdn.example.com/renders/{job_id}.mp4") }),
        failed => json!({ "status": failed }),
    }
}

fn job(shared: &Shared, job_id: &str) -> Job {
    let books = shared.books();
    books.jobs.iter().find(|job| job.job_id == job_id).cloned().unwrap_or_else(|| panic!("no job {job_id}"))
}

/// Posts `body` to the job's callback URL and records it; returns the webhook's status code.
async fn call_back(shared: &Shared, job_id: &str, body: Value, key: Option<String>) -> u16 {
    let job = job(shared, job_id);
    let key = key.unwrap_or_else(|| format!("{job_id}-callback-{}", job.callbacks.len() + 1));
    let sent = super::client().post(&job.callback_url).header("idempotency-key", &key).json(&body).send().await;
    let status = sent.map_or(0, |response| response.status().as_u16());
    let mut books = shared.books();
    if let Some(job) = books.jobs.iter_mut().find(|job| job.job_id == job_id) {
        job.callbacks.push(Callback { body, key, status });
    }
    status
}

/// `POST /jobs`: accepts a job (once per idempotency key) and, on autopilot, renders it.
async fn submit(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (Some(project_id), Some(callback_url)) = (body["projectId"].as_str(), body["callbackUrl"].as_str()) else {
        return (StatusCode::BAD_REQUEST, "`projectId` and `callbackUrl` are required").into_response();
    };
    let key = headers.get("idempotency-key").and_then(|value| value.to_str().ok()).map(str::to_owned);
    let mut books = shared.books();
    if let Some(&index) = key.as_ref().and_then(|key| books.submissions.get(key)) {
        return (StatusCode::CREATED, Json(json!({ "jobId": books.jobs[index].job_id }))).into_response();
    }
    let job_id = format!("job-{}", books.jobs.len() + 1);
    let job = Job {
        job_id: job_id.clone(),
        project_id: project_id.to_owned(),
        callback_url: callback_url.to_owned(),
        callbacks: Vec::new(),
    };
    if let Some(key) = key {
        let index = books.jobs.len();
        books.submissions.insert(key, index);
    }
    books.jobs.push(job);
    drop(books);
    if let Mode::Autopilot(render_time) = shared.mode {
        tokio::spawn(render(shared.clone(), job_id.clone(), project_id.to_owned(), render_time));
    }
    (StatusCode::CREATED, Json(json!({ "jobId": job_id }))).into_response()
}

/// Autopilot: renders for `render_time`, then calls back.
async fn render(shared: Arc<Shared>, job_id: String, project_id: String, render_time: std::time::Duration) {
    tokio::time::sleep(render_time).await;
    let status = if project_id.starts_with("corrupt-") { "source-corrupt" } else { "ok" };
    println!("    [render farm] {job_id} ({project_id}) finished with status {status:?}; calling the webhook back");
    call_back(&shared, &job_id, outcome(&job_id, status), None).await;
}
