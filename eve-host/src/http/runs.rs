//! The run API for channels, examples and the inspector: start a run, list runs a page at a
//! time, read a run's status or timeline, cancel it, fork it, list its open questions and answer
//! one.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body;
use super::errors::{ApiError, from_runtime};
use super::path::segment;
use super::state::AppState;
use crate::timeline::{Inspection, RunListing};
use eve_runtime::ask::{Answer, AnswerAction, Ask};
use eve_runtime::journal::{BuildStamp, Op, RunId, TraceParent};
use eve_runtime::store::{RunQuery, unknown_state};
use eve_runtime::testing::ReplayVerdict;
use eve_runtime::time::Timestamp;
use eve_runtime::{RunOutcome, StartOptions};

/// The index of `{tool}` in `/v1/tools/{tool}/runs` and of `{run}` in `/v1/runs/{run}/…`.
const NAME_SEGMENT: usize = 2;
/// The index of `{request}` in `/v1/runs/{run}/questions/{request}`.
const REQUEST_SEGMENT: usize = 4;

/// The body of `POST /v1/tools/{tool}/runs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct StartBody {
    input: Value,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    principal: Option<String>,
}

/// `POST /v1/tools/{tool}/runs`: starts a run (or returns the run that already has `runId`).
pub(crate) async fn start(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let start: StartBody = body::json(body, &headers, &state.limits).await?;
    let no_tool = || ApiError::new(StatusCode::NOT_FOUND, "no tool has this name; the manifest lists the tools");
    let tool = segment(&uri, NAME_SEGMENT).ok_or_else(no_tool)?;
    let mut options = StartOptions::new();
    if let Some(id) = start.run_id {
        let invalid = "`runId` must be 1 to 128 ASCII letters, digits, `-`, `_` or `.`";
        let id = id.parse().map_err(|_| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, invalid).field("runId"))?;
        options = options.id(id);
    }
    if let Some(principal) = start.principal {
        options = options.principal(principal);
    }
    // A caller that traces its request makes its span the parent of the run's trace; a header
    // that is not a `traceparent` is ignored, as W3C Trace Context asks.
    if let Some(parent) = headers.get("traceparent").and_then(|value| TraceParent::parse(value.to_str().ok()?)) {
        options = options.traceparent(parent);
    }
    let handle = state.runtime.start_with(&tool, start.input, options).await.map_err(from_runtime)?;
    let id = handle.id();
    let mut response = (StatusCode::CREATED, Json(serde_json::json!({ "runId": id }))).into_response();
    if let Ok(location) = HeaderValue::try_from(format!("/v1/runs/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// A run as `GET /v1/runs/{run}` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusView {
    run_id: RunId,
    tool: String,
    /// [`RunSummary::state`](eve_runtime::store::RunSummary::state)'s word, as everywhere, or
    /// `held` (see [`RunListing::held`]).
    status: &'static str,
    #[serde(serialize_with = "eve_runtime::time::iso")]
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<RunOutcome>,
    /// The build its history runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    build: Option<BuildStamp>,
    /// Why this build holds it, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<ReplayVerdict>,
}

/// `GET /v1/runs/{run}`: the run's tool, status and, once it ended, its outcome.
pub(crate) async fn status(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, ApiError> {
    let run = run_id(&uri)?;
    let record = state.runtime.journal(&run).await.map_err(from_runtime)?;
    let outcome = record.entries.last().and_then(RunOutcome::from_terminal);
    let held = state.runtime.held(&record.summary).await.map_err(from_runtime)?;
    let RunListing { run_id, tool, status, created_at, build, held, .. } = RunListing::of(&record.summary).held(held);
    let view = StatusView { run_id, tool, status, created_at, outcome, build, held };
    Ok(Json(serde_json::to_value(view).expect("a run view always serializes")))
}

/// The most runs one page of `GET /v1/runs` holds, and how many it holds unless asked.
const MOST_PER_PAGE: usize = 200;
const DEFAULT_PER_PAGE: usize = 50;

/// The query of `GET /v1/runs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    status: Option<String>,
    tool: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

/// `GET /v1/runs[?status=…&tool=…&before=…&limit=…]`: one page of runs, newest first, with the
/// cursor of the next page (`next`, `null` on the last).
pub(crate) async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(asked) = query.map_err(|_| {
        let message = "the query string is malformed; the parameters are `status`, `tool`, `before` and `limit`";
        ApiError::new(StatusCode::BAD_REQUEST, message)
    })?;
    let unprocessable =
        |field: &str, message: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message).field(field);
    let limit = match asked.limit.as_deref() {
        None => DEFAULT_PER_PAGE,
        Some(text) => text.parse().ok().filter(|limit| (1..=MOST_PER_PAGE).contains(limit)).ok_or_else(|| {
            unprocessable("limit", format!("`limit` must be a whole number from 1 to {MOST_PER_PAGE}, not `{text}`"))
        })?,
    };
    let mut query = RunQuery::newest(limit);
    if let Some(word) = asked.status.as_deref().filter(|word| !word.is_empty()) {
        query = query.state(word).ok_or_else(|| unprocessable("status", unknown_state(word)))?;
    }
    if let Some(tool) = asked.tool.filter(|tool| !tool.is_empty()) {
        query = query.tool(tool);
    }
    if let Some(cursor) = asked.before.as_deref().filter(|cursor| !cursor.is_empty()) {
        let cursor = cursor.parse().map_err(|_| {
            unprocessable("before", "`before` must be the `next` of an earlier page, as it was given".to_owned())
        })?;
        query = query.before(cursor);
    }
    let page = state.runtime.list_runs(&query).await.map_err(from_runtime)?;
    let mut runs = Vec::with_capacity(page.runs.len());
    for summary in &page.runs {
        let held = state.runtime.held(summary).await.map_err(from_runtime)?;
        runs.push(RunListing::of(summary).held(held));
    }
    Ok(Json(serde_json::json!({ "runs": runs, "next": page.next.map(|next| next.to_string()) })))
}

