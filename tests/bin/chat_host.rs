//! A binary hosting tools with the eve CLI, for `chat` driven through a pipe (tests/chat.rs).

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// Who to greet.
#[derive(Deserialize, JsonSchema)]
pub struct Greeting {
    /// Their name.
    name: String,
}

/// Greet someone, at once.
#[tool]
pub async fn greet(input: Greeting) -> Result<String, ToolError> {
    Ok(format!("hello, {}", input.name))
}

/// What to deploy.
#[derive(Deserialize, JsonSchema)]
pub struct Service {
    /// The service.
    service: String,
}

/// Deploy a service in the background: it takes a second.
#[task]
pub async fn deploy(input: Service, _ctx: &TaskCtx) -> Result<String, ToolError> {
    sleep(std::time::Duration::from_secs(1)).await?;
    Ok(format!("deployed {}", input.service))
}

/// Deploy a service once a person confirms.
#[task]
pub async fn confirm(input: Service, ctx: &TaskCtx) -> Result<String, ToolError> {
    let ask = Ask::confirmation(format!("Deploy {}?", input.service)).option("yes", "Yes").option("no", "No");
    let answer = ctx.ask(ask).await;
    Ok(format!("{}: {}", input.service, if answer.chose("yes") { "confirmed" } else { "declined" }))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await
}
