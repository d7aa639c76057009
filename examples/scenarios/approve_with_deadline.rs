//! Approve with a deadline and an escalation (the seed's "workflow tool examples").
//!
//! One question stays open the whole time. If nobody answers within 4 hours, the on-call
//! engineer is paged (a step) and the question stays open 20 more hours; after that the tool
//! gives up, and returning withdraws the question.

use std::time::Duration;

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to deploy.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeployInput {
    /// The service name.
    pub service: String,
}

/// What happened.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployed {
    /// Whether it was deployed.
    pub deployed: bool,
    /// Why not, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where it runs, if it was deployed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// How long to wait before paging, and how much longer before giving up.
pub const PAGE_AFTER: Duration = Duration::from_secs(4 * 3600);
/// See [`PAGE_AFTER`].
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(20 * 3600);

/// Deploy a service once a human approves the plan. Pages the on-call engineer after 4 hours
/// without an answer and gives up after 24.
#[workflow_tool]
pub async fn deploy_with_deadline(input: DeployInput, ctx: &WorkflowCtx) -> Result<Deployed, ToolError> {
    let plan = plan_deploy(input.service.clone()).await?;
    let question = Ask::confirmation(format!("Deploy {}?\n\n{plan}", input.service))
        .option("approve", "Deploy")
        .primary()
        .option("cancel", "Cancel");
    let mut pending = ctx.ask(question);
    let mut answer = tokio::select! {
        biased;
        answer = &mut pending => Some(answer),
        fired = sleep(PAGE_AFTER) => { fired?; None }
    };
    if answer.is_none() {
        page_on_call(input.service.clone()).await?;
        answer = tokio::select! {
            biased;
            answer = &mut pending => Some(answer),
            fired = sleep(GIVE_UP_AFTER) => { fired?; None }
        };
    }
    let Some(answer) = answer else {
        return Ok(Deployed { deployed: false, reason: Some("timed out".into()), url: None });
    };
    if !answer.chose("approve") {
        return Ok(Deployed { deployed: false, reason: Some("rejected".into()), url: None });
    }
    let url = apply_deploy(plan).await?;
    Ok(Deployed { deployed: true, reason: None, url: Some(url) })
}

#[step]
async fn plan_deploy(service: String) -> Result<String, StepError> {
    Ok(format!("roll out {service} v2 to 3 regions, 10% at a time"))
}

#[step]
async fn page_on_call(service: String) -> Result<(), StepError> {
    tracing_free_log(&format!("paging on-call: {service} deploy is waiting for approval"));
    Ok(())
}

#[step]
async fn apply_deploy(plan: String) -> Result<String, StepError> {
    let service = plan.split_whitespace().nth(2).unwrap_or("service");
    Ok(format!("https://{service}.example.com"))
}

/// Where a real tool would call a pager; the example just prints.
fn tracing_free_log(message: &str) {
    println!("    [step] {message}");
}
