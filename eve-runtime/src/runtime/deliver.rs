//! Deliveries from people and systems: answers to asks, webhook requests and sign-in callbacks.
//!
//! Every delivery is accepted durably into the run's inbox before the caller hears back, and is
//! refused (changing nothing) when it targets an unknown run, a finished run, an unknown or
//! already-answered question, or a token no unfinished run holds.

use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;

use crate::ask::{self, Answer, AnswerError};
use crate::executor::Msg;
use crate::journal::RunId;
use crate::run_core::HookCheck;
use crate::runtime::{Error, Runtime};
use crate::secret::TokenHash;
use crate::store::{Delivered, Delivery, DeliveryPayload, HookMeta, HookRow, Target};
use crate::webhook::{Respond, WebhookRequest, WebhookResponse};

pub use crate::view::OpenQuestion;

/// How to answer the HTTP request a webhook received.
#[derive(Debug)]
pub enum WebhookReply {
    /// Answer now with this response.
    Now(WebhookResponse),
    /// Wait for the response a step writes (`StepCtx::respond`).
    Later(PendingResponse),
    /// The request repeats the delivery id of a manual webhook's request whose step has not
    /// responded yet (or whose response is no longer kept): nothing was delivered, and the
    /// caller should answer at once that the response is not ready (the HTTP server says `409`),
    /// so the client retries later and then gets the first request's response.
    Unanswered,
}

/// The response a step will write to a manual webhook's request. Await it (with a timeout);
/// dropping it stops the wait, so a step that responds later finds no one waiting.
pub struct PendingResponse {
    receiver: oneshot::Receiver<WebhookResponse>,
    delivery: String,
    services: std::sync::Arc<crate::run_core::Services>,
}

impl std::future::Future for PendingResponse {
    /// The response, or `None` if the runtime stopped waiting.
    type Output = Option<WebhookResponse>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.receiver).poll(cx).map(Result::ok)
    }
}

impl std::fmt::Debug for PendingResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingResponse").field("delivery", &self.delivery).finish_non_exhaustive()
    }
}

impl Drop for PendingResponse {
    fn drop(&mut self) {
        self.services.forget_response(&self.delivery);
    }
}

/// Where to send a person's browser to sign in, and the value that ties the sign-in to that
/// browser; [`Runtime::begin_authorization`] gives it. Both are secrets: its `Debug` output shows
/// neither.
pub struct AuthorizationStart {
    url: String,
    binding: SecretString,
}

impl AuthorizationStart {
    /// The provider's authorization URL: redirect the browser there. It carries the sign-in's
    /// `state`, so do not log it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The value to keep in the browser (a short-lived, `HttpOnly`, `SameSite=Lax` cookie, one per
    /// sign-in) and to check with [`Runtime::authorization_binding_matches`] when the callback
    /// comes back.
    pub fn binding(&self) -> &str {
        self.binding.expose_secret()
    }
}

impl std::fmt::Debug for AuthorizationStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationStart").finish_non_exhaustive()
    }
}

/// What the key that ties a sign-in to a browser is derived for.
const BINDING_PURPOSE: &str = "eve sign-in browser binding v1";

/// The delivery id a caller's id stands for at the hook with `hash`. A run keeps one set of
/// delivery ids for all its hooks, questions and callbacks, so each caller id is scoped to the
/// hook it was sent to: it can neither collide with another hook's nor block an answer.
fn scoped(hash: &TokenHash, id: &str) -> String {
    format!("hook:{}:{id}", hash.as_str())
}

impl Runtime {
    /// Answers the question `request_id` of `run`. The answer is checked against the question and
    /// accepted once; a refused answer changes nothing.
    pub async fn answer(&self, run: &RunId, request_id: &str, answer: Answer) -> Result<(), Error> {
        let not_open = || Error::Answer(AnswerError::NotOpen { run: run.clone(), request: request_id.to_owned() });
        let question = self.open_questions(run).await?.into_iter().find(|open| open.request_id == request_id);
        let question = question.ok_or_else(not_open)?;
        question.request.check(&answer)?;
        let op = ask::request_op(request_id).ok_or_else(not_open)?;
        let payload = DeliveryPayload::Run(Delivery::Answer { op, answer });
        let delivery_id = format!("answer:{request_id}");
        match self.shared.store.deliver(Target::Run(run.clone()), Some(&delivery_id), payload).await? {
            Delivered::Accepted { run, .. } => {
                self.shared.wake(&run, Msg::Inbox);
                Ok(())
            }
            Delivered::Duplicate { .. } | Delivered::NotFound => Err(not_open()),
        }
    }

