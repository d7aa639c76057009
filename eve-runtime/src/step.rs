//! Steps: the journaled side effects of a workflow.
//!
//! A `#[step]` fn returns a [`StepCall`]. Called inside a run's body, the call takes an op number
//! at once and hashes its serialized arguments; the executor runs attempts only once the body
//! polls the call, and records the outcome exactly once. A recorded step is never executed again:
//! replay hands its recorded outcome back. Called outside any run, the call just runs the step
//! once.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::{AccessToken, AuthProvider, Provider};
use crate::control::RunControl;
use crate::error::{FatalError, StepError};
use crate::journal::{InputHash, Op, OpKind, OpSignature, Payload, RunId, StepOutcome, canonical};
use crate::run_core::{self, AttemptFn, RunCore, Slot, StepAttempt, StepSlot};
pub use crate::run_core::{Backoff, RetryPolicy, StepDef};
use crate::webhook::{WebhookRequest, WebhookResponse};

/// What a step attempt can see: which run and op it belongs to, its attempt number, its stable
/// idempotency key and the run's abort signal.
#[derive(Clone)]
pub struct StepCtx {
    op: Option<Op>,
    attempt: u32,
    /// Formatted on first use: most steps never ask for it.
    key: std::sync::OnceLock<String>,
    core: Option<Arc<RunCore>>,
}

impl StepCtx {
    pub(crate) fn in_run(core: Arc<RunCore>, op: Op, attempt: u32) -> Self {
        StepCtx { op: Some(op), attempt, key: std::sync::OnceLock::new(), core: Some(core) }
    }

    fn detached() -> Self {
        StepCtx { op: None, attempt: 1, key: std::sync::OnceLock::new(), core: None }
    }

    /// The runtime's services, inside a run.
    pub(crate) fn services(&self) -> Option<&Arc<crate::run_core::Services>> {
        self.core.as_ref().map(|core| &core.services)
    }

    /// What this step may ask of the runtime running its run: start, deliver to, cancel or
    /// interrupt other runs, and publish live events (see [`RunControl`]).
    ///
    /// Fails fatally for a step called outside any run.
    pub fn control(&self) -> Result<Arc<dyn RunControl>, StepError> {
        let core = self.core.as_ref().ok_or_else(|| FatalError::new("this step runs outside any run"))?;
        let control = core.services.control.get().cloned();
        control.ok_or_else(|| FatalError::new("no runtime runs this step (a replay check runs none)").into())
    }

    /// The run this attempt belongs to, or `None` when the step was called outside any run.
    pub fn run_id(&self) -> Option<&RunId> {
        self.core.as_ref().map(|core| &core.run)
    }

    /// The step's op number within its run.
    pub fn op(&self) -> Option<Op> {
        self.op
    }

    /// The attempt number, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// A key that is the same for every attempt of this step call, including attempts after a
    /// crash: `{run id}:{op}`. Pass it to external APIs so an effect is applied exactly once.
    /// Outside any run it is a fresh random key.
    pub fn idempotency_key(&self) -> &str {
        self.key.get_or_init(|| match (&self.core, self.op) {
            (Some(core), Some(op)) => format!("{}:{}", core.run, op.0),
            _ => {
                let mut bytes = [0u8; 16];
                crate::secret::fill_random(&mut bytes);
                crate::secret::hex(&bytes)
            }
        })
    }

    /// Whether the run has been cancelled. Cleanup steps still run after a cancellation.
    pub fn is_cancelled(&self) -> bool {
        self.core.as_ref().is_some_and(|core| core.is_cancelled())
    }

    /// The token of the identity that started the run, from `provider`.
    ///
    /// When there is none, the error this returns ends the attempt without counting as a failure:
    /// propagate it with `?`. The run parks until the person signs in (`authorization.required`
    /// carries the URL), then retries the whole step; earlier steps are not rerun. Resolve tokens
    /// before other side effects in the step, since everything before this call runs again.
    pub async fn get_token(&self, provider: &Provider) -> Result<AccessToken, StepError> {
        let (core, auth) = self.provider(provider)?;
        match auth.token(&core.principal).await {
            Ok(Some(token)) => Ok(token),
            Ok(None) => Err(StepError::auth_required(provider.id(), false)),
            Err(error) => Err(StepError::msg(error)),
        }
    }

    /// Forgets the identity's token (the API rejected it) and returns the error that asks for a
    /// new sign-in: `return Err(ctx.require_auth(&GITHUB).await)`. If the token was rejected right
    /// after a sign-in, the step fails instead of prompting again.
    pub async fn require_auth(&self, provider: &Provider) -> StepError {
        let (core, auth) = match self.provider(provider) {
            Ok(found) => found,
            Err(error) => return error,
        };
        if let Err(error) = auth.forget(&core.principal).await {
            tracing::warn!(provider = provider.id(), "could not forget a rejected token: {error}");
        }
        StepError::auth_required(provider.id(), true)
    }

