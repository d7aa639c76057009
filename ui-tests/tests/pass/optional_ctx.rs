// The context parameter is optional: every macro accepts a body that takes only its input.

use eve_tools::Receive;
use eve_tools::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Numbers {
    a: i64,
    b: i64,
}

#[step]
async fn add(a: i64, b: i64) -> Result<i64, StepError> {
    Ok(a + b)
}

#[step]
async fn nothing() -> Result<(), StepError> {
    Ok(())
}

/// Adds durably.
#[workflow_tool]
async fn add_workflow(input: Numbers) -> Result<i64, ToolError> {
    nothing().await?;
    Ok(add(input.a, input.b).await?)
}

/// Adds in the background.
#[task]
async fn add_task(input: Numbers) -> Result<i64, ToolError> {
    Ok(add(input.a, input.b).await?)
}

/// Serves additions.
#[task(serve)]
async fn add_serve(_calls: Receive<Numbers>) -> Result<(), ToolError> {
    Ok(())
}

/// Adds inline.
#[tool]
async fn add_tool(input: Numbers) -> Result<i64, ToolError> {
    Ok(input.a + input.b)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runtime = Runtime::in_memory().unwrap();
    let input = serde_json::json!({ "a": 2, "b": 3 });
    let run = runtime.start("add_workflow", input.clone()).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(5)));
    let run = runtime.start("add_task", input.clone()).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(5)));
    assert_eq!(runtime.call_tool("add_tool", input).await.unwrap(), serde_json::json!(5));
    // Called outside any run, a step just runs.
    assert_eq!(add(40, 2).await.unwrap(), 42);
    let manifest = eve_tools::manifest();
    let serve = manifest.tools.iter().find(|tool| tool.name == "add_serve").unwrap();
    assert_eq!(serve.input_schema["properties"]["a"]["type"], "integer");
}
