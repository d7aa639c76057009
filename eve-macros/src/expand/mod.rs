//! Code generation, one file per macro, each reading only the model.
//!
//! Every macro runs the same pipeline: parse the item and the arguments into the model, check the
//! rules, then expand. On any error the user's item is emitted unchanged next to the errors
//! (`fallback`), so IDEs and later diagnostics keep working.
//!
//! Generated code names the runtime only through `::eve_tools::__private` (or the `crate = "…"`
//! path), std items by absolute path, and the identifiers it introduces are `__eve_`-prefixed with
//! `Span::mixed_site()`, so nothing in the user's scope can change what an expansion means.

mod descriptor;
mod step;
mod task;
mod tool;
mod workflow_tool;

use proc_macro2::{Ident, Span, TokenStream};

use crate::fallback;
use crate::item::ItemFn;
use crate::model::{Cell, Macro, StepModel, ToolModel};
use crate::validate;

/// `#[step]`.
pub fn step(args: TokenStream, item: TokenStream) -> TokenStream {
    run(Macro::Step, args, item)
}

/// `#[tool]`.
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    run(Macro::Tool, args, item)
}

/// `#[workflow_tool]`.
pub fn workflow_tool(args: TokenStream, item: TokenStream) -> TokenStream {
    run(Macro::WorkflowTool, args, item)
}

/// `#[task]` and `#[task(serve)]`.
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    run(Macro::Task, args, item)
}

fn run(attr: Macro, args: TokenStream, tokens: TokenStream) -> TokenStream {
    let item = match ItemFn::parse(attr, tokens.clone()) {
        Ok(item) => item,
        Err(error) => return fallback::unparsed(tokens, error),
    };
    match try_expand(attr, args, &item) {
        Ok(expanded) => expanded,
        Err(error) => fallback::expand(&item, error),
    }
}

fn try_expand(attr: Macro, args: TokenStream, item: &ItemFn) -> syn::Result<TokenStream> {
    if attr == Macro::Step {
        let model = StepModel::new(args, item);
        validate::step(&model)?;
        return Ok(step::expand(&model));
    }
    let model = ToolModel::new(attr, args, item);
    validate::tool(&model)?;
    Ok(match model.cell {
        Cell::Tool => tool::expand(&model),
        Cell::WorkflowTool => workflow_tool::expand(&model),
        Cell::Task | Cell::Serve => task::expand(&model),
    })
}

/// An identifier the macro introduces: `__eve_`-prefixed, resolved at the macro's definition for
/// locals so it can neither capture nor be captured by the user's names.
fn ident(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}