    /// The questions `run` has open, oldest first.
    pub async fn open_questions(&self, run: &RunId) -> Result<Vec<OpenQuestion>, Error> {
        let record = self.journal(run).await?;
        Ok(crate::view::RunView::of(&record.entries).questions)
    }

    /// Delivers a payload to the hook holding `token` (not a webhook or sign-in callback). The
    /// store finds the hook as it takes the delivery, and refuses a token of another kind of
    /// hook ([`DeliveryPayload::for_hook`]), so nothing reads the hook before: on SQLite that
    /// would be a round trip to a reader thread on every delivery, on Postgres one to the server.
    /// Only a payload that the hook's type check refuses is looked up first ([`Self::check_holds`]).
    pub(crate) async fn deliver_to_hook(
        &self,
        token: &str,
        delivery_id: Option<&str>,
        payload: serde_json::Value,
    ) -> Result<crate::runtime::HookDelivery, Error> {
        crate::journal::depth::check(&payload, || "the hook payload".to_owned())?;
        let hash = TokenHash::of(token);
        let checks = &self.shared.services.payload_checks;
        let checked = checks.get(hash.as_str());
        if let Some(checked) = &checked
            && let Err((message, field)) = (checked.check)(&payload)
            && self.check_holds(&hash, checked).await?
        {
            return Err(Error::InvalidPayload { message, field });
        }
        let delivery_id = delivery_id.map(|id| scoped(&hash, id));
        let payload = DeliveryPayload::Hook(payload);
        match self.shared.store.deliver(Target::Hook(hash.clone()), delivery_id.as_deref(), payload).await? {
            Delivered::Accepted { run, .. } => {
                self.shared.wake(&run, Msg::Inbox);
                Ok(crate::runtime::HookDelivery::Accepted(run))
            }
            Delivered::Duplicate { run } => Ok(crate::runtime::HookDelivery::Duplicate(run)),
            Delivered::NotFound => {
                if let Some(checked) = checked {
                    checks.remove(hash.as_str(), &checked.run, checked.op);
                }
                Err(Error::UnknownHook)
            }
        }
    }

    /// Whether `checked`, which refused a payload, still speaks for the token's hook: only if the
    /// hook is still the one the check was made for. A check is this process's memory of a hook,
    /// and the token may have moved on since (see `PayloadChecks`): if no hook holds it, the
    /// caller hears [`Error::UnknownHook`], not how to fix a payload nothing will take; if another
    /// hook holds it, the check is dropped and the payload goes on unchecked, as to any hook whose
    /// type this process does not know. Only a refused payload pays for this lookup.
    async fn check_holds(&self, hash: &TokenHash, checked: &HookCheck) -> Result<bool, Error> {
        let held = self.shared.store.find_hook(hash).await?;
        if held.as_ref().is_some_and(|hook| checked.is_for(&hook.run, hook.op)) {
            return Ok(true);
        }
        self.shared.services.payload_checks.remove(hash.as_str(), &checked.run, checked.op);
        match held {
            Some(_) => Ok(false),
            None => Err(Error::UnknownHook),
        }
    }

