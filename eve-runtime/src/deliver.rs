//! Deliveries from people and systems: answers to asks, webhook requests and sign-in callbacks.
//!
//! Every delivery is accepted durably into the run's inbox before the caller hears back, and is
//! refused (changing nothing) when it targets an unknown run, a finished run, an unknown or
//! already-answered question, or a token no unfinished run holds.

use std::collections::HashSet;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::ask::{self, Answer, AnswerError, Ask};
use crate::executor::Msg;
use crate::journal::{Entry, RunId};
use crate::runtime::{Error, Runtime};
use crate::secret::TokenHash;
use crate::store::{Delivered, Delivery, DeliveryPayload, HookMeta, HookRow, Target};
use crate::webhook::{Respond, WebhookRequest, WebhookResponse};

/// A question a run has open.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OpenQuestion {
    /// The id to answer it by.
    pub request_id: String,
    /// The question.
    pub request: Ask,
}

/// How to answer the HTTP request a webhook received.
#[derive(Debug)]
pub enum WebhookReply {
    /// Answer now with this response.
    Now(WebhookResponse),
    /// Wait for the response a step writes (`StepCtx::respond`).
    Later(PendingResponse),
}

/// The response a step will write to a manual webhook's request. Await it (with a timeout);
/// dropping it stops the wait, so a step that responds later finds no one waiting.
pub struct PendingResponse {
    receiver: oneshot::Receiver<WebhookResponse>,
    delivery: String,
    services: std::sync::Arc<crate::executor::Services>,
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

/// The delivery id a caller's id stands for at the hook with `hash`. A run keeps one set of
/// delivery ids for all its hooks, questions and callbacks, so each caller id is scoped to the
/// hook it was sent to: it can neither collide with another hook's nor block an answer.
fn scoped(hash: &TokenHash, id: &str) -> String {
    format!("hook:{}:{id}", hash.as_str())
}

/// Sign-in callbacks being handled or done, so a duplicate never exchanges a code twice.
#[derive(Debug, Default)]
pub(crate) struct Callbacks(Mutex<HashSet<String>>);

impl Callbacks {
    /// Claims the callback with this state hash; false if it was claimed before.
    fn claim(&self, state_hash: &str) -> bool {
        self.0.lock().expect("the callbacks mutex is never poisoned").insert(state_hash.to_owned())
    }

    /// Releases a claim whose exchange failed, so the person can try again.
    fn release(&self, state_hash: &str) {
        self.0.lock().expect("the callbacks mutex is never poisoned").remove(state_hash);
    }
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
        if record.summary.status.is_finished() {
            return Ok(Vec::new());
        }
        let resolved: HashSet<_> = record
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::AskResolved { op, .. } => Some(*op),
                _ => None,
            })
            .collect();
        let open = record.entries.into_iter().filter_map(|entry| match entry {
            Entry::AskCreated { op, request_id, request } if !resolved.contains(&op) => {
                Some(OpenQuestion { request_id, request })
            }
            _ => None,
        });
        Ok(open.collect())
    }

    /// Delivers a payload to the hook holding `token` (not a webhook or sign-in callback).
    pub(crate) async fn deliver_to_hook(
        &self,
        token: &str,
        delivery_id: Option<&str>,
        payload: serde_json::Value,
    ) -> Result<crate::runtime::HookDelivery, Error> {
        crate::journal::depth::check(&payload, || "the hook payload".to_owned())?;
        let hash = TokenHash::of(token);
        self.hook(&hash, |meta| matches!(meta, HookMeta::Hook)).await?;
        let delivery_id = delivery_id.map(|id| scoped(&hash, id));
        let payload = DeliveryPayload::Hook(payload);
        match self.shared.store.deliver(Target::Hook(hash), delivery_id.as_deref(), payload).await? {
            Delivered::Accepted { run, .. } => {
                self.shared.wake(&run, Msg::Inbox);
                Ok(crate::runtime::HookDelivery::Accepted(run))
            }
            Delivered::Duplicate { run } => Ok(crate::runtime::HookDelivery::Duplicate(run)),
            Delivered::NotFound => Err(Error::UnknownHook),
        }
    }

    /// Delivers one HTTP request to the webhook holding `token` and says how to answer it. A
    /// repeated `delivery_id` is answered the same way without being delivered again.
    pub async fn deliver_webhook(
        &self,
        token: &str,
        delivery_id: Option<&str>,
        request: WebhookRequest,
    ) -> Result<WebhookReply, Error> {
        let hash = TokenHash::of(token);
        let hook = self.hook(&hash, |meta| matches!(meta, HookMeta::Webhook { .. })).await?;
        let HookMeta::Webhook { respond } = hook.meta else { unreachable!("checked to be a webhook") };
        let services = &self.shared.services;
        let waiting = matches!(respond, Respond::Manual).then(|| PendingResponse {
            receiver: services.expect_response(request.delivery.clone()),
            delivery: request.delivery.clone(),
            services: self.shared.services.clone(),
        });
        let delivery = request.delivery.clone();
        let payload =
            DeliveryPayload::Hook(serde_json::to_value(&request).expect("a webhook request always serializes"));
        let delivery_id = delivery_id.map(|id| scoped(&hash, id));
        let delivered = self.shared.store.deliver(Target::Hook(hash), delivery_id.as_deref(), payload).await;
        match delivered {
            Ok(Delivered::Accepted { run, .. }) => self.shared.wake(&run, Msg::Inbox),
            Ok(Delivered::Duplicate { .. }) => {}
            Ok(Delivered::NotFound) => {
                services.forget_response(&delivery);
                return Err(Error::UnknownHook);
            }
            Err(error) => {
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

    /// Completes the sign-in a step waits for: exchanges the one-time `code` with `provider`
    /// (the token stays with the provider; only a marker is journaled), then retries the step.
    /// An unknown `state`, another provider's callback, or a repeated callback is refused with
    /// [`Error::UnknownCallback`] and changes nothing.
    pub async fn complete_authorization(&self, provider: &str, state: &str, code: &str) -> Result<RunId, Error> {
        let hash = TokenHash::of(state);
        let is_this_provider = |meta: &HookMeta| matches!(meta, HookMeta::Auth { provider: p } if p == provider);
        let hook = self.hook(&hash, is_this_provider).await.map_err(|_| Error::UnknownCallback)?;
        let callbacks = &self.shared.callbacks;
        if !callbacks.claim(hash.as_str()) {
            return Err(Error::UnknownCallback);
        }
        if let Err(error) = self.exchange(&hook, provider, state, code).await {
            callbacks.release(hash.as_str());
            return Err(error);
        }
        let delivery_id = format!("auth:{}", hash.as_str());
        match self.shared.store.deliver(Target::Hook(hash), Some(&delivery_id), DeliveryPayload::AuthCompleted).await? {
            Delivered::Accepted { run, .. } => {
                self.shared.wake(&run, Msg::Inbox);
                Ok(run)
            }
            Delivered::Duplicate { .. } | Delivered::NotFound => Err(Error::UnknownCallback),
        }
    }

    /// Exchanges the code under the identity that started the hook's run.
    async fn exchange(&self, hook: &HookRow, provider: &str, state: &str, code: &str) -> Result<(), Error> {
        let record = self.journal(&hook.run).await?;
        let started = crate::executor::core::Started::of(&record.entries[0]);
        let principal = started.principal.map_or_else(crate::auth::Principal::anonymous, crate::auth::Principal::new);
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
