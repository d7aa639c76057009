// Generated code names std and runtime items by absolute path: a module that redefines `Result`,
// `Ok`, `Err`, `Option`, `Some`, `None`, `Box` and modules named `core` and `std`, next to all four
// macros, changes nothing.

mod shadowed {
    #![allow(dead_code, non_snake_case, non_upper_case_globals)]

    use eve_tools::{Progress, Receive, ServeCtx, StepCtx, StepError, TaskCtx, ToolCtx, ToolError, WorkflowCtx};
    use eve_tools::{step, task, tool, workflow_tool};
    use serde::Deserialize;

    pub struct Result;
    pub struct Option;
    pub struct Box;
    pub fn Ok() {}
    pub fn Err() {}
    pub fn Some() {}
    pub const None: () = ();
    pub mod core {}
    pub mod std {}

    #[derive(Deserialize, schemars::JsonSchema)]
    pub struct Input {
        pub n: u32,
    }

    #[step]
    async fn double(n: u32) -> ::core::result::Result<u32, StepError> {
        ::core::result::Result::Ok(n * 2)
    }

    #[step(max_attempts = 2, backoff = "fixed(5ms)")]
    async fn attempt(ctx: &StepCtx, n: u32) -> ::core::result::Result<u32, StepError> {
        ::core::result::Result::Ok(n + ctx.attempt())
    }

    /// Doubles a number durably.
    #[workflow_tool]
    pub async fn shadowed_workflow(input: Input, ctx: &WorkflowCtx) -> ::core::result::Result<u32, ToolError> {
        let doubled = double(input.n).await?;
        ::core::result::Result::Ok(attempt(ctx, doubled).await?)
    }

    /// Doubles a number in the background.
    #[task]
    pub async fn shadowed_task(input: Input, _ctx: &TaskCtx) -> ::core::result::Result<u32, ToolError> {
        ::core::result::Result::Ok(double(input.n).await?)
    }

    /// Serves calls.
    #[task(serve)]
    pub async fn shadowed_serve(_calls: Receive<Input>, _ctx: &ServeCtx) -> ::core::result::Result<(), ToolError> {
        ::core::result::Result::Ok(())
    }

    /// Counts to a number, reporting each step; its last report is its output.
    #[workflow_tool]
    pub async fn shadowed_progress(input: Input, progress: Progress) -> ::core::result::Result<(), ToolError> {
        for n in 1..=input.n {
            progress.report(n).await?;
        }
        ::core::result::Result::Ok(())
    }

    /// Serves calls, reporting progress nobody sees.
    #[task(serve)]
    pub async fn shadowed_serve_progress(
        _calls: Receive<Input>,
        _ctx: &ServeCtx,
        progress: Progress,
    ) -> ::core::result::Result<(), ToolError> {
        progress.report(1).await
    }

    /// Echoes a number.
    #[tool]
    pub async fn shadowed_tool(input: Input, _ctx: &ToolCtx) -> ::core::result::Result<u32, ToolError> {
        ::core::result::Result::Ok(input.n)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runtime = eve_tools::Runtime::in_memory().unwrap();
    let run = runtime.start("shadowed_workflow", serde_json::json!({ "n": 20 })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(41)));
    let echoed = runtime.call_tool("shadowed_tool", serde_json::json!({ "n": 7 })).await.unwrap();
    assert_eq!(echoed, serde_json::json!(7));
    let names: Vec<String> = eve_tools::manifest().tools.into_iter().map(|tool| tool.name).collect();
    let ours: Vec<&str> = names.iter().map(String::as_str).filter(|name| name.starts_with("shadowed_")).collect();
    assert_eq!(
        ours,
        [
            "shadowed_progress",
            "shadowed_serve",
            "shadowed_serve_progress",
            "shadowed_task",
            "shadowed_tool",
            "shadowed_workflow"
        ]
    );
    let run = runtime.start("shadowed_progress", serde_json::json!({ "n": 3 })).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&serde_json::json!(3)));
}
