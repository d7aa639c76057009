//! The session API: start a session, send it messages, cancel its turn, answer its tasks'
//! questions, and follow its event feed as server-sent events.
//!
//! - `POST /v1/sessions` `{sessionId?, system?, tools?, child?, history?}` → `201 {"sessionId"}`
//! - `POST /v1/sessions/{session}/messages` `{text, turnPolicy?, caller?, messageId?}` → `202`
//! - `POST /v1/sessions/{session}/cancel` → `202`; `POST /v1/sessions/{session}/close` → `202`
//! - `POST /v1/sessions/{session}/questions/{requestId}` `{optionId?, text?}` → `204`
//! - `GET /v1/sessions/{session}/events` → `text/event-stream`, one SSE event per feed event:
//!   its `id` is the event's sequence number, its name the event's (`turn.started`, …), its data
//!   the event as JSON. A client that reconnects sends `Last-Event-ID` (or `?after=N`) and
//!   resumes after it without loss or duplicates, also after the server restarted.

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;

use super::body;
use super::errors::{ApiError, from_session};
use super::path::segment;
use super::serve;
use super::state::AppState;
use eve_runtime::Error;
use eve_runtime::ask::{Answer, AnswerAction};
use eve_runtime::journal::RunId;
use eve_sessions::{Session, SessionOptions, SessionRuntimeExt, TurnPolicy, UserMessage};

/// The index of `{session}` in `/v1/sessions/{session}/…`.
const SESSION_SEGMENT: usize = 2;
/// The index of `{requestId}` in `/v1/sessions/{session}/questions/{requestId}`.
const REQUEST_SEGMENT: usize = 4;

/// The body of `POST /v1/sessions`, which may be empty.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct StartBody {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    child: bool,
    /// How many messages of history the model is shown at most.
    #[serde(default)]
    history: Option<usize>,
}

/// `POST /v1/sessions`: starts a session (or returns the one that already has `sessionId`).
pub(crate) async fn start(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let start: StartBody = body::optional_json(body, &headers, &state.limits).await?.unwrap_or_default();
    let mut options = SessionOptions::new();
    if let Some(id) = start.session_id {
        let invalid = "`sessionId` must be 1 to 128 ASCII letters, digits, `-`, `_` or `.`";
        let id = id.parse().map_err(|_| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, invalid).field("sessionId"))?;
        options = options.id(id);
    }
    if let Some(system) = start.system {
        options = options.system(system);
    }
    if let Some(tools) = start.tools {
        options = options.tools(tools);
    }
    if start.child {
        options = options.child();
    }
    if let Some(messages) = start.history {
        options = options.history(messages);
    }
    let session = state.runtime.session(options).await.map_err(|error| match error {
        eve_sessions::Error::Runtime(error @ Error::UnknownTool { .. }) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()).field("tools")
        }
        error => from_session(error),
    })?;
    let id = session.id();
    let mut response = (StatusCode::CREATED, Json(serde_json::json!({ "sessionId": id }))).into_response();
    if let Ok(location) = HeaderValue::try_from(format!("/v1/sessions/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// The body of `POST /v1/sessions/{session}/messages`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MessageBody {
    text: String,
    #[serde(default)]
    turn_policy: TurnPolicy,
    #[serde(default)]
    caller: Option<String>,
    /// Sent again with the same id (a retry after a lost response), the message is read once.
    #[serde(default)]
    message_id: Option<String>,
}

/// `POST /v1/sessions/{session}/messages`: sends the model a message.
pub(crate) async fn message(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let body: MessageBody = body::json(body, &headers, &state.limits).await?;
    let session = session(&state, &uri).await?;
    let mut message = UserMessage::new(body.text).policy(body.turn_policy);
    if let Some(caller) = body.caller {
        message = message.caller(caller);
    }
    let sent = match body.message_id {
        Some(id) if id.is_empty() || id.len() > 128 => {
            let message = "`messageId` must be 1 to 128 characters";
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message).field("messageId"));
        }
        Some(id) => session.send_message_once(message, &id).await,
        None => session.send_message(message).await,
    };
    sent.map_err(from_session)?;
    Ok(StatusCode::ACCEPTED)
}

