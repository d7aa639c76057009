//! The typed model of an annotated fn: what `validate` checks and `expand` generates from.
//!
//! The model borrows the parsed item, so every part keeps its original tokens, and with them
//! their spans, for error messages. It records what the user wrote, valid or not: `validate`
//! judges it, and `expand` runs only on a model that passed, reading values the rules proved.

use std::fmt;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::{
    Expr, ExprLit, FnArg, GenericArgument, Ident, Lit, LitInt, LitStr, Meta, Pat, PatType, Path, PathArguments,
    PathSegment, Receiver, ReturnType, Type,
};

pub use crate::args::Macro;
use crate::args::{self, Args, StepArgs, ToolArgs};
use crate::duration::{self, Backoff};
use crate::item::ItemFn;
use crate::lints;

/// A tool's cell: lifetime × suspendability (ARCHITECTURE.md, "The four cells").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// `#[tool]`: step / none.
    Tool,
    /// `#[workflow_tool]`: step / workflow.
    WorkflowTool,
    /// `#[task]`: task / workflow.
    Task,
    /// `#[task(serve)]`: task / workflow, entered with a stream of calls.
    Serve,
}

impl Cell {
    /// The attribute as users write it, for messages: `#[{attr}]`.
    pub fn attr(self) -> &'static str {
        match self {
            Cell::Tool => "tool",
            Cell::WorkflowTool => "workflow_tool",
            Cell::Task => "task",
            Cell::Serve => "task(serve)",
        }
    }

    /// The context the cell's body takes.
    pub fn context(self) -> Context {
        match self {
            Cell::Tool => Context::Tool,
            Cell::WorkflowTool => Context::Workflow,
            Cell::Task => Context::Task,
            Cell::Serve => Context::Serve,
        }
    }

    /// Whether the body is a replayed workflow (so it must be deterministic).
    pub fn is_workflow(self) -> bool {
        self != Cell::Tool
    }
}

/// The context types a parameter can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// `WorkflowCtx`
    Workflow,
    /// `TaskCtx`
    Task,
    /// `ServeCtx`
    Serve,
    /// `ToolCtx`
    Tool,
    /// `StepCtx`
    Step,
}

impl Context {
    const ALL: [Context; 5] = [Context::Workflow, Context::Task, Context::Serve, Context::Tool, Context::Step];

    /// The type's name.
    pub fn type_name(self) -> &'static str {
        match self {
            Context::Workflow => "WorkflowCtx",
            Context::Task => "TaskCtx",
            Context::Serve => "ServeCtx",
            Context::Tool => "ToolCtx",
            Context::Step => "StepCtx",
        }
    }

    /// The attribute whose fns take this context.
    pub fn owner(self) -> &'static str {
        match self {
            Context::Workflow => "workflow_tool",
            Context::Task => "task",
            Context::Serve => "task(serve)",
            Context::Tool => "tool",
            Context::Step => "step",
        }
    }

    fn from_type_name(name: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|context| context.type_name() == name)
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// How a parameter holds its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Borrow {
    /// `&T`
    Shared,
    /// `&mut T`
    Mutable,
    /// `T`
    Owned,
}

/// What a parameter is, judged by its type's name.
#[derive(Clone, Copy)]
pub enum Role<'a> {
    /// A context such as `ctx: &WorkflowCtx`.
    Context(Context, Borrow),
    /// `Receive<T>`, the call stream of a `#[task(serve)]`, with `T` if written.
    Receive(Option<&'a Type>),
    /// `progress: Progress`, the channel a workflow body reports progress on.
    Progress(Borrow),
    /// Anything else: a tool's input or a step's argument.
    Value,
}

/// One typed parameter.
pub struct Param<'a> {
    /// `pat: Type` as written.
    pub arg: &'a PatType,
    /// What it is.
    pub role: Role<'a>,
}

impl<'a> Param<'a> {
    /// The parameter's type.
    pub fn ty(&self) -> &'a Type {
        &self.arg.ty
    }

    /// The name the parameter binds, when its pattern is a plain (possibly `mut`) identifier.
    pub fn ident(&self) -> Option<&'a Ident> {
        match &*self.arg.pat {
            Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => Some(&pat.ident),
            _ => None,
        }
    }

    /// The context this parameter is, if any.
    pub fn context(&self) -> Option<(Context, Borrow)> {
        match self.role {
            Role::Context(context, borrow) => Some((context, borrow)),
            _ => None,
        }
    }

    /// How this parameter holds its `Progress`, if it is the progress channel.
    pub fn progress(&self) -> Option<Borrow> {
        match self.role {
            Role::Progress(borrow) => Some(borrow),
            _ => None,
        }
    }

    /// Whether the caller supplies this parameter: a tool's input (or call stream) or a step's
    /// argument, as opposed to a context or the progress channel, which the runtime supplies.
    pub fn is_supplied(&self) -> bool {
        matches!(self.role, Role::Value | Role::Receive(_))
    }
}

