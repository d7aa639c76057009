//! Step attempts: starting them, recording how they end, and the two durable waits between
//! attempts: a retry backoff, and a sign-in.
//!
//! A step whose body polled it starts attempt 1, or resumes what the journal says it was doing
//! ([`Resume`]). An attempt that fails with attempts left journals `StepRetrying` and waits for
//! its retry timer; one that ends needing a sign-in journals `AuthRequired` (not a failure) and
//! waits for the callback, after which the same attempt number runs again. While a step waits in
//! either way nothing runs for it, so the run may park.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use super::Engine;
use super::{Attempt, Driver, Event};
use crate::error::{FatalError, StepError};
use crate::events::RunEvent;
use crate::journal::{Entry, InputHash, Op, Payload, StepOutcome};
use crate::run_core::{AttemptFn, Resume, RunCore, Slot, signal};
use crate::run_core::{RetryPolicy, StepAttempt, StepDef};
use crate::store::TimerKind;
use crate::time::Timestamp;

/// A step's result, or a fatal error if it nests deeper than the journal keeps (it could not be
/// read back, and running the step again would return the same).
fn journalable(value: Payload, step: &str) -> Result<Payload, StepError> {
    value
        .check_depth(|| format!("the result of step `{step}`"))
        .map(|()| value)
        .map_err(|too_deep| FatalError::new(too_deep).into())
}

/// A step that started: the function that runs its attempts, what its entries record about it,
/// and the attempt running now. The driver keeps these itself until the step completes, so
/// recording an attempt does not lock the run's core to read the step's slot, and a step's
/// attempts are found with one lookup.
pub(super) struct StartedStep {
    pub attempt: AttemptFn,
    pub def: &'static StepDef,
    pub input_hash: InputHash,
    /// The attempt running now and when it started (monotonic: a duration, not a date); `None`
    /// while the step waits to retry or to sign in.
    pub running: Option<(u32, std::time::Instant)>,
}

/// A step waiting for a sign-in callback.
pub(super) struct AwaitingAuth {
    pub attempt: u32,
    pub provider: String,
    /// What the callback's `state` is derived from.
    pub nonce: String,
}

/// When the sign-in before a step's current attempt completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SignedIn {
    /// In this process: the provider just stored a token.
    Here,
    /// Before a restart: an in-memory token store may have lost the token since.
    BeforeRestart,
}

/// A step's attempt under way: its future, run inside its span, ending as an [`Attempt`]. A panic
/// ends it as a failed attempt.
pub(super) struct Running {
    op: Op,
    attempt: u32,
    future: tracing::instrument::Instrumented<BoxFuture<'static, Result<Payload, StepError>>>,
}

impl Future for Running {
    type Output = Attempt;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Attempt> {
        // `Running` holds only `Unpin` data (a boxed future and its span).
        let this = self.get_mut();
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(&mut this.future).poll(cx)));
        ended(this.op, this.attempt, polled, this.future.span())
    }
}

/// How one poll of an attempt's future left it: pending, or ended as an [`Attempt`] (a panic ends
/// it as a failed one, and a failure is logged inside the attempt's span).
fn ended(
    op: Op,
    attempt: u32,
    polled: std::thread::Result<Poll<Result<Payload, StepError>>>,
    span: &tracing::Span,
) -> Poll<Attempt> {
    let result = match polled {
        Ok(Poll::Pending) => return Poll::Pending,
        Ok(Poll::Ready(result)) => result,
        Err(panic) => Err(StepError::msg(format!("the step panicked: {}", super::panic_message(&*panic)))),
    };
    if let Err(error) = &result {
        let _in_step = span.enter();
        tracing::warn!(fatal = error.is_fatal(), "the attempt failed: {}", error.message());
    }
    Poll::Ready(Attempt { op, attempt, result })
}

/// Starts attempt `number` of `step`, the step at `op`, and polls it once. Returns how it ended
/// if it ended then; an attempt that waits joins `attempts`.
fn launch(
    rt: &Engine,
    core: &Arc<RunCore>,
    op: Op,
    number: u32,
    step: &mut StartedStep,
    attempts: &mut FuturesUnordered<Running>,
) -> Option<Attempt> {
    let mut future = (step.attempt)(StepAttempt { core: core.clone(), op, number });
    let name = step.def.name();
    step.running = Some((number, std::time::Instant::now()));
    if let Some(metrics) = step.def.metrics() {
        metrics.attempts.increment(1);
    }
    rt.events.emit(|| RunEvent::StepStarted { run: core.run.clone(), op, step: name.to_owned(), attempt: number });
    // One span per attempt; what the step logs is recorded inside it.
    let span = tracing::debug_span!("step", eve.op = op.0, eve.step.name = name, eve.step.attempt = number);
    // Most attempts of a quick step end the first time they are polled, so each is polled once
    // here, inside its span: one that ends never becomes a `Running` (its future, done, drops
    // nothing of the step's), and one that waits joins the set of running attempts, which polls
    // it again at once with the driver's waker.
    let polled = {
        let _in_step = span.enter();
        std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut Context::from_waker(Waker::noop()))))
    };
    match ended(op, number, polled, &span) {
        Poll::Ready(ended) => Some(ended),
        Poll::Pending => {
            attempts.push(Running { op, attempt: number, future: tracing::Instrument::instrument(future, span) });
            None
        }
    }
}

