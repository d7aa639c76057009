//! Webhook requests and the way webhooks answer and redact them, as the journal records them.
//! The primitive that creates webhooks is `crate::webhook`.
//!
//! A request is journaled, and so kept in the store, as the body sees it. Credentials are
//! redacted from it first, whichever way it arrives: the values of the headers
//! [`REDACTED_HEADERS`] and of query parameters with secret-looking names
//! ([`is_secret_looking`]) become [`REDACTED`]. [`WebhookOptions`] redacts more headers or
//! parameters, or keeps named ones a step needs (the `Authorization` a step checks, say).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The path prefix webhook URLs live under.
pub const WEBHOOK_PATH: &str = "/.well-known/workflow/v1/webhook/";

/// What replaces a redacted header or query value.
pub const REDACTED: &str = "[redacted]";

/// Headers whose values are redacted from every webhook request before it is journaled, unless
/// the webhook keeps them ([`WebhookOptions::keep_header`]).
pub const REDACTED_HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "set-cookie"];

/// Words that make a query parameter's name secret-looking wherever they stand in it, as in
/// `access_token`, `clientSecret` or `X-Amz-Signature`.
const SECRET_SUFFIXES: [&str; 7] = ["token", "secret", "password", "passwd", "signature", "apikey", "credential"];

/// Words that make a query parameter's name secret-looking when they stand as a whole word, as in
/// `code`, `api_key` or `sig` (but not `keyword` or `zipcode`).
const SECRET_WORDS: [&str; 8] = ["code", "key", "sig", "auth", "pwd", "pass", "session", "credentials"];

/// Whether a query parameter's value is redacted by default: its name (percent-decoded), split
/// into words at punctuation and at lower-to-upper case changes, has a word that is one of
/// `code`, `key`, `sig`, `auth`, `pwd`, `pass`, `session`, `credentials`, or that ends with
/// `token`, `secret`, `password`, `passwd`, `signature`, `apikey` or `credential` (so `token`,
/// `access_token`, `apiKey`, `client_secret`, `X-Amz-Signature`, `hub.secret` and `sig` are, and
/// `page`, `keyword` and `q` are not).
///
/// ```
/// use eve_tools::is_secret_looking;
/// assert!(is_secret_looking("access_token") && is_secret_looking("apiKey") && is_secret_looking("sig"));
/// assert!(!is_secret_looking("page") && !is_secret_looking("keyword"));
/// ```
pub fn is_secret_looking(name: &str) -> bool {
    let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy().replace('+', " ");
    let mut words: Vec<String> = Vec::new();
    let mut previous_lower = false;
    for character in name.chars() {
        if !character.is_alphanumeric() {
            previous_lower = false;
            words.push(String::new());
            continue;
        }
        if words.is_empty() || (character.is_uppercase() && previous_lower) {
            words.push(String::new());
        }
        previous_lower = character.is_lowercase() || character.is_numeric();
        words.last_mut().expect("a word was started").extend(character.to_lowercase());
    }
    let secret_word =
        |word: &String| SECRET_WORDS.contains(&word.as_str()) || SECRET_SUFFIXES.iter().any(|end| word.ends_with(end));
    words.iter().any(secret_word)
}

/// What of a webhook's requests is redacted before they are journaled, besides the defaults
/// ([`REDACTED_HEADERS`] and secret-looking query parameters). Names compare case-insensitively
/// (query parameter names after percent-decoding); a name both kept and redacted is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// More headers to redact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact_headers: Vec<String>,
    /// Headers to keep although they would be redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_headers: Vec<String>,
    /// More query parameters to redact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact_query: Vec<String>,
    /// Query parameters to keep although they would be redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_query: Vec<String>,
}

impl Redaction {
    /// Whether this adds nothing to the defaults.
    pub fn is_default(&self) -> bool {
        *self == Redaction::default()
    }

    /// `request` with its credentials replaced by [`REDACTED`].
    pub fn apply(&self, mut request: WebhookRequest) -> WebhookRequest {
        for (name, value) in &mut request.headers {
            if self.redacts_header(name) {
                *value = REDACTED.to_owned();
            }
        }
        if !request.query.is_empty() {
            let parameters = request.query.split('&').map(|parameter| match parameter.split_once('=') {
                Some((name, _)) if self.redacts_parameter(name) => format!("{name}={REDACTED}"),
                _ => parameter.to_owned(),
            });
            request.query = parameters.collect::<Vec<_>>().join("&");
        }
        request
    }