    /// Delivers one HTTP request to the webhook holding `token` and says how to answer it. A
    /// repeated `delivery_id` is answered the same way without being delivered again: with the
    /// static response, or, for a manual webhook, with the response the step wrote to the first
    /// request ([`WebhookReply::Unanswered`] while there is none).
    ///
    /// The request is journaled, and the body sees it, with its credentials redacted: the
    /// headers [`REDACTED_HEADERS`](crate::webhook::REDACTED_HEADERS) and secret-looking query
    /// parameters ([`is_secret_looking`](crate::webhook::is_secret_looking)), adjusted by the
    /// webhook's [`WebhookOptions`](crate::webhook::WebhookOptions).
    pub async fn deliver_webhook(
        &self,
        token: &str,
        delivery_id: Option<&str>,
        request: WebhookRequest,
    ) -> Result<WebhookReply, Error> {
        let hash = TokenHash::of(token);
        let hook = self.hook(&hash, |meta| matches!(meta, HookMeta::Webhook { .. })).await?;
        let HookMeta::Webhook { respond, redaction } = hook.meta else { unreachable!("checked to be a webhook") };
        // Before anything keeps it: the journal gets the request as the body will see it.
        let request = redaction.apply(request);
        let services = &self.shared.services;
        let waiting = matches!(respond, Respond::Manual).then(|| PendingResponse {
            receiver: services.expect_response(request.delivery.clone()),
            delivery: request.delivery.clone(),
            services: self.shared.services.clone(),
        });
        let delivery = request.delivery.clone();
        let payload =
            DeliveryPayload::Webhook(serde_json::to_value(&request).expect("a webhook request always serializes"));
        let delivery_id = delivery_id.map(|id| scoped(&hash, id));
        let delivered = self.shared.store.deliver(Target::Hook(hash), delivery_id.as_deref(), payload).await;
        match (delivered, &waiting, delivery_id) {
            (Ok(Delivered::Accepted { run, .. }), waiting, delivery_id) => {
                // Remembered before the run is woken, so its step's response is kept for repeats.
                if let (Some(_), Some(key)) = (waiting, delivery_id) {
                    services.responses.remember(key, delivery.clone());
                }
                self.shared.wake(&run, Msg::Inbox);
            }
            // A repeat of a manual webhook's request: nothing will respond to this one (dropping
            // its wait says so), so it gets the first request's response, or none yet.
            (Ok(Delivered::Duplicate { .. }), Some(_), Some(key)) => {
                return Ok(services.responses.first_response(&key).map_or(WebhookReply::Unanswered, WebhookReply::Now));
            }
            (Ok(Delivered::Duplicate { .. }), ..) => {}
            (Ok(Delivered::NotFound), ..) => {
                services.forget_response(&delivery);
                return Err(Error::UnknownHook);
            }
            (Err(error), ..) => {
                services.forget_response(&delivery);
                return Err(error.into());
            }
        }
        Ok(match (respond, waiting) {
            (Respond::Manual, Some(waiting)) => WebhookReply::Later(waiting),
            (Respond::Static(response), _) => WebhookReply::Now(response),
            _ => WebhookReply::Now(WebhookResponse::status(202)),
        })
    }

    /// Begins the sign-in whose callback will carry `state`: the provider's authorization URL to
    /// send the person's browser to, and the binding to keep in that browser.
    ///
    /// `authorization.required` publishes a sign-in link, `{public URL}{AUTH_CALLBACK_PATH}{provider}/start?state=…`.
    /// The HTTP server (`eve_tools::http`) serves it by calling this, setting the binding in a
    /// cookie and redirecting to the URL; its callback then refuses a browser without the cookie.
    /// A host that serves its own sign-in pages does the same: on its start page, call this, keep
    /// [`AuthorizationStart::binding`] in a short-lived, `HttpOnly`, `SameSite=Lax` cookie (one per
    /// sign-in, so two sign-ins in one browser both work) and redirect to
    /// [`AuthorizationStart::url`]; on its callback, refuse the request unless
    /// [`Runtime::authorization_binding_matches`] accepts the cookie, and only then call
    /// [`Runtime::complete_authorization`]. Without that check, whoever holds the callback URL
    /// can complete a sign-in meant for someone else (login CSRF, RFC 9700 §4.7).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownCallback`] if no run waits for a sign-in with `provider` under `state`;
    /// [`Error::Auth`] if the provider cannot build its URL.
    pub async fn begin_authorization(&self, provider: &str, state: &str) -> Result<AuthorizationStart, Error> {
        let hook = self.callback_hook(provider, state).await?;
        let principal = self.principal_of(&hook).await?;
        let url = self.shared.services.provider_url(provider, &principal, state).map_err(Error::Auth)?;
        Ok(AuthorizationStart { url, binding: self.sign_in_binding(state) })
    }

