//! Steps as `#[step]` declares them ([`StepDef`]: an id, a name, a [`RetryPolicy`]) and the
//! boxed function that runs one attempt ([`AttemptFn`]). The executor reads these; `crate::step`
//! builds them.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::RunCore;
use crate::error::StepError;
use crate::journal::Op;
use crate::metrics::{StepHandles, StepRecorders};

/// How long to wait between attempts: `initial`, then multiplied by `factor` after each failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial_millis: u64,
    factor: u32,
}

impl Backoff {
    /// The longest delay any backoff produces: one day.
    pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

    /// The delay after the first failure, in milliseconds.
    pub const fn initial_millis(&self) -> u64 {
        self.initial_millis
    }

    /// What each delay is multiplied by for the next (1 for a fixed backoff).
    pub const fn factor(&self) -> u32 {
        self.factor
    }

    /// Starts at `initial_millis` and doubles after each failure.
    pub const fn exponential_millis(initial_millis: u64) -> Self {
        Backoff { initial_millis, factor: 2 }
    }

    /// Waits `millis` between every pair of attempts.
    pub const fn fixed_millis(millis: u64) -> Self {
        Backoff { initial_millis: millis, factor: 1 }
    }

    /// The delay after failed attempt number `attempt` (from 1), capped at [`Backoff::MAX_DELAY`].
    ///
    /// ```
    /// # use eve_tools::Backoff;
    /// # use std::time::Duration;
    /// let backoff = Backoff::exponential_millis(1_000);
    /// assert_eq!(backoff.delay_after(1), Duration::from_secs(1));
    /// assert_eq!(backoff.delay_after(3), Duration::from_secs(4));
    /// ```
    pub fn delay_after(&self, attempt: u32) -> Duration {
        let factor = u64::from(self.factor).saturating_pow(attempt.saturating_sub(1));
        Duration::from_millis(self.initial_millis.saturating_mul(factor)).min(Self::MAX_DELAY)
    }
}

/// How often a step is attempted and how long to wait in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first; at least 1.
    pub max_attempts: u32,
    /// The delay between attempts.
    pub backoff: Backoff,
}

impl RetryPolicy {
    /// 3 attempts, waiting 1 s and then 2 s.
    pub const DEFAULT: RetryPolicy = RetryPolicy { max_attempts: 3, backoff: Backoff::exponential_millis(1_000) };
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

/// A step as `#[step]` declares it: a stable id, a name and a retry policy.
#[derive(Debug)]
pub struct StepDef {
    id: &'static str,
    name: &'static str,
    policy: RetryPolicy,
    hands_over: bool,
    /// What its attempts record through, made on the first attempt once metrics are on.
    metrics: StepHandles,
}

impl StepDef {
    /// A step definition; `#[step]` emits one `static` per step.
    pub const fn new(id: &'static str, name: &'static str, policy: RetryPolicy) -> Self {
        StepDef { id, name, policy, hands_over: false, metrics: StepHandles::new() }
    }

    /// The same step, whose live output the body takes as the attempt returned it instead of
    /// decoding the journal's copy: for the runtime's own steps (a session's model call), whose
    /// output types decode from their JSON to an equal value, as replay decodes it. Debug builds
    /// check that on every attempt. A user's `#[step]` always decodes, so a type whose JSON loses
    /// something (a skipped field) behaves the same live and on replay.
    pub const fn handing_over(self) -> Self {
        let (id, name, policy) = (self.id, self.name, self.policy);
        // A constant function may not run a destructor, so `self` is forgotten rather than
        // dropped; its handles are still empty where this is called, in a `static`'s initializer.
        std::mem::forget(self);
        StepDef { id, name, policy, hands_over: true, metrics: StepHandles::new() }
    }

    /// Whether the body takes the step's live output as it was returned (see
    /// [`handing_over`](StepDef::handing_over)).
    pub(crate) fn hands_over(&self) -> bool {
        self.hands_over
    }

    /// The module path and fn name.
    pub fn id(&self) -> &'static str {
        self.id
    }

    /// The step's name, as journaled (the fn name unless `name = "…"` was given).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The retry policy.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// The step's metrics handles, or `None` while metrics are off.
    #[inline]
    pub(crate) fn metrics(&self) -> Option<&StepRecorders> {
        self.metrics.get(self.name)
    }
}

/// Which attempt an [`AttemptFn`] runs: of the step at `op` in the run `core`, number `number`.
pub(crate) struct StepAttempt {
    pub core: Arc<RunCore>,
    pub op: Op,
    pub number: u32,
}

/// Runs one attempt of a step and serializes its output.
pub(crate) type AttemptFn =
    Box<dyn FnMut(StepAttempt) -> BoxFuture<'static, Result<crate::journal::Payload, StepError>> + Send>;
