// A tool takes a single input; several values go in one struct, the JSON object the model fills in.

use eve_tools::prelude::*;

#[workflow_tool]
async fn deploy(service: String, region: String, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(format!("{service} in {region}"))
}

fn main() {}