    fn redacts_header(&self, name: &str) -> bool {
        let listed = |names: &[String]| names.iter().any(|listed| listed.eq_ignore_ascii_case(name));
        let by_default = REDACTED_HEADERS.iter().any(|header| header.eq_ignore_ascii_case(name));
        (by_default || listed(&self.redact_headers)) && !listed(&self.keep_headers)
    }

    fn redacts_parameter(&self, raw: &str) -> bool {
        let name = percent_encoding::percent_decode_str(raw).decode_utf8_lossy().replace('+', " ");
        let listed = |names: &[String]| names.iter().any(|listed| listed.eq_ignore_ascii_case(&name));
        (is_secret_looking(raw) || listed(&self.redact_query)) && !listed(&self.keep_query)
    }
}

/// How a webhook answers its requests ([`Respond`]) and what of them it redacts before they are
/// journaled ([`Redaction`]); for [`create_webhook_with`](crate::webhook::create_webhook_with), which also takes a bare [`Respond`].
///
/// ```
/// use eve_tools::{Respond, WebhookOptions};
/// // A step checks the caller's `Authorization` itself, so the body must see it; the partner's
/// // shared secret travels in `X-Partner-Secret` and `?trace=` carries a session id.
/// let options = WebhookOptions::new(Respond::Manual)
///     .keep_header("Authorization")
///     .redact_header("X-Partner-Secret")
///     .redact_query_param("trace");
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookOptions {
    /// How the runtime answers the webhook's requests.
    #[serde(flatten)]
    pub respond: Respond,
    /// What is redacted besides the defaults.
    #[serde(default, skip_serializing_if = "Redaction::is_default")]
    pub redaction: Redaction,
}

impl WebhookOptions {
    /// A webhook that answers as `respond` says and redacts the defaults.
    pub fn new(respond: Respond) -> Self {
        WebhookOptions { respond, redaction: Redaction::default() }
    }

    /// Redacts this header too.
    pub fn redact_header(mut self, name: impl Into<String>) -> Self {
        self.redaction.redact_headers.push(name.into());
        self
    }

    /// Keeps this header, such as `Authorization`, that would be redacted: the body, and so the
    /// journal, sees its value. Keep only what a step needs.
    pub fn keep_header(mut self, name: impl Into<String>) -> Self {
        self.redaction.keep_headers.push(name.into());
        self
    }

    /// Redacts the value of this query parameter too.
    pub fn redact_query_param(mut self, name: impl Into<String>) -> Self {
        self.redaction.redact_query.push(name.into());
        self
    }

    /// Keeps the value of this query parameter, which would be redacted.
    pub fn keep_query_param(mut self, name: impl Into<String>) -> Self {
        self.redaction.keep_query.push(name.into());
        self
    }
}

impl From<Respond> for WebhookOptions {
    fn from(respond: Respond) -> Self {
        WebhookOptions::new(respond)
    }
}

/// How the runtime answers the HTTP requests a webhook receives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Respond {
    /// `202 Accepted` with an empty body, once the request is durably accepted.
    #[default]
    Accepted,
    /// The same response to every request, once it is durably accepted.
    Static(WebhookResponse),
    /// The response a step writes with `StepCtx::respond`; the request waits for it (up to the
    /// server's response timeout, then `504`).
    Manual,
}

/// An HTTP response to a webhook request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookResponse {
    /// The status code.
    pub status: u16,
    /// Headers, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(default)]
    pub body: String,
}

impl WebhookResponse {
    /// A response with this status and an empty body.
    pub fn status(status: u16) -> Self {
        WebhookResponse { status, headers: Vec::new(), body: String::new() }
    }

    /// A `200 OK` JSON response.
    pub fn json(body: &serde_json::Value) -> Self {
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        WebhookResponse { status: 200, headers, body: body.to_string() }
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }
}

/// One HTTP request a webhook received, as journaled.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookRequest {
    /// The method, such as `POST`.
    pub method: String,
    /// The query string, without `?`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query: String,
    /// The headers, lowercased names, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body: UTF-8 text, or base64 when `binary` is set.
    #[serde(default)]
    pub body: String,
    /// Whether `body` is base64 (the request body was not UTF-8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// A unique id for this request; a step answers a manual webhook by it.
    pub delivery: String,
}

impl WebhookRequest {
    /// A request with this body, for tests and adapters.
    pub fn new(method: impl Into<String>, body: &[u8]) -> Self {
        let (body, binary) = match std::str::from_utf8(body) {
            Ok(text) => (text.to_owned(), false),
            Err(_) => (STANDARD.encode(body), true),
        };
        WebhookRequest {
            method: method.into(),
            query: String::new(),
            headers: Vec::new(),
            body,
            binary,
            delivery: crate::random::nonce(),
        }
    }