/// How long the attempt of `step` that started at `started` ran, in milliseconds as journaled;
/// recorded in `eve_step_duration_seconds` too while metrics are on.
fn ran(step: &StartedStep, started: std::time::Instant) -> u64 {
    let ran = started.elapsed();
    if let Some(metrics) = step.def.metrics() {
        metrics.duration.record(ran);
    }
    ran.as_millis() as u64
}

/// The entry recording the step's outcome for good.
fn completion(op: Op, step: &StartedStep, attempt: u32, outcome: StepOutcome, took_ms: Option<u64>) -> Entry {
    Entry::StepCompleted { op, name: step.def.name().into(), input_hash: step.input_hash, attempt, outcome, took_ms }
}

impl Driver {
    /// Starts the steps the body polled for the first time, resuming what the journal records.
    pub(super) fn start_polled_steps(&mut self, rt: &Engine) {
        if self.core.signals() & signal::POLLED == 0 {
            return;
        }
        let mut polled = std::mem::take(&mut self.spare.polled);
        let mut starting = std::mem::take(&mut self.spare.starting);
        {
            // One look at the core for all of them.
            let mut state = self.core.lock();
            let state = &mut *state;
            std::mem::swap(&mut polled, &mut state.polled);
            for &op in &polled {
                let completed = state.index.completed.contains_key(&op);
                let Some(Slot::Step(step)) = state.ops.get_mut(op.0 as usize).map(|slot| &mut slot.slot) else {
                    continue;
                };
                let completed = completed || step.outcome.is_some();
                let (def, input_hash) = (step.def, step.input_hash);
                let Some(attempt) = step.attempt.take().filter(|_| !completed) else { continue };
                let resume = state.index.resume.get(&op).cloned();
                starting.push((op, StartedStep { attempt, def, input_hash, running: None }, resume));
            }
        }
        for (op, started, resume) in starting.drain(..) {
            let Some(resume) = resume else {
                self.start_first_attempt(rt, op, started);
                continue;
            };
            self.execs.insert(op, started);
            match resume {
                Resume::Retry { next, due } if due > rt.services.clock.now() => self.wait_to_retry(rt, op, next, due),
                Resume::Retry { next, .. } => self.start_attempt(rt, op, next),
                Resume::AwaitAuth { attempt, provider, nonce } => {
                    // The journal holds the wait, so the sign-in URL can be published again now.
                    self.announce_sign_in(rt, op, &provider, &nonce);
                    self.awaiting_auth.insert(op, AwaitingAuth { attempt, provider, nonce });
                }
                Resume::AfterSignIn { attempt } => {
                    self.signed_in.insert(op, SignedIn::BeforeRestart);
                    self.start_attempt(rt, op, attempt);
                }
            }
        }
        polled.clear();
        self.spare.polled = polled;
        self.spare.starting = starting;
    }

    /// Whether an attempt of some step is under way (the run cannot park while one is).
    pub(super) fn attempt_running(&self) -> bool {
        self.execs.values().any(|step| step.running.is_some())
    }

    /// Starts attempt `number` of the step at `op`.
    pub(super) fn start_attempt(&mut self, rt: &Engine, op: Op, number: u32) {
        let step = self.execs.get_mut(&op).expect("a step's attempt function is kept until it completes");
        if let Some(ended) = launch(rt, &self.core, op, number, step, &mut self.attempts) {
            self.ended.push(Event::Attempt(ended));
        }
    }

