//! Questions to people: `ctx.ask(request)`.
//!
//! An ask is a durable operation. Creating it journals the request ([`Entry::AskCreated`]) and
//! publishes `input.requested`; the body may await it at once, race it against a `sleep`, or keep
//! it pending across several waits. It resolves exactly once, with an [`AskOutcome`] journaled as
//! [`Entry::AskResolved`] and published as `input.resolved`:
//!
//! - `answered`: a person picked an option and/or typed text, or filled in a form
//!   ([`crate::Runtime::answer`]);
//! - `declined`: a person declined it;
//! - `cancelled`: the body withdrew it, the run was cancelled, or a person dismissed it; an answer
//!   that reached the runtime before the withdrawal still wins;
//! - `unavailable`: the run cannot ask anyone (it was started non-interactive).
//!
//! A form (`ctx.ask_form::<T>(prompt)`, [`Ask::form`]) asks for a value of a type: its JSON Schema
//! is journaled with the question, an answer is checked against it (the field at fault named)
//! before it is accepted, and the body gets a [`FormOutcome`] holding the value as a `T`.
//!
//! Several asks may be open at once; each is answered once; an answer for another run, another
//! request or an unknown request is refused and changes nothing. When the run ends, its open asks
//! are withdrawn.
//!
//! [`Entry::AskCreated`]: crate::journal::Entry::AskCreated
//! [`Entry::AskResolved`]: crate::journal::Entry::AskResolved

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::journal::Op;
use crate::run_core::{CoreRef, Slot};

pub use crate::journal::ask::request_id;
pub use crate::journal::ask::{
    Answer, AnswerAction, AnswerError, Ask, AskOption, AskOutcome, Display, FieldRefusal, FormError, Style,
};
pub(crate) use crate::journal::ask::{hash, request_op};
pub use crate::journal::sample::{Completion, Sampling};

/// A pending question, returned by `ctx.ask` (resolving to an [`AskOutcome`]) and
/// `ctx.ask_form` (a [`FormOutcome`]). Await it (or `&mut` it in a `select!`) for the outcome; it
/// stays open across several awaits until it resolves.
#[must_use = "an ask is only useful if its outcome is awaited"]
pub struct Pending<O = AskOutcome> {
    state: PendingState,
    outcome: PhantomData<fn() -> O>,
}

/// What an ask's future resolves to, made from how it resolved: [`AskOutcome`] itself, or a
/// form's [`FormOutcome`].
pub trait Resolution: Sized {
    /// The outcome as the body sees it; `op` is the ask's (`None` outside a run).
    fn of(outcome: AskOutcome, op: Option<Op>) -> Self;
}

impl Resolution for AskOutcome {
    fn of(outcome: AskOutcome, _op: Option<Op>) -> Self {
        outcome
    }
}

/// How a form resolved, its value decoded into `T`.
///
/// ```
/// # use eve_tools::prelude::*;
/// # use eve_tools::FormOutcome;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Release { version: String }
///
/// async fn release(ctx: &WorkflowCtx) -> Result<String, ToolError> {
///     Ok(match ctx.ask_form::<Release>("Release which version?")?.await {
///         FormOutcome::Answered(release) => format!("releasing {}", release.version),
///         FormOutcome::Declined => "not released: declined".into(),
///         FormOutcome::Cancelled | FormOutcome::Unavailable => "not released: nobody answered".into(),
///     })
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormOutcome<T> {
    /// A person filled the form in; the value was checked against `T`'s schema.
    Answered(T),
    /// A person declined to fill it in.
    Declined,
    /// The form was withdrawn (by the body, or because the run was cancelled), or a person
    /// dismissed it.
    Cancelled,
    /// Nobody can answer: the run is not interactive.
    Unavailable,
}

/// How a request for the client's model ([`WorkflowCtx::sample`](crate::context::WorkflowCtx::sample))
/// resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SampleOutcome {
    /// The client's model (or whoever answered for it) completed it.
    Completed(Completion),
    /// The client declined to sample.
    Declined,
    /// The request was withdrawn (by the body, or because the run was cancelled), or dismissed.
    Cancelled,
    /// Nobody can answer: the run is not interactive.
    Unavailable,
}

/// A completion is checked before the runtime accepts it, so it reads back.
impl Resolution for SampleOutcome {
    fn of(outcome: AskOutcome, op: Option<Op>) -> Self {
        match outcome {
            AskOutcome::Answered { value: Some(value), .. } => match Completion::from_value(&value) {
                Ok(completion) => SampleOutcome::Completed(completion),
                Err(error) => {
                    panic!("the answer to {} was accepted, yet is {error}", op.map(request_id).unwrap_or_default())
                }
            },
            AskOutcome::Answered { .. } | AskOutcome::Declined => SampleOutcome::Declined,
            AskOutcome::Cancelled => SampleOutcome::Cancelled,
            AskOutcome::Unavailable => SampleOutcome::Unavailable,
        }
    }
}

