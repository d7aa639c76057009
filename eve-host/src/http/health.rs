//! Probes for orchestrators: `/healthz` (the process answers) and `/readyz` (it can take work).
//!
//! Both are outside the run API's key and origin rules: a probe carries neither, and neither
//! says anything about a run. `/readyz` does not say why it is not ready either (a store's error
//! names its server); the server's log does, at WARN.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
use super::state::AppState;
use eve_runtime::Error;

/// `GET /healthz`: `200 ok` while the process serves requests at all.
pub(crate) async fn live() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: `200 {"ready": true}` while the runtime is not stopping and its store answers
/// (on Postgres, the database and a worker's listening connection); otherwise `503` saying which.
pub(crate) async fn ready(State(state): State<AppState>) -> Response {
    let not_ready = |message: &str| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    if *state.stop.borrow() {
        return not_ready("not ready: the server is shutting down");
    }
    match state.runtime.ready().await {
        Ok(()) => Json(serde_json::json!({ "ready": true })).into_response(),
        Err(Error::ShuttingDown) => not_ready("not ready: the runtime is shutting down"),
        Err(error) => {
            tracing::warn!("not ready: {error}");
            not_ready("not ready: the store does not answer; the server's log says why")
        }
    }
}