/// The query of `GET /v1/runs/{run}/timeline`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimelineQuery {
    at: Option<String>,
}

/// `GET /v1/runs/{run}/timeline[?at=…]`: the run, its timeline and its journal as of entry `at`
/// (its end by default), and the deliveries it has not taken yet: what `host inspect --json`
/// prints.
pub(crate) async fn timeline(
    State(state): State<AppState>,
    uri: Uri,
    query: Result<Query<TimelineQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(asked) = query.map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, "the query string is malformed; the only parameter is `at`")
    })?;
    let run = run_id(&uri)?;
    let at = match asked.at.as_deref().filter(|at| !at.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            let message = format!("`at` must be a journal entry's number (0, 1, …), not `{text}`");
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message).field("at")
        })?),
    };
    let record = state.runtime.journal(&run).await.map_err(from_runtime)?;
    let pending = state.runtime.store().inbox(&run).await.map_err(|error| from_runtime(error.into()))?;
    let mut inspection = Inspection::of(&record, &pending, at).map_err(|error| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("{error}; give `at` one of them")).field("at")
    })?;
    let held = state.runtime.held(&record.summary).await.map_err(from_runtime)?;
    inspection.run = inspection.run.held(held);
    Ok(Json(serde_json::to_value(inspection).expect("an inspection always serializes")))
}

/// `GET /v1/tools`: the tools of the manifest, by name, with their descriptions and shapes.
pub(crate) async fn tools() -> Json<Value> {
    let tools: Vec<_> = eve_runtime::registry::manifest()
        .tools
        .into_iter()
        .map(|tool| serde_json::json!({ "name": tool.name, "description": tool.description, "shape": tool.shape }))
        .collect();
    Json(serde_json::json!({ "tools": tools }))
}

/// The body of `POST /v1/runs/{run}/cancel`, which may be empty.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelBody {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/runs/{run}/cancel`: fires the run's abort signal.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let cancel: Option<CancelBody> = body::optional_json(body, &headers, &state.limits).await?;
    let run = run_id(&uri)?;
    let reason = cancel.and_then(|cancel| cancel.reason).unwrap_or_else(|| "cancelled over HTTP".to_owned());
    state.runtime.cancel(&run, &reason).await.map_err(from_runtime)?;
    Ok(StatusCode::ACCEPTED)
}

/// The body of `POST /v1/runs/{run}/fork`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// The first op the fork runs again.
    from: u32,
}

/// `POST /v1/runs/{run}/fork` with `{"from": 5}`: forks the finished run from op 5 (see
/// `Runtime::fork`) and answers `201` with the fork's id and where it came from.
pub(crate) async fn fork(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let ForkBody { from } = body::json(body, &headers, &state.limits).await?;
    let run = run_id(&uri)?;
    let handle = state.runtime.fork(&run, Op(from)).await.map_err(from_runtime)?;
    let id = handle.id();
    let created = serde_json::json!({ "runId": id, "forkedFrom": { "runId": run, "op": from } });
    let mut response = (StatusCode::CREATED, Json(created)).into_response();
    if let Ok(location) = HeaderValue::try_from(format!("/v1/runs/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// One open question as `GET /v1/runs/{run}/questions` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QuestionView {
    request_id: String,
    request: Ask,
}

/// `GET /v1/runs/{run}/questions`: the run's open questions, oldest first.
pub(crate) async fn questions(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, ApiError> {
    let run = run_id(&uri)?;
    let open = state.runtime.open_questions(&run).await.map_err(from_runtime)?;
    let questions: Vec<_> = open
        .into_iter()
        .map(|question| QuestionView { request_id: question.request_id, request: question.request })
        .collect();
    Ok(Json(serde_json::json!({ "runId": run, "questions": questions })))
}

/// The body of `POST /v1/runs/{run}/questions/{request}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AnswerBody {
    #[serde(default)]
    option_id: Option<String>,
    #[serde(default)]
    text: Option<String>,
    /// A form's value: a JSON object of its fields.
    #[serde(default)]
    value: Option<serde_json::Value>,
    /// `decline` or `cancel` (dismiss) instead of answering; `accept` by default.
    #[serde(default)]
    action: AnswerAction,
}

/// `POST /v1/runs/{run}/questions/{request}`: answers the question once.
pub(crate) async fn answer(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let answer: AnswerBody = body::json(body, &headers, &state.limits).await?;
    let run = run_id(&uri)?;
    let not_open = || ApiError::new(StatusCode::CONFLICT, format!("run {run} has no open question with this id"));
    let request = segment(&uri, REQUEST_SEGMENT).ok_or_else(not_open)?;
    let answer = Answer { option_id: answer.option_id, text: answer.text, value: answer.value, action: answer.action };
    state.runtime.answer(&run, &request, answer).await.map_err(from_runtime)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The run named by the path; an id that cannot name a run is a `404`.
fn run_id(uri: &Uri) -> Result<RunId, ApiError> {
    let invalid = || {
        let message = "no run with this id; run ids are 1 to 128 ASCII letters, digits, `-`, `_` or `.`";
        ApiError::new(StatusCode::NOT_FOUND, message)
    };
    segment(uri, NAME_SEGMENT).and_then(|run| run.parse().ok()).ok_or_else(invalid)
}
