//! A fake api-devbox: tasks that run in sandboxes and post their state changes to a webhook.
//!
//! The API (every `/v1` call needs `Authorization: Bearer <token>`, else `401`):
//!
//! | Route | Does | Answers |
//! |---|---|---|
//! | `POST /v1/task-sets` `{title}` | creates a task set | `{set_id}` |
//! | `POST /v1/tasks` `{setId, repos, prompt, assistant?, model?, webhookUrl}` | creates a task in a new devbox | `{task_id, devbox_id}` |
//! | `POST /v1/tasks/{task}/prompt` `{prompt}` | sends a follow-up prompt | `202 {}` |
//! | `GET /v1/tasks/{task}` | reads the result | `{summary, exitStatus, error?, prs?}` |
//! | `POST /v1/devboxes/{devbox}/stop` | stops the devbox | `202 {}` |
//! | `GET /tasks/{task}` | the task's page, with what the assistant is asking | text |
//! | `GET /oauth/authorize`, `POST /oauth/token` | sign-in (OAuth 2.0 authorization code) | `302`, `{access_token}` |
//!
//! Creating calls repeated with the same `Idempotency-Key` have one effect. State changes are
//! posted to the task's webhook as `{"taskId", "state"}` with an `Idempotency-Key` naming the
//! delivery; `state` is `pending`, `running`, `attention-required`, `complete` or `errored`.
//!
//! A task completes with a pull request when the latest of its prompts that mentions one asks to
//! open it (rather than "do not open"); otherwise it completes with review findings. On autopilot a new task goes `pending`,
//! `running`, then `attention-required` (its page asks which branch to target), and every prompt
//! sends it `running`, then `complete`; a stopped devbox posts nothing more. In manual mode the
//! caller moves tasks with [`FakeDevbox::change`] and [`FakeDevbox::fail`], and can post anything
//! to a task's webhook with [`FakeDevbox::post`] and [`FakeDevbox::redeliver`]. The fake does not
//! check PKCE or client credentials.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use eve_tools::OAuth2ProviderBuilder;
use reqwest::Url;
use serde_json::{Value, json};

use super::Mode;

/// The OAuth client id the fake knows.
pub const CLIENT_ID: &str = "eve-examples";

/// What the page of a task that needs attention asks.
pub const QUESTION: &str = "Which branch should the change target?";

/// A task, as the fake service sees it.
#[derive(Clone, Debug)]
pub struct FakeTask {
    /// Its id.
    pub task_id: String,
    /// The devbox it runs in.
    pub devbox_id: String,
    /// Its task set's title.
    pub title: String,
    /// The repositories it works in.
    pub repos: Vec<String>,
    /// Where it posts state changes.
    pub webhook_url: String,
    /// Its prompts: the first, then every follow-up, in order.
    pub prompts: Vec<String>,
    /// Its current state.
    pub state: String,
    /// Why it failed, once it has.
    pub error: Option<String>,
    /// How many times its result was read.
    pub reads: usize,
    /// Whether its devbox was stopped.
    pub stopped: bool,
    /// Every post to its webhook, in order.
    pub deliveries: Vec<Delivery>,
}

/// One post to a task's webhook, and how the webhook answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Its `Idempotency-Key`.
    pub key: String,
    /// The body posted.
    pub body: String,
    /// The webhook's status code (0 when it could not be reached).
    pub status: u16,
}

/// A running fake api-devbox. Clones share it.
#[derive(Clone)]
pub struct FakeDevbox {
    base: String,
    shared: Arc<Shared>,
}

struct Shared {
    mode: Mode,
    books: Mutex<Books>,
}

#[derive(Default)]
struct Books {
    serial: u32,
    tokens: HashSet<String>,
    /// One-time codes, to the redirect URI they were issued for.
    codes: HashMap<String, String>,
    /// `(route, idempotency key)` of creating calls, to what they answered.
    done: HashMap<(String, String), Value>,
    sets: HashMap<String, String>,
    tasks: Vec<FakeTask>,
}

impl Books {
    fn next(&mut self) -> u32 {
        self.serial += 1;
        self.serial
    }

    fn task(&mut self, task_id: &str) -> Option<&mut FakeTask> {
        self.tasks.iter_mut().find(|task| task.task_id == task_id)
    }
}

