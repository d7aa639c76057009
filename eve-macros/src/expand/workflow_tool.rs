//! `#[workflow_tool]`: a durable workflow (step / workflow). The fn stays as written; the runtime
//! enters it with a `WorkflowCtx` and replays it from the journal. Hand-simplified in
//! `examples/workflow-tool-expanded.rs`.

use proc_macro2::TokenStream;

use super::descriptor::{self, Entry};
use crate::model::ToolModel;

/// The fn and its registration as `EntryPoint::Workflow`.
pub fn expand(model: &ToolModel) -> TokenStream {
    let function = descriptor::value_entry(model, "WorkflowCtx");
    descriptor::expand(model, Entry { variant: "Workflow", shape: "WORKFLOW_TOOL", function })
}
