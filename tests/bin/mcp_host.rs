//! A binary hosting tools written with eve's macros, served over MCP with `mcp-host mcp`, as a
//! user's binary is. Each step appends its name to the file `EVE_MCP_COUNTS` names, so a test
//! counts how often each step ran across process kills.

use std::io::Write as _;
use std::time::Duration;

use eve_tools::SampleOutcome;
use eve_tools::prelude::*;
use eve_tools::sample::Sampling;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// A parcel to weigh.
#[derive(Deserialize, JsonSchema)]
pub struct Parcel {
    /// Its weight in grams.
    grams: u64,
}

/// A weight.
#[derive(Serialize, JsonSchema)]
pub struct Weight {
    /// In kilograms.
    kilograms: f64,
}

/// Weigh a parcel, at once; the output is an object, so the tool has an output schema.
#[tool]
pub async fn weigh(input: Parcel) -> Result<Weight, ToolError> {
    Ok(Weight { kilograms: input.grams as f64 / 1000.0 })
}

/// What to deploy.
#[derive(Deserialize, JsonSchema)]
pub struct Deploy {
    /// The service.
    service: String,
}

/// Deploy a service once a person approves.
#[workflow_tool]
pub async fn approve_deploy(input: Deploy, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let question = Ask::confirmation(format!("Deploy {}?", input.service))
        .option("approve", "Deploy")
        .primary()
        .option("cancel", "Cancel");
    if !ctx.ask(question).await.chose("approve") {
        return Ok(format!("{} not deployed", input.service));
    }
    Ok(record("deploy".into()).await?.replace("deploy", &format!("deployed {}", input.service)))
}

/// What to release.
#[derive(Deserialize, JsonSchema)]
pub struct Release {
    /// The version.
    version: String,
}

/// Build a release, ask before shipping it, ship it, then announce it after a short wait.
#[task]
pub async fn release(input: Release, ctx: &TaskCtx) -> Result<String, ToolError> {
    record("build".into()).await?;
    let question =
        Ask::confirmation(format!("Ship {}?", input.version)).option("ship", "Ship").primary().option("hold", "Hold");
    if !ctx.ask(question).await.chose("ship") {
        return Ok(format!("{} held", input.version));
    }
    record("ship".into()).await?;
    sleep(Duration::from_millis(200)).await?;
    record("announce".into()).await?;
    Ok(format!("released {}", input.version))
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Prepare, then wait an hour; on cancellation, clean up.
#[task]
pub async fn long_job(_input: Nothing, _ctx: &TaskCtx) -> Result<String, ToolError> {
    record("prepare".into()).await?;
    match sleep(Duration::from_secs(3600)).await {
        Ok(()) => Ok("done".into()),
        Err(cancelled) => {
            record("cleanup".into()).await?;
            Err(cancelled.into())
        }
    }
}

/// Tables to migrate.
#[derive(Deserialize, JsonSchema)]
pub struct Tables {
    /// Their names.
    tables: Vec<String>,
}

/// Migrate tables one by one, reporting each as it is done.
#[workflow_tool]
pub async fn migrate(input: Tables, progress: Progress) -> Result<(), ToolError> {
    for (done, table) in input.tables.iter().enumerate() {
        record(format!("migrate {table}")).await?;
        progress.report(serde_json::json!({ "migrated": done + 1, "of": input.tables.len() })).await?;
    }
    Ok(())
}

/// What to announce.
#[derive(Deserialize, JsonSchema)]
pub struct Announcement {
    /// What the announcement is about.
    topic: String,
}

/// Where and how to publish an announcement, as a person fills it in.
#[derive(Deserialize, JsonSchema)]
pub struct Publishing {
    /// The channel to post it in.
    channel: String,
    /// How many times to post it.
    copies: u32,
}

/// Outlines an announcement, has the client's model draft it, asks a person where to publish it,
/// and publishes it: a step before and after each of the two waits.
#[workflow_tool]
pub async fn announce(input: Announcement, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    record("outline".into()).await?;
    let request = Sampling::user(format!("Write one line announcing {}.", input.topic), 64)
        .system("You write short release announcements.");
    let draft = match ctx.sample(request).await {
        SampleOutcome::Completed(completion) => completion.text().unwrap_or("(not text)").to_owned(),
        SampleOutcome::Declined => return Ok("not announced: the client declined to draft it".into()),
        SampleOutcome::Cancelled | SampleOutcome::Unavailable => return Ok("not announced: no draft".into()),
    };
    record(format!("draft {draft}")).await?;
    let publishing = match ctx.ask_form::<Publishing>(format!("Publish {draft:?} where?"))?.await {
        FormOutcome::Answered(publishing) => publishing,
        _ => return Ok(format!("drafted {draft:?}, not published")),
    };
    record(format!("publish {} x{}", publishing.channel, publishing.copies)).await?;
    Ok(format!("published {draft:?} in {} ({} copies)", publishing.channel, publishing.copies))
}

/// Appends `name` to the counts file, once per execution.
#[step(max_attempts = 1)]
async fn record(name: String) -> Result<String, StepError> {
    if let Ok(path) = std::env::var("EVE_MCP_COUNTS") {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(file, "{name}")?;
        file.sync_all()?;
    }
    Ok(name)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await
}