    fn provider(&self, provider: &Provider) -> Result<(&Arc<RunCore>, Arc<dyn AuthProvider>), StepError> {
        let core = self.core.as_ref().ok_or_else(|| {
            FatalError::new("`get_token` needs a run: call the step from a workflow body with its context")
        })?;
        let auth = core.services.providers.get(provider.id()).cloned().ok_or_else(|| {
            FatalError::new(format!(
                "no auth provider `{}` is registered; add it with Runtime::builder().auth_provider(\"{}\", ..)",
                provider.id(),
                provider.id()
            ))
        })?;
        Ok((core, auth))
    }

    /// The value of type `T` the host gave the runtime with `RuntimeBuilder::state`.
    ///
    /// ```
    /// # use eve_tools::{StepCtx, StepError};
    /// struct BillingApi { base_url: String }
    ///
    /// // In a tool crate this fn carries `#[step]`; the host called `.state(BillingApi { .. })`.
    /// async fn invoice_url(ctx: &StepCtx, number: u32) -> Result<String, StepError> {
    ///     let api = ctx.state::<BillingApi>()?;   // an `Arc<BillingApi>`
    ///     Ok(format!("{}/invoices/{number}", api.base_url))
    /// }
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, StepError> {
        let core = self.core.as_ref().ok_or_else(|| {
            FatalError::new("`state` needs a run: call the step from a workflow body with its context")
        })?;
        core.services.state.get::<T>().map_err(|error| FatalError::new(error).into())
    }

    /// Answers a webhook request received by a webhook created with `Respond::Manual`. Returns
    /// whether the HTTP request was still waiting (it times out otherwise, or was answered).
    pub fn respond(&self, request: &WebhookRequest, response: WebhookResponse) -> bool {
        let Some(core) = &self.core else { return false };
        core.services.respond(&request.delivery, response)
    }
}

impl fmt::Debug for StepCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepCtx")
            .field("run", &self.run_id())
            .field("op", &self.op)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

/// The future a `#[step]` fn returns. Its output is the step's result, recorded in the journal.
#[must_use = "a step does nothing unless awaited"]
pub struct StepCall<T> {
    state: CallState<T>,
}

