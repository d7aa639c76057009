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

#[doc(hidden)]
pub mod __private;

pub use eve_macros::{step, task, tool, workflow_tool};
pub use eve_runtime::context::{Receive, ServeCtx, StepCtxSource, TaskCtx, ToolCtx, WorkflowCtx};
pub use eve_runtime::error::{FatalError, NonDeterminismError, RetryableError, StepError, StoreError, ToolError};
pub use eve_runtime::events::RunEvent;
pub use eve_runtime::journal::{Entry, Op, RunFailure, RunId, RunStatus};
pub use eve_runtime::registry::{Lifetime, Manifest, Shape, Suspend};
pub use eve_runtime::step::{Backoff, RetryPolicy, StepCall, StepCtx};
pub use eve_runtime::wait::{
    AbortSignal, Cancelled, Hook, HookError, create_hook, create_hook_with_token, sleep, sleep_until,
};
pub use eve_runtime::{
    Clock, Error, HookDelivery, ManualClock, Phase, RunHandle, RunOutcome, Runtime, RuntimeBuilder, SystemClock,
    Timestamp,
};
pub use eve_runtime::{journal, secret, store};

/// The manifest of every tool and step compiled into this binary, sorted by name.
///
/// ```
/// let manifest = eve_tools::manifest();
/// println!("{}", serde_json::to_string_pretty(&manifest).unwrap());
/// ```
pub fn manifest() -> Manifest {
    eve_runtime::registry::manifest()
}

/// What most tool modules need: `use eve_tools::prelude::*;`.
pub mod prelude {
    pub use crate::{
        AbortSignal, Cancelled, FatalError, Hook, HookError, RetryableError, Runtime, StepCtx, StepError, TaskCtx,
        ToolCtx, ToolError, WorkflowCtx, create_hook, create_hook_with_token, sleep, sleep_until, step, task, tool,
        workflow_tool,
    };
}