/// A return type, split into `T` and `E` when it is spelled `…Result<T, E>`.
pub struct Output<'a> {
    /// The whole type, if the fn has one.
    pub ty: Option<&'a Type>,
    /// `T` of `Result<T, E>` (or of an alias such as `io::Result<T>`).
    pub ok: Option<&'a Type>,
    /// `E` of `Result<T, E>`, when written.
    pub err: Option<&'a Type>,
}

impl<'a> Output<'a> {
    fn new(output: &'a ReturnType) -> Self {
        let ReturnType::Type(_, ty) = output else { return Output { ty: None, ok: None, err: None } };
        let mut types = last_segment(ty)
            .filter(|segment| segment.ident.to_string().ends_with("Result"))
            .into_iter()
            .flat_map(type_arguments);
        Output { ty: Some(ty), ok: types.next(), err: types.next() }
    }
}

/// What every macro reads off the fn.
pub struct FnModel<'a> {
    /// The item, for its attributes, visibility, signature and body.
    pub item: &'a ItemFn,
    /// A `self` receiver, which no macro allows.
    pub receiver: Option<&'a Receiver>,
    /// The typed parameters, in order.
    pub params: Vec<Param<'a>>,
    /// The return type.
    pub output: Output<'a>,
    /// The body, read once for the scanner.
    pub body: lints::Body,
}

impl<'a> FnModel<'a> {
    fn new(item: &'a ItemFn) -> Self {
        let mut receiver = None;
        let mut params = Vec::new();
        for input in &item.sig.inputs {
            match input {
                FnArg::Receiver(self_arg) => receiver = Some(self_arg),
                FnArg::Typed(arg) => params.push(Param { arg, role: role(&arg.ty) }),
            }
        }
        let contexts = context_names(&params);
        FnModel {
            item,
            receiver,
            params,
            output: Output::new(&item.sig.output),
            body: lints::Body::new(item.body.stream(), contexts),
        }
    }

    /// The fn's name without `r#`, as tool names, step names and workflow ids use it.
    pub fn name(&self) -> String {
        self.item.sig.ident.unraw().to_string()
    }
}

/// The names of the context parameters, for the body scanner (`ctx` is always included).
fn context_names(params: &[Param]) -> Vec<String> {
    let names = params.iter().filter(|param| param.context().is_some()).filter_map(Param::ident);
    let mut names: Vec<String> = names.map(ToString::to_string).collect();
    names.push("ctx".to_owned());
    names
}

/// A `#[step]` fn and its arguments.
pub struct StepModel<'a> {
    /// The fn.
    pub func: FnModel<'a>,
    /// The arguments as written.
    pub args: Args<StepArgs>,
    /// `name = "…"`.
    pub name: Option<syn::Result<LitStr>>,
    /// `max_attempts = N`, checked to be a `u32` of at least 1 by `validate`.
    pub max_attempts: Option<syn::Result<LitInt>>,
    /// `backoff = "…"`, checked to parse by `validate`.
    pub backoff: Option<syn::Result<LitStr>>,
    /// `crate = "…"`, checked to be a path by `validate`.
    pub krate: Option<syn::Result<LitStr>>,
}

/// The retry policy a valid `#[step]` declares.
pub struct Policy {
    /// Attempts in all.
    pub max_attempts: u32,
    /// The delay between attempts.
    pub backoff: Backoff,
}

impl<'a> StepModel<'a> {
    /// The model of `#[step(args)]` on `item`.
    pub fn new(args: TokenStream, item: &'a ItemFn) -> Self {
        let args = args::parse::<StepArgs>(Macro::Step, args);
        let values = &args.values;
        let name = values.name.as_ref().map(|meta| args::string(Macro::Step, meta, "name = \"plan\""));
        let max_attempts =
            values.max_attempts.as_ref().map(|meta| args::integer(Macro::Step, meta, "max_attempts = 5"));
        let backoff = values.backoff.as_ref().map(|meta| args::string(Macro::Step, meta, "backoff = \"1s\""));
        let krate = values.krate.as_ref().map(|meta| krate(Macro::Step, meta));
        StepModel { func: FnModel::new(item), args, name, max_attempts, backoff, krate }
    }