enum CallState<T> {
    /// Outside any run: the step's own future, run once.
    Detached(BoxFuture<'static, Result<T, StepError>>),
    /// Inside a run: waits for the outcome the executor delivers.
    Durable { core: Arc<RunCore>, op: Op, output: PhantomData<fn() -> T> },
    /// Creation failed (divergence or unserializable arguments): the error, or pending forever.
    Failed(Option<StepError>),
}

impl<T> StepCall<T>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    /// The call of `def` with `args`; `step` runs one attempt. `#[step]` generates this call.
    #[track_caller]
    pub fn new<A, F, Fut, E>(def: &'static StepDef, args: A, step: F) -> Self
    where
        A: Serialize + DeserializeOwned + Send + 'static,
        F: FnMut(A, StepCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<StepError>,
    {
        match run_core::current() {
            Some(core) => Self::durable(core, def, args, step),
            None => Self::detached(args, step),
        }
    }

    fn detached<A, F, Fut, E>(args: A, mut step: F) -> Self
    where
        F: FnMut(A, StepCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<StepError>,
    {
        let future = step(args, StepCtx::detached());
        StepCall { state: CallState::Detached(Box::pin(async move { future.await.map_err(Into::into) })) }
    }

    #[track_caller]
    fn durable<A, F, Fut, E>(core: Arc<RunCore>, def: &'static StepDef, args: A, step: F) -> Self
    where
        A: Serialize + DeserializeOwned + Send + 'static,
        F: FnMut(A, StepCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<StepError>,
    {
        // Canonical, so a map argument hashes the same in every process (see `journal::canonical`).
        // A step whose result the journal records never runs again, so replay only hashes its
        // arguments, keeps no copy of them and skips boxing it. A live step keeps them for its
        // retries: inline when they are small, so a number or a short string allocates nothing.
        let live = !core.next_op_completed();
        let encoded =
            canonical::with_encoded(&args, |bytes| (InputHash::of(bytes), live.then(|| Args::from_slice(bytes))));
        let (input_hash, bytes) = match encoded {
            Ok(encoded) => encoded,
            Err(error) => {
                let error =
                    FatalError::new(format!("the arguments of step `{}` cannot be serialized: {error}", def.name()));
                return StepCall { state: CallState::Failed(Some(error.into())) };
            }
        };
        let signature = OpSignature { kind: OpKind::Step, name: def.name().into(), input_hash };
        let attempt = bytes.map(|bytes| attempt_fn(args, bytes, def.hands_over(), step));
        let slot = StepSlot { def, input_hash, attempt, polled: false, outcome: None, handed: None };
        match core.create(signature, Slot::Step(slot)) {
            Some(op) => StepCall { state: CallState::Durable { core, op, output: PhantomData } },
            None => StepCall { state: CallState::Failed(None) },
        }
    }
}

/// A step's arguments in their canonical encoding, kept for its later attempts.
type Args = smallvec::SmallVec<[u8; 24]>;

/// Boxes one attempt: the first uses the arguments as given, later ones deserialize a fresh copy.
/// With `hands_over`, the output is also kept as it is for the body (`StepDef::handing_over`).
fn attempt_fn<A, T, F, Fut, E>(args: A, bytes: Args, hands_over: bool, mut step: F) -> AttemptFn
where
    A: DeserializeOwned + Send + 'static,
    T: Serialize + DeserializeOwned + Send + 'static,
    F: FnMut(A, StepCtx) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    E: Into<StepError>,
{
    let mut first = Some(args);
    Box::new(move |StepAttempt { core, op, number }| {
        // The attempt's context takes the core; only a step that hands its output over keeps a
        // handle of its own, to hand it over with.
        let handing = hands_over.then(|| core.clone());
        let ctx = StepCtx::in_run(core, op, number);
        let args = match first.take() {
            Some(args) => args,
            None => match crate::journal::depth::from_slice(&bytes) {
                Ok(args) => args,
                Err(error) => {
                    let error = FatalError::new(format!("the step's arguments do not deserialize again: {error}"));
                    return Box::pin(std::future::ready(Err(error.into())));
                }
            },
        };
        let future = step(args, ctx);
        Box::pin(async move {
            let output = future.await.map_err(Into::into)?;
            let cannot = |error: serde_json::Error| {
                StepError::from(FatalError::new(format!("the step's output cannot be serialized: {error}")))
            };
            let Some(core) = handing else {
                return serde_json::to_value(&output).map(Payload::from).map_err(cannot);
            };
            // The body takes the output itself, so the journal's copy is written and not read: as
            // JSON text, one allocation, where a tree costs one for every map, key and string.
            let value = Payload::text(&output).map_err(cannot)?;
            // Replay decodes the journal's copy, so that copy must decode to what the body takes.
            #[cfg(debug_assertions)]
            crate::journal::assert_survives_journal::<T>(&value.to_value(), "a handed-over step output");
            core.hand_over(op, number, Box::new(output));
            Ok(value)
        })
    })
}

impl<T: DeserializeOwned + 'static> Future for StepCall<T> {
    type Output = Result<T, StepError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `StepCall` holds only `Unpin` data (boxed futures, `Arc`s).
        let this = self.get_mut();
        match &mut this.state {
            CallState::Detached(future) => future.as_mut().poll(cx),
            CallState::Failed(error) => match error.take() {
                Some(error) => Poll::Ready(Err(error)),
                None => Poll::Pending,
            },
            CallState::Durable { core, op, .. } => poll_durable(core, *op, cx),
        }
    }
}

fn poll_durable<T: DeserializeOwned + 'static>(
    core: &RunCore,
    op: Op,
    cx: &mut Context<'_>,
) -> Poll<Result<T, StepError>> {
    let (outcome, handed, name) = {
        let mut state = core.lock();
        let state = &mut *state;
        let slot = &mut state.ops[op.0 as usize];
        let Slot::Step(step) = &mut slot.slot else { unreachable!("op {} was created as a step", op.0) };
        let Some(outcome) = step.outcome.take() else {
            if !step.polled {
                step.polled = true;
                state.polled.push(op);
            }
            state.wait(op, cx);
            return Poll::Pending;
        };
        let handed = if matches!(outcome, StepOutcome::Ok { .. }) { step.handed.take() } else { None };
        (outcome, handed, step.def.name())
    };
    // Decoding runs user `Deserialize` code, so it happens after the core's lock is released.
    if let Some((_, output)) = handed {
        let output = output.downcast::<T>().map(|output| *output).map_err(|_| {
            FatalError::new(format!("step `{name}` handed over an output of another type than its call awaits")).into()
        });
        return Poll::Ready(output);
    }
    Poll::Ready(match outcome {
        StepOutcome::Ok { value } => value.decode().map_err(|error| {
            FatalError::new(format!("the recorded output of step `{name}` no longer deserializes: {error}")).into()
        }),
        StepOutcome::Err { fatal, message } => Err(StepError::from_record(fatal, message)),
    })
}
