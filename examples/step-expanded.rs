//! What `#[step]` expands to, simplified for reading (`cargo expand` shows the exact output).
//!
//! You write:
//!
//! ```ignore
//! /// Applies a deploy plan.
//! #[step(max_attempts = 5, backoff = "250ms")]
//! pub async fn apply_deploy(plan: Plan) -> Result<String, StepError> {
//!     Ok(format!("deployed {}", plan.service))
//! }
//!
//! #[step]
//! async fn read_repository(ctx: &StepCtx, repository: String) -> Result<String, StepError> {
//!     Ok(format!("{repository} on attempt {}", ctx.attempt()))
//! }
//! ```
//!
//! The `async fn` becomes a plain fn of the same name, visibility and docs that returns a
//! `StepCall`: the future that takes an op number when it is created and journals the result.
//! Inside it, the user's fn survives whole as `__eve_body`. The real expansion spells paths out
//! (`::eve_tools::__private::StepCall`, `::core::concat!`) and creates the `__eve` names with
//! `Span::mixed_site()`, so nothing in the user's scope can change what it means.

use eve_tools::__private::{StepCall, StepCtxSource};
use eve_tools::prelude::*;
use serde::{Deserialize, Serialize};

/// A deploy plan.
#[derive(Serialize, Deserialize)]
pub struct Plan {
    service: String,
}

/// Applies a deploy plan.
pub fn apply_deploy(plan: Plan) -> StepCall<String> {
    // Generated code names the runtime through one short alias.
    use eve_tools::__private as __eve;
    // The user's fn, renamed, its body untouched.
    async fn __eve_body(plan: Plan) -> Result<String, StepError> {
        Ok(format!("deployed {}", plan.service))
    }
    // The step's identity and policy, and its entry in the manifest.
    static __EVE_STEP: __eve::StepDef = __eve::StepDef::new(
        concat!(module_path!(), "::", "apply_deploy"),
        "apply_deploy",
        __eve::RetryPolicy { max_attempts: 5, backoff: __eve::Backoff::exponential_millis(250) },
    );
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_STEP);
    // Trait checks, spanned on the user's types: "`Plan` cannot be a `#[step]` argument".
    const {
        __eve::assert_step_arg::<Plan>();
        __eve::assert_step_output::<String>();
        __eve::assert_step_error::<StepError>();
    }
    // The arguments are journaled as a tuple; the closure runs one attempt. `StepCall::new` is
    // the only runtime code compiled for this step alone: what it calls is compiled once for all
    // the steps that take and return the same types.
    let __eve_args = (plan,);
    __eve::StepCall::new(&__EVE_STEP, __eve_args, |(plan,), _| __eve_body(plan))
}

// With `ctx: &StepCtx` first, callers pass the body's own context (`read_repository(ctx, repo)`);
// the runtime builds a fresh `StepCtx` for each attempt, and the closure hands it to the body.
// The context is never part of the journaled arguments.
fn read_repository(ctx: &impl StepCtxSource, repository: String) -> StepCall<String> {
    use eve_tools::__private as __eve;
    async fn __eve_body(ctx: &StepCtx, repository: String) -> Result<String, StepError> {
        Ok(format!("{repository} on attempt {}", ctx.attempt()))
    }
    static __EVE_STEP: __eve::StepDef = __eve::StepDef::new(
        concat!(module_path!(), "::", "read_repository"),
        "read_repository",
        __eve::RetryPolicy::DEFAULT,
    );
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_STEP);
    const {
        __eve::assert_step_arg::<String>();
        __eve::assert_step_output::<String>();
        __eve::assert_step_error::<StepError>();
    }
    let _ = ctx;
    let __eve_args = (repository,);
    __eve::StepCall::new(&__EVE_STEP, __eve_args, move |(repository,), __eve_ctx| async move {
        __eve_body(&__eve_ctx, repository).await
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
struct DeployInput {
    service: String,
}

/// Deploys a service.
#[workflow_tool]
async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let source = read_repository(ctx, input.service.clone()).await?;
    let deployed = apply_deploy(Plan { service: input.service }).await?;
    Ok(format!("{deployed} from {source}"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Outside any run, a step just runs.
    let deployed = apply_deploy(Plan { service: "api".into() }).await.map_err(|error| error.to_string())?;
    println!("{deployed}");
    // Inside a run, its result is journaled.
    let runtime = Runtime::in_memory()?;
    let run = runtime.start("deploy", serde_json::json!({ "service": "api" })).await?;
    println!("{:?}", run.outcome().await?);
    Ok(())
}
