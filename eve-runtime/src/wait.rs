//! Durable waits: [`sleep`], hooks ([`create_hook`]) and the abort signal.
//!
//! A wait created in a body takes an op number and journals what it needs (a sleep's absolute
//! deadline, a hook's token hash) before anything outside the body can depend on it. When the body
//! is pending and only such waits are outstanding, the run parks and holds no task.
//!
//! When the run is cancelled, every wait that has not resolved yet resolves at once with
//! [`Cancelled`], so the code after the await (the body's cleanup) runs.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::journal::{Entry, InputHash, Op, OpKind, OpSignature};
use crate::run_core::{self, CoreRef, HookCheck, HookSlot, Slot};
use crate::secret::{self, Token};
use crate::time::{Clock, SystemClock, Timestamp};

/// The run was cancelled while this wait was pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the run was cancelled")]
pub struct Cancelled;

/// Waits durably for `duration`.
///
/// Inside a run the deadline (now + `duration`) is journaled, the run parks holding no task, and
/// the timer fires exactly once, after a restart too. Outside any run it is an ordinary sleep.
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::new(Deadline::After(duration))
}

/// Waits durably until `deadline` (read it from `ctx.now()` so it replays identically).
#[track_caller]
pub fn sleep_until(deadline: Timestamp) -> Sleep {
    Sleep::new(Deadline::At(deadline))
}

enum Deadline {
    After(Duration),
    At(Timestamp),
}

/// The future [`sleep`] returns: `Ok(())` when the deadline passes, `Err(Cancelled)` if the run
/// is cancelled first.
#[must_use = "a sleep does nothing unless awaited"]
pub struct Sleep {
    state: SleepState,
}

enum SleepState {
    Detached(BoxFuture<'static, ()>),
    Durable { core: CoreRef, op: Op },
    Diverged,
}

impl Sleep {
    #[track_caller]
    fn new(deadline: Deadline) -> Self {
        let Some(core) = run_core::current() else {
            let at = match deadline {
                Deadline::After(duration) => SystemClock.now().saturating_add(duration),
                Deadline::At(at) => at,
            };
            return Sleep { state: SleepState::Detached(SystemClock.sleep_until(at)) };
        };
        let signature = OpSignature { kind: OpKind::Sleep, name: "sleep".into(), input_hash: InputHash::default() };
        // The deadline the journal records for the op this sleep is about to take, if any.
        let recorded = {
            let state = core.lock();
            state.index.deadlines.get(&Op(state.next_op)).copied()
        };
        let deadline = recorded.unwrap_or_else(|| match deadline {
            Deadline::After(duration) => core.services.clock.now().saturating_add(duration),
            Deadline::At(at) => at,
        });
        let Some(op) = core.create(signature, Slot::Sleep { fired: false, deadline }) else {
            return Sleep { state: SleepState::Diverged };
        };
        if recorded.is_none() {
            let mut state = core.lock();
            state.outbox.push(Entry::TimerScheduled { op, deadline });
            state.new_timers.push((op, deadline));
        }
        Sleep { state: SleepState::Durable { core: core.into(), op } }
    }
}

impl Future for Sleep {
    type Output = Result<(), Cancelled>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().state {
            SleepState::Detached(sleep) => sleep.as_mut().poll(cx).map(Ok),
            SleepState::Diverged => Poll::Pending,
            SleepState::Durable { core, op } => {
                let mut state = core.lock();
                let cancelled = state.cancelled;
                let slot = &mut state.ops[op.0 as usize];
                match slot.slot {
                    Slot::Sleep { fired: true, .. } => Poll::Ready(Ok(())),
                    _ if cancelled => Poll::Ready(Err(Cancelled)),
                    _ => {
                        state.wait(*op, cx);
                        Poll::Pending
                    }
                }
            }
        }
    }
}

/// Why a hook yields no payload.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// Another unfinished run already holds the chosen token, so this hook receives nothing.
    #[error("another unfinished run holds this hook's token; choose a different token")]
    TokenInUse,
    /// A payload did not deserialize into the hook's payload type.
    #[error("a hook payload does not match the expected type: {0}")]
    Payload(String),
    /// The hook was created outside any run, where nothing can deliver to it.
    #[error("hooks exist only inside a workflow run")]
    NotInRun,
}

