//! The attribute macros of `eve-tools`: `#[step]`, `#[tool]`, `#[workflow_tool]` and `#[task]`.
//!
//! Users depend on `eve-tools`, which re-exports these macros and documents them with examples
//! that run against the real runtime. This crate is the compiler side. Each macro runs the same
//! pipeline, in the manner of serde_derive and thiserror:
//!
//! 1. parse: `item` (the fn shell; the body stays the user's tokens) and `args` (darling);
//! 2. model: `model`, a typed view of both that keeps the user's tokens for spans;
//! 3. check: `validate`, one function per rule (ARCHITECTURE.md lists them), with the body scanner in `lints`;
//!    every error is collected and reported at once;
//! 4. expand: `expand`, one file per macro, reading only the model and naming the runtime only
//!    through `::eve_tools::__private`.
//!
//! On any error, `fallback` emits the user's item unchanged next to the errors.

mod args;
mod duration;
mod expand;
mod fallback;
mod item;
mod lints;
mod model;
mod suggest;
mod validate;

use proc_macro::TokenStream;

/// Makes an `async fn` a journaled step. Documented on `eve_tools::step`.
#[proc_macro_attribute]
pub fn step(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::step(args.into(), item.into()).into()
}

/// Makes an `async fn` a plain tool that runs inside the model step. Documented on `eve_tools::tool`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// Makes an `async fn` a durable workflow tool. Documented on `eve_tools::workflow_tool`.
#[proc_macro_attribute]
pub fn workflow_tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::workflow_tool(args.into(), item.into()).into()
}

/// Makes an `async fn` a durable task: a receipt now, the result later. Documented on `eve_tools::task`.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::task(args.into(), item.into()).into()
}
