//! Webhooks: hooks with a URL the runtime serves over HTTP.
//!
//! `create_webhook()` mints a 256-bit token and a URL under `/.well-known/workflow/v1/webhook/`.
//! Each HTTP request to it (any method) becomes one [`WebhookRequest`] in the hook's stream, in
//! delivery order, buffered until the body reads it. The response is chosen when the webhook is
//! created ([`Respond`]): `202 Accepted` with an empty body (the default), a static response, or
//! a response written by a step with [`StepCtx::respond`](crate::StepCtx::respond). Unknown tokens,
//! and tokens of finished runs, get `404` with an empty body.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::Stream;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::secret::Token;
use crate::wait::{Hook, HookError, Recv};

/// The path prefix webhook URLs live under.
pub const WEBHOOK_PATH: &str = "/.well-known/workflow/v1/webhook/";

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
            delivery: crate::secret::nonce(),
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

/// Creates a webhook that answers `202 Accepted` with an empty body.
pub fn create_webhook() -> Webhook {
    create_webhook_with(Respond::Accepted)
}

/// Creates a webhook that answers as `respond` says.
pub fn create_webhook_with(respond: Respond) -> Webhook {
    let hook = Hook::create_webhook(respond);
    Webhook { hook }
}

/// A webhook: a URL that delivers each HTTP request to the body, in order.
pub struct Webhook {
    hook: Hook<WebhookRequest>,
}

impl Webhook {
    /// The URL to hand to the system that will call back. Treat it as a secret.
    pub fn url(&self) -> String {
        self.hook.url()
    }

    /// The token in the URL.
    pub fn token(&self) -> &Token {
        self.hook.token()
    }

    /// Waits for the next request.
    pub fn recv(&mut self) -> Recv<'_, WebhookRequest> {
        self.hook.recv()
    }
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook").finish_non_exhaustive()
    }
}

impl Stream for Webhook {
    type Item = Result<WebhookRequest, HookError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.get_mut().hook).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_bodies_round_trip_through_base64() {
        let request = WebhookRequest::new("POST", &[0xff, 0x00, 0x10]);
        assert!(request.binary && request.text().is_none());
        assert_eq!(request.bytes(), [0xff, 0x00, 0x10]);
        let json = WebhookRequest::new("POST", br#"{"status":"ok"}"#);
        assert_eq!(json.json::<serde_json::Value>().unwrap()["status"], "ok");
    }
}
