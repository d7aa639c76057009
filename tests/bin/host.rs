//! A binary hosting tools with the eve CLI, as a user's binary does.

use eve_tools::SampleOutcome;
use eve_tools::prelude::*;
use eve_tools::sample::Sampling;
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

/// Greet someone durably: the greeting is composed in a step.
#[workflow_tool]
pub async fn greet_durably(input: Greeting, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(compose(input.name).await?)
}

/// Greet someone after a long durable wait: an hour passes
/// before the greeting is composed.
///
/// The wait survives restarts.
#[task]
pub async fn greet_later(input: Greeting, _ctx: &TaskCtx) -> Result<String, ToolError> {
    sleep(std::time::Duration::from_secs(3600)).await?;
    Ok(compose(input.name).await?)
}

/// Wait for someone to approve, on the hook `approve-{run id}`.
#[workflow_tool]
pub async fn await_approval(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut approval = create_hook_with_token::<Approval>(format!("approve-{}", ctx.run_id()));
    let approval = approval.recv().await?;
    Ok(format!("approved by {}", approval.by))
}

/// An approval, as the hook receives it.
#[derive(Deserialize)]
pub struct Approval {
    by: String,
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// A release, asked as a form.
#[derive(Deserialize, JsonSchema)]
pub struct Release {
    /// The version to release.
    version: String,
    /// How many replicas.
    #[serde(default = "two")]
    replicas: u8,
}

fn two() -> u8 {
    2
}

/// Ask a person how to release, in a form.
#[workflow_tool]
pub async fn plan_release(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(match ctx.ask_form::<Release>("Release what?")?.await {
        FormOutcome::Answered(release) => format!("releasing {} on {} replicas", release.version, release.replicas),
        FormOutcome::Declined => "not releasing: declined".into(),
        FormOutcome::Cancelled | FormOutcome::Unavailable => "not releasing: nobody answered".into(),
    })
}

/// Fail, always.
#[workflow_tool]
pub async fn fail_on_purpose(_input: Nothing, _ctx: &WorkflowCtx) -> Result<(), ToolError> {
    Err(ToolError::new("the warehouse is closed"))
}

/// Tally votes on the hook `votes-{run id}` until one says `done`, and return them in order.
#[workflow_tool]
pub async fn tally_votes(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let mut votes = create_hook_with_token::<Ballot>(format!("votes-{}", ctx.run_id()));
    let mut tally = Vec::new();
    loop {
        match votes.recv().await? {
            Ballot { done: true, .. } => return Ok(tally),
            Ballot { vote, .. } => tally.extend(vote),
        }
    }
}

/// One vote, or the end of the vote, as the hook receives it.
#[derive(Deserialize)]
pub struct Ballot {
    #[serde(default)]
    vote: Option<String>,
    #[serde(default)]
    done: bool,
}

/// What to write a note about.
#[derive(Deserialize, JsonSchema)]
pub struct Topic {
    /// The topic.
    topic: String,
}

/// Have the calling client's model write a note: answered over MCP by the client, elsewhere by
/// a person with a completion.
#[workflow_tool]
pub async fn write_note(input: Topic, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let request = Sampling::user(format!("Write a note about {}.", input.topic), 200).system("Be brief.");
    Ok(match ctx.sample(request).await {
        SampleOutcome::Completed(completion) => {
            format!("{} (by {})", completion.text().unwrap_or("(not text)"), completion.model)
        }
        SampleOutcome::Declined => "no note: declined".into(),
        SampleOutcome::Cancelled | SampleOutcome::Unavailable => "no note: nobody answered".into(),
    })
}

#[step(max_attempts = 4, backoff = "250ms")]
async fn compose(name: String) -> Result<String, StepError> {
    Ok(format!("hello, {name}"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await
}
