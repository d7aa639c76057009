//! The inspector: a small web page at `/ui` over the `/v1` run API.
//!
//! The page is three files built into the binary (`ui/index.html`, `ui/app.js`, `ui/app.css`:
//! plain HTML and JavaScript, no CDN, so it works offline) that read runs, timelines and
//! questions from `/v1`, answer and cancel there, and follow the event stream for a live view.
//!
//! It is served on the same terms as `/v1`: the `Host` and `Origin` rules of `origin.rs` apply
//! to every `/ui` route, and on a server with an API key the page asks for the key once and
//! signs the browser in with a signed cookie that any worker sharing the runtime's secret key
//! accepts (see `cookie.rs`). The files themselves hold no data, so
//! the script and the style sheet are served to the sign-in form too. Every page carries a
//! Content-Security-Policy that allows this origin's own script and style and nothing else.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::body;
use super::cookie::{self, SIGN_IN_COOKIE, SIGN_IN_LIFETIME, SignIns};
use super::errors::ApiError;
use super::state::AppState;
use eve_runtime::secret::TokenHash;

/// Where the inspector lives.
pub const UI_PATH: &str = "/ui";

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");
const HTML: &str = "text/html; charset=utf-8";

/// What the inspector's pages may load: their own script, style and API, nothing else, and no
/// page may frame them.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                      base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `GET /ui`: the inspector, or its sign-in form on a server with a key the browser has not
/// given yet.
pub(crate) async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match state.api_key.is_none() || signed_in(&state, &headers) {
        true => file(StatusCode::OK, HTML, INDEX),
        false => sign_in_form(StatusCode::OK, None),
    }
}

/// `GET /ui/app.js`.
pub(crate) async fn script() -> Response {
    file(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /ui/app.css`.
pub(crate) async fn style() -> Response {
    file(StatusCode::OK, "text/css; charset=utf-8", STYLE)
}

/// The sign-in form's fields.
#[derive(Deserialize)]
struct SignInForm {
    key: String,
}

/// `POST /ui/sign-in` (a form with `key`): the right key sets the sign-in cookie and goes back to
/// the inspector; a wrong one shows the form again with `401`.
pub(crate) async fn sign_in(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let Some(expected) = &state.api_key else { return see_other(UI_PATH, None) };
    let bytes = match body::read(body, &headers, &state.limits).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let Ok(form) = serde_urlencoded::from_bytes::<SignInForm>(&bytes) else {
        let message = "send the form with the key in its `key` field";
        return ApiError::new(StatusCode::BAD_REQUEST, message).field("key").into_response();
    };
    if !TokenHash::of(form.key.trim()).matches(expected) {
        return sign_in_form(StatusCode::UNAUTHORIZED, Some("That is not the server's API key. Try again."));
    }
    let value = SignIns::start(&state.sign_in_key, expected, state.runtime.clock().now());
    see_other(UI_PATH, Some(sign_in_cookie(&state, &value, SIGN_IN_LIFETIME.as_secs())))
}

/// `POST /ui/sign-out`: refuses the browser's sign-in on this server from now on and clears its
/// cookie.
pub(crate) async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(api_key) = &state.api_key {
        state.sign_ins.end(&headers, &state.sign_in_key, api_key, state.runtime.clock().now());
    }
    see_other(UI_PATH, Some(sign_in_cookie(&state, "", 0)))
}

/// Whether the request carries the cookie of a sign-in this server accepts now.
pub(crate) fn signed_in(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(api_key) = &state.api_key else { return false };
    state.sign_ins.signed_in(headers, &state.sign_in_key, api_key, state.runtime.clock().now())
}

/// The sign-in cookie holding `value`, for `max_age` seconds (0 clears it). `Secure` when the
/// runtime's public URL is HTTPS.
fn sign_in_cookie(state: &AppState, value: &str, max_age: u64) -> HeaderValue {
    cookie::set(SIGN_IN_COOKIE, value, "/", max_age, "Strict", state.runtime.public_url())
}

/// `303 See Other` to `location`, setting `cookie` if given.
fn see_other(location: &'static str, cookie: Option<HeaderValue>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
    if let Some(cookie) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// A page or file, with its type and the pages' policy.
fn file(status: StatusCode, content_type: &'static str, contents: impl Into<Body>) -> Response {
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], contents.into()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    // Not `no-referrer`: under it a browser sends `Origin: null` with the page's own form posts.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// The sign-in form, with `notice` above it (a wrong key, say).
fn sign_in_form(status: StatusCode, notice: Option<&'static str>) -> Response {
    let notice = notice.map(|text| format!("<p class=\"error\" role=\"alert\">{text}</p>")).unwrap_or_default();
    file(status, HTML, SIGN_IN.replace("{notice}", &notice))
}

/// The sign-in form's page; `{notice}` is replaced by a fixed sentence or nothing.
const SIGN_IN: &str = r#"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Sign in · eve inspector</title>
  <link rel="stylesheet" href="/ui/app.css">
</head>
<body>
  <main id="main" class="sign-in">
    <h1>eve inspector</h1>
    {notice}
    <form method="post" action="/ui/sign-in">
      <label for="key">The server's API key</label>
      <input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
      <button type="submit">Sign in</button>
    </form>
    <p class="hint">It is the key the server was started with (<code>EVE_API_KEY</code> for <code>host serve</code>).</p>
  </main>
</body>
</html>
"#;
