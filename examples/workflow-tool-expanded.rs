//! What `#[workflow_tool]` expands to, simplified for reading (`cargo expand` shows the exact output).
//!
//! You write:
//!
//! ```ignore
//! /// Deploy a service to production.
//! #[workflow_tool]
//! pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<String, ToolError> {
//!     let plan = plan_deploy(input.service).await?;
//!     Ok(format!("{plan} in run {}", ctx.run_id()))
//! }
//! ```
//!
//! The fn stays exactly as written. Next to it, an anonymous `const` block registers it: an entry
//! fn that decodes the JSON input and encodes the output, the `ToolDescriptor` the manifest and
//! the runtime read, its registration (a constructor run before `main`), and trait checks spanned on the user's types.
//! The real expansion spells paths out (`::eve_tools::__private`, `::std::boxed::Box`,
//! `::core::concat!`) and creates the `__eve` names with `Span::mixed_site()`.

use eve_tools::prelude::*;
use serde::Deserialize;

/// The tool's input.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct DeployInput {
    service: String,
}

#[step]
async fn plan_deploy(service: String) -> Result<String, StepError> {
    Ok(format!("deploy {service}"))
}

/// Deploy a service to production.
pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let plan = plan_deploy(input.service).await?;
    Ok(format!("{plan} in run {}", ctx.run_id()))
}

const _: () = {
    // Generated code names the runtime through one short alias.
    use eve_tools::__private as __eve;
    // Lets `output_schema` below find the output's schema if it has one (autoref specialization).
    #[allow(unused_imports)] // one of the two is
    use __eve::{NoOutputSchema as _, OutputSchema as _};
    // How the runtime enters the body: JSON in, JSON out.
    fn __eve_entry(__eve_input: __eve::Value, __eve_ctx: __eve::WorkflowCtx) -> __eve::BodyFuture {
        // The input is decoded before the body's future is made; `body` encodes its output.
        match __eve::decode_input::<DeployInput>(__eve_input) {
            Ok(__eve_input) => __eve::body(async move { deploy(__eve_input, &__eve_ctx).await }),
            Err(error) => __eve::refused(error),
        }
    }
    // What the manifest lists and the runtime looks tools up by.
    static __EVE_TOOL: __eve::ToolDescriptor = __eve::ToolDescriptor {
        name: "deploy",                                       // the fn name, or `name = "…"`
        description: "Deploy a service to production.",       // the doc comment
        workflow_id: concat!(module_path!(), "::", "deploy"), // stable across rebuilds
        shape: __eve::Shape::WORKFLOW_TOOL,                   // step / workflow
        input_schema: __eve::schema_for::<DeployInput>,
        validate_input: __eve::validate_input::<DeployInput>,
        output_schema: || (&&__eve::OutputProbe::<String>::new()).output_schema(),
        entry: __eve::EntryPoint::Workflow(__eve_entry),
        fingerprint: "5d1e0f3a9c2b7e48",
        version: __eve::version(::core::option_env!("EVE_BUILD_VERSION"), ::core::env!("CARGO_PKG_VERSION")),
    };
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_TOOL);
    // Trait checks, spanned on the user's types: "`DeployInput` cannot be an eve tool input".
    __eve::assert_tool_input::<DeployInput>();
    __eve::assert_tool_output::<String>();
    __eve::assert_tool_return::<Result<String, ToolError>>();
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::in_memory()?;
    let run = runtime.start("deploy", serde_json::json!({ "service": "api" })).await?;
    println!("{:?}", run.outcome().await?);
    println!("{}", serde_json::to_string_pretty(&eve_tools::manifest())?);
    Ok(())
}
