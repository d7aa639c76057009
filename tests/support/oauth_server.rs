//! A fake OAuth 2.0 server on loopback, for sign-in tests.
//!
//! - `GET /authorize` approves at once: it answers `302` to `redirect_uri?code=…&state=…`. The
//!   person signing in is the `login` query parameter (tests add it to the sign-in URL), or `user`.
//! - `POST /token` exchanges one-time codes (checking the client's credentials, the redirect URI and
//!   the PKCE verifier) and refresh tokens. Codes, access tokens, refresh tokens and the client
//!   secret all contain the test's canary string, so a test can look for them anywhere.
//! - `GET /api/me` checks the bearer token and answers `{"user": login, "serial": n}`; it can be
//!   told to reject every token, or to fail the next few calls with `503`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use eve_tools::{Clock, OAuth2Provider, OAuth2ProviderBuilder, Runtime};
use reqwest::Url;
use serde_json::json;
use sha2::{Digest, Sha256};

/// The client id the fake server knows.
pub const CLIENT_ID: &str = "eve-test-client";

type Params = HashMap<String, String>;

/// A running fake OAuth server; it stops when dropped.
pub struct FakeOAuth {
    base: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        self.server.abort();
    }
}

struct Shared {
    canary: String,
    state: Mutex<Books>,
}

/// Everything the server issued and counted.
#[derive(Default)]
struct Books {
    /// The serial number of the last access token issued.
    serial: u64,
    codes: HashMap<String, Grant>,
    access: HashMap<String, (String, u64)>,
    refresh: HashMap<String, String>,
    exchanges: usize,
    refreshes: usize,
    reject_tokens: bool,
    refuse_refresh: bool,
    failing_api_calls: usize,
    expires_in: Option<u64>,
    issue_refresh_tokens: bool,
}

/// What an approved authorization request granted, until its code is exchanged.
struct Grant {
    redirect_uri: String,
    challenge: Option<String>,
    login: String,
    used: bool,
}

/// Where the server sent the browser after approving a sign-in.
#[derive(Clone, Debug)]
pub struct Redirect {
    /// The whole `Location`.
    pub location: String,
    /// `Location` without its query: the runtime's callback URL.
    pub callback: String,
    /// The `state` it carries back.
    pub state: String,
    /// The one-time `code`.
    pub code: String,
}

impl FakeOAuth {
    /// Starts a server on a free loopback port; everything secret it issues contains `canary`.
    pub async fn start(canary: &str) -> FakeOAuth {
        let shared = Arc::new(Shared { canary: canary.to_owned(), state: Mutex::new(Books::default()) });
        let app = Router::new()
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/api/me", get(me))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port is free");
        let base = format!("http://{}", listener.local_addr().expect("a bound listener has an address"));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the fake OAuth server runs until aborted");
        });
        FakeOAuth { base, shared, server }
    }

    /// The server's base URL, `http://127.0.0.1:port`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The client secret the server expects (it contains the canary).
    pub fn client_secret(&self) -> String {
        format!("secret-{}", self.shared.canary)
    }

    /// A provider builder configured for this server, reading token expiry from `clock`.
    pub fn provider(&self, name: &str, clock: impl Clock) -> OAuth2ProviderBuilder {
        OAuth2Provider::builder(name)
            .client_id(CLIENT_ID)
            .client_secret(self.client_secret())
            .auth_url(format!("{}/authorize", self.base))
            .token_url(format!("{}/token", self.base))
            .scopes(["profile"])
            .clock(clock)
    }

    /// Issues access tokens that expire after `seconds`, with refresh tokens.
    pub fn expiring_tokens(&self, seconds: u64) {
        let mut books = self.books();
        books.expires_in = Some(seconds);
        books.issue_refresh_tokens = true;
    }

    /// Makes `/api/me` reject every token (`401`), or stop doing so.
    pub fn reject_tokens(&self, reject: bool) {
        self.books().reject_tokens = reject;
    }

    /// Makes `/token` refuse every refresh token.
    pub fn refuse_refresh(&self) {
        self.books().refuse_refresh = true;
    }

    /// Makes the next `calls` calls of `/api/me` fail with `503`.
    pub fn fail_api_calls(&self, calls: usize) {
        self.books().failing_api_calls = calls;
    }

    /// How many codes were exchanged for tokens.
    pub fn exchanges(&self) -> usize {
        self.books().exchanges
    }

    /// How many refresh tokens were exchanged.
    pub fn refreshes(&self) -> usize {
        self.books().refreshes
    }

    /// Signs in as `login` at a sign-in URL the runtime published: GETs it without following the
    /// redirect and returns where the browser would have gone.
    pub async fn follow(&self, url: &str, login: &str) -> Redirect {
        let mut url = Url::parse(url).expect("a sign-in URL is a URL");
        assert!(url.as_str().starts_with(&self.base), "the sign-in URL points at the fake server: {url}");
        url.query_pairs_mut().append_pair("login", login);
        let client = no_redirects();
        let response = client.get(url).send().await.expect("the fake OAuth server answers");
        assert_eq!(response.status(), StatusCode::FOUND, "the fake server approves the sign-in");
        let location = response.headers()[header::LOCATION].to_str().expect("an ASCII Location").to_owned();
        redirect(&location)
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.shared.books()
    }
}

/// A person's browser: it keeps cookies, and follows no redirects, so a test can see each step.
pub fn browser() -> reqwest::Client {
    let builder = reqwest::Client::builder().cookie_store(true).no_proxy();
    builder.redirect(reqwest::redirect::Policy::none()).build().expect("a plain HTTP client builds")
}

