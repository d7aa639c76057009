//! Sign-in links and callbacks, under `/.well-known/workflow/v1/auth/{provider}/`.
//!
//! A run that needs a sign-in publishes a link to `start?state=…`. Opening it sets a cookie that
//! ties the sign-in to this browser, then redirects to the provider. The provider sends the
//! browser back to `callback?code=…&state=…`, which completes the sign-in only if the browser
//! carries that cookie: whoever else opens the callback (a page that makes a person's browser
//! complete someone else's sign-in, login CSRF in RFC 9700 §4.7) gets the empty 404, like an
//! unknown, used or other provider's callback. The `state` names the step waiting for the
//! sign-in and the `code` is exchanged once for a token that stays with the provider.
//!
//! The cookie is `HttpOnly` and `SameSite=Lax` (so the provider's top-level redirect brings it
//! back), `Secure` when the public URL is `https`, scoped to the callback's path, lives
//! [`SIGN_IN_COOKIE_SECONDS`], and is named after the sign-in, so two sign-ins started in one
//! browser do not overwrite each other's. Its value is derived from the `state` with the runtime's
//! secret key ([`Runtime::begin_authorization`](crate::Runtime::begin_authorization)). The
//! `state`, the `code` and the cookie are secrets: none is logged, and an exchange error is
//! redacted of them before it is returned.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::cookie;
use super::errors::{ApiError, redact, token_refusal};
use super::path::segment;
use super::state::AppState;
use eve_runtime::Error;
use eve_runtime::secret::TokenHash;

/// The index of the provider among the path's segments.
const PROVIDER_SEGMENT: usize = 4;

/// How long the cookie a sign-in link sets lives: the time a person has to sign in, 10 minutes.
pub(crate) const SIGN_IN_COOKIE_SECONDS: u32 = 600;

/// The sign-in link's query parameters.
#[derive(Deserialize)]
pub(crate) struct Start {
    state: Option<String>,
}

/// Opens a sign-in: sets the cookie that ties it to this browser and redirects to the provider.
pub(crate) async fn start(
    State(app): State<AppState>,
    uri: Uri,
    query: Result<Query<Start>, QueryRejection>,
) -> Result<Response, ApiError> {
    let malformed = "the sign-in link's query string is malformed; open the link the run published, unchanged";
    let Query(start) = query.map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, malformed))?;
    let state = start.state.filter(|state| !state.is_empty()).ok_or_else(|| {
        let message = "the sign-in link has no `state`; open the link the run published, unchanged";
        ApiError::new(StatusCode::BAD_REQUEST, message).field("state")
    })?;
    let provider = segment(&uri, PROVIDER_SEGMENT).ok_or(ApiError::NotFound)?;
    let started = match app.runtime.begin_authorization(&provider, &state).await {
        Ok(started) => started,
        Err(Error::Auth(error)) => {
            let message = redact(&format!("the sign-in cannot start: {error}"), &[&state]);
            return Err(ApiError::new(StatusCode::BAD_GATEWAY, message));
        }
        Err(error) => return Err(token_refusal(error)),
    };
    let location = HeaderValue::try_from(started.url()).map_err(|_| {
        tracing::error!(provider, "the provider's sign-in URL is not a valid header value");
        ApiError::new(StatusCode::BAD_GATEWAY, "the sign-in provider built an invalid URL; check its configuration")
    })?;
    let cookie = cookie(&app, &provider, &state, started.binding(), SIGN_IN_COOKIE_SECONDS);
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(header::LOCATION, location);
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// The cookie that ties the sign-in under `state` to a browser (`max_age` 0 clears it).
fn cookie(app: &AppState, provider: &str, state: &str, value: &str, max_age: u32) -> HeaderValue {
    let callback = app.runtime.sign_in_callback(provider);
    cookie::set(&cookie_name(state), value, path_of(&callback), max_age.into(), "Lax", app.runtime.public_url())
}

/// The path of a URL, as the browser sends it when the provider redirects it there (the cookie's
/// `Path`, so the browser sends the cookie to the callback and nowhere else).
fn path_of(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
    path.split(['?', '#']).next().unwrap_or(path)
}

/// The name of a sign-in's cookie: one per sign-in, named by a prefix of the `state`'s hash (the
/// hash stores keep anyway), so it reveals nothing of the `state`.
fn cookie_name(state: &str) -> String {
    format!("eve-sign-in-{}", &TokenHash::of(state).as_str()[..16])
}

/// Whether the request carries the cookie the sign-in link under `state` set.
fn opened_here(app: &AppState, headers: &HeaderMap, state: &str) -> bool {
    let name = cookie_name(state);
    cookie::values(headers, &name).any(|value| app.runtime.authorization_binding_matches(state, value))
}

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
    headers: HeaderMap,
    query: Result<Query<Callback>, QueryRejection>,
) -> Result<Response, ApiError> {
    let malformed = "the callback's query string is malformed; expected `code` and `state` once each";
    let Query(callback) = query.map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, malformed))?;
    let code = required(callback.code, "code")?;
    let state = required(callback.state, "state")?;
    let provider = segment(&uri, PROVIDER_SEGMENT).ok_or(ApiError::NotFound)?;
    // A browser that did not open this sign-in's link gets the refusal an unknown `state` gets.
    if !opened_here(&app, &headers, &state) {
        return Err(ApiError::NotFound);
    }
    match app.runtime.complete_authorization(&provider, &state, &code).await {
        Ok(_) => {
            let mut page = signed_in();
            let spent = cookie(&app, &provider, &state, "", 0);
            page.headers_mut().insert(header::SET_COOKIE, spent);
            Ok(page)
        }
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

#[cfg(test)]
mod tests {
    use super::path_of;

    #[test]
    fn the_cookie_is_scoped_to_the_callback_the_provider_sends_the_browser_to() {
        let cases = [
            (
                "http://127.0.0.1:7700/.well-known/workflow/v1/auth/my-sso/callback",
                "/.well-known/workflow/v1/auth/my-sso/callback",
            ),
            (
                "https://agent.example/base/.well-known/workflow/v1/auth/gh/callback",
                "/base/.well-known/workflow/v1/auth/gh/callback",
            ),
            ("https://agent.example", "/"),
        ];
        for (url, path) in cases {
            assert_eq!(path_of(url), path, "{url}");
        }
    }
}
