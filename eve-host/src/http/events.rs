//! `GET /v1/events[?run={run}]`: the runtime's events as server-sent events, so a channel can
//! render questions (`input.requested`, `input.resolved`) and sign-in links
//! (`authorization.required`) as they happen.
//!
//! Each event's SSE name is its `event` field and its data is the event's JSON. Events are
//! best-effort, like [`Runtime::events`](crate::Runtime::events): a client that falls behind is
//! sent a `lagged` event with the number it missed, and should re-read what it needs
//! (`GET /v1/runs/{run}/questions`). The stream ends when the server shuts down.

use std::convert::Infallible;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio::sync::watch;

use super::errors::ApiError;
use super::serve;
use super::state::AppState;
use eve_runtime::events::RunEvent;

/// The stream's query parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    /// Only this run's events.
    run: Option<String>,
}

/// Streams events until the client leaves or the server stops.
pub(crate) async fn stream(
    State(state): State<AppState>,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(filter) = query.map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, "the query string is malformed; the only parameter is `run`")
    })?;
    // Subscribed before the response goes out: a client that has the headers misses nothing after them.
    let events = state.runtime.events();
    let stream = sse_events(events, filter.run, state.stop.clone());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn sse_events(
    events: Receiver<RunEvent>,
    run: Option<String>,
    stop: watch::Receiver<bool>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((events, stop), move |(mut events, mut stop)| {
        let run = run.clone();
        async move {
            loop {
                let received = tokio::select! {
                    received = events.recv() => received,
                    _ = serve::stopped(&mut stop) => return None,
                };
                let event = match received {
                    Ok(event) if run.as_deref().is_some_and(|run| run != event.run().as_str()) => continue,
                    Ok(event) => sse_event(&event),
                    Err(RecvError::Lagged(missed)) => {
                        Some(Event::default().event("lagged").data(serde_json::json!({ "missed": missed }).to_string()))
                    }
                    Err(RecvError::Closed) => return None,
                };
                if let Some(event) = event {
                    return Some((Ok(event), (events, stop)));
                }
            }
        }
    })
}

/// One event: named by its `event` field, with its JSON as data.
fn sse_event(event: &RunEvent) -> Option<Event> {
    let value = serde_json::to_value(event).ok()?;
    let name = value.get("event").and_then(|name| name.as_str()).unwrap_or("event").to_owned();
    Some(Event::default().event(name).data(value.to_string()))
}
