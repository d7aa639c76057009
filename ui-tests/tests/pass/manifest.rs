// The manifest records what the macros compiled: each tool's name (the fn name, or `name = "…"`),
// its description (the doc comment), its shape `{lifetime, suspend}` per cell, its workflow id
// (module path and fn name), and each step's journaled name and retry policy.

mod tools {
    use eve_tools::prelude::*;
    use eve_tools::{Receive, ServeCtx};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Input {
        pub text: String,
    }

    /// Deploy a service to production.
    ///
    /// Pauses for a human to approve the plan.
    #[workflow_tool(name = "deploy")]
    pub async fn deploy_service(input: Input, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
        Ok(input.text)
    }

    /** Remind the user later. */
    #[task]
    pub async fn remind(input: Input, _ctx: &TaskCtx) -> Result<String, ToolError> {
        Ok(input.text)
    }

    /// Answer questions as they come.
    #[task(serve)]
    pub async fn concierge(_calls: Receive<Input>, _ctx: &ServeCtx) -> Result<(), ToolError> {
        Ok(())
    }

    #[tool]
    pub async fn undocumented(input: Input) -> Result<String, ToolError> {
        Ok(input.text)
    }

    #[step]
    pub async fn default_policy() -> Result<(), StepError> {
        Ok(())
    }

    #[step(name = "charge_card", max_attempts = 5)]
    pub async fn charge() -> Result<(), StepError> {
        Ok(())
    }

    #[step(backoff = "250ms")]
    pub async fn quick_backoff() -> Result<(), StepError> {
        Ok(())
    }

    #[step(max_attempts = 1, backoff = "fixed(2m)")]
    pub async fn fixed_backoff() -> Result<(), StepError> {
        Ok(())
    }
}

use serde_json::{Value, json};

fn tool(manifest: &Value, name: &str) -> Value {
    let tools = manifest["tools"].as_array().unwrap();
    tools.iter().find(|tool| tool["name"] == name).unwrap_or_else(|| panic!("no tool `{name}`")).clone()
}

fn step(manifest: &Value, name: &str) -> Value {
    let steps = manifest["steps"].as_array().unwrap();
    steps.iter().find(|step| step["name"] == name).unwrap_or_else(|| panic!("no step `{name}`")).clone()
}

fn main() {
    let _ = (tools::default_policy, tools::charge, tools::quick_backoff, tools::fixed_backoff);
    let manifest = serde_json::to_value(eve_tools::manifest()).unwrap();

    let deploy = tool(&manifest, "deploy");
    assert_eq!(deploy["description"], "Deploy a service to production.\n\nPauses for a human to approve the plan.");
    assert_eq!(deploy["shape"], json!({ "lifetime": "step", "suspend": "workflow" }));
    assert_eq!(deploy["entry"], "execute");
    assert_eq!(deploy["workflowId"], concat!(module_path!(), "::tools::deploy_service"));
    assert_eq!(deploy["inputSchema"]["properties"]["text"]["type"], "string");

    let remind = tool(&manifest, "remind");
    assert_eq!(remind["description"], "Remind the user later.", "trimmed, as every line is");
    assert_eq!(remind["shape"], json!({ "lifetime": "task", "suspend": "workflow" }));
    assert_eq!(remind["entry"], "task");

    let concierge = tool(&manifest, "concierge");
    assert_eq!(concierge["shape"], json!({ "lifetime": "task", "suspend": "workflow" }));
    assert_eq!(concierge["entry"], "serve");
    assert_eq!(concierge["inputSchema"]["properties"]["text"]["type"], "string");

    let undocumented = tool(&manifest, "undocumented");
    assert_eq!(undocumented["description"], "");
    assert_eq!(undocumented["shape"], json!({ "lifetime": "step", "suspend": "none" }));
    assert_eq!(undocumented["workflowId"], concat!(module_path!(), "::tools::undocumented"));

    let policy = |name: &str| {
        let step = step(&manifest, name);
        (step["maxAttempts"].clone(), step["backoff"].clone())
    };
    let backoff = |initial: u64, factor: u32| json!({ "initialMs": initial, "factor": factor });
    assert_eq!(policy("default_policy"), (json!(3), backoff(1000, 2)));
    assert_eq!(policy("charge_card"), (json!(5), backoff(1000, 2)));
    assert_eq!(policy("quick_backoff"), (json!(3), backoff(250, 2)));
    assert_eq!(policy("fixed_backoff"), (json!(1), backoff(120000, 1)));
    assert_eq!(step(&manifest, "charge_card")["id"], concat!(module_path!(), "::tools::charge"));
}