/// Checks that `payload` decodes into `T`, naming the field at fault by its path (`paid`,
/// `lines[0].sku`) when the decoder can.
fn check_payload<T: DeserializeOwned>(payload: &serde_json::Value) -> Result<(), (String, Option<String>)> {
    let Err(refusal) = crate::json::decode::<T>(payload) else { return Ok(()) };
    let message = refusal.error.to_string();
    let missing = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
    let field = match (refusal.field, missing) {
        (None, Some(name)) => Some(name.to_owned()),
        (None, None) => None,
        (Some(at), Some(name)) => Some(format!("{at}.{name}")),
        (Some(at), None) => Some(at),
    };
    let message = match &field {
        Some(field) if !message.contains(&format!("`{field}`")) => format!("`{field}`: {message}"),
        _ => message,
    };
    Err((message, field))
}

/// Creates a hook with a fresh 256-bit token. Deliver to it with `Runtime::resume_hook`.
#[track_caller]
pub fn create_hook<T: DeserializeOwned>() -> Hook<T> {
    Hook::create(None, None)
}

/// Creates a hook with a token the body chooses, for callers that must know it in advance.
/// If another unfinished run holds the same token, the hook yields [`HookError::TokenInUse`].
#[track_caller]
pub fn create_hook_with_token<T: DeserializeOwned>(token: impl Into<String>) -> Hook<T> {
    Hook::create(Some(Token::chosen(token)), None)
}

/// A durable hook: receives payloads in delivery order, each exactly once, buffered until the
/// body takes them. It is a [`Stream`]; [`Hook::recv`] takes the next payload.
pub struct Hook<T> {
    token: Token,
    state: HookState,
    payload: PhantomData<fn() -> T>,
}

enum HookState {
    Durable {
        core: CoreRef,
        op: Op,
    },
    Failed(HookError),
    /// The body diverged from its journal; the executor fails the run and never polls again.
    Diverged,
}

impl Hook<crate::journal::webhook::WebhookRequest> {
    /// A webhook's hook: a generated token, answered over HTTP as `options` say.
    #[track_caller]
    pub(crate) fn create_webhook(options: crate::journal::webhook::WebhookOptions) -> Self {
        Hook::create(None, Some(options))
    }
}

impl<T> Hook<T> {
    /// The URL a webhook with this token is served at (empty outside a run).
    pub(crate) fn url(&self) -> String {
        match &self.state {
            HookState::Durable { core, .. } => {
                format!("{}{}{}", core.services.public_url, crate::journal::webhook::WEBHOOK_PATH, self.token.expose())
            }
            _ => String::new(),
        }
    }
}

impl<T: DeserializeOwned> Hook<T> {
    /// A hook with a generated token in the run `core`, created outside a poll of its body (a
    /// resumable task's calls hook, made before the body first runs).
    pub(crate) fn in_run(core: CoreRef) -> Self {
        Hook::create_in(Some(core), None, None)
    }

    #[track_caller]
    fn create(chosen: Option<Token>, webhook: Option<crate::journal::webhook::WebhookOptions>) -> Self {
        Hook::create_in(run_core::current().map(CoreRef::from), chosen, webhook)
    }

    #[track_caller]
    fn create_in(
        core: Option<CoreRef>,
        chosen: Option<Token>,
        webhook: Option<crate::journal::webhook::WebhookOptions>,
    ) -> Self {
        let Some(core) = core else {
            let token = chosen.unwrap_or_else(|| Token::chosen(secret::nonce()));
            return Hook { token, state: HookState::Failed(HookError::NotInRun), payload: PhantomData };
        };
        let signature = OpSignature { kind: OpKind::Hook, name: "hook".into(), input_hash: InputHash::default() };
        let placeholder = HookSlot { token: Token::chosen(""), queue: Default::default(), conflict: false };
        let Some(op) = core.create(signature, Slot::Hook(placeholder)) else {
            let token = chosen.unwrap_or_else(|| Token::chosen(""));
            return Hook { token, state: HookState::Diverged, payload: PhantomData };
        };
        let mut state = core.lock();
        let recorded = state.index.hooks.get(&op).cloned();
        let (token, nonce, conflict) = match (chosen, recorded) {
            (Some(token), recorded) => (token, None, recorded.is_some_and(|record| record.conflict)),
            (None, Some(record)) => {
                let nonce = record.nonce.unwrap_or_default();
                (core.services.key.derive_token(&core.run, op, &nonce), Some(nonce), record.conflict)
            }
            (None, None) => {
                let nonce = secret::nonce();
                (core.services.key.derive_token(&core.run, op, &nonce), Some(nonce), false)
            }
        };
        if webhook.is_none() {
            let check = HookCheck { run: core.run.clone(), op, check: check_payload::<T> };
            core.services.payload_checks.insert(token.hash().as_str().to_owned(), check);
        }
        if !state.index.hooks.contains_key(&op) {
            let token_hash = token.hash().as_str().to_owned();
            let webhook = webhook.map(Box::new);
            state.outbox.push(Entry::HookCreated { op, token_hash, nonce, conflict, webhook });
        }
        if let Slot::Hook(hook) = &mut state.ops[op.0 as usize].slot {
            hook.token = token.clone();
            hook.conflict = conflict;
        }
        drop(state);
        Hook { token, state: HookState::Durable { core, op }, payload: PhantomData }
    }