/// A form's answer is checked against `T`'s JSON Schema before the runtime accepts it, so it
/// decodes; a `T` whose `Deserialize` refuses what its `JsonSchema` allows (a custom
/// deserializer, say) makes the body panic here, naming the field, and so fails the run.
impl<T: serde::de::DeserializeOwned> Resolution for FormOutcome<T> {
    fn of(outcome: AskOutcome, op: Option<Op>) -> Self {
        let id = || op.map(request_id).unwrap_or_default();
        match outcome {
            AskOutcome::Answered { value: Some(value), .. } => match crate::json::decode::<T>(&value) {
                Ok(decoded) => FormOutcome::Answered(decoded),
                Err(refusal) => panic!(
                    "the answer to form {} fits its schema but does not decode into `{}`{}: {}; make the type's \
                     `JsonSchema` describe what its `Deserialize` takes",
                    id(),
                    std::any::type_name::<T>(),
                    refusal.field.map(|field| format!(" at field `{field}`")).unwrap_or_default(),
                    refusal.error
                ),
            },
            AskOutcome::Answered { .. } => {
                panic!("form {} was answered without a value: the runtime accepts only a value for a form", id())
            }
            AskOutcome::Declined => FormOutcome::Declined,
            AskOutcome::Cancelled => FormOutcome::Cancelled,
            AskOutcome::Unavailable => FormOutcome::Unavailable,
        }
    }
}

enum PendingState {
    Durable { core: CoreRef, op: Op },
    Resolved(Option<AskOutcome>),
    Diverged,
}

impl<O> Pending<O> {
    pub(crate) fn durable(core: CoreRef, op: Op) -> Self {
        Pending { state: PendingState::Durable { core, op }, outcome: PhantomData }
    }

    pub(crate) fn resolved(outcome: AskOutcome) -> Self {
        Pending { state: PendingState::Resolved(Some(outcome)), outcome: PhantomData }
    }

    pub(crate) fn diverged() -> Self {
        Pending { state: PendingState::Diverged, outcome: PhantomData }
    }

    /// The id people answer this question by (`None` outside a run).
    pub fn request_id(&self) -> Option<String> {
        match &self.state {
            PendingState::Durable { op, .. } => Some(request_id(*op)),
            _ => None,
        }
    }

    /// Withdraws the question. Resolves to `Cancelled`, or to the answer if one reached the
    /// runtime first.
    pub fn withdraw(self) -> Withdraw<O> {
        if let PendingState::Durable { core, op } = &self.state {
            core.withdraw_ask(*op);
        }
        Withdraw { pending: self }
    }

    /// Waits for the answer until `signal` completes, then withdraws the question. An answer that
    /// reached the runtime before the withdrawal still wins. Use a durable future as the signal
    /// (a `sleep`, a hook, the abort signal) so replay withdraws at the same point.
    pub fn until<S: Future<Output = T> + Unpin, T>(self, signal: S) -> Until<S, O> {
        Until { pending: self, signal: Some(signal) }
    }
}

/// The future [`Pending::until`] returns.
#[must_use = "an ask is only useful if its outcome is awaited"]
pub struct Until<S, O = AskOutcome> {
    pending: Pending<O>,
    signal: Option<S>,
}

impl<S: Future + Unpin, O: Resolution> Future for Until<S, O> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.get_mut();
        if let Poll::Ready(outcome) = Pin::new(&mut this.pending).poll(cx) {
            return Poll::Ready(outcome);
        }
        if let Some(signal) = this.signal.as_mut()
            && Pin::new(signal).poll(cx).is_ready()
        {
            this.signal = None;
            if let PendingState::Durable { core, op } = &this.pending.state {
                core.withdraw_ask(*op);
            }
        }
        Poll::Pending
    }
}

impl<O: Resolution> Future for Pending<O> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.get_mut();
        let op = match &this.state {
            PendingState::Durable { op, .. } => Some(*op),
            _ => None,
        };
        this.poll_outcome(cx).map(|outcome| O::of(outcome, op))
    }
}

impl<O> Pending<O> {
    fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<AskOutcome> {
        match &mut self.state {
            PendingState::Resolved(outcome) => match outcome.clone() {
                Some(outcome) => Poll::Ready(outcome),
                None => Poll::Pending,
            },
            PendingState::Diverged => Poll::Pending,
            PendingState::Durable { core, op } => {
                let mut state = core.lock();
                let cancelled = state.cancelled;
                let slot = &mut state.ops[op.0 as usize];
                let Slot::Ask { outcome } = &slot.slot else { unreachable!("op {} was created as an ask", op.0) };
                match outcome {
                    Some(outcome) => Poll::Ready(outcome.clone()),
                    None if cancelled => Poll::Ready(AskOutcome::Cancelled),
                    None => {
                        state.wait(*op, cx);
                        Poll::Pending
                    }
                }
            }
        }
    }
}

impl<O> fmt::Debug for Pending<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").field("request_id", &self.request_id()).finish()
    }
}

/// The future [`Pending::withdraw`] returns.
#[must_use = "a withdrawal resolves only when awaited"]
pub struct Withdraw<O = AskOutcome> {
    pending: Pending<O>,
}

impl<O: Resolution> Future for Withdraw<O> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        Pin::new(&mut self.get_mut().pending).poll(cx)
    }
}
