//! `GET /v1/events[?run={run}]`: runs' events as server-sent events, so a channel can render
//! questions (`input.requested`, `input.resolved`) and sign-in links (`authorization.required`)
//! as they happen.
//!
//! Each event's SSE name is its `event` field and its data is the event's JSON.
//!
//! - **One run** (`?run=`): the events of the run's journal, read with
//!   [`Runtime::follow`](eve_runtime::Runtime::follow), each with its journal position as its SSE
//!   id. Nothing is missed however slowly the client reads, and a client that reconnects with
//!   `Last-Event-ID` goes on after the last event it received. The stream ends after the run
//!   does. A run not created yet is waited for, so a client may subscribe before it starts the
//!   run. Only journaled events come this way: a step's start and a model's streaming text
//!   (`step.started`, `model.text`) are on the stream of every run.
//! - **Every run** (no `run`): what the runtime reports as it happens
//!   ([`Runtime::events`](eve_runtime::Runtime::events)), best-effort: a client that falls
//!   behind is sent a `lagged` event with the number it missed, and should re-read what it needs
//!   (`GET /v1/runs/{run}/questions`). The stream ends when the server shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio::sync::{mpsc, watch};

use super::errors::ApiError;
use super::serve;
use super::state::AppState;
use eve_runtime::Runtime;
use eve_runtime::events::RunEvent;
use eve_runtime::journal::{Position, RunId};

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
    headers: HeaderMap,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(filter) = query.map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, "the query string is malformed; the only parameter is `run`")
    })?;
    let Some(run) = filter.run else {
        // Subscribed before the response goes out: a client that has the headers misses nothing after them.
        let events = state.runtime.events();
        let stream = sse_events(events, state.stop.clone());
        return Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response());
    };
    let run: RunId = run.parse().map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("`{run}` is not a run id; give the id a run was started with"))
    })?;
    let from = match headers.get("last-event-id") {
        None => Position::START,
        Some(id) => {
            id.to_str().ok().and_then(|id| id.parse::<Position>().ok()).map(Position::next).ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "`Last-Event-ID` is not an id this stream sent (ids are journal positions such as `0.17`); \
                 reconnect without it to read the run from its start",
                )
            })?
        }
    };
    let stream = run_events(state.runtime.clone(), run, from, state.stop.clone());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// How often a stream waiting for its run to be created looks for it, besides hearing it start.
const CREATED_POLL: Duration = Duration::from_secs(1);

/// The events of one run's journal from `from`, each with its position as its id, until the run
/// ends, the client leaves or the server stops. A task follows the run and hands the events
/// over through a short channel, so it reads no further ahead of the client than that.
fn run_events(
    runtime: Runtime,
    run: RunId,
    from: Position,
    stop: watch::Receiver<bool>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let (sender, receiver) = mpsc::channel(16);
    tokio::spawn(follow_run(runtime, run, from, stop, sender));
    futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|event| (Ok(event), receiver)) },
    )
}

async fn follow_run(
    runtime: Runtime,
    run: RunId,
    from: Position,
    mut stop: watch::Receiver<bool>,
    sender: mpsc::Sender<Event>,
) {
    let tool = tokio::select! {
        tool = created(&runtime, &run) => tool,
        () = serve::stopped(&mut stop) => return,
        () = sender.closed() => return,
    };
    let tool = match tool {
        Ok(tool) => tool,
        Err(message) => {
            let _ = sender.send(error_event(&message)).await;
            return;
        }
    };
    let mut follow = runtime.follow(&run, from);
    loop {
        let followed = tokio::select! {
            followed = follow.next() => followed,
            () = serve::stopped(&mut stop) => return,
            () = sender.closed() => return,
        };
        let event = match followed {
            None => return,
            Some(Err(error)) => {
                let _ = sender.send(error_event(&error.to_string())).await;
                return;
            }
            Some(Ok(followed)) => match runtime.event_of(&run, &tool, &followed.entry).as_ref().and_then(sse_event) {
                Some(event) => event.id(followed.position.to_string()),
                None => continue,
            },
        };
        if sender.send(event).await.is_err() {
            return;
        }
    }
}

/// The tool of `run`, once the run exists: a client may subscribe before it starts the run.
async fn created(runtime: &Runtime, run: &RunId) -> Result<String, String> {
    let mut started = runtime.events();
    loop {
        match runtime.store().tail(run).await {
            Ok(Some((summary, _))) => return Ok(summary.tool),
            Ok(None) => {}
            Err(error) => return Err(error.to_string()),
        }
        let heard = async {
            loop {
                match started.recv().await {
                    Ok(RunEvent::Started { run: new, .. }) if &new == run => return,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return,
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout(CREATED_POLL, heard).await;
    }
}

/// An `error` event: the stream ends after it, and the client may reconnect with its last id.
fn error_event(message: &str) -> Event {
    Event::default().event("error").data(serde_json::json!({ "error": message }).to_string())
}

/// Every run's events as the runtime reports them, until the server stops.
fn sse_events(
    events: Receiver<RunEvent>,
    stop: watch::Receiver<bool>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((events, stop), move |(mut events, mut stop)| async move {
        loop {
            let received = tokio::select! {
                received = events.recv() => received,
                _ = serve::stopped(&mut stop) => return None,
            };
            let event = match received {
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
    })
}

/// One event: named by its `event` field, with its JSON as data.
fn sse_event(event: &RunEvent) -> Option<Event> {
    let value = serde_json::to_value(event).ok()?;
    let name = value.get("event").and_then(|name| name.as_str()).unwrap_or("event").to_owned();
    Some(Event::default().event(name).data(value.to_string()))
}
