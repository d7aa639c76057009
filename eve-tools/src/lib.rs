//! Durable tools for AI agents.
//!
//! Annotate an `async fn` with [`#[workflow_tool]`](workflow_tool), [`#[task]`](task) or
//! [`#[tool]`](tool), and its side effects with [`#[step]`](step). The macros turn the functions
//! into replayable durable workflows, check the rules at compile time, and register each tool
//! with its compiled shape in the [`manifest()`]. The [`Runtime`] runs them: a journal replayed
//! after crashes, durable [`sleep`], [hooks](create_hook), step retries and cancellation.
//!
//! ```
//! use eve_tools::prelude::*;
//! use serde::{Deserialize, Serialize};
//! use schemars::JsonSchema;
//!
//! #[derive(Deserialize, JsonSchema)]
//! pub struct GreetInput {
//!     name: String,
//! }
//!
//! /// Greet someone, durably.
//! #[workflow_tool]
//! pub async fn greet(input: GreetInput, ctx: &WorkflowCtx) -> Result<String, ToolError> {
//!     let greeting = compose(input.name).await?;
//!     Ok(greeting)
//! }
//!
//! #[step]
//! async fn compose(name: String) -> Result<String, StepError> {
//!     Ok(format!("hello, {name}"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::in_memory()?;
//! let run = runtime.start("greet", serde_json::json!({ "name": "Ada" })).await?;
//! assert_eq!(run.outcome().await?.output(), Some(&serde_json::json!("hello, Ada")));
//! # Ok(())
//! # }
//! ```
//!
//! # Report progress
//!
//! A `#[workflow_tool]` or `#[task]` body reports progress, the seed's `yield`, through a last
//! parameter [`progress: Progress`](Progress). A workflow tool's snapshots are shown for its
//! pending call (`action.partial` in a session's feed, progress notifications over MCP), once,
//! never again on replay, and never in the model's history; a body that returns nothing (`null`)
//! settles with its last snapshot. A task's snapshots are consumed silently.
//!
//! ```
//! use eve_tools::prelude::*;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! pub struct Survey {
//!     hosts: Vec<String>,
//! }
//!
//! /// Check each host, reporting as it goes.
//! #[workflow_tool]
//! pub async fn survey(input: Survey, progress: Progress) -> Result<(), ToolError> {
//!     for (checked, host) in input.hosts.iter().enumerate() {
//!         progress.report(serde_json::json!({ "checked": checked + 1, "last": host })).await?;
//!     }
//!     Ok(()) // no output of its own: the last snapshot is the result
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::in_memory()?;
//! let run = runtime.start("survey", serde_json::json!({ "hosts": ["a", "b"] })).await?;
//! let output = run.outcome().await?.output().cloned();
//! assert_eq!(output, Some(serde_json::json!({ "checked": 2, "last": "b" })));
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
pub mod builtin;
pub mod guide;