    /// The journaled name: `name = "…"` or the fn name.
    pub fn step_name(&self) -> LitStr {
        name_or(self.name.as_ref(), &self.func)
    }

    /// The declared policy, or `None` for the runtime's default (3 attempts, 1 s doubling).
    pub fn policy(&self) -> Option<Policy> {
        if self.max_attempts.is_none() && self.backoff.is_none() {
            return None;
        }
        let max_attempts = self.max_attempts.as_ref().map_or(3, |lit| {
            attempts(lit.as_ref().expect("validated: `max_attempts` is an integer"))
                .expect("validated: `max_attempts` fits in a u32")
        });
        let backoff = self.backoff.as_ref().map_or(Backoff::Exponential { initial_millis: 1_000 }, |lit| {
            let lit = lit.as_ref().expect("validated: `backoff` is a string");
            duration::parse_backoff(&lit.value()).expect("validated: `backoff` parses")
        });
        Some(Policy { max_attempts, backoff })
    }

    /// `eve_tools::__private`, or `<crate>::__private` with `crate = "…"`.
    pub fn private(&self) -> TokenStream {
        private(self.krate.as_ref())
    }

    /// `use eve_tools::__private as __eve;`: generated code names the runtime through this short
    /// alias, which keeps the expansion small and readable.
    pub fn use_private(&self) -> TokenStream {
        use_private(self.krate.as_ref())
    }
}

/// A `#[tool]`, `#[workflow_tool]` or `#[task]` fn and its arguments.
pub struct ToolModel<'a> {
    /// The fn.
    pub func: FnModel<'a>,
    /// The cell the attribute asked for.
    pub cell: Cell,
    /// The arguments as written.
    pub args: Args<ToolArgs>,
    /// `name = "…"`.
    pub name: Option<syn::Result<LitStr>>,
    /// `serve`, on `#[task]`.
    pub serve: Option<syn::Result<()>>,
    /// `allow_unknown_fields`: the published schema stays as the input type gives it, so the
    /// runtime does not refuse fields the type does not list.
    pub allow_unknown_fields: Option<syn::Result<()>>,
    /// `crate = "…"`, checked to be a path by `validate`.
    pub krate: Option<syn::Result<LitStr>>,
    /// The doc comment, which becomes the model-facing description.
    pub description: Vec<DocLine<'a>>,
}

/// One `#[doc = …]` attribute.
pub enum DocLine<'a> {
    /// A doc comment line, with the one space after `///` removed.
    Text(String),
    /// A computed doc, such as `#[doc = include_str!("…")]`.
    Expr(&'a Expr),
}

impl<'a> ToolModel<'a> {
    /// The model of `#[attr(args)]` on `item`.
    pub fn new(attr: Macro, args: TokenStream, item: &'a ItemFn) -> Self {
        let args = args::parse::<ToolArgs>(attr, args);
        let values = &args.values;
        let name = values.name.as_ref().map(|meta| args::string(attr, meta, "name = \"deploy\""));
        let serve = values.serve.as_ref().map(|meta| args::flag(attr, meta));
        let allow_unknown_fields = values.allow_unknown_fields.as_ref().map(|meta| args::flag(attr, meta));
        let krate = values.krate.as_ref().map(|meta| krate(attr, meta));
        let cell = match attr {
            Macro::Tool => Cell::Tool,
            Macro::WorkflowTool => Cell::WorkflowTool,
            Macro::Task if serve.is_some() => Cell::Serve,
            Macro::Task => Cell::Task,
            Macro::Step => unreachable!("`#[step]` has its own model"),
        };
        let description = item.attrs.iter().filter_map(doc_line).collect();
        ToolModel { func: FnModel::new(item), cell, args, name, serve, allow_unknown_fields, krate, description }
    }

    /// The model-facing name: `name = "…"` or the fn name.
    pub fn tool_name(&self) -> LitStr {
        name_or(self.name.as_ref(), &self.func)
    }

