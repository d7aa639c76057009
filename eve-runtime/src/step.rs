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
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::{AccessToken, AuthProvider, Provider};
use crate::control::RunControl;
use crate::error::{FatalError, StepError};
use crate::journal::{InputHash, Op, OpKind, OpSignature, Payload, RunId, StepOutcome, canonical};
use crate::run_core::{self, AttemptFn, CoreRef, RunCore, Slot, StepAttempt, StepSlot};
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
    core: Option<CoreRef>,
}

impl StepCtx {
    pub(crate) fn in_run(core: Arc<RunCore>, op: Op, attempt: u32) -> Self {
        StepCtx { op: Some(op), attempt, key: std::sync::OnceLock::new(), core: Some(core.into()) }
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

    /// Sends a log message, named for this step: to `tracing`, and to whoever listens to its
    /// run (see [`crate::logs`]). Each attempt that runs sends its own; a step whose completion
    /// is journaled never runs again, so a replay sends nothing. Outside any run, only `tracing`
    /// gets it.
    pub fn log(&self, level: crate::logs::LogLevel, message: impl Into<String>) {
        let message = message.into();
        let Some(core) = &self.core else {
            crate::logs::trace("", "step", level, &message);
            return;
        };
        let name = self.op.and_then(|op| match &core.lock().ops.get(op.0 as usize)?.slot {
            Slot::Step(step) => Some(step.def.name()),
            _ => None,
        });
        core.services.logs.send(core.run.as_str(), name.unwrap_or("step"), level, message);
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

    fn provider(&self, provider: &Provider) -> Result<(&RunCore, Arc<dyn AuthProvider>), StepError> {
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
    /// Outside any run: the step's one attempt, and where it leaves its output.
    Detached { attempt: AttemptFuture, output: Arc<Mutex<Option<T>>> },
    /// Inside a run: waits for the outcome the executor delivers.
    Durable { core: CoreRef, op: Op, output: PhantomData<fn() -> T> },
    /// Creation failed (divergence or unserializable arguments): the error, or pending forever.
    Failed(Option<StepError>),
}

/// The future of one attempt: what the journal records of its outcome.
type AttemptFuture = BoxFuture<'static, Result<Payload, StepError>>;

impl<T> StepCall<T>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    /// The call of `def` with `args`; `step` runs one attempt. `#[step]` generates this call.
    ///
    /// Only this fn, `Body::attempt` and `Attempt`'s `poll` are compiled once for each step,
    /// being generic over the step's own closure and future. The rest (`StepCall::start`) is
    /// compiled once for all the steps that take and return the same types, so that a crate of
    /// many steps pays little for each.
    #[track_caller]
    pub fn new<A, F, Fut, E>(def: &'static StepDef, args: A, step: F) -> Self
    where
        A: Serialize + DeserializeOwned + Send + 'static,
        F: FnMut(A, StepCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<StepError>,
    {
        // The closures `#[step]` writes capture nothing, so this box allocates nothing.
        Self::start(def, args, Box::new(step))
    }

    #[track_caller]
    fn start<A>(def: &'static StepDef, args: A, mut body: Box<dyn Body<A, T>>) -> Self
    where
        A: Serialize + DeserializeOwned + Send + 'static,
    {
        let Some(core) = run_core::current() else {
            let output = Arc::new(Mutex::new(None));
            let attempt = body.attempt(args, StepCtx::detached(), Output::Call(output.clone()));
            return StepCall { state: CallState::Detached { attempt, output } };
        };
        let (signature, bytes) = match Self::prepare(def, &core, &args) {
            Ok(prepared) => prepared,
            Err(failed) => return failed,
        };
        let hands_over = def.hands_over();
        let mut first = Some(args);
        let attempt = bytes.map(|bytes| -> AttemptFn {
            Box::new(move |attempt| match Output::start(&mut first, &bytes, hands_over, attempt) {
                Ok((args, ctx, output)) => body.attempt(args, ctx, output),
                Err(error) => Box::pin(std::future::ready(Err(error))),
            })
        });
        Self::create(core, def, signature, attempt)
    }

    /// Hashes the arguments of a call inside a run, and keeps their encoding if the step will run.
    ///
    /// Canonical, so a map argument hashes the same in every process (see `journal::canonical`).
    /// A step whose result the journal records never runs again, so replay only hashes its
    /// arguments, keeps no copy of them and skips boxing it. A live step keeps them for its
    /// retries: inline when they are small, so a number or a short string allocates nothing.
    fn prepare<A: Serialize>(
        def: &'static StepDef,
        core: &RunCore,
        args: &A,
    ) -> Result<(OpSignature, Option<Args>), Self> {
        let live = !core.next_op_completed();
        let encoded =
            canonical::with_encoded(args, |bytes| (InputHash::of(bytes), live.then(|| Args::from_slice(bytes))));
        match encoded {
            Ok((input_hash, bytes)) => {
                Ok((OpSignature { kind: OpKind::Step, name: def.name().into(), input_hash }, bytes))
            }
            Err(error) => {
                let error =
                    FatalError::new(format!("the arguments of step `{}` cannot be serialized: {error}", def.name()));
                Err(StepCall { state: CallState::Failed(Some(error.into())) })
            }
        }
    }

    /// Takes the call's op number (or records a divergence) with `attempt` to run it.
    #[track_caller]
    fn create(core: Arc<RunCore>, def: &'static StepDef, signature: OpSignature, attempt: Option<AttemptFn>) -> Self {
        let input_hash = signature.input_hash;
        let slot = StepSlot { def, input_hash, attempt, polled: false, outcome: None, handed: None };
        match core.create(signature, Slot::Step(slot)) {
            Some(op) => StepCall { state: CallState::Durable { core: core.into(), op, output: PhantomData } },
            None => StepCall { state: CallState::Failed(None) },
        }
    }
}

/// A step's own closure, its types erased.
trait Body<A, T>: Send {
    /// Starts one attempt, whose output goes to `output`.
    fn attempt(&mut self, args: A, ctx: StepCtx, output: Output<T>) -> AttemptFuture;
}

impl<A, T, F, Fut, E> Body<A, T> for F
where
    T: Serialize + DeserializeOwned + Send + 'static,
    F: FnMut(A, StepCtx) -> Fut + Send,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    E: Into<StepError>,
{
    fn attempt(&mut self, args: A, ctx: StepCtx, output: Output<T>) -> AttemptFuture {
        Box::pin(Attempt { future: self(args, ctx), output: Some(output) })
    }
}

/// A step's arguments in their canonical encoding, kept for its later attempts.
type Args = smallvec::SmallVec<[u8; 24]>;

pin_project_lite::pin_project! {
    /// One attempt of a step: the step's own future, and where its output goes.
    struct Attempt<Fut, T> {
        #[pin]
        future: Fut,
        output: Option<Output<T>>,
    }
}

impl<Fut, T, E> Future for Attempt<Fut, T>
where
    Fut: Future<Output = Result<T, E>>,
    T: Serialize + DeserializeOwned + Send + 'static,
    E: Into<StepError>,
{
    type Output = Result<Payload, StepError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.future.poll(cx) {
            Poll::Ready(result) => Poll::Ready(Output::finish(this.output, result)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Where an attempt's output goes.
enum Output<T> {
    /// Inside a run: serialized for the journal; with `handing`, also handed over to the body as
    /// it is (`StepDef::handing_over`).
    Journal { handing: Option<CoreRef>, op: Op, number: u32 },
    /// Outside any run: to the call, as it is.
    Call(Arc<Mutex<Option<T>>>),
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Output<T> {
    /// What attempt `number` runs with: the arguments (the first attempt takes them as given,
    /// later ones deserialize a fresh copy), its context, and where its output goes.
    fn start<A: DeserializeOwned>(
        first: &mut Option<A>,
        bytes: &Args,
        hands_over: bool,
        StepAttempt { core, op, number }: StepAttempt,
    ) -> Result<(A, StepCtx, Self), StepError> {
        let args = match first.take() {
            Some(args) => args,
            None => crate::journal::depth::from_slice(bytes)
                .map_err(|error| FatalError::new(format!("the step's arguments do not deserialize again: {error}")))?,
        };
        // The attempt's context takes the core; only a step that hands its output over keeps a
        // handle of its own, to hand it over with.
        let handing = hands_over.then(|| CoreRef::from(core.clone()));
        Ok((args, StepCtx::in_run(core, op, number), Output::Journal { handing, op, number }))
    }

    /// Sends the output of an attempt that ended with `result` where it goes. Generic over the
    /// step's error type only, so steps that return `StepError` share one copy for each `T`.
    fn finish<E: Into<StepError>>(output: &mut Option<Self>, result: Result<T, E>) -> Result<Payload, StepError> {
        let output = output.take().expect("a step attempt is not polled after it ended");
        let result = result.map_err(Into::into)?;
        let cannot = |error: serde_json::Error| {
            StepError::from(FatalError::new(format!("the step's output cannot be serialized: {error}")))
        };
        let (op, number, core) = match output {
            Output::Call(call) => {
                *call.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
                return Ok(Payload::from(serde_json::Value::Null));
            }
            Output::Journal { handing: None, .. } => {
                return serde_json::to_value(&result).map(Payload::from).map_err(cannot);
            }
            Output::Journal { handing: Some(core), op, number } => (op, number, core),
        };
        // The body takes the output itself, so the journal's copy is written and not read: as
        // JSON text, one allocation, where a tree costs one for every map, key and string.
        let value = Payload::text(&result).map_err(cannot)?;
        // Replay decodes the journal's copy, so that copy must decode to what the body takes.
        #[cfg(debug_assertions)]
        crate::journal::assert_survives_journal::<T>(&value.to_value(), "a handed-over step output");
        core.hand_over(op, number, Box::new(result));
        Ok(value)
    }
}

impl<T: DeserializeOwned + 'static> Future for StepCall<T> {
    type Output = Result<T, StepError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `StepCall` holds only `Unpin` data (boxed futures, `Arc`s).
        let this = self.get_mut();
        match &mut this.state {
            CallState::Detached { attempt, output } => {
                std::task::ready!(attempt.as_mut().poll(cx))?;
                let output = output.lock().unwrap_or_else(PoisonError::into_inner).take();
                Poll::Ready(Ok(output.expect("a step's attempt leaves its output before it ends")))
            }
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
