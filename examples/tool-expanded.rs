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

use eve_tools::prelude::*;
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
    #[allow(unused_imports)] // one of the two is
    use __eve::{NoOutputSchema as _, OutputSchema as _};
    use eve_tools::__private as __eve;
    fn __eve_entry(__eve_input: __eve::Value, _: __eve::ToolCtx) -> __eve::BodyFuture {
        // Decodes the input, calls the body with it, and encodes what its future returns: no
        // `async` block of its own, when the body borrows nothing of the entry.
        __eve::entry(__eve_input, weather)
    }
    static __EVE_TOOL: __eve::ToolDescriptor = __eve::ToolDescriptor {
        name: "weather",
        description: "Look up the weather for a city.",
        workflow_id: concat!(module_path!(), "::", "weather"),
        shape: __eve::Shape::TOOL,
        input_schema: __eve::schema_for::<City>,
        validate_input: __eve::validate_input::<City>,
        output_schema: || (&&__eve::OutputProbe::<String>::new()).output_schema(),
        entry: __eve::EntryPoint::Plain(__eve_entry),
        fingerprint: "5d1e0f3a9c2b7e48",
        version: __eve::version(::core::option_env!("EVE_BUILD_VERSION"), ::core::env!("CARGO_PKG_VERSION")),
    };
    // Added to the registry before `main`, by a constructor (not `inventory`: cheaper per use).
    __eve::register!(__EVE_TOOL);
    __eve::assert_tool_input::<City>();
    __eve::assert_tool_output::<String>();
    __eve::assert_tool_return::<Result<String, ToolError>>();
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = Runtime::in_memory()?;
    println!("{}", runtime.call_tool("weather", serde_json::json!({ "name": "Oslo" })).await?);
    Ok(())
}
