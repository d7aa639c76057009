// `crate = "…"` points the generated code at a re-export of eve_tools, for crates that reach it
// under another path.

mod facade {
    pub use eve_tools as eve;
}

use facade::eve::{StepError, ToolError, WorkflowCtx};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    word: String,
}

#[facade::eve::step(crate = "crate::facade::eve")]
async fn shout(word: String) -> Result<String, StepError> {
    Ok(word.to_uppercase())
}

/// Shouts a word.
#[facade::eve::workflow_tool(crate = "crate::facade::eve")]
async fn shout_tool(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(shout(input.word).await?)
}

/// Shouts a word, later.
#[facade::eve::task(crate = "facade::eve")]
async fn shout_task(input: Input) -> Result<String, ToolError> {
    Ok(shout(input.word).await?)
}

/// Shouts a word, inline.
#[facade::eve::tool(crate = "self::facade::eve", name = "shout_inline")]
async fn shout_plain(input: Input) -> Result<String, ToolError> {
    Ok(input.word.to_uppercase())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runtime = eve_tools::Runtime::in_memory().unwrap();
    let run = runtime.start("shout_tool", serde_json::json!({ "word": "hey" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!("HEY")));
    let run = runtime.start("shout_task", serde_json::json!({ "word": "ho" })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!("HO")));
    let inline = runtime.call_tool("shout_inline", serde_json::json!({ "word": "yo" })).await.unwrap();
    assert_eq!(inline, serde_json::json!("YO"));
}
