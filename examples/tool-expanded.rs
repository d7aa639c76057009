//! What `#[tool]` expands to, simplified for reading (`cargo expand` shows the exact output).
//!
//! You write:
//!
//! ```ignore
//! /// Look up the weather for a city.
//! #[tool]
//! pub async fn weather(city: City) -> Result<String, ToolError> { … }
//! ```
//!
//! A plain tool registers like a workflow tool (see `workflow_tool.rs`) with `EntryPoint::Plain`
//! and the shape step / none: it runs inside the model step and nothing is journaled. The context
//! is optional; without one, the entry drops the `ToolCtx` it is given and calls the fn with the
//! input alone.

use eve_tools::__private::{BodyFuture, EntryPoint, ToolCtx, ToolDescriptor, ToolRegistration, Value};
use eve_tools::prelude::*;
use eve_tools::{__private, Shape};
use serde::Deserialize;

/// The tool's input.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct City {
    name: String,
}

/// Look up the weather for a city.
pub async fn weather(city: City) -> Result<String, ToolError> {
    Ok(format!("{}: sunny", city.name))
}

const _: () = {
    fn __eve_entry(__eve_input: Value, _: ToolCtx) -> BodyFuture {
        Box::pin(async move {
            let __eve_input: City = __private::decode_input(__eve_input)?;
            let __eve_output = weather(__eve_input).await;
            __private::encode_output(__eve_output)
        })
    }
    static __EVE_TOOL: ToolDescriptor = ToolDescriptor {
        name: "weather",
        description: "Look up the weather for a city.",
        workflow_id: concat!(module_path!(), "::", "weather"),
        shape: Shape::TOOL,
        input_schema: __private::schema_for::<City>,
        validate_input: __private::validate_input::<City>,
        output_schema: __private::output_schema!(String),
        entry: EntryPoint::Plain(__eve_entry),
    };
    __private::inventory::submit! {
        ToolRegistration(&__EVE_TOOL)
    }
    __private::assert_tool_input::<City>();
    __private::assert_tool_output::<String>();
    __private::assert_tool_return::<Result<String, ToolError>>();
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::in_memory()?;
    println!("{}", runtime.call_tool("weather", serde_json::json!({ "name": "Oslo" })).await?);
    Ok(())
}