    /// The hook's op in its run (`None` outside a run): what a child run's [`ParentLink`]
    /// names to report to it.
    ///
    /// [`ParentLink`]: crate::journal::ParentLink
    pub fn op(&self) -> Option<Op> {
        match &self.state {
            HookState::Durable { op, .. } => Some(*op),
            _ => None,
        }
    }

    /// The token that delivers to this hook. Treat it as a secret.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Waits for the next payload.
    pub fn recv(&mut self) -> Recv<'_, T> {
        Recv { hook: self }
    }

    pub(crate) fn poll_payload(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, HookError>> {
        // Decoding runs user `Deserialize` code, so it happens after the core's lock is released.
        self.poll_delivered(cx).map(|payload| decode(payload?))
    }

    /// The next payload as it was delivered, not yet decoded.
    fn poll_delivered(&mut self, cx: &mut Context<'_>) -> Poll<Result<Value, HookError>> {
        let (core, op) = match &self.state {
            HookState::Durable { core, op } => (core, *op),
            HookState::Failed(error) => return Poll::Ready(Err(error.clone())),
            HookState::Diverged => return Poll::Pending,
        };
        let payload = {
            let mut state = core.lock();
            let cancelled = state.cancelled;
            let slot = &mut state.ops[op.0 as usize];
            let Slot::Hook(hook) = &mut slot.slot else { unreachable!("op {} was created as a hook", op.0) };
            if hook.conflict {
                return Poll::Ready(Err(HookError::TokenInUse));
            }
            match hook.queue.pop_front() {
                Some(payload) => payload,
                None if cancelled => return Poll::Ready(Err(HookError::Cancelled)),
                None => {
                    state.wait(op, cx);
                    return Poll::Pending;
                }
            }
        };
        Poll::Ready(Ok(payload))
    }
}

impl Hook<Value> {
    /// Waits for the next payload, taken as it was delivered: decoding a `Value` into a `Value`
    /// would only build the same tree again.
    pub fn recv_value(&mut self) -> impl Future<Output = Result<Value, HookError>> + Send + '_ {
        std::future::poll_fn(move |cx| self.poll_delivered(cx))
    }
}

fn decode<T: DeserializeOwned>(payload: Value) -> Result<T, HookError> {
    serde_json::from_value(payload).map_err(|error| HookError::Payload(error.to_string()))
}

impl<T> fmt::Debug for Hook<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hook").field("token", &self.token).finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned> Stream for Hook<T> {
    type Item = Result<T, HookError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_payload(cx).map(Some)
    }
}

/// The future [`Hook::recv`] returns.
#[must_use = "a hook receives nothing unless awaited"]
pub struct Recv<'a, T> {
    hook: &'a mut Hook<T>,
}

impl<T: DeserializeOwned> Future for Recv<'_, T> {
    type Output = Result<T, HookError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().hook.poll_payload(cx)
    }
}

/// The run's durable abort signal: fires once when the run is cancelled, the same on replay.
#[derive(Clone)]
pub struct AbortSignal {
    core: Option<CoreRef>,
}

impl AbortSignal {
    pub(crate) fn new(core: Option<CoreRef>) -> Self {
        AbortSignal { core }
    }

    /// Whether the run has been cancelled.
    pub fn is_aborted(&self) -> bool {
        self.core.as_ref().is_some_and(|core| core.is_cancelled())
    }

    /// Resolves when the run is cancelled.
    pub fn aborted(&self) -> Aborted {
        Aborted { core: self.core.clone() }
    }
}

impl fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortSignal").field("aborted", &self.is_aborted()).finish()
    }
}

/// The future [`AbortSignal::aborted`] returns.
#[must_use = "waiting for the abort signal does nothing unless awaited"]
pub struct Aborted {
    core: Option<CoreRef>,
}

impl Future for Aborted {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(core) = &self.core else { return Poll::Pending };
        let mut state = core.lock();
        if state.cancelled {
            return Poll::Ready(());
        }
        // Every future in a body shares the executor's waker: keep one copy, not one per poll.
        if !state.cancel_wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            state.cancel_wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
