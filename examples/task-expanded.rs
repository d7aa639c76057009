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

use eve_tools::__private::{BodyFuture, EntryPoint, ToolDescriptor, ToolRegistration, Value};
use eve_tools::prelude::*;
use eve_tools::{__private, Receive, ServeCtx, Shape};
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
    fn __eve_entry(__eve_input: Value, __eve_ctx: TaskCtx) -> BodyFuture {
        Box::pin(async move {
            let __eve_input: Reminder = __private::decode_input(__eve_input)?;
            let __eve_output = remind(__eve_input, &__eve_ctx).await;
            __private::encode_output(__eve_output)
        })
    }
    static __EVE_TOOL: ToolDescriptor = ToolDescriptor {
        name: "remind",
        description: "Remind the user about something after a delay.",
        workflow_id: concat!(module_path!(), "::", "remind"),
        shape: Shape::TASK,
        input_schema: __private::schema_for::<Reminder>,
        validate_input: __private::validate_input::<Reminder>,
        output_schema: __private::output_schema!(String),
        entry: EntryPoint::Task(__eve_entry),
    };
    __private::inventory::submit! {
        ToolRegistration(&__EVE_TOOL)
    }
    __private::assert_tool_input::<Reminder>();
    __private::assert_tool_output::<String>();
    __private::assert_tool_return::<Result<String, ToolError>>();
};

/// Answer questions as they come in.
pub async fn concierge(questions: Receive<Question>, ctx: &ServeCtx) -> Result<(), ToolError> {
    let _ = (questions, ctx.task_id());
    Ok(())
}

const _: () = {
    // The runtime hands over the untyped stream; the body gets the `Receive<Question>` it declared.
    fn __eve_entry(__eve_receive: Receive, __eve_ctx: ServeCtx) -> BodyFuture {
        Box::pin(async move {
            let __eve_output = concierge(__eve_receive.typed::<Question>(), &__eve_ctx).await;
            __private::encode_output(__eve_output)
        })
    }
    static __EVE_TOOL: ToolDescriptor = ToolDescriptor {
        name: "concierge",
        description: "Answer questions as they come in.",
        workflow_id: concat!(module_path!(), "::", "concierge"),
        shape: Shape::TASK,
        input_schema: __private::schema_for::<Question>,
        validate_input: __private::validate_input::<Question>,
        output_schema: __private::output_schema!(()),
        entry: EntryPoint::Serve(__eve_entry),
    };
    __private::inventory::submit! {
        ToolRegistration(&__EVE_TOOL)
    }
    __private::assert_tool_input::<Question>();
    __private::assert_tool_return::<Result<(), ToolError>>();
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::in_memory()?;
    let run = runtime.start("remind", serde_json::json!({ "note": "stand up", "delay_ms": 10 })).await?;
    println!("{:?}", run.outcome().await?);
    println!("{}", serde_json::to_string_pretty(&eve_tools::manifest())?);
    Ok(())
}
