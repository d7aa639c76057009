// `#[task(serve)]` receives its calls as a stream, `receive: Receive<Input>`; and a `Receive` stream
// exists only in `#[task(serve)]`.

use eve_tools::prelude::*;
use eve_tools::{Receive, ServeCtx};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    text: String,
}

#[task(serve)]
async fn concierge(_input: Input, _ctx: &ServeCtx) -> Result<(), ToolError> {
    Ok(())
}

#[task]
async fn remind(_calls: Receive<Input>, _ctx: &TaskCtx) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
