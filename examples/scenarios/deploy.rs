//! Define a workflow tool (the seed's `deploy`): plan, ask a person to approve, deploy only if
//! they did.
//!
//! The turn parks while the person reads the plan. When they answer, minutes or days later, the
//! run resumes, deploys and returns; the model sees one tool result. Anything but an explicit
//! "Deploy" (the "Cancel" button, nobody able to answer, the run being cancelled) deploys nothing.

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to deploy.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeployInput {
    /// The service name.
    pub service: String,
}

/// The plan a person approves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeployPlan {
    /// The service it deploys.
    pub service: String,
    /// What it will do, for the person to read.
    pub summary: String,
}

/// What happened.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployed {
    /// Whether it was deployed.
    pub deployed: bool,
    /// Why not, if it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where it runs, if it was deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Deploy a service to production. Pauses for a human to approve the plan.
#[workflow_tool]
pub async fn deploy(input: DeployInput, ctx: &WorkflowCtx) -> Result<Deployed, ToolError> {
    let plan = plan_deploy(input.service.clone()).await?;
    let question = Ask::confirmation(format!("Deploy {}?\n\n{}", input.service, plan.summary))
        .option("approve", "Deploy")
        .primary()
        .option("cancel", "Cancel");
    let answer = ctx.ask(question).await;
    if !answer.chose("approve") {
        return Ok(Deployed { deployed: false, reason: Some("rejected".into()), url: None });
    }
    let url = apply_deploy(plan).await?;
    Ok(Deployed { deployed: true, reason: None, url: Some(url) })
}

/// Computes the plan (a real tool diffs the running and the desired versions here).
#[step]
async fn plan_deploy(service: String) -> Result<DeployPlan, StepError> {
    let summary = format!("Roll out {service} v2 to 3 regions, 10% of traffic at a time; roll back on errors.");
    Ok(DeployPlan { service, summary })
}

/// Applies the plan (a real tool calls its deploy system here, keyed by `ctx.idempotency_key()`).
#[step(max_attempts = 5)]
async fn apply_deploy(plan: DeployPlan) -> Result<String, StepError> {
    Ok(format!("https://{}.example.com", plan.service))
}