/// Makes an `async fn` a step: a side effect whose result is journaled, so that replay after a
/// crash hands the recorded result back instead of running it again.
///
/// `#[step] async fn f(args…) -> Result<T, E>` becomes a plain `fn f(args…) -> StepCall<T>` of the
/// same name and visibility. Calling it inside a run's body takes the next op number at once (so
/// `join!` and `select!` replay in program order); awaiting it runs attempts, retrying per the
/// step's policy, and records the outcome exactly once. Called outside any run, it just runs.
///
/// - Arguments are owned values that implement `Serialize` and `Deserialize`: they are hashed into
///   the journal (a changed argument on replay is a non-determinism error) and read back for retries.
/// - The output `T` implements `Serialize` and `Deserialize`; it is what the journal records, so a
///   step never returns a token or other secret.
/// - The error `E` converts into [`StepError`]: [`FatalError`] stops at once, [`RetryableError`]
///   may set the delay, anything else is retried.
/// - A first parameter `ctx: &StepCtx` gives the attempt its [`StepCtx`] (attempt number, a stable
///   idempotency key, the abort signal). Callers pass the body's own context in its place,
///   `charge(ctx, cents)`; the macro builds a fresh `StepCtx` per attempt and never journals it.
///
/// Arguments of the attribute:
///
/// | argument | meaning | default |
/// |---|---|---|
/// | `name = "…"` | the journaled name | the fn name |
/// | `max_attempts = N` | attempts in all, at least 1 | `3` |
/// | `backoff = "250ms"` | the first delay, doubling; `ms`, `s`, `m` or `h`; `"fixed(1s)"` waits the same each time | `"1s"` |
/// | `crate = "path"` | where `eve_tools` is, for crates that re-export it | `::eve_tools` |
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// use eve_tools::prelude::*;
///
/// static CALLS: AtomicU32 = AtomicU32::new(0);
///
/// /// Charges a card; the payment API deduplicates on the idempotency key.
/// #[step(max_attempts = 5, backoff = "10ms")]
/// async fn charge(ctx: &StepCtx, cents: u64) -> Result<String, StepError> {
///     assert!(!ctx.idempotency_key().is_empty());
///     if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
///         return Err(RetryableError::new("the payment API timed out").into());
///     }
///     Ok(format!("charged {cents} on attempt {}", ctx.attempt()))
/// }
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Order {
///     cents: u64,
/// }
///
/// /// Takes payment for an order.
/// #[workflow_tool]
/// async fn checkout(order: Order, ctx: &WorkflowCtx) -> Result<String, ToolError> {
///     Ok(charge(ctx, order.cents).await?)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::in_memory()?;
/// let run = runtime.start("checkout", serde_json::json!({ "cents": 1250 })).await?;
/// assert_eq!(run.outcome().await?.output(), Some(&serde_json::json!("charged 1250 on attempt 2")));
///
/// let manifest = eve_tools::manifest();
/// let step = manifest.steps.iter().find(|step| step.name == "charge").unwrap();
/// assert_eq!((step.max_attempts, step.backoff.initial_ms, step.backoff.factor), (5, 10, 2));
/// # Ok(())
/// # }
/// ```
pub use eve_macros::step;

/// Makes an `async fn` a plain tool (shape step / none): it runs inside the model step, the model
/// sees its result, and nothing is journaled.
///
/// The signature is `async fn name(input: Input, ctx: &ToolCtx) -> Result<T, E>`:
///
/// - `Input` is one struct that derives `Deserialize` and `JsonSchema`; its schema is what the
///   model fills in, and calls whose JSON does not match are refused before the body runs.
///   A field the struct does not list is refused too, by name (models make fields up, and
///   decoding would drop them silently): the schema says `"additionalProperties": false` on each
///   object that says nothing itself of other fields. `allow_unknown_fields` takes such fields
///   and leaves the schema as the type gives it; a `#[serde(flatten)]` map takes them as well.
/// - `ctx: &ToolCtx` is optional, and comes second when present.
/// - `T: Serialize` is what the model sees; `E` converts into [`ToolError`].
/// - The doc comment is the description the model reads; the fn name is the tool name, unless
///   `name = "…"` says otherwise. `crate = "path"` points the generated code at a re-export.
///
/// A plain tool cannot wait durably (`ask` and `agent` do not exist on [`ToolCtx`]). The background
/// plain tool was removed: `#[tool(background)]` is a compile error that points to [`task`].
///
/// ```
/// use eve_tools::prelude::*;
/// use eve_tools::{Lifetime, Shape, Suspend};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// pub struct City {
///     name: String,
/// }
///
/// /// Look up the weather for a city.
/// #[tool(name = "weather")]
/// pub async fn look_up_weather(city: City, ctx: &ToolCtx) -> Result<String, ToolError> {
///     Ok(format!("{}: sunny (via {})", city.name, ctx.tool_name()))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::in_memory()?;
/// let forecast = runtime.call_tool("weather", serde_json::json!({ "name": "Oslo" })).await?;
/// assert_eq!(forecast, serde_json::json!("Oslo: sunny (via weather)"));
/// let refused = runtime.call_tool("weather", serde_json::json!({ "name": "Oslo", "units": "C" })).await;
/// assert!(refused.unwrap_err().to_string().contains("a field `units` that the tool does not take"));
///
/// let manifest = eve_tools::manifest();
/// let tool = manifest.tools.iter().find(|tool| tool.name == "weather").unwrap();
/// assert_eq!(tool.description, "Look up the weather for a city.");
/// assert_eq!(tool.shape, Shape { lifetime: Lifetime::Step, suspend: Suspend::None });
/// assert_eq!(tool.input_schema["properties"]["name"]["type"], "string");
/// assert_eq!(tool.input_schema["additionalProperties"], false);
/// # Ok(())
/// # }
/// ```
pub use eve_macros::tool;

/// Makes an `async fn` a workflow tool (shape step / workflow): a durable workflow whose turn
/// parks until it settles, surviving restarts while it waits for a person, a webhook or a timer.
///
/// The signature is `async fn name(input: Input, ctx: &WorkflowCtx) -> Result<T, E>`, with the
/// same input (`allow_unknown_fields` included), output, name, description and `crate` rules as
/// [`tool`]; the context is a [`WorkflowCtx`] and is optional. The fn itself stays as written. Its
/// workflow id is its module path and fn name, stable across rebuilds: moving or renaming the fn
/// makes a new workflow.
///
/// The body is replayed from the journal, so it must take the same path every time. Side effects
/// go in [`step`]s. The macro rejects, with what to use instead: clocks (`SystemTime::now`,
/// `Instant::now`: use `ctx.now()`), randomness (use `ctx.random()`, `ctx.uuid()`), `tokio::spawn`
/// and threads, `tokio::time::sleep` and `std::thread::sleep` (use [`sleep`]), `std::env`,
/// `std::fs`, network clients, `select!` without `biased;`, and `get_token` (call it in a step
/// that takes `&StepCtx`, so the token never enters the journal).
///
/// ```
/// use eve_tools::prelude::*;
/// use eve_tools::Phase;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, schemars::JsonSchema)]
/// pub struct DeployInput {
///     service: String,
/// }
///
/// #[derive(Serialize, Deserialize)]
/// struct Plan {
///     summary: String,
/// }
///
/// #[derive(Deserialize)]
/// struct Approval {
///     approved: bool,
/// }
///
/// /// Deploy a service to production. Pauses for a human to approve the plan.
/// #[workflow_tool]
/// pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<String, ToolError> {
///     let plan = plan_deploy(input.service).await?; // a step: journaled
///     let mut approval = create_hook_with_token::<Approval>(format!("approve-{}", ctx.run_id()));
///     if !approval.recv().await?.approved {
///         // The run parked above, holding no thread, until someone answered.
///         return Ok(format!("{}: rejected", plan.summary));
///     }
///     Ok(apply_deploy(plan).await?)
/// }
///
/// #[step]
/// async fn plan_deploy(service: String) -> Result<Plan, StepError> {
///     Ok(Plan { summary: format!("deploy {service}") })
/// }
///
/// #[step(max_attempts = 5)]
/// async fn apply_deploy(plan: Plan) -> Result<String, StepError> {
///     Ok(format!("{}: done", plan.summary))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::in_memory()?;
/// let run = runtime.start("deploy", serde_json::json!({ "service": "api" })).await?;
/// assert!(matches!(run.parked().await?, Phase::Parked));
/// runtime.resume_hook(&format!("approve-{}", run.id()), serde_json::json!({ "approved": true })).await?;
/// assert_eq!(run.outcome().await?.output(), Some(&serde_json::json!("deploy api: done")));
///
/// let manifest = eve_tools::manifest();
/// let tool = manifest.tools.iter().find(|tool| tool.name == "deploy").unwrap();
/// assert_eq!(tool.description, "Deploy a service to production. Pauses for a human to approve the plan.");
/// assert!(tool.workflow_id.ends_with("::deploy"));
/// # Ok(())
/// # }
/// ```
pub use eve_macros::workflow_tool;

/// Makes an `async fn` a task (shape task / workflow): the call returns a receipt at once, and
/// the result arrives later, while the conversation goes on.
///
/// A task is a durable workflow with the rules of [`workflow_tool`], entered with a [`TaskCtx`]
/// (the workflow context plus the task's id). `#[task(serve)]` makes a resumable task instead: it
/// takes the stream of its calls, `receive: Receive<Input>`, and a `&ServeCtx`, and its input
/// schema is `Input`'s. `name = "…"`, `allow_unknown_fields` and `crate = "path"` work as on
/// [`tool`].
///
/// ```
/// use std::time::Duration;
///
/// use eve_tools::prelude::*;
/// use eve_tools::{Receive, ServeCtx, Shape};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// pub struct Reminder {
///     note: String,
///     delay_ms: u64,
/// }
///
/// /// Remind the user about something after a delay.
/// #[task]
/// pub async fn remind(input: Reminder, ctx: &TaskCtx) -> Result<String, ToolError> {
///     sleep(Duration::from_millis(input.delay_ms)).await?; // a durable timer
///     Ok(format!("{} (task {})", input.note, ctx.task_id()))
/// }
///
/// /// Answer questions as they come in.
/// #[task(serve)]
/// pub async fn concierge(_questions: Receive<Reminder>, _ctx: &ServeCtx) -> Result<(), ToolError> {
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::in_memory()?;
/// let run = runtime.start("remind", serde_json::json!({ "note": "stand up", "delay_ms": 5 })).await?;
/// let output = run.outcome().await?.output().cloned().unwrap();
/// assert!(output.as_str().unwrap().starts_with("stand up (task remind-"));
///
/// let manifest = eve_tools::manifest();
/// for (name, entry) in [("remind", "task"), ("concierge", "serve")] {
///     let tool = manifest.tools.iter().find(|tool| tool.name == name).unwrap();
///     assert_eq!((tool.shape, tool.entry), (Shape::TASK, entry));
/// }
/// # Ok(())
/// # }
/// ```
pub use eve_macros::task;
pub use eve_runtime::ask::{
    Answer, AnswerAction, AnswerError, Ask, AskOption, AskOutcome, Display, FormError, FormOutcome, Pending,
    SampleOutcome, Style,
};
pub use eve_runtime::auth::{AccessToken, AuthError, AuthProvider, Principal, Provider};
pub use eve_runtime::auth::{MemoryTokenStore, TokenSet, TokenStore, TokenStoreError};
pub use eve_runtime::context::{Call, Receive, ServeCtx, StepCtxSource, StretchSignal, TaskCtx, ToolCtx, WorkflowCtx};
pub use eve_runtime::error::{
    FatalError, ForkError, NonDeterminismError, RetryableError, StepError, StoreError, ToolError,
};
pub use eve_runtime::events::RunEvent;
/// Requests for the calling client's model (`ctx.sample`) and their completions.
pub use eve_runtime::journal::sample;
pub use eve_runtime::journal::{Entry, Op, Position, RunFailure, RunId, RunStatus};
pub use eve_runtime::logs::LogLevel;
pub use eve_runtime::progress::Progress;
pub use eve_runtime::registry::{Lifetime, Manifest, Shape, Suspend};
pub use eve_runtime::step::{Backoff, RetryPolicy, StepCall, StepCtx};
pub use eve_runtime::wait::{
    AbortSignal, Cancelled, Hook, HookError, create_hook, create_hook_with_token, sleep, sleep_until,
};
pub use eve_runtime::webhook::{
    Respond, Webhook, WebhookOptions, WebhookRequest, WebhookResponse, create_webhook, create_webhook_with,
    is_secret_looking,
};
pub use eve_runtime::{
    AuthorizationStart, Clock, Error, HookDelivery, ManualClock, OpenQuestion, Phase, RefusedRun, RunHandle,
    RunOutcome, Runtime, RuntimeBuilder, StartOptions, SystemClock, Timestamp, Upgrade, UpgradedRun, WebhookReply,
};
pub use eve_runtime::{control, follow, journal, logs, secret, testing, trace, view};

// Sign-in with OAuth 2.0, and tokens sealed in files (feature `oauth2`).
#[cfg(feature = "oauth2")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth2")))]
pub use eve_auth::{ClientAuth, FileTokenStore, OAuth2Provider, OAuth2ProviderBuilder};
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub use eve_host::cli;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use eve_host::http;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub use eve_host::mcp;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use eve_host::otel;
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub use eve_host::timeline;

/// Metrics: what the runtime and its parts record (the table of them is in
/// [`eve_runtime::metrics`]), [`enable`](metrics::enable) to record them into a recorder of your
/// own, and with the feature `metrics`, [`install`](metrics::install) for the Prometheus recorder
/// that `serve`'s `/metrics` renders, or `install_with` for it and another recorder together (such
/// as `otel::Metrics::recorder`, the same metrics over OTLP). The guide's
/// [operations](crate::guide::operations) page says how to scrape them and how to export them.
pub mod metrics {
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub use eve_host::metrics::{InstallError, Metrics, UPKEEP, install, install_with};
    pub use eve_runtime::metrics::*;
}
#[cfg(feature = "sessions")]
#[cfg_attr(docsrs, doc(cfg(feature = "sessions")))]
pub use eve_sessions as session;

/// Stores: the [`Store`](store::Store) trait, the memory store and the driver kit, and the stores
/// of the features on: [`SqliteStore`](store::SqliteStore) (`sqlite`) and
/// [`PostgresStore`](store::PostgresStore) (`postgres`).
pub mod store {
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub use eve_postgres::{ConnectError as PostgresConnectError, PostgresOptions, PostgresStore};
    pub use eve_runtime::store::*;
    #[cfg(feature = "sqlite")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
    pub use eve_sqlite::{SqliteOptions, SqliteSnapshot, SqliteStore};
}

/// The manifest of every tool and step compiled into this binary, sorted by name.
///
/// ```
/// let manifest = eve_tools::manifest();
/// println!("{}", serde_json::to_string_pretty(&manifest).unwrap());
/// ```
pub fn manifest() -> Manifest {
    eve_runtime::registry::manifest()
}

/// The library crates whose tools a host binary serves, for [`cli::Host::main`]: naming a crate
/// here is what links it into the binary, registrations and all.
///
/// A binary links a library only if it names it. With the tools in `lib.rs` and a host in
/// `main.rs` that never mentions the library, the linker leaves the library out whole, and the
/// host would list only the provided tools. `Host::main` takes the list this macro makes, so the
/// crates cannot be forgotten; `eve_tools::tools!()` names none, for tools defined in the binary.
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> std::process::ExitCode {
///     // With a library crate `my_tools`: `eve_tools::tools!(my_tools)`.
///     eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await
/// }
/// ```
///
/// ```
/// let tools = eve_tools::tools!(serde_json);
/// assert_eq!(tools.crates(), ["serde_json"]);
/// ```
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
#[macro_export]
macro_rules! tools {
    ($($krate:ident),* $(,)?) => {{
        // Naming each crate loads it, and a loaded crate's registrations are kept by the linker.
        $( #[allow(unused_imports)] use $krate as _; )*
        $crate::cli::Tools::__linked(&[$(::core::stringify!($krate)),*])
    }};
}

/// What most tool modules need: `use eve_tools::prelude::*;`.
pub mod prelude {
    pub use crate::{
        AbortSignal, Ask, AskOutcome, Cancelled, FatalError, FormOutcome, Hook, HookError, LogLevel, Progress,
        Provider, Respond, RetryableError, Runtime, StepCtx, StepError, TaskCtx, ToolCtx, ToolError, Webhook,
        WebhookOptions, WebhookRequest, WebhookResponse, WorkflowCtx, create_hook, create_hook_with_token,
        create_webhook, create_webhook_with, sleep, sleep_until, step, task, tool, workflow_tool,
    };
    #[cfg(feature = "postgres")]
    pub use eve_postgres::PostgresBuilderExt;
    #[cfg(feature = "sessions")]
    pub use eve_sessions::{AgentCtxExt, SessionBuilderExt, SessionRuntimeExt};
}
