//! Webhooks: hooks with a URL the runtime serves over HTTP.
//!
//! `create_webhook()` mints a 256-bit token and a URL under `/.well-known/workflow/v1/webhook/`.
//! Each HTTP request to it (any method) becomes one [`WebhookRequest`] in the hook's stream, in
//! delivery order, buffered until the body reads it. The response is chosen when the webhook is
//! created ([`Respond`]): `202 Accepted` with an empty body (the default), a static response, or
//! a response written by a step with [`StepCtx::respond`](crate::StepCtx::respond). Unknown tokens,
//! and tokens of finished runs, get `404` with an empty body.
//!
//! A request is journaled, and so kept in the store, as the body sees it. Credentials are
//! redacted from it first, whichever way it arrives ([`Runtime::deliver_webhook`](crate::Runtime::deliver_webhook)
//! does it, so the HTTP server and any other adapter alike): the values of the headers
//! [`REDACTED_HEADERS`] and of query parameters with secret-looking names
//! ([`is_secret_looking`]) become [`REDACTED`]. [`WebhookOptions`] redacts more headers or
//! parameters, or keeps named ones a step needs (the `Authorization` a step checks, say).

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use crate::secret::Token;
use crate::wait::{Hook, HookError, Recv};

pub use crate::journal::webhook::{
    REDACTED, REDACTED_HEADERS, Redaction, Respond, WEBHOOK_PATH, WebhookOptions, WebhookRequest, WebhookResponse,
    is_secret_looking,
};

/// Creates a webhook that answers `202 Accepted` with an empty body.
#[track_caller]
pub fn create_webhook() -> Webhook {
    create_webhook_with(Respond::Accepted)
}

/// Creates a webhook that answers as `options` says: a [`Respond`], or [`WebhookOptions`] that
/// also say what to redact from its requests or keep in them.
#[track_caller]
pub fn create_webhook_with(options: impl Into<WebhookOptions>) -> Webhook {
    let hook = Hook::create_webhook(options.into());
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
