//! Sign-in callbacks: `GET /.well-known/workflow/v1/auth/{provider}/callback?code=…&state=…`.
//!
//! The provider sends the person's browser here after they sign in. The `state` names the step
//! waiting for the sign-in and the `code` is exchanged once for a token that stays with the
//! provider. Unknown, used and other providers' callbacks get the empty 404. Both values are
//! secrets: neither is logged, and an exchange error is redacted of both before it is returned.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::AppState;
use super::errors::{ApiError, redact, token_refusal};
use super::routes::segment;
use crate::runtime::Error;

/// The index of the provider among the path's segments.
const PROVIDER_SEGMENT: usize = 4;

/// The page a person sees after signing in.
const SIGNED_IN: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Signed in</title></head>\
                         <body><p>Signed in; you can close this tab.</p></body></html>\n";

/// The callback's query parameters.
#[derive(Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
}

/// Completes the sign-in a step waits for.
pub(crate) async fn callback(
    State(app): State<AppState>,
    uri: Uri,
    query: Result<Query<Callback>, QueryRejection>,
) -> Result<Response, ApiError> {
    let malformed = "the callback's query string is malformed; expected `code` and `state` once each";
    let Query(callback) = query.map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, malformed))?;
    let code = required(callback.code, "code")?;
    let state = required(callback.state, "state")?;
    let provider = segment(&uri, PROVIDER_SEGMENT).ok_or(ApiError::NotFound)?;
    match app.runtime.complete_authorization(&provider, &state, &code).await {
        Ok(_) => Ok(signed_in()),
        Err(Error::Auth(error)) => {
            let message = redact(&format!("the sign-in could not be completed: {error}"), &[&code, &state]);
            Err(ApiError::new(StatusCode::BAD_GATEWAY, message))
        }
        Err(error) => Err(token_refusal(error)),
    }
}

/// A query parameter that must be present and non-empty.
fn required(value: Option<String>, name: &str) -> Result<String, ApiError> {
    value.filter(|value| !value.is_empty()).ok_or_else(|| {
        let message = format!("the callback has no `{name}`; start the sign-in again from its link");
        ApiError::new(StatusCode::BAD_REQUEST, message).field(name)
    })
}

/// `200` with a page that loads nothing and sends no referrer (the URL held a code).
fn signed_in() -> Response {
    let mut response = Html(SIGNED_IN).into_response();
    let policy = HeaderValue::from_static("default-src 'none'");
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, policy);
    response
}