/// Opens a sign-in link the runtime published in `browser` and returns where it sends the browser
/// (the provider's authorization URL), after checking that it answered with a redirect.
pub async fn open_sign_in_link(browser: &reqwest::Client, link: &str) -> String {
    let response = browser.get(link).send().await.expect("the runtime's server answers");
    let status = response.status();
    let location = response.headers().get(header::LOCATION).and_then(|value| value.to_str().ok());
    assert!(status.is_redirection(), "the sign-in link redirects to the provider, but answered {status}");
    location.expect("a redirect has an ASCII Location").to_owned()
}

/// The provider's authorization URL behind a sign-in link the runtime published, as a host that
/// serves its own sign-in pages gets it ([`Runtime::begin_authorization`]).
pub async fn provider_url(runtime: &Runtime, link: &str) -> String {
    let url = Url::parse(link).expect("a sign-in link is a URL");
    let segments: Vec<_> = url.path_segments().expect("a sign-in link has a path").collect();
    let provider = segments[segments.len() - 2];
    let state = url.query_pairs().find(|(name, _)| name == "state").expect("a sign-in link carries its `state`").1;
    let started = runtime.begin_authorization(provider, &state).await.expect("the sign-in is waiting");
    started.url().to_owned()
}

/// An HTTP client that does not follow redirects.
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a plain HTTP client builds")
}

/// Splits a redirect to the callback into its parts.
pub fn redirect(location: &str) -> Redirect {
    let url = Url::parse(location).expect("the redirect is a URL");
    let param = |name: &str| {
        let value = url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned());
        value.unwrap_or_else(|| panic!("the redirect carries `{name}`"))
    };
    let mut callback = url.clone();
    callback.set_query(None);
    Redirect {
        location: location.to_owned(),
        callback: callback.to_string(),
        state: param("state"),
        code: param("code"),
    }
}

impl Shared {
    fn books(&self) -> MutexGuard<'_, Books> {
        self.state.lock().unwrap()
    }

    /// Issues an access token (and perhaps a refresh token) to `login`: the `/token` response.
    fn issue(&self, books: &mut Books, login: &str) -> Response {
        books.serial += 1;
        let serial = books.serial;
        let access = format!("at-{}-{serial}", self.canary);
        books.access.insert(access.clone(), (login.to_owned(), serial));
        let mut body = json!({ "access_token": access, "token_type": "bearer" });
        if let Some(seconds) = books.expires_in {
            body["expires_in"] = json!(seconds);
        }
        if books.issue_refresh_tokens {
            let refresh = format!("rt-{}-{serial}", self.canary);
            books.refresh.insert(refresh.clone(), login.to_owned());
            body["refresh_token"] = json!(refresh);
        }
        json_response(StatusCode::OK, &body)
    }
}

async fn authorize(State(shared): State<Arc<Shared>>, Query(params): Query<Params>) -> Response {
    let param = |name: &str| params.get(name).cloned().unwrap_or_default();
    if param("response_type") != "code" || param("client_id") != CLIENT_ID || param("state").is_empty() {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    let Ok(mut location) = Url::parse(&param("redirect_uri")) else {
        return (StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    let challenge = (param("code_challenge_method") == "S256").then(|| param("code_challenge"));
    let login = params.get("login").cloned().unwrap_or_else(|| "user".to_owned());
    let mut books = shared.books();
    let code = format!("code-{}-{}", shared.canary, books.codes.len() + 1);
    let grant = Grant { redirect_uri: param("redirect_uri"), challenge, login, used: false };
    books.codes.insert(code.clone(), grant);
    location.query_pairs_mut().append_pair("code", &code).append_pair("state", &param("state"));
    (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
}

async fn token(State(shared): State<Arc<Shared>>, headers: HeaderMap, Form(params): Form<Params>) -> Response {
    if !client_authenticated(&shared, &headers, &params) {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let param = |name: &str| params.get(name).cloned().unwrap_or_default();
    let mut books = shared.books();
    match param("grant_type").as_str() {
        "authorization_code" => {
            let Some(grant) = books.codes.get_mut(&param("code")) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let verified = grant.challenge.as_ref().is_none_or(|challenge| *challenge == s256(&param("code_verifier")));
            if grant.used || grant.redirect_uri != param("redirect_uri") || !verified {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            grant.used = true;
            let login = grant.login.clone();
            books.exchanges += 1;
            shared.issue(&mut books, &login)
        }
        "refresh_token" => {
            let login = books.refresh.remove(&param("refresh_token"));
            let Some(login) = login.filter(|_| !books.refuse_refresh) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            books.refreshes += 1;
            shared.issue(&mut books, &login)
        }
        _ => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
}

async fn me(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let mut books = shared.books();
    if books.failing_api_calls > 0 {
        books.failing_api_calls -= 1;
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let bearer = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    let token = bearer.and_then(|value| value.strip_prefix("Bearer "));
    match token.and_then(|token| books.access.get(token)) {
        Some((login, serial)) if !books.reject_tokens => {
            json_response(StatusCode::OK, &json!({ "user": login, "serial": serial }))
        }
        _ => StatusCode::UNAUTHORIZED.into_response(),
    }
}

/// HTTP Basic (`client_secret_basic`) or form fields (`client_secret_post`).
fn client_authenticated(shared: &Shared, headers: &HeaderMap, params: &Params) -> bool {
    let secret = format!("secret-{}", shared.canary);
    let basic = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    let basic = basic.and_then(|value| value.strip_prefix("Basic ")).and_then(|value| STANDARD.decode(value).ok());
    match basic {
        Some(credentials) => credentials == format!("{CLIENT_ID}:{secret}").as_bytes(),
        None => {
            params.get("client_id").map(String::as_str) == Some(CLIENT_ID)
                && params.get("client_secret") == Some(&secret)
        }
    }
}

fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    json_response(status, &json!({ "error": error, "error_description": "see the fake server's rules" }))
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
