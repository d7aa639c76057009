//! The macros' arguments: `#[step(name = "…", max_attempts = 5)]` and friends.
//!
//! darling fills one typed struct per macro. Names are checked by `validate` (unknown, duplicate,
//! misplaced) so that every message reads the same way; darling receives only the first occurrence
//! of each known name, and every value stays a `syn::Meta` until the model gives it a type with
//! the helpers below. So darling itself never fails on user input.

use darling::FromMeta;
use darling::ast::NestedMeta;
use proc_macro2::TokenStream;
use syn::{Expr, ExprLit, Lit, LitInt, LitStr, Meta};

/// The arguments `#[step]` knows, in the order messages list them.
pub const STEP: &[&str] = &["name", "max_attempts", "backoff", "crate"];
/// The arguments `#[tool]` and `#[workflow_tool]` know.
pub const TOOL: &[&str] = &["name", "allow_unknown_fields", "crate"];
/// The arguments `#[task]` knows.
pub const TASK: &[&str] = &["name", "serve", "allow_unknown_fields", "crate"];

/// `#[step(…)]`.
#[derive(Default, FromMeta)]
pub struct StepArgs {
    /// `name = "…"`: the journaled name.
    pub name: Option<Meta>,
    /// `max_attempts = N`.
    pub max_attempts: Option<Meta>,
    /// `backoff = "250ms"` or `"fixed(1s)"`.
    pub backoff: Option<Meta>,
    /// `crate = "path"`: where `eve_tools` is.
    #[darling(rename = "crate")]
    pub krate: Option<Meta>,
}

/// `#[tool(…)]`, `#[workflow_tool(…)]` and `#[task(…)]`.
#[derive(Default, FromMeta)]
pub struct ToolArgs {
    /// `name = "…"`: the model-facing name.
    pub name: Option<Meta>,
    /// `serve` (`#[task]` only): a resumable task that receives a stream of calls.
    pub serve: Option<Meta>,
    /// `allow_unknown_fields`: the input takes fields its type does not list (and ignores them).
    pub allow_unknown_fields: Option<Meta>,
    /// `crate = "path"`: where `eve_tools` is.
    #[darling(rename = "crate")]
    pub krate: Option<Meta>,
}

/// A macro's arguments as written, and the typed values darling filled from them.
pub struct Args<T> {
    /// Which macro they belong to.
    pub attr: Macro,
    /// Every item, in order, for the name rules.
    pub items: Vec<NestedMeta>,
    /// The first occurrence of each known name.
    pub values: T,
    /// A syntax error in the argument list, if any.
    pub syntax: Option<syn::Error>,
}

/// Parses `attr`'s argument tokens.
pub fn parse<T: FromMeta + Default>(attr: Macro, tokens: TokenStream) -> Args<T> {
    let items = match NestedMeta::parse_meta_list(tokens) {
        Ok(items) => items,
        Err(error) => return Args { attr, items: Vec::new(), values: T::default(), syntax: Some(error) },
    };
    let mut seen = Vec::new();
    let usable: Vec<NestedMeta> = items
        .iter()
        .filter(|item| match (item, name(item)) {
            (NestedMeta::Meta(_), Some(name)) if attr.known_args().contains(&name.as_str()) => {
                let first = !seen.contains(&name);
                seen.push(name);
                first
            }
            _ => false,
        })
        .cloned()
        .collect();
    match T::from_list(&usable) {
        Ok(values) => Args { attr, items, values, syntax: None },
        Err(error) => Args { attr, items, values: T::default(), syntax: Some(error.into()) },
    }
}

/// The name of an argument (`max_attempts` in `max_attempts = 5`), if it is a single identifier.
pub fn name(item: &NestedMeta) -> Option<String> {
    let path = match item {
        NestedMeta::Meta(meta) => meta.path(),
        NestedMeta::NameValueInvalidExpr(meta) => &meta.path,
        NestedMeta::Lit(_) => return None,
    };
    path.get_ident().map(ToString::to_string)
}

/// The string of `name = "…"`.
pub fn string(attr: Macro, meta: &Meta, example: &str) -> syn::Result<LitStr> {
    match literal(meta) {
        Some(Lit::Str(lit)) => Ok(lit.clone()),
        _ => Err(form_error(attr, meta, &format!("a string, such as `{example}`"))),
    }
}

/// The integer of `max_attempts = 5`.
pub fn integer(attr: Macro, meta: &Meta, example: &str) -> syn::Result<LitInt> {
    match literal(meta) {
        Some(Lit::Int(lit)) => Ok(lit.clone()),
        _ => Err(form_error(attr, meta, &format!("an integer, such as `{example}`"))),
    }
}

/// A bare flag such as `serve`.
pub fn flag(attr: Macro, meta: &Meta) -> syn::Result<()> {
    match meta {
        Meta::Path(_) => Ok(()),
        _ => {
            let name = meta.path().get_ident().map(ToString::to_string).unwrap_or_default();
            Err(form_error(attr, meta, &format!("no value: write `{name}` alone")))
        }
    }
}

fn literal(meta: &Meta) -> Option<&Lit> {
    match meta {
        Meta::NameValue(name_value) => match &name_value.value {
            Expr::Lit(ExprLit { lit, .. }) => Some(lit),
            _ => None,
        },
        _ => None,
    }
}

fn form_error(attr: Macro, meta: &Meta, expected: &str) -> syn::Error {
    let name = meta.path().get_ident().map(ToString::to_string).unwrap_or_default();
    let message = format!("`{attr}` argument `{name}` takes {expected}", attr = attr.name());
    match meta {
        Meta::NameValue(name_value) => syn::Error::new_spanned(&name_value.value, message),
        other => syn::Error::new_spanned(other, message),
    }
}

/// The four attribute macros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Macro {
    /// `#[step]`
    Step,
    /// `#[tool]`
    Tool,
    /// `#[workflow_tool]`
    WorkflowTool,
    /// `#[task]`, with or without `serve`
    Task,
}

impl Macro {
    /// The attribute's name as written.
    pub fn name(self) -> &'static str {
        match self {
            Macro::Step => "step",
            Macro::Tool => "tool",
            Macro::WorkflowTool => "workflow_tool",
            Macro::Task => "task",
        }
    }

    /// The arguments the attribute accepts.
    pub fn known_args(self) -> &'static [&'static str] {
        match self {
            Macro::Step => STEP,
            Macro::Tool | Macro::WorkflowTool => TOOL,
            Macro::Task => TASK,
        }
    }
}
