//! Questions to people: `ctx.ask(request)`.
//!
//! An ask is a durable operation. Creating it journals the request ([`Entry::AskCreated`]) and
//! publishes `input.requested`; the body may await it at once, race it against a `sleep`, or keep
//! it pending across several waits. It resolves exactly once, with an [`AskOutcome`] journaled as
//! [`Entry::AskResolved`] and published as `input.resolved`:
//!
//! - `answered`: a person picked an option and/or typed text ([`crate::Runtime::answer`]);
//! - `cancelled`: the body withdrew it, or the run was cancelled; an answer that reached the
//!   runtime before the withdrawal still wins;
//! - `unavailable`: the run cannot ask anyone (it was started non-interactive).
//!
//! Several asks may be open at once; each is answered once; an answer for another run, another
//! request or an unknown request is refused and changes nothing. When the run ends, its open asks
//! are withdrawn.
//!
//! [`Entry::AskCreated`]: crate::journal::Entry::AskCreated
//! [`Entry::AskResolved`]: crate::journal::Entry::AskResolved

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::journal::Op;
use crate::run_core::{RunCore, Slot};

pub use crate::journal::ask::request_id;
pub use crate::journal::ask::{Answer, AnswerError, Ask, AskOption, AskOutcome, Display, Style};
pub(crate) use crate::journal::ask::{hash, request_op};

/// A pending question, returned by `ctx.ask`. Await it (or `&mut` it in a `select!`) for the
/// outcome; it stays open across several awaits until it resolves.
#[must_use = "an ask is only useful if its outcome is awaited"]
pub struct Pending {
    state: PendingState,
}

enum PendingState {
    Durable { core: Arc<RunCore>, op: Op },
    Resolved(Option<AskOutcome>),
    Diverged,
}

impl Pending {
    pub(crate) fn durable(core: Arc<RunCore>, op: Op) -> Self {
        Pending { state: PendingState::Durable { core, op } }
    }

    pub(crate) fn resolved(outcome: AskOutcome) -> Self {
        Pending { state: PendingState::Resolved(Some(outcome)) }
    }

    pub(crate) fn diverged() -> Self {
        Pending { state: PendingState::Diverged }
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
    pub fn withdraw(self) -> Withdraw {
        if let PendingState::Durable { core, op } = &self.state {
            core.withdraw_ask(*op);
        }
        Withdraw { pending: self }
    }
}

impl Pending {
    /// Waits for the answer until `signal` completes, then withdraws the question. An answer that
    /// reached the runtime before the withdrawal still wins. Use a durable future as the signal
    /// (a `sleep`, a hook, the abort signal) so replay withdraws at the same point.
    pub fn until<S: Future<Output = T> + Unpin, T>(self, signal: S) -> Until<S> {
        Until { pending: self, signal: Some(signal) }
    }
}

/// The future [`Pending::until`] returns.
#[must_use = "an ask is only useful if its outcome is awaited"]
pub struct Until<S> {
    pending: Pending,
    signal: Option<S>,
}

impl<S: Future + Unpin> Future for Until<S> {
    type Output = AskOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<AskOutcome> {
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

impl Future for Pending {
    type Output = AskOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<AskOutcome> {
        match &mut self.get_mut().state {
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

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").field("request_id", &self.request_id()).finish()
    }
}

/// The future [`Pending::withdraw`] returns.
#[must_use = "a withdrawal resolves only when awaited"]
pub struct Withdraw {
    pending: Pending,
}

impl Future for Withdraw {
    type Output = AskOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<AskOutcome> {
        Pin::new(&mut self.get_mut().pending).poll(cx)
    }
}
