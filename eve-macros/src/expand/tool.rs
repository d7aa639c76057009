//! `#[tool]`: a plain tool (step / none). The fn stays as written; it runs inside the model step
//! with a `&ToolCtx`, and nothing is journaled. Hand-simplified in `examples/tool-expanded.rs`.

use proc_macro2::TokenStream;

use super::descriptor::{self, Entry};
use crate::model::ToolModel;

/// The fn and its registration as `EntryPoint::Plain`.
pub fn expand(model: &ToolModel) -> TokenStream {
    let function = descriptor::value_entry(model, "ToolCtx");
    descriptor::expand(model, Entry { variant: "Plain", shape: "TOOL", function })
}