impl Shared {
    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().expect("the Devbox fake's books are never poisoned")
    }
}

impl FakeDevbox {
    /// Starts the service on a free loopback port, for the rest of the process.
    pub fn start(mode: Mode) -> FakeDevbox {
        let router = Router::new()
            .route("/oauth/authorize", get(authorize))
            .route("/oauth/token", post(token))
            .route("/v1/task-sets", post(create_set))
            .route("/v1/tasks", post(create_task))
            .route("/v1/tasks/{task}", get(read_task))
            .route("/v1/tasks/{task}/prompt", post(prompt))
            .route("/v1/devboxes/{devbox}/stop", post(stop))
            .route("/tasks/{task}", get(page));
        let shared = Arc::new(Shared { mode, books: Mutex::default() });
        let base = super::serve_detached("fake-devbox", router.with_state(shared.clone()));
        FakeDevbox { base, shared }
    }

    /// The service's base URL, `http://127.0.0.1:port`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A provider builder for signing in to this service; register the provider as `devbox`.
    pub fn oauth(&self) -> OAuth2ProviderBuilder {
        eve_tools::OAuth2Provider::builder("devbox")
            .client_id(CLIENT_ID)
            .client_secret("devbox-example-secret")
            .auth_url(format!("{}/oauth/authorize", self.base))
            .token_url(format!("{}/oauth/token", self.base))
            .scopes(["tasks"])
    }

    /// A token the API accepts, as if someone had signed in earlier.
    pub fn issue_token(&self) -> String {
        let mut books = self.shared.books();
        let token = format!("dbx-token-{}", books.next());
        books.tokens.insert(token.clone());
        token
    }

    /// The latest task whose title is `title`, if any.
    pub fn task_titled(&self, title: &str) -> Option<FakeTask> {
        self.shared.books().tasks.iter().rev().find(|task| task.title == title).cloned()
    }

    /// The task `task_id`, if it exists.
    pub fn task(&self, task_id: &str) -> Option<FakeTask> {
        self.shared.books().task(task_id).cloned()
    }

    /// Moves the task to `state` and posts the change; returns the webhook's status code.
    pub async fn change(&self, task_id: &str, state: &str) -> u16 {
        transition(&self.shared, task_id, state).await
    }

    /// Fails the task with `error` and posts `errored`; returns the webhook's status code.
    pub async fn fail(&self, task_id: &str, error: &str) -> u16 {
        if let Some(task) = self.shared.books().task(task_id) {
            task.error = Some(error.to_owned());
        }
        transition(&self.shared, task_id, "errored").await
    }

    /// Posts `body` to the task's webhook as a new delivery; returns the webhook's status code.
    pub async fn post(&self, task_id: &str, body: &str) -> u16 {
        deliver(&self.shared, task_id, body.to_owned(), None).await
    }

    /// Posts the task's delivery number `index` (from 0) again, same key and body, as a sender
    /// does when it did not see the first response; returns the webhook's status code.
    pub async fn redeliver(&self, task_id: &str, index: usize) -> u16 {
        let task = self.task(task_id).expect("the task exists");
        let Delivery { key, body, .. } = task.deliveries[index].clone();
        deliver(&self.shared, task_id, body, Some(key)).await
    }
}

/// Moves a task to `state` and posts `{taskId, state}` to its webhook.
async fn transition(shared: &Shared, task_id: &str, state: &str) -> u16 {
    match shared.books().task(task_id) {
        Some(task) => task.state = state.to_owned(),
        None => panic!("no task {task_id}"),
    }
    deliver(shared, task_id, json!({ "taskId": task_id, "state": state }).to_string(), None).await
}

/// Posts `body` to the task's webhook (a new delivery unless `key` repeats one) and records it.
async fn deliver(shared: &Shared, task_id: &str, body: String, key: Option<String>) -> u16 {
    let (url, key) = {
        let mut books = shared.books();
        let serial = books.next();
        let task = books.task(task_id).unwrap_or_else(|| panic!("no task {task_id}"));
        (task.webhook_url.clone(), key.unwrap_or_else(|| format!("evt_{serial}")))
    };
    let request =
        super::client().post(&url).header("idempotency-key", &key).header(header::CONTENT_TYPE, "application/json");
    let status = request.body(body.clone()).send().await.map_or(0, |response| response.status().as_u16());
    if let Some(task) = shared.books().task(task_id) {
        task.deliveries.push(Delivery { key, body, status });
    }
    status
}