    /// Starts the first attempt of a step the journal records nothing of. Most such attempts
    /// end well the first time they are polled: their completion is made at once, and the step
    /// never joins the table of started steps (`execs`), whose four lookups a step would
    /// otherwise cost. One that fails or waits is kept there, as [`Driver::start_attempt`] keeps it.
    fn start_first_attempt(&mut self, rt: &Engine, op: Op, mut step: StartedStep) {
        let ended = launch(rt, &self.core, op, 1, &mut step, &mut self.attempts);
        let ended = match ended {
            Some(Attempt { result: Ok(value), .. }) => match journalable(value, step.def.name()) {
                Ok(value) => {
                    let took = step.running.take().map(|(_, started)| ran(&step, started));
                    self.ended.push(Event::Completed(completion(op, &step, 1, StepOutcome::Ok { value }, took)));
                    return;
                }
                Err(error) => Some(Attempt { op, attempt: 1, result: Err(error) }),
            },
            ended => ended,
        };
        self.execs.insert(op, step);
        if let Some(ended) = ended {
            self.ended.push(Event::Attempt(ended));
        }
    }

    /// The entry recording a finished attempt, and what the step waits for next, if anything.
    pub(super) fn attempt_finished(&mut self, rt: &Engine, Attempt { op, attempt, result }: Attempt) -> Option<Entry> {
        // A stale attempt (the step was restarted since) records nothing.
        let step = self.execs.get_mut(&op)?;
        let (_, started) = step.running.take_if(|(running, _)| *running == attempt)?;
        let took = Some(ran(step, started));
        let name = step.def.name();
        let signed_in = self.signed_in.remove(&op);
        let error = match result.and_then(|value| journalable(value, name)) {
            Ok(value) => return Some(self.complete(op, attempt, StepOutcome::Ok { value }, took)),
            Err(error) => error,
        };
        let Some(need) = error.auth_need() else { return Some(self.failed_attempt(rt, op, attempt, error, took)) };
        let provider = need.provider.clone();
        let fatal = match signed_in {
            // No second prompt: a token refused right after signing in will be refused again.
            Some(_) if need.rejected => Some(format!("`{provider}` rejected the token right after sign-in")),
            Some(SignedIn::Here) => Some(format!("`{provider}` kept no token after the sign-in")),
            _ if !rt.services.providers.contains_key(&provider) => {
                Some(format!("no auth provider `{provider}` is registered with the runtime"))
            }
            _ => None,
        };
        match fatal {
            Some(message) => Some(self.fail_step(op, attempt, FatalError::new(message).into(), took)),
            None => Some(self.require_sign_in(op, attempt, provider)),
        }
    }

    /// A failed attempt: retried after its backoff if attempts are left, else the step fails.
    fn failed_attempt(&mut self, rt: &Engine, op: Op, attempt: u32, error: StepError, took: Option<u64>) -> Entry {
        let (name, input_hash, policy) = self.step_info(op);
        if error.is_fatal() || attempt >= policy.max_attempts || self.core.is_cancelled() {
            return self.fail_step(op, attempt, error, took);
        }
        let delay = error.retry_after().unwrap_or_else(|| policy.backoff.delay_after(attempt));
        let next_attempt_at = rt.services.clock.now().saturating_add(delay);
        let message = error.message().to_owned();
        if let Some(metrics) = self.execs.get(&op).and_then(|step| step.def.metrics()) {
            metrics.retries.increment(1);
        }
        self.wait_to_retry(rt, op, attempt + 1, next_attempt_at);
        Entry::StepRetrying { op, name: name.into(), input_hash, attempt, error: message, next_attempt_at }
    }

    /// The step's final failure.
    fn fail_step(&mut self, op: Op, attempt: u32, error: StepError, took: Option<u64>) -> Entry {
        let outcome = StepOutcome::Err { fatal: error.is_fatal(), message: error.message().to_owned() };
        self.complete(op, attempt, outcome, took)
    }

    /// Records the step's outcome for good, with how long its last attempt ran. `step.succeeded`
    /// or `step.failed` is published once the entry is durable.
    fn complete(&mut self, op: Op, attempt: u32, outcome: StepOutcome, took_ms: Option<u64>) -> Entry {
        // Only an attempt in flight completes, and its step is kept from its start until here.
        let step = self.execs.remove(&op).expect("a step's attempt function is kept until it completes");
        completion(op, &step, attempt, outcome, took_ms)
    }

    /// Parks attempt `next` of the step at `op` until `due`; the timer service wakes the run.
    pub(super) fn wait_to_retry(&mut self, rt: &Engine, op: Op, next: u32, due: Timestamp) {
        self.retrying.insert(op, (next, due));
        rt.timers.add(self.core.run.clone(), op, due, TimerKind::Retry);
    }

    /// Starts the next attempt of the step at `op` if its backoff is over.
    pub(super) fn retry_due(&mut self, rt: &Engine, op: Op) {
        let Some(&(next, due)) = self.retrying.get(&op) else { return };
        if due <= rt.services.clock.now() {
            self.retrying.remove(&op);
            self.start_attempt(rt, op, next);
        }
    }

