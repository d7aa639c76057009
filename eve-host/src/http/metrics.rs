//! `GET /metrics`: the process's metrics in Prometheus's text format, for a scraper.
//!
//! The route is behind the run API's key and origin rules: metrics name the tools and steps a
//! binary has and how busy it is, which is not for whoever reaches the address. A scraper sends
//! the key as `Authorization: Bearer <key>` (Prometheus's `authorization` setting does).
//! Without a recorder given to [`Server::metrics`](super::Server::metrics) it answers `404`
//! saying how to give one; in a binary built without the `metrics` feature, how to enable it.

use axum::http::StatusCode;
#[cfg(feature = "metrics")]
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
#[cfg(feature = "metrics")]
use super::state::AppState;

/// The content type of the text exposition format.
#[cfg(feature = "metrics")]
const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the recorder the server was given.
#[cfg(feature = "metrics")]
pub(crate) async fn render(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    let Some(metrics) = &state.metrics else {
        let message = "this server records no metrics; give it a recorder with \
                       `Server::metrics(eve_tools::metrics::install()?)`";
        return ApiError::new(StatusCode::NOT_FOUND, message).into_response();
    };
    let mut response = metrics.render().into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(EXPOSITION));
    response
}

/// `/metrics` in a binary built without the `metrics` feature: `404`, saying how to enable it.
#[cfg(not(feature = "metrics"))]
pub(crate) async fn render() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, crate::without::METRICS).into_response()
}