/// Autopilot: moves the task through `states`, pausing before each, unless its devbox stops.
async fn play(shared: Arc<Shared>, task_id: String, states: &'static [&'static str]) {
    let Mode::Autopilot(pace) = shared.mode else { return };
    for state in states {
        tokio::time::sleep(pace).await;
        if shared.books().task(&task_id).is_none_or(|task| task.stopped) {
            return;
        }
        println!("    [devbox] {task_id} is {state}: posting it to the webhook");
        transition(&shared, &task_id, state).await;
    }
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    let token = bearer.and_then(|value| value.strip_prefix("Bearer "));
    token.is_some_and(|token| shared.books().tokens.contains(token))
}

/// The call's `(route, idempotency key)`, if it carries a key.
fn idempotency(route: &str, headers: &HeaderMap) -> Option<(String, String)> {
    let key = headers.get("idempotency-key").and_then(|value| value.to_str().ok())?;
    Some((route.to_owned(), key.to_owned()))
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, Json(json!({ "error": "sign in again" }))).into_response()
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": format!("no {what}") }))).into_response()
}

type Params = HashMap<String, String>;

/// `GET /oauth/authorize`: approves at once and sends the browser back with a one-time code.
async fn authorize(State(shared): State<Arc<Shared>>, Query(params): Query<Params>) -> Response {
    let (Some(redirect), Some(state)) = (params.get("redirect_uri"), params.get("state")) else {
        return (StatusCode::BAD_REQUEST, "`redirect_uri` and `state` are required").into_response();
    };
    let Ok(mut location) = Url::parse(redirect) else {
        return (StatusCode::BAD_REQUEST, "bad `redirect_uri`").into_response();
    };
    let mut books = shared.books();
    let code = format!("dbx-code-{}", books.next());
    books.codes.insert(code.clone(), redirect.clone());
    location.query_pairs_mut().append_pair("code", &code).append_pair("state", state);
    (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
}

/// `POST /oauth/token`: exchanges a one-time code for an access token.
async fn token(State(shared): State<Arc<Shared>>, Form(params): Form<Params>) -> Response {
    let mut books = shared.books();
    let code = params.get("code").cloned().unwrap_or_default();
    if params.get("grant_type").map(String::as_str) != Some("authorization_code")
        || books.codes.remove(&code).is_none_or(|redirect| Some(&redirect) != params.get("redirect_uri"))
    {
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": "invalid_grant" }))).into_response();
    }
    let token = format!("dbx-token-{}", books.next());
    books.tokens.insert(token.clone());
    Json(json!({ "access_token": token, "token_type": "bearer" })).into_response()
}

/// `POST /v1/task-sets`.
async fn create_set(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let mut books = shared.books();
    let key = idempotency("task-sets", &headers);
    if let Some(done) = key.as_ref().and_then(|key| books.done.get(key)) {
        return Json(done.clone()).into_response();
    }
    let set_id = format!("set-{}", books.next());
    books.sets.insert(set_id.clone(), body["title"].as_str().unwrap_or_default().to_owned());
    let answer = json!({ "set_id": set_id });
    books.done.extend(key.map(|key| (key, answer.clone())));
    Json(answer).into_response()
}

/// `POST /v1/tasks`: creates the task and its devbox; on autopilot, starts working on it.
async fn create_task(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let mut books = shared.books();
    let key = idempotency("tasks", &headers);
    if let Some(done) = key.as_ref().and_then(|key| books.done.get(key)) {
        return Json(done.clone()).into_response();
    }
    let Some(title) = body["setId"].as_str().and_then(|set| books.sets.get(set)).cloned() else {
        return not_found("task set");
    };
    let number = books.tasks.len() + 1;
    let task = FakeTask {
        task_id: format!("task-{number}"),
        devbox_id: format!("box-{number}"),
        title,
        repos: serde_json::from_value(body["repos"].clone()).unwrap_or_default(),
        webhook_url: body["webhookUrl"].as_str().unwrap_or_default().to_owned(),
        prompts: vec![body["prompt"].as_str().unwrap_or_default().to_owned()],
        state: "created".to_owned(),
        error: None,
        reads: 0,
        stopped: false,
        deliveries: Vec::new(),
    };
    let answer = json!({ "task_id": task.task_id, "devbox_id": task.devbox_id });
    books.done.extend(key.map(|key| (key, answer.clone())));
    tokio::spawn(play(shared.clone(), task.task_id.clone(), &["pending", "running", "attention-required"]));
    books.tasks.push(task);
    Json(answer).into_response()
}

/// `POST /v1/tasks/{task}/prompt`: a follow-up; on autopilot, the task works on it and completes.
async fn prompt(
    State(shared): State<Arc<Shared>>,
    Path(task_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let mut books = shared.books();
    let key = idempotency(&format!("prompt {task_id}"), &headers);
    if key.as_ref().is_some_and(|key| books.done.contains_key(key)) {
        return (StatusCode::ACCEPTED, Json(json!({}))).into_response();
    }
    let Some(task) = books.task(&task_id) else { return not_found("task") };
    task.prompts.push(body["prompt"].as_str().unwrap_or_default().to_owned());
    books.done.extend(key.map(|key| (key, json!({}))));
    tokio::spawn(play(shared.clone(), task_id, &["running", "complete"]));
    (StatusCode::ACCEPTED, Json(json!({}))).into_response()
}

/// `GET /v1/tasks/{task}`: the result so far.
async fn read_task(State(shared): State<Arc<Shared>>, Path(task_id): Path<String>, headers: HeaderMap) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let mut books = shared.books();
    let Some(task) = books.task(&task_id) else { return not_found("task") };
    task.reads += 1;
    Json(result(task)).into_response()
}

/// A task's result: its error, a pull request if its prompts ask for one, or review findings.
fn result(task: &FakeTask) -> Value {
    let repo = task.repos.first().map_or("the repository", String::as_str);
    if let Some(error) = &task.error {
        return json!({ "summary": format!("The work in {repo} failed."), "exitStatus": 1, "error": error });
    }
    // The latest prompt that says anything about a pull request decides whether to open one.
    let prompts = task.prompts.iter().rev().map(|prompt| prompt.to_lowercase());
    let latest = prompts.into_iter().find(|prompt| prompt.contains("pull request") || prompt.contains("open a pr"));
    if latest.is_some_and(|prompt| !prompt.contains("do not open")) {
        let number: u32 = task.task_id.trim_start_matches("task-").parse().unwrap_or_default();
        let pr = format!("https://github.com/{repo}/pull/{}", 100 + number);
        return json!({ "summary": format!("Made the change in {repo} and opened {pr}."), "exitStatus": 0, "prs": [pr] });
    }
    let findings = format!(
        "2 findings in {repo}: the order total is computed before the discount is applied, \
         and the payment retry loop never backs off."
    );
    json!({ "summary": findings, "exitStatus": 0 })
}

/// `POST /v1/devboxes/{devbox}/stop`.
async fn stop(State(shared): State<Arc<Shared>>, Path(devbox_id): Path<String>, headers: HeaderMap) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let mut books = shared.books();
    let Some(task) = books.tasks.iter_mut().find(|task| task.devbox_id == devbox_id) else {
        return not_found("devbox");
    };
    task.stopped = true;
    task.state = "stopped".to_owned();
    if matches!(shared.mode, Mode::Autopilot(_)) {
        println!("    [devbox] {devbox_id} stopped");
    }
    (StatusCode::ACCEPTED, Json(json!({}))).into_response()
}

/// `GET /tasks/{task}`: the page people open, with the assistant's question when it has one.
async fn page(State(shared): State<Arc<Shared>>, Path(task_id): Path<String>) -> Response {
    let mut books = shared.books();
    let Some(task) = books.task(&task_id) else { return (StatusCode::NOT_FOUND, "no such task").into_response() };
    let mut page = format!("{}: {}\n", task.title, task.state);
    if task.state == "attention-required" {
        page.push_str(&format!("The assistant asks: {QUESTION}\n"));
    }
    page.into_response()
}