    /// Whether `binding` is the one [`Runtime::begin_authorization`] gave for `state`, compared in
    /// constant time. It is derived from `state` with the runtime's secret key, so any process
    /// with the same key agrees.
    pub fn authorization_binding_matches(&self, state: &str, binding: &str) -> bool {
        let expected = self.sign_in_binding(state);
        expected.expose_secret().as_bytes().ct_eq(binding.as_bytes()).into()
    }

    fn sign_in_binding(&self, state: &str) -> SecretString {
        self.shared.services.key.derive(BINDING_PURPOSE).mac_hex(state.as_bytes()).into()
    }

    /// Completes the sign-in a step waits for: exchanges the one-time `code` with `provider`
    /// (the token stays with the provider; only a marker is journaled), then retries the step.
    /// An unknown `state`, another provider's callback, or a repeated callback is refused with
    /// [`Error::UnknownCallback`] and changes nothing.
    ///
    /// This does not check which browser the callback came from: the HTTP server's callback does,
    /// and a host that serves its own callback must too, as [`Runtime::begin_authorization`] says.
    pub async fn complete_authorization(&self, provider: &str, state: &str, code: &str) -> Result<RunId, Error> {
        let hash = TokenHash::of(state);
        let hook = self.callback_hook(provider, state).await?;
        let callbacks = &self.shared.services.callbacks;
        if !callbacks.claim(hash.as_str()) {
            return Err(Error::UnknownCallback);
        }
        if let Err(error) = self.exchange(&hook, provider, state, code).await {
            callbacks.release(hash.as_str());
            return Err(error);
        }
        let delivery_id = format!("auth:{}", hash.as_str());
        let delivered =
            self.shared.store.deliver(Target::Hook(hash.clone()), Some(&delivery_id), DeliveryPayload::AuthCompleted);
        match delivered.await? {
            // The run releases the claim once it journals the sign-in.
            Delivered::Accepted { run, .. } => {
                self.shared.wake(&run, Msg::Inbox);
                Ok(run)
            }
            Delivered::Duplicate { .. } => Err(Error::UnknownCallback),
            // The run ended meanwhile: nothing holds the callback any more.
            Delivered::NotFound => {
                callbacks.release(hash.as_str());
                Err(Error::UnknownCallback)
            }
        }
    }

    /// The callback hook of a sign-in with `provider` under `state`.
    async fn callback_hook(&self, provider: &str, state: &str) -> Result<HookRow, Error> {
        let is_this_provider = |meta: &HookMeta| matches!(meta, HookMeta::Auth { provider: p, .. } if p == provider);
        self.hook(&TokenHash::of(state), is_this_provider).await.map_err(|_| Error::UnknownCallback)
    }

    /// The identity that started the hook's run.
    async fn principal_of(&self, hook: &HookRow) -> Result<crate::auth::Principal, Error> {
        let record = self.journal(&hook.run).await?;
        let started = crate::run_core::Started::of(&record.entries[0]);
        Ok(started.principal.map_or_else(crate::auth::Principal::anonymous, crate::auth::Principal::new))
    }

    /// Exchanges the code under the identity that started the hook's run.
    async fn exchange(&self, hook: &HookRow, provider: &str, state: &str, code: &str) -> Result<(), Error> {
        let principal = self.principal_of(hook).await?;
        let services = &self.shared.services;
        let auth = services.providers.get(provider).ok_or(Error::UnknownCallback)?;
        auth.exchange_callback(&principal, state, code, &services.redirect_uri(provider)).await.map_err(Error::Auth)
    }

    /// The hook holding `hash`, if it exists and is of the kind `wanted` accepts.
    async fn hook(&self, hash: &TokenHash, wanted: impl Fn(&HookMeta) -> bool) -> Result<HookRow, Error> {
        match self.shared.store.find_hook(hash).await? {
            Some(hook) if wanted(&hook.meta) => Ok(hook),
            _ => Err(Error::UnknownHook),
        }
    }
}