/// `POST /v1/sessions/{session}/cancel`: cancels the open turn, the calls it waits on and every
/// working task.
pub(crate) async fn cancel(State(state): State<AppState>, uri: Uri) -> Result<StatusCode, ApiError> {
    session(&state, &uri).await?.cancel().await.map_err(from_session)?;
    Ok(StatusCode::ACCEPTED)
}

/// `POST /v1/sessions/{session}/close`: ends the session and every task.
pub(crate) async fn close(State(state): State<AppState>, uri: Uri) -> Result<StatusCode, ApiError> {
    session(&state, &uri).await?.close().await.map_err(from_session)?;
    Ok(StatusCode::ACCEPTED)
}

/// The body of `POST /v1/sessions/{session}/questions/{requestId}`.
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

/// `POST /v1/sessions/{session}/questions/{requestId}`: answers a task's question once.
pub(crate) async fn answer(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let answer: AnswerBody = body::json(body, &headers, &state.limits).await?;
    let session = session(&state, &uri).await?;
    let not_open = || ApiError::new(StatusCode::CONFLICT, "the session has no open question with this id");
    let request = segment(&uri, REQUEST_SEGMENT).ok_or_else(not_open)?;
    let answer = Answer { option_id: answer.option_id, text: answer.text, value: answer.value, action: answer.action };
    session.answer(&request, answer).await.map_err(from_session)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of `GET /v1/sessions/{session}/events`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct After {
    /// Only the events after this sequence number.
    after: Option<u64>,
}

/// `GET /v1/sessions/{session}/events`: the feed from the start, or after `Last-Event-ID`.
pub(crate) async fn events(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    query: Result<Query<After>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|_| {
        let message = "the query string is malformed; the only parameter is `after`, a sequence number";
        ApiError::new(StatusCode::BAD_REQUEST, message)
    })?;
    let last = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(value.to_str().ok().and_then(|id| id.trim().parse::<u64>().ok()).ok_or_else(|| {
            let message = "`Last-Event-ID` must be the sequence number of an event this feed sent";
            ApiError::new(StatusCode::BAD_REQUEST, message)
        })?),
    };
    let session = session(&state, &uri).await?;
    let after = last.or(query.after).unwrap_or(0);
    let feed = session.events(after);
    let stream = futures::stream::unfold((feed, state.stop.clone(), false), |(mut feed, mut stop, done)| async move {
        if done {
            return None;
        }
        tokio::select! {
            next = feed.next() => match next? {
                Ok(event) => {
                    let data = serde_json::to_string(&event).expect("a feed event always serializes");
                    let sse = Event::default().id(event.sequence.to_string()).event(event.name).data(data);
                    Some((Ok::<_, Infallible>(sse), (feed, stop, false)))
                }
                Err(error) => {
                    tracing::warn!("a session's feed could not be read: {error}");
                    let data = serde_json::json!({ "message": "the feed could not be read; reconnect with Last-Event-ID" });
                    Some((Ok(Event::default().event("error").data(data.to_string())), (feed, stop, true)))
                }
            },
            _ = serve::stopped(&mut stop) => None,
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// The session named by the path.
async fn session(state: &AppState, uri: &Uri) -> Result<Session, ApiError> {
    let invalid = || {
        let message = "no session with this id; session ids are 1 to 128 ASCII letters, digits, `-`, `_` or `.`";
        ApiError::new(StatusCode::NOT_FOUND, message)
    };
    let id: RunId = segment(uri, SESSION_SEGMENT).and_then(|id| id.parse().ok()).ok_or_else(invalid)?;
    state.runtime.open_session(&id).await.map_err(from_session)
}
