#![allow(missing_docs)]
//! The expansion the macros generate, written by hand, run end to end. It pins the contract
//! between `eve-macros` and `eve_tools::__private`.

use std::sync::atomic::{AtomicU32, Ordering};

use eve_tools::prelude::*;
use eve_tools::{RunEvent, RunOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct DeployInput {
    service: String,
}

#[derive(Serialize, Deserialize)]
pub struct Plan {
    steps: Vec<String>,
}

static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

// ---- #[step] async fn plan_deploy(service: String) -> Result<Plan, StepError> { … }
fn plan_deploy(service: String) -> ::eve_tools::__private::StepCall<Plan> {
    async fn __eve_body(service: String) -> Result<Plan, StepError> {
        Ok(Plan { steps: vec![format!("build {service}"), format!("ship {service}")] })
    }
    static __EVE_STEP: ::eve_tools::__private::StepDef = ::eve_tools::__private::StepDef::new(
        ::core::concat!(::core::module_path!(), "::", "plan_deploy"),
        "plan_deploy",
        ::eve_tools::__private::RetryPolicy::DEFAULT,
    );
    ::eve_tools::__private::register!(__EVE_STEP);
    ::eve_tools::__private::StepCall::new(&__EVE_STEP, (service,), |(service,), _ctx| __eve_body(service))
}

// ---- #[step(max_attempts = 3, backoff = "1ms")] async fn flaky(ctx: &StepCtx, n: u32) -> Result<u32, StepError>
fn flaky(_ctx: &impl ::eve_tools::__private::StepCtxSource, n: u32) -> ::eve_tools::__private::StepCall<u32> {
    async fn __eve_body(ctx: &StepCtx, n: u32) -> Result<u32, StepError> {
        if FLAKY_CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(StepError::msg("first attempt fails"));
        }
        Ok(n * ctx.attempt())
    }
    static __EVE_STEP: ::eve_tools::__private::StepDef = ::eve_tools::__private::StepDef::new(
        ::core::concat!(::core::module_path!(), "::", "flaky"),
        "flaky",
        ::eve_tools::__private::RetryPolicy {
            max_attempts: 3,
            backoff: ::eve_tools::__private::Backoff::exponential_millis(1),
        },
    );
    ::eve_tools::__private::StepCall::new(&__EVE_STEP, (n,), |(n,), ctx| async move { __eve_body(&ctx, n).await })
}

// ---- #[workflow_tool] pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError>
/// Deploy a service.
pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let plan = plan_deploy(input.service).await?;
    let doubled = flaky(ctx, 21).await?;
    sleep(std::time::Duration::from_millis(1)).await?;
    let mut out = plan.steps;
    out.push(doubled.to_string());
    Ok(out)
}

const _: () = {
    #[allow(unused_imports)]
    use ::eve_tools::__private::{NoOutputSchema as _, OutputSchema as _};
    fn __eve_entry(
        __eve_input: ::eve_tools::__private::Value,
        __eve_ctx: ::eve_tools::__private::WorkflowCtx,
    ) -> ::eve_tools::__private::BodyFuture {
        match ::eve_tools::__private::decode_input::<DeployInput>(__eve_input) {
            ::core::result::Result::Ok(__eve_input) => {
                ::eve_tools::__private::body(async move { deploy(__eve_input, &__eve_ctx).await })
            }
            ::core::result::Result::Err(error) => ::eve_tools::__private::refused(error),
        }
    }
    static __EVE_TOOL: ::eve_tools::__private::ToolDescriptor = ::eve_tools::__private::ToolDescriptor {
        name: "deploy",
        description: "Deploy a service.",
        workflow_id: ::core::concat!(::core::module_path!(), "::", "deploy"),
        shape: ::eve_tools::__private::Shape::WORKFLOW_TOOL,
        input_schema: ::eve_tools::__private::schema_for::<DeployInput>,
        validate_input: ::eve_tools::__private::validate_input::<DeployInput>,
        output_schema: || (&&::eve_tools::__private::OutputProbe::<Vec<String>>::new()).output_schema(),
        entry: ::eve_tools::__private::EntryPoint::Workflow(__eve_entry),
        fingerprint: "5d1e0f3a9c2b7e48",
        version: ::eve_tools::__private::version(
            ::core::option_env!("EVE_BUILD_VERSION"),
            ::core::env!("CARGO_PKG_VERSION"),
        ),
    };
    ::eve_tools::__private::register!(__EVE_TOOL);
    ::eve_tools::__private::assert_tool_input::<DeployInput>();
    ::eve_tools::__private::assert_tool_return::<Result<Vec<String>, ToolError>>();
};

#[tokio::test]
async fn hand_expanded_workflow_runs_end_to_end() {
    let runtime = Runtime::in_memory().unwrap();
    let mut events = runtime.events();
    let run = runtime.start("deploy", json!({ "service": "api" })).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!(["build api", "ship api", "42"])));
    let mut retried = false;
    while let Ok(event) = events.try_recv() {
        retried |= matches!(event, RunEvent::StepFailed { attempt: 1, retry_at: Some(_), .. });
    }
    assert!(retried, "the flaky step failed once and was retried");
    let manifest = eve_tools::manifest();
    let tool = manifest.tools.iter().find(|tool| tool.name == "deploy").unwrap();
    assert_eq!(tool.input_schema["properties"]["service"]["type"], "string");
    assert!(manifest.steps.iter().any(|step| step.name == "plan_deploy"));
}

#[tokio::test]
async fn bad_input_is_refused_before_a_run_exists() {
    let runtime = Runtime::in_memory().unwrap();
    let error = runtime.start("deploy", json!({ "service": 3 })).await.unwrap_err();
    assert_eq!(error.to_string(), "invalid input for tool `deploy`: field `service`: 3 is not of type \"string\"");
    assert!(runtime.runs(None, 10).await.unwrap().is_empty());
}