    /// The input parameter: the first one that is neither a context nor the progress channel.
    pub fn input(&self) -> Option<&Param<'a>> {
        self.func.params.iter().find(|param| param.is_supplied())
    }

    /// The context parameter, if the body takes one.
    pub fn context(&self) -> Option<&Param<'a>> {
        self.func.params.iter().find(|param| param.context().is_some())
    }

    /// The progress channel, `progress: Progress`, if the body reports progress.
    pub fn progress(&self) -> Option<&Param<'a>> {
        self.func.params.iter().find(|param| param.progress().is_some())
    }

    /// The type the model fills in: the input's type, or `T` of a serve task's `Receive<T>`.
    pub fn input_type(&self) -> Option<&'a Type> {
        let input = self.input()?;
        match input.role {
            Role::Receive(item) => item,
            _ => Some(input.ty()),
        }
    }

    /// `use eve_tools::__private as __eve;`: generated code names the runtime through this short
    /// alias, which keeps the expansion small and readable.
    pub fn use_private(&self) -> TokenStream {
        use_private(self.krate.as_ref())
    }
}

/// `max_attempts` as a `u32`, if it fits.
pub fn attempts(lit: &LitInt) -> Option<u32> {
    lit.base10_parse().ok()
}

/// The path of `crate = "…"`.
pub fn crate_path(lit: &LitStr) -> syn::Result<Path> {
    lit.parse()
}

fn krate(attr: Macro, meta: &Meta) -> syn::Result<LitStr> {
    args::string(attr, meta, "crate = \"my_crate::eve_tools\"")
}

/// The alias [`use_private`] declares.
pub fn alias() -> TokenStream {
    let alias = proc_macro2::Ident::new("__eve", Span::mixed_site());
    quote!(#alias)
}

fn use_private(krate: Option<&syn::Result<LitStr>>) -> TokenStream {
    let (path, alias) = (private(krate), alias());
    quote!(use #path as #alias;)
}

fn private(krate: Option<&syn::Result<LitStr>>) -> TokenStream {
    match krate {
        Some(lit) => {
            let path = crate_path(lit.as_ref().expect("validated: `crate` is a string"));
            let path = path.expect("validated: `crate` is a path");
            quote!(#path::__private)
        }
        None => quote!(::eve_tools::__private),
    }
}

fn name_or(name: Option<&syn::Result<LitStr>>, func: &FnModel) -> LitStr {
    match name {
        Some(name) => name.as_ref().expect("validated: `name` is a string").clone(),
        None => LitStr::new(&func.name(), Span::call_site()),
    }
}

fn doc_line(attr: &syn::Attribute) -> Option<DocLine<'_>> {
    let Meta::NameValue(doc) = &attr.meta else { return None };
    if !doc.path.is_ident("doc") {
        return None;
    }
    Some(match &doc.value {
        Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => {
            let text = text.value();
            DocLine::Text(text.strip_prefix(' ').unwrap_or(&text).to_owned())
        }
        computed => DocLine::Expr(computed),
    })
}

fn role(ty: &Type) -> Role<'_> {
    let (borrow, inner) = match ty {
        Type::Reference(reference) if reference.mutability.is_some() => (Borrow::Mutable, &*reference.elem),
        Type::Reference(reference) => (Borrow::Shared, &*reference.elem),
        other => (Borrow::Owned, other),
    };
    let Some(segment) = last_segment(inner) else { return Role::Value };
    let name = segment.ident.to_string();
    match Context::from_type_name(&name) {
        Some(context) if segment.arguments.is_none() => Role::Context(context, borrow),
        _ if name == "Receive" && borrow == Borrow::Owned => Role::Receive(type_arguments(segment).next()),
        _ if name == "Progress" && segment.arguments.is_none() => Role::Progress(borrow),
        _ => Role::Value,
    }
}

/// The last segment of a plain path type: `Result<T, E>` of `std::result::Result<T, E>`.
pub fn last_segment(ty: &Type) -> Option<&PathSegment> {
    match ty {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        Type::Paren(paren) => last_segment(&paren.elem),
        Type::Group(group) => last_segment(&group.elem),
        _ => None,
    }
}

/// The type arguments of a path segment: `T` and `E` of `Result<T, E>`.
pub fn type_arguments(segment: &PathSegment) -> impl Iterator<Item = &Type> {
    let arguments = match &segment.arguments {
        PathArguments::AngleBracketed(arguments) => Some(&arguments.args),
        _ => None,
    };
    arguments.into_iter().flatten().filter_map(|argument| match argument {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    })
}
