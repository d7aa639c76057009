//! What `#[task]` and `#[task(serve)]` expand to, simplified for reading (`cargo expand` shows
//! the exact output).
//!
//! You write:
//!
//! ```ignore
//! /// Remind the user about something after a delay.
//! #[task]
//! pub async fn remind(input: Reminder, ctx: &TaskCtx) -> Result<String, ToolError> { … }
//!
//! /// Answer questions as they come in.
//! #[task(serve)]
//! pub async fn concierge(questions: Receive<Question>, ctx: &ServeCtx) -> Result<(), ToolError> { … }
//! ```
//!
//! A task registers like a workflow tool (see `workflow_tool.rs`), with a `TaskCtx`,
//! `EntryPoint::Task` and the shape task / workflow. A serve task is entered with the untyped
//! stream of its calls, which the entry types to the `Receive<Question>` the body declared; its
//! input schema is `Question`'s.

use std::time::Duration;

use eve_tools::prelude::*;
use eve_tools::{Receive, ServeCtx};
use serde::Deserialize;

/// The task's input.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct Reminder {
    note: String,
    delay_ms: u64,
}

/// The serve task's call input.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct Question {
    /// The question.
    pub text: String,
}

/// Remind the user about something after a delay.
pub async fn remind(input: Reminder, ctx: &TaskCtx) -> Result<String, ToolError> {
    sleep(Duration::from_millis(input.delay_ms)).await?;
    Ok(format!("{} (task {})", input.note, ctx.task_id()))
}

const _: () = {
    #[allow(unused_imports)] // one of the two is
    use __eve::{NoOutputSchema as _, OutputSchema as _};
    use eve_tools::__private as __eve;
    fn __eve_entry(__eve_input: __eve::Value, __eve_ctx: __eve::TaskCtx) -> __eve::BodyFuture {
        // The input is decoded before the body's future is made; `body` encodes its output.
        match __eve::decode_input::<Reminder>(__eve_input) {
            Ok(__eve_input) => __eve::body(async move { remind(__eve_input, &__eve_ctx).await }),
            Err(error) => __eve::refused(error),
        }
    }
    static __EVE_TOOL: __eve::ToolDescriptor = __eve::ToolDescriptor {
        name: "remind",
        description: "Remind the user about something after a delay.",
        workflow_id: concat!(module_path!(), "::", "remind"),
        shape: __eve::Shape::TASK,
        input_schema: __eve::schema_for::<Reminder>,
        validate_input: __eve::validate_input::<Reminder>,
        output_schema: || (&&__eve::OutputProbe::<String>::new()).output_schema(),
        entry: __eve::EntryPoint::Task(__eve_entry),
        fingerprint: "5d1e0f3a9c2b7e48",
        version: __eve::version(::core::option_env!("EVE_BUILD_VERSION"), ::core::env!("CARGO_PKG_VERSION")),
    };
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_TOOL);
    __eve::assert_tool_input::<Reminder>();
    __eve::assert_tool_output::<String>();
    __eve::assert_tool_return::<Result<String, ToolError>>();
};

/// Answer questions as they come in.
pub async fn concierge(questions: Receive<Question>, ctx: &ServeCtx) -> Result<(), ToolError> {
    let _ = (questions, ctx.task_id());
    Ok(())
}

const _: () = {
    #[allow(unused_imports)] // one of the two is
    use __eve::{NoOutputSchema as _, OutputSchema as _};
    use eve_tools::__private as __eve;
    // The runtime hands over the untyped stream; the body gets the `Receive<Question>` it declared.
    fn __eve_entry(__eve_receive: __eve::Receive, __eve_ctx: __eve::ServeCtx) -> __eve::BodyFuture {
        Box::pin(async move {
            let __eve_output = concierge(__eve_receive.typed::<Question>(), &__eve_ctx).await;
            __eve::encode_output(__eve_output)
        })
    }
    static __EVE_TOOL: __eve::ToolDescriptor = __eve::ToolDescriptor {
        name: "concierge",
        description: "Answer questions as they come in.",
        workflow_id: concat!(module_path!(), "::", "concierge"),
        shape: __eve::Shape::TASK,
        input_schema: __eve::schema_for::<Question>,
        validate_input: __eve::validate_input::<Question>,
        output_schema: || (&&__eve::OutputProbe::<()>::new()).output_schema(),
        entry: __eve::EntryPoint::Serve(__eve_entry),
        fingerprint: "5d1e0f3a9c2b7e48",
        version: __eve::version(::core::option_env!("EVE_BUILD_VERSION"), ::core::env!("CARGO_PKG_VERSION")),
    };
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_TOOL);
    __eve::assert_tool_input::<Question>();
    __eve::assert_tool_return::<Result<(), ToolError>>();
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::in_memory()?;
    let run = runtime.start("remind", serde_json::json!({ "note": "stand up", "delay_ms": 10 })).await?;
    println!("{:?}", run.outcome().await?);
    println!("{}", serde_json::to_string_pretty(&eve_tools::manifest())?);
    Ok(())
}