    /// Ends the attempt waiting for a sign-in: journals `AuthRequired` with a fresh nonce. The
    /// sign-in URL is published once that entry is durable, so its callback is always accepted.
    fn require_sign_in(&mut self, op: Op, attempt: u32, provider: String) -> Entry {
        let nonce = crate::secret::nonce();
        let state_hash = self.core.services.auth_state(&self.core.run, op, &nonce).hash().as_str().to_owned();
        self.awaiting_auth.insert(op, AwaitingAuth { attempt, provider: provider.clone(), nonce: nonce.clone() });
        self.announce_after_append.push((op, provider.clone(), nonce.clone()));
        Entry::AuthRequired { op, provider, attempt, nonce, state_hash }
    }

    /// Publishes `authorization.required` with the URL that starts the sign-in for `op`.
    fn announce_sign_in(&self, rt: &Engine, op: Op, provider: &str, nonce: &str) {
        let state = rt.services.auth_state(&self.core.run, op, nonce);
        match rt.services.authorization_url(provider, &self.core.principal, state.expose()) {
            Ok(url) => {
                let (run, task_id, provider) = (self.core.run.clone(), self.core.task_id.clone(), provider.to_owned());
                rt.events.emit(|| RunEvent::AuthorizationRequired { run, op, task_id, provider, url });
            }
            Err(error) => tracing::error!(run = %self.core.run, provider, "cannot build the sign-in URL: {error}"),
        }
    }

    /// `AuthCompleted` for a step waiting for this sign-in; its attempt restarts after the append.
    pub(super) fn sign_in_completed(&mut self, op: Op) -> Option<Entry> {
        let waiting = self.awaiting_auth.remove(&op)?;
        self.restart_after_append.push((op, waiting));
        Some(Entry::AuthCompleted { op })
    }

    /// What waits for the last append to be durable: publishing new sign-in URLs, and restarting
    /// the attempts whose sign-in completed.
    pub(super) fn after_append(&mut self, rt: &Engine) {
        if self.announce_after_append.is_empty() && self.restart_after_append.is_empty() {
            // The common case: nothing waited for this append.
            return;
        }
        for (op, provider, nonce) in std::mem::take(&mut self.announce_after_append) {
            self.announce_sign_in(rt, op, &provider, &nonce);
        }
        for (op, AwaitingAuth { attempt, provider, nonce }) in std::mem::take(&mut self.restart_after_append) {
            // The callback's hook is gone with the `AuthCompleted` just journaled, so a duplicate
            // callback is refused without its claim: forget the claim.
            rt.services.callbacks.release(rt.services.auth_state(&self.core.run, op, &nonce).hash().as_str());
            let (run, task_id) = (self.core.run.clone(), self.core.task_id.clone());
            rt.events.emit(|| RunEvent::AuthorizationCompleted { run, op, task_id, provider });
            self.signed_in.insert(op, SignedIn::Here);
            self.start_attempt(rt, op, attempt);
        }
    }

    /// Fails every step waiting to retry or to sign in: a cancellation stops them at once.
    pub(super) fn cancel_waiting_steps(&mut self) -> Vec<Entry> {
        let mut waiting: Vec<(Op, u32, &str)> = self
            .retrying
            .drain()
            .map(|(op, (next, _))| (op, next - 1, "the run was cancelled while the step waited to retry"))
            .collect();
        let signing_in = self
            .awaiting_auth
            .drain()
            .map(|(op, waiting)| (op, waiting.attempt, "the run was cancelled while the step waited for a sign-in"));
        waiting.extend(signing_in);
        waiting.sort_by_key(|(op, _, _)| *op);
        waiting
            .into_iter()
            .map(|(op, attempt, message)| {
                let (name, input_hash, _) = self.step_info(op);
                self.execs.remove(&op);
                let outcome = StepOutcome::Err { fatal: true, message: message.to_owned() };
                Entry::StepCompleted { op, name: name.into(), input_hash, attempt, outcome, took_ms: None }
            })
            .collect()
    }

    /// The step's name, input hash and policy: kept with its attempt function while it runs,
    /// read from its slot otherwise.
    pub(super) fn step_info(&self, op: Op) -> (&'static str, InputHash, RetryPolicy) {
        if let Some(step) = self.execs.get(&op) {
            return (step.def.name(), step.input_hash, step.def.policy());
        }
        let state = self.core.lock();
        let Some(Slot::Step(step)) = state.ops.get(op.0 as usize).map(|slot| &slot.slot) else {
            unreachable!("attempts run only for ops created as steps")
        };
        (step.def.name(), step.input_hash, step.def.policy())
    }
}