    /// The body bytes.
    pub fn bytes(&self) -> Vec<u8> {
        if self.binary { STANDARD.decode(&self.body).unwrap_or_default() } else { self.body.clone().into_bytes() }
    }

    /// The body as text, if it was UTF-8.
    pub fn text(&self) -> Option<&str> {
        (!self.binary).then_some(self.body.as_str())
    }

    /// The body decoded as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.bytes())
    }

    /// The first value of a header (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

impl fmt::Debug for WebhookRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookRequest")
            .field("method", &self.method)
            .field("delivery", &self.delivery)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_query_parameters_are_named_like_credentials() {
        let secret = [
            "token",
            "code",
            "key",
            "secret",
            "password",
            "passwd",
            "pwd",
            "signature",
            "sig",
            "auth",
            "session",
            "api_key",
            "apikey",
            "apiKey",
            "API-KEY",
            "access_token",
            "accessToken",
            "refresh_token",
            "id_token",
            "client_secret",
            "clientSecret",
            "X-Amz-Signature",
            "X-Amz-Security-Token",
            "X-Amz-Credential",
            "hub.secret",
            "oauth_token",
            "private_key",
            "to%6Ben",
            "auth_code",
            "userPassword",
        ];
        for name in secret {
            assert!(is_secret_looking(name), "{name} looks secret");
        }
        let plain = ["page", "q", "keyword", "zipcode", "signup", "author", "passage", "monkey", "id", "state", ""];
        for name in plain {
            assert!(!is_secret_looking(name), "{name} does not look secret");
        }
    }

    #[test]
    fn redaction_replaces_values_and_keeps_what_it_is_told_to() {
        let mut request = WebhookRequest::new("POST", b"{}");
        request.query = "a=1&token=t&flag&code=c&trace=x&sig".to_owned();
        request.headers = [("Authorization", "Bearer t"), ("x-partner-secret", "s"), ("cookie", "c"), ("x-id", "7")]
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .to_vec();
        let options = WebhookOptions::new(Respond::Accepted)
            .keep_header("authorization")
            .redact_header("X-Partner-Secret")
            .redact_query_param("TRACE")
            .keep_query_param("code");
        let redacted = options.redaction.apply(request.clone());
        assert_eq!(redacted.query, "a=1&token=[redacted]&flag&code=c&trace=[redacted]&sig");
        let values: Vec<_> = redacted.headers.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(values, ["Bearer t", "[redacted]", "[redacted]", "7"]);
        assert_eq!((redacted.body, redacted.delivery), (request.body.clone(), request.delivery.clone()));
        let by_default = Redaction::default().apply(request);
        assert_eq!(by_default.header("authorization"), Some("[redacted]"));
        assert_eq!(by_default.query, "a=1&token=[redacted]&flag&code=[redacted]&trace=x&sig");
    }

    #[test]
    fn webhook_options_are_journaled_as_a_bare_respond_was() {
        let thanks = Respond::Static(WebhookResponse::status(201).body("thanks"));
        for respond in [Respond::Accepted, Respond::Manual, thanks] {
            let before = serde_json::to_value(&respond).unwrap();
            let options: WebhookOptions = serde_json::from_value(before.clone()).unwrap();
            assert_eq!(options, WebhookOptions::from(respond.clone()), "an old journal entry reads back: {before}");
            assert_eq!(serde_json::to_value(&options).unwrap(), before, "and is written as before");
        }
        let keeping = WebhookOptions::new(Respond::Manual).keep_header("authorization");
        let json = serde_json::to_value(&keeping).unwrap();
        assert_eq!(json, serde_json::json!({ "mode": "manual", "redaction": { "keep_headers": ["authorization"] } }));
        assert_eq!(serde_json::from_value::<WebhookOptions>(json).unwrap(), keeping);
    }

    #[test]
    fn binary_bodies_round_trip_through_base64() {
        let request = WebhookRequest::new("POST", &[0xff, 0x00, 0x10]);
        assert!(request.binary && request.text().is_none());
        assert_eq!(request.bytes(), [0xff, 0x00, 0x10]);
        let json = WebhookRequest::new("POST", br#"{"status":"ok"}"#);
        assert_eq!(json.json::<serde_json::Value>().unwrap()["status"], "ok");
    }
}
