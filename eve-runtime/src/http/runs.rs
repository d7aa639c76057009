//! The run API for channels and examples: start a run, read its status, cancel it, list its open
//! questions and answer one.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body;
use super::errors::{ApiError, from_runtime};
use super::path::segment;
use super::state::AppState;
use crate::ask::{Answer, Ask};
use crate::journal::{RunId, RunStatus};
use crate::runtime::{RunOutcome, StartOptions};
use crate::time::Timestamp;

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
struct RunView {
    run_id: RunId,
    tool: String,
    status: RunStatus,
    #[serde(serialize_with = "crate::time::iso")]
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<RunOutcome>,
}

/// `GET /v1/runs/{run}`: the run's tool, status and, once it ended, its outcome.
pub(crate) async fn status(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, ApiError> {
    let run = run_id(&uri)?;
    let record = state.runtime.journal(&run).await.map_err(from_runtime)?;
    let outcome = record.entries.last().and_then(RunOutcome::from_terminal);
    let summary = record.summary;
    let view = RunView {
        run_id: summary.id,
        tool: summary.tool,
        status: summary.status,
        created_at: summary.created_at,
        outcome,
    };
    Ok(Json(serde_json::to_value(view).expect("a run view always serializes")))
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
    let answer = Answer { option_id: answer.option_id, text: answer.text };
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
