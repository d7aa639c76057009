//! The compile-time rules (ARCHITECTURE.md, "Compile-time rules"), one function per rule.
//!
//! Every rule runs and pushes its errors, each spanned on the offending tokens, so independent
//! mistakes are reported together. Messages are lowercase without a trailing period, name the
//! attribute in backticks, and say what to do. Rules about trait bounds (an input that is not
//! `Deserialize`, an output that is not `Serialize`) cannot be decided here: `expand` emits
//! assertions for them, spanned on the user's types.

use darling::ast::NestedMeta;
use quote::ToTokens;
use syn::{LitStr, Type};

use crate::args::{self, Args};
use crate::duration;
use crate::lints::{self, Finding, Pattern};
use crate::model::{self, Borrow, Cell, Context, FnModel, Macro, Param, Role, StepModel, ToolModel};
use crate::suggest;

/// Checks a `#[step]`.
pub fn step(model: &StepModel) -> syn::Result<()> {
    let mut errors = Errors::default();
    let func = &model.func;
    let attr = "step";
    check_arguments(&mut errors, &model.args);
    argument_values_are_well_formed(&mut errors, &[err(&model.name), err(&model.max_attempts), err(&model.backoff)]);
    crate_is_a_path(&mut errors, Macro::Step, model.krate.as_ref());
    max_attempts_is_at_least_one(&mut errors, model.max_attempts.as_ref());
    backoff_is_a_duration(&mut errors, model.backoff.as_ref());
    check_signature(&mut errors, func, attr);
    step_returns_result(&mut errors, func);
    step_returns_no_secret(&mut errors, func);
    step_context_comes_first(&mut errors, func);
    step_takes_step_ctx(&mut errors, func);
    contexts_are_shared_references(&mut errors, func, attr, Context::Step);
    step_arguments_are_owned(&mut errors, func);
    step_arguments_have_one_order(&mut errors, func);
    workflow_capabilities_stay_in_workflows(
        &mut errors,
        func,
        attr,
        "return what you need from the step and ask in the body",
    );
    progress_is_reported_from_workflow_bodies(&mut errors, func, attr, STEP_PROGRESS);
    errors.finish()
}

/// Checks a `#[tool]`, `#[workflow_tool]` or `#[task]`.
pub fn tool(model: &ToolModel) -> syn::Result<()> {
    let mut errors = Errors::default();
    let (func, cell, attr) = (&model.func, model.cell, model.cell.attr());
    check_arguments(&mut errors, &model.args);
    let values = [err(&model.name), err(&model.serve), err(&model.allow_unknown_fields)];
    argument_values_are_well_formed(&mut errors, &values);
    crate_is_a_path(&mut errors, model.args.attr, model.krate.as_ref());
    tool_name_is_valid(&mut errors, model);
    check_signature(&mut errors, func, attr);
    context_matches_the_cell(&mut errors, func, cell);
    contexts_are_shared_references(&mut errors, func, attr, cell.context());
    context_comes_second(&mut errors, model);
    has_an_input(&mut errors, model);
    has_one_input(&mut errors, model);
    serve_takes_a_call_stream(&mut errors, model);
    call_stream_needs_serve(&mut errors, model);
    input_is_a_json_object(&mut errors, model);
    tool_returns_a_value(&mut errors, model);
    if cell.is_workflow() {
        tokens_stay_in_steps(&mut errors, func, attr);
        workflow_body_is_deterministic(&mut errors, func, attr);
        patch_ids_are_literals_used_once(&mut errors, func, attr);
        progress_is_one_owned_last_parameter(&mut errors, model);
        progress_is_reported_through_its_channel(&mut errors, func, attr);
    } else {
        workflow_capabilities_stay_in_workflows(&mut errors, func, attr, "make it a `#[workflow_tool]` to use it");
        progress_is_reported_from_workflow_bodies(&mut errors, func, attr, TOOL_PROGRESS);
    }
    errors.finish()
}

/// The rules every macro's arguments follow.
fn check_arguments<T>(errors: &mut Errors, args: &Args<T>) {
    arguments_parse(errors, args);
    background_plain_tool_was_removed(errors, args);
    arguments_are_on_the_right_macro(errors, args);
    arguments_are_known(errors, args);
    arguments_are_unique(errors, args);
}

/// The rules every macro's signature follows.
fn check_signature(errors: &mut Errors, func: &FnModel, attr: &str) {
    is_async(errors, func, attr);
    has_no_unsupported_qualifiers(errors, func, attr);
    is_not_generic(errors, func, attr);
    has_no_receiver(errors, func, attr);
}

// ---- arguments

/// The argument list is a comma-separated list of `name = value` and flags.
fn arguments_parse<T>(errors: &mut Errors, args: &Args<T>) {
    if let Some(error) = &args.syntax {
        errors.push(error.clone());
    }
}

/// The background plain tool (task / none) was removed: a tool that outlives the step is a `#[task]`.
fn background_plain_tool_was_removed<T>(errors: &mut Errors, args: &Args<T>) {
    const MESSAGE: &str = "the background plain tool was removed: use `#[task]` for work that outlives the model \
                           step (a plain `#[tool]` always runs inside it)";
    let asks_for_background =
        |item: &&NestedMeta| args::name(item).is_some_and(|name| is_background_tool(args.attr, &name));
    for item in args.items.iter().filter(asks_for_background) {
        errors.push(syn::Error::new_spanned(item, MESSAGE));
    }
}

/// Arguments that belong to another macro say which one.
fn arguments_are_on_the_right_macro<T>(errors: &mut Errors, args: &Args<T>) {
    for item in &args.items {
        let Some(name) = args::name(item) else { continue };
        if let Some(advice) = misplaced(args.attr, &name) {
            let message = format!("`{name}` is not a `{attr}` argument: {advice}", attr = args.attr.name());
            errors.push(syn::Error::new_spanned(item, message));
        }
    }
}

/// Arguments the macro does not know are reported with the ones it does, and the closest one.
fn arguments_are_known<T>(errors: &mut Errors, args: &Args<T>) {
    let known = args.attr.known_args();
    let expected = known.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
    for item in &args.items {
        let name = args::name(item);
        if name.as_deref().is_some_and(|name| known.contains(&name) || is_misplaced(args.attr, name)) {
            continue;
        }
        let attr = args.attr.name();
        let written = match (&name, item) {
            (Some(name), _) => name.clone(),
            (None, NestedMeta::Lit(_)) => {
                let message = format!("expected `name = value` in `#[{attr}(…)]`; `{attr}` takes {expected}");
                errors.push(syn::Error::new_spanned(item, message));
                continue;
            }
            (None, item) => display(path_of(item)),
        };
        let mut message = format!("unknown `{attr}` argument `{written}`; expected one of {expected}");
        if let Some(closest) = name.as_deref().and_then(|name| suggest::closest(name, known)) {
            message.push_str(&format!("; did you mean `{closest}`?"));
        }
        errors.push(syn::Error::new_spanned(path_of(item), message));
    }
}

/// Each argument is given at most once.
fn arguments_are_unique<T>(errors: &mut Errors, args: &Args<T>) {
    let mut seen = Vec::new();
    for item in &args.items {
        let Some(name) = args::name(item) else { continue };
        if seen.contains(&name) && args.attr.known_args().contains(&name.as_str()) {
            let message = format!("duplicate `{attr}` argument `{name}`; give it once", attr = args.attr.name());
            errors.push(syn::Error::new_spanned(path_of(item), message));
        }
        seen.push(name);
    }
}

/// Each value has the form its argument takes: `name = "…"`, `max_attempts = 5`, `serve`.
fn argument_values_are_well_formed(errors: &mut Errors, values: &[Option<&syn::Error>]) {
    for error in values.iter().flatten() {
        errors.push((*error).clone());
    }
}

/// `crate = "…"` names a path, such as `"my_crate::eve_tools"`.
fn crate_is_a_path(errors: &mut Errors, attr: Macro, krate: Option<&syn::Result<LitStr>>) {
    let Some(Ok(lit)) = krate else { return };
    if model::crate_path(lit).is_err() {
        let message = format!(
            "`{}` argument `crate = {}` is not a path; write the path to `eve_tools`, such as \
             `crate = \"my_crate::eve_tools\"`",
            attr.name(),
            display(lit)
        );
        errors.push(syn::Error::new_spanned(lit, message));
    }
}

/// `max_attempts` counts the first attempt, so it is at least 1 (and fits a `u32`).
fn max_attempts_is_at_least_one(errors: &mut Errors, max_attempts: Option<&syn::Result<syn::LitInt>>) {
    const ZERO: &str = "`step` argument `max_attempts` must be at least 1, because it counts the first attempt; \
                        use `max_attempts = 1` for no retries";
    const TOO_LARGE: &str = "`step` argument `max_attempts` must fit in a `u32`";
    let Some(Ok(lit)) = max_attempts else { return };
    match model::attempts(lit) {
        Some(0) => errors.push(syn::Error::new_spanned(lit, ZERO)),
        Some(_) => {}
        None => errors.push(syn::Error::new_spanned(lit, TOO_LARGE)),
    }
}

/// `backoff` is a duration the macro can read: `"250ms"`, `"1s"`, `"2m"`, `"1h"` or `"fixed(1s)"`.
fn backoff_is_a_duration(errors: &mut Errors, backoff: Option<&syn::Result<LitStr>>) {
    let Some(Ok(lit)) = backoff else { return };
    if let Err(reason) = duration::parse_backoff(&lit.value()) {
        let message = format!(
            "invalid `step` argument `backoff = {}`: {reason}; write a whole number and a unit \
             (`ms`, `s`, `m` or `h`), such as `\"250ms\"`, `\"2m\"` or `\"fixed(1s)\"`",
            display(lit)
        );
        errors.push(syn::Error::new_spanned(lit, message));
    }
}

/// A tool's name is what the model calls: 1 to 64 ASCII letters, digits, `_` or `-`.
fn tool_name_is_valid(errors: &mut Errors, model: &ToolModel) {
    let valid = |name: &str| {
        (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let attr = model.cell.attr();
    match &model.name {
        Some(Ok(lit)) if !valid(&lit.value()) => {
            let message = format!(
                "`{attr}` argument `name = {}` is not a valid tool name; use 1 to 64 letters, digits, `_` or `-`",
                display(lit)
            );
            errors.push(syn::Error::new_spanned(lit, message));
        }
        None if !valid(&model.func.name()) => {
            let message = format!(
                "`{}` cannot be a tool name; rename the fn or set `#[{attr}(name = \"…\")]` with 1 to 64 letters, \
                 digits, `_` or `-`",
                model.func.name()
            );
            errors.push(syn::Error::new_spanned(&model.func.item.sig.ident, message));
        }
        _ => {}
    }
}

// ---- signature

/// The attribute goes on an `async fn`: the body awaits steps and durable waits.
fn is_async(errors: &mut Errors, func: &FnModel, attr: &str) {
    let sig = &func.item.sig;
    if sig.asyncness.is_none() {
        let message = format!("`#[{attr}]` must be on an `async fn`; add `async` before `fn`");
        errors.push(syn::Error::new_spanned(sig.fn_token, message));
    }
}

/// The fn is not `const`, `unsafe`, `extern` or variadic.
fn has_no_unsupported_qualifiers(errors: &mut Errors, func: &FnModel, attr: &str) {
    let sig = &func.item.sig;
    let qualifiers = [
        sig.constness.map(|token| token.into_token_stream()),
        matches!(sig.safety, syn::Safety::Unsafe(_)).then(|| sig.safety.to_token_stream()),
        sig.abi.as_ref().map(ToTokens::into_token_stream),
        sig.variadic.as_ref().map(ToTokens::into_token_stream),
    ];
    for qualifier in qualifiers.into_iter().flatten() {
        let message = format!("`#[{attr}]` fns cannot be `{}`; remove it", display(&qualifier));
        errors.push(syn::Error::new_spanned(qualifier, message));
    }
}

/// The fn has no generics and no `impl Trait`: schemas and the journal need concrete types.
fn is_not_generic(errors: &mut Errors, func: &FnModel, attr: &str) {
    let generics = &func.item.sig.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        let message = format!(
            "`#[{attr}]` fns cannot be generic; use concrete types, which the input schema and the journal record"
        );
        errors.push(syn::Error::new_spanned(generics, message));
    }
    let types = func.params.iter().map(Param::ty).chain(func.output.ty);
    for ty in types.filter(|ty| mentions_impl(ty)) {
        let message = format!("`#[{attr}]` fns cannot use `impl Trait`; name the concrete type");
        errors.push(syn::Error::new_spanned(ty, message));
    }
}

/// No `self`: the runtime calls the fn by itself, with nothing to call it on.
fn has_no_receiver(errors: &mut Errors, func: &FnModel, attr: &str) {
    if let Some(receiver) = func.receiver {
        let message = format!("`#[{attr}]` cannot take `self`; make it a free fn and pass what it needs as arguments");
        errors.push(syn::Error::new_spanned(receiver, message));
    }
}

/// A context is taken by shared reference: `ctx: &WorkflowCtx`.
fn contexts_are_shared_references(errors: &mut Errors, func: &FnModel, attr: &str, expected: Context) {
    for param in &func.params {
        if let Some((context, borrow)) = param.context()
            && context == expected
            && borrow != Borrow::Shared
        {
            let message = format!("`#[{attr}]` takes its context by shared reference: `ctx: &{context}`");
            errors.push(syn::Error::new_spanned(param.ty(), message));
        }
    }
}

// ---- steps

/// A step returns `Result<T, E>`: `T` is journaled, and an `E` makes the runtime retry.
fn step_returns_result(errors: &mut Errors, func: &FnModel) {
    if func.output.ok.is_some() {
        return;
    }
    let message = "`#[step]` must return `Result<T, E>`, where `T` is recorded in the journal \
                   and `E` converts into `StepError`";
    match func.output.ty {
        Some(ty) => errors.push(syn::Error::new_spanned(ty, message)),
        None => errors.push(syn::Error::new_spanned(&func.item.sig.ident, message)),
    }
}

/// A step never returns a secret: its result is written to the journal.
fn step_returns_no_secret(errors: &mut Errors, func: &FnModel) {
    const SECRETS: &[&str] = &["Token", "AccessToken", "BearerToken", "RefreshToken", "Secret", "SecretString"];
    let Some(ok) = func.output.ok else { return };
    let Some(secret) = idents(ok).into_iter().find(|ident| SECRETS.iter().any(|secret| ident == secret)) else {
        return;
    };
    let message = format!(
        "a `#[step]` must not return a `{secret}`: step results are written to the journal; use the token inside \
         the step and return only what you got with it"
    );
    errors.push(syn::Error::new_spanned(ok, message));
}

/// A step's `&StepCtx` is its first parameter, so callers pass the body's context first.
fn step_context_comes_first(errors: &mut Errors, func: &FnModel) {
    for param in func.params.iter().skip(1) {
        if let Some((Context::Step, _)) = param.context() {
            let message = "`&StepCtx` must be the first parameter of a `#[step]`; move it to the front";
            errors.push(syn::Error::new_spanned(param.arg, message));
        }
    }
}

/// A step takes `&StepCtx`, never a body's context: the macro builds a `StepCtx` per attempt.
fn step_takes_step_ctx(errors: &mut Errors, func: &FnModel) {
    for param in &func.params {
        if let Some((context, _)) = param.context()
            && context != Context::Step
        {
            let message = format!(
                "a `#[step]` takes `&StepCtx`, not `&{context}`; declare `ctx: &StepCtx` and call the step \
                 with the body's context, as in `{}(ctx, …)`",
                func.name()
            );
            errors.push(syn::Error::new_spanned(param.ty(), message));
        }
    }
}

/// Step arguments are owned values: they are serialized into the journal and read back on retries.
fn step_arguments_are_owned(errors: &mut Errors, func: &FnModel) {
    for param in func.params.iter().filter(|param| param.is_supplied()) {
        if let Type::Reference(reference) = param.ty() {
            let message = format!(
                "`#[step]` arguments must be owned, because they are recorded in the journal; take `{}` \
                 instead of `{}`",
                owned_form(&reference.elem),
                display(param.ty())
            );
            errors.push(syn::Error::new_spanned(param.ty(), message));
        }
    }
}

/// Step arguments serialize the same way in every process: a `HashSet` writes its elements in
/// its random hasher's order, as a sequence whose order counts, so replay would see another call.
fn step_arguments_have_one_order(errors: &mut Errors, func: &FnModel) {
    for param in func.params.iter().filter(|param| param.is_supplied()) {
        for ident in idents(param.ty()).into_iter().filter(|ident| ident == "HashSet") {
            let message = "`#[step]` arguments must serialize the same way in every process, and a `HashSet` \
                           lists its elements in a random order, so replay would see another argument; use a \
                           `BTreeSet` (a `HashMap` is fine: its entries are sorted before hashing)";
            errors.push(syn::Error::new(ident.span(), message));
        }
    }
}

// ---- tools

/// Each cell takes its own context: `&ToolCtx`, `&WorkflowCtx`, `&TaskCtx` or `&ServeCtx`.
fn context_matches_the_cell(errors: &mut Errors, func: &FnModel, cell: Cell) {
    let expected = cell.context();
    for param in &func.params {
        let Some((found, _)) = param.context().filter(|(found, _)| *found != expected) else { continue };
        let advice = match found {
            Context::Step => "`&StepCtx` is for `#[step]` fns, which the body calls".to_owned(),
            _ => format!("use `#[{}]` for a body that takes `&{found}`", found.owner()),
        };
        let message = format!("`#[{}]` takes `&{expected}`, not `&{found}`; {advice}", cell.attr());
        errors.push(syn::Error::new_spanned(param.ty(), message));
    }
}

/// The context comes second, after the input: `(input: Input, ctx: &WorkflowCtx)`.
fn context_comes_second(errors: &mut Errors, model: &ToolModel) {
    let params = &model.func.params;
    let (Some(first), Some(input)) = (params.first(), model.input()) else { return };
    if first.context().is_some_and(|(context, _)| context == model.cell.context()) {
        let message = format!(
            "the context comes second in a `#[{}]`, after the input: `({}, {})`",
            model.cell.attr(),
            display(input.arg),
            display(first.arg)
        );
        errors.push(syn::Error::new_spanned(first.arg, message));
    }
}

/// A tool takes an input, the object the model fills in (for `serve`, the stream of calls).
fn has_an_input(errors: &mut Errors, model: &ToolModel) {
    if model.input().is_some() {
        return;
    }
    let attr = model.cell.attr();
    let message = match model.cell {
        Cell::Serve => {
            format!("`#[{attr}]` fn needs its stream of calls: add a first parameter `receive: Receive<Input>`")
        }
        _ => format!(
            "`#[{attr}]` fn needs an input: add a first parameter such as `input: Input`, where `Input` derives \
             `Deserialize` and `JsonSchema`"
        ),
    };
    let parens = model.func.item.sig.paren_token.span.join();
    errors.push(syn::Error::new(parens, message));
}

/// A tool takes one input; several values go in one struct, which is the JSON object the model fills in.
fn has_one_input(errors: &mut Errors, model: &ToolModel) {
    let inputs: Vec<&Param> = model.func.params.iter().filter(|param| param.is_supplied()).collect();
    if inputs.len() < 2 {
        return;
    }
    let names: Vec<String> = inputs.iter().map(|param| format!("`{}`", display(&param.arg.pat))).collect();
    let (last, rest) = names.split_last().expect("at least two inputs");
    let message = format!(
        "`#[{}]` takes a single input; wrap {} and {last} in one struct that derives `Deserialize` and `JsonSchema`",
        model.cell.attr(),
        rest.join(", ")
    );
    let extra: Vec<&syn::PatType> = inputs[1..].iter().map(|param| param.arg).collect();
    errors.push(syn::Error::new_spanned(quote::quote!(#(#extra)*), message));
}

/// `#[task(serve)]` receives its calls as a stream: `receive: Receive<Input>`.
fn serve_takes_a_call_stream(errors: &mut Errors, model: &ToolModel) {
    let Some(input) = model.input().filter(|_| model.cell == Cell::Serve) else { return };
    if let Role::Value = input.role {
        let ty = display(input.ty());
        let message =
            format!("`#[task(serve)]` receives its calls as a stream: take `receive: Receive<{ty}>` instead of `{ty}`");
        errors.push(syn::Error::new_spanned(input.ty(), message));
    }
}

/// A `Receive` stream exists only in `#[task(serve)]`.
fn call_stream_needs_serve(errors: &mut Errors, model: &ToolModel) {
    let Some(input) = model.input().filter(|_| model.cell != Cell::Serve) else { return };
    if let Role::Receive(_) = input.role {
        let attr = model.cell.attr();
        let advice = match model.cell {
            Cell::Task => "add `serve`: `#[task(serve)]`, with `ctx: &ServeCtx`",
            _ => "use `#[task(serve)]` for a resumable task, or take the input itself",
        };
        let message = format!("`Receive` is the call stream of a `#[task(serve)]`, not a `#[{attr}]` input; {advice}");
        errors.push(syn::Error::new_spanned(input.ty(), message));
    }
}

/// The input is a struct that deserializes from a JSON object: the model fills in named fields.
fn input_is_a_json_object(errors: &mut Errors, model: &ToolModel) {
    let inputs = model.func.params.iter().filter(|param| param.is_supplied());
    let Some(ty) = model.input_type().filter(|_| inputs.count() == 1) else { return };
    let attr = model.cell.attr();
    let message = match ty {
        Type::Reference(reference) => {
            format!("`#[{attr}]` input must be owned: take `{}` instead of `{}`", display(&reference.elem), display(ty))
        }
        ty if is_not_an_object(ty) => format!(
            "`#[{attr}]` input must be a struct that deserializes from a JSON object, not `{}`; wrap it in a \
             struct that derives `Deserialize` and `JsonSchema`",
            display(ty)
        ),
        _ => return,
    };
    errors.push(syn::Error::new_spanned(ty, message));
}

/// A tool returns `Result<T, E>`: the model sees `T`, or the error.
fn tool_returns_a_value(errors: &mut Errors, model: &ToolModel) {
    if model.func.output.ty.is_some() {
        return;
    }
    let message = format!(
        "`#[{}]` fn must return `Result<T, E>`, where `T: Serialize` is what the model sees and `E` converts into \
         `ToolError`",
        model.cell.attr()
    );
    errors.push(syn::Error::new_spanned(&model.func.item.sig.ident, message));
}

// ---- bodies

/// `ask`, `agent` and `agents` exist only in workflow bodies, which can park durably.
fn workflow_capabilities_stay_in_workflows(errors: &mut Errors, func: &FnModel, attr: &str, advice: &str) {
    for finding in scan(func, lints::WORKFLOW_ONLY) {
        let message = format!(
            "`{}` is only available in a workflow body (`#[workflow_tool]` or `#[task]`), not in a `#[{attr}]`; \
             {advice}",
            finding.text
        );
        errors.push(syn::Error::new_spanned(finding.tokens, message));
    }
}

/// `get_token` and `require_auth` run in a `#[step]`, so a token never enters a workflow's journal.
fn tokens_stay_in_steps(errors: &mut Errors, func: &FnModel, attr: &str) {
    for finding in scan(func, lints::STEP_ONLY) {
        let message = format!(
            "`{}` cannot be called in a `#[{attr}]` body; call it inside a `#[step]` that takes `ctx: &StepCtx`, \
             so the token never enters the journal",
            finding.text
        );
        errors.push(syn::Error::new_spanned(finding.tokens, message));
    }
}

/// A workflow body is replayed, so it does not read clocks, randomness, the environment, files or
/// the network, nor spawn, sleep or race without `biased;`.
fn workflow_body_is_deterministic(errors: &mut Errors, func: &FnModel, attr: &str) {
    for finding in scan(func, lints::NONDETERMINISM) {
        let what = match finding.lint.pattern {
            Pattern::Unbiased(_) => format!("`{}` without `biased;`", finding.text),
            _ => format!("`{}`", finding.text),
        };
        let message = format!("{what} in a `#[{attr}]` body breaks replay; {}", finding.lint.advice);
        errors.push(syn::Error::new_spanned(finding.tokens, message));
    }
}

/// A patch's id is what its journaled marker records, so it is a literal (the same in every run)
/// and names one patch of the body.
fn patch_ids_are_literals_used_once(errors: &mut Errors, func: &FnModel, attr: &str) {
    let mut seen: Vec<String> = Vec::new();
    for call in lints::patch_calls(&func.body) {
        let method = &call.method;
        let Some(id) = call.id else {
            let message = format!(
                "the id of `ctx.{method}` must be a string literal, such as `ctx.{method}(\"notify-by-email\")`: \
                 the journal records it, and replay looks for the same id"
            );
            errors.push(syn::Error::new_spanned(call.tokens, message));
            continue;
        };
        let id = id.value();
        if seen.contains(&id) {
            let message = format!(
                "the patch id {id:?} is already used in this `#[{attr}]` body; give each patch an id of its own, as \
                 replay tells patches apart by their ids"
            );
            errors.push(syn::Error::new_spanned(call.tokens, message));
        } else {
            seen.push(id);
        }
    }
}

// ---- progress

/// Why a `#[step]` cannot report progress, and what to do instead.
const STEP_PROGRESS: &str = "progress is reported from the workflow body; return the value from the step and \
                             report it in the body with `progress.report(value).await?`";

/// Why a plain `#[tool]` cannot report progress, and what to do instead.
const TOOL_PROGRESS: &str = "it runs inside the model step and answers at once; make it a `#[workflow_tool]` \
                             to report progress with `progress.report(value).await?`";

/// Progress is reported from a workflow body only: a step's result is journaled once, and a plain
/// tool answers inside the model step, so neither takes `Progress` nor writes `yield`.
fn progress_is_reported_from_workflow_bodies(errors: &mut Errors, func: &FnModel, attr: &str, advice: &str) {
    for param in func.params.iter().filter(|param| param.progress().is_some()) {
        let message = format!("a `#[{attr}]` cannot report progress: {advice}");
        errors.push(syn::Error::new_spanned(param.ty(), message));
    }
    for finding in scan(func, lints::YIELDS) {
        let message = format!("`yield` cannot report progress from a `#[{attr}]`: {advice}");
        errors.push(syn::Error::new_spanned(finding.tokens, message));
    }
}

/// A workflow body takes at most one progress channel, by value, as its last parameter:
/// `(input: Input, ctx: &WorkflowCtx, progress: Progress)`.
fn progress_is_one_owned_last_parameter(errors: &mut Errors, model: &ToolModel) {
    let attr = model.cell.attr();
    let params = &model.func.params;
    let channels: Vec<(usize, &Param)> =
        params.iter().enumerate().filter(|(_, param)| param.progress().is_some()).collect();
    for (index, param) in &channels {
        let message = if *index != channels[0].0 {
            format!("a `#[{attr}]` takes one `Progress`; report every snapshot through the first")
        } else if param.progress() != Some(Borrow::Owned) {
            format!("`#[{attr}]` takes its progress channel by value: `progress: Progress`")
        } else if *index + 1 != params.len() {
            let input = if model.cell == Cell::Serve { "receive: Receive<Input>" } else { "input: Input" };
            let context = model.cell.context();
            format!(
                "the progress channel comes last in a `#[{attr}]`: `({input}, ctx: &{context}, progress: Progress)`"
            )
        } else {
            continue;
        };
        errors.push(syn::Error::new_spanned(param.arg, message));
    }
}

/// A workflow body reports progress through its `Progress` parameter; Rust's `yield` is not
/// available in an `async fn`.
fn progress_is_reported_through_its_channel(errors: &mut Errors, func: &FnModel, attr: &str) {
    for finding in scan(func, lints::YIELDS) {
        let message = format!(
            "`yield` is not how a `#[{attr}]` body reports progress; declare `progress: Progress` as its last \
             parameter and write `progress.report(value).await?`"
        );
        errors.push(syn::Error::new_spanned(finding.tokens, message));
    }
}

// ---- helpers

/// Errors collected from every rule, reported together.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

fn err<T>(value: &Option<syn::Result<T>>) -> Option<&syn::Error> {
    value.as_ref().and_then(|value| value.as_ref().err())
}

fn scan<'l>(func: &FnModel, table: &'l [lints::Lint]) -> Vec<Finding<'l>> {
    lints::scan(&func.body, table)
}

/// What an argument on the wrong macro should be instead.
fn misplaced(attr: Macro, name: &str) -> Option<String> {
    let advice = match (attr, name) {
        (Macro::Tool | Macro::WorkflowTool, "serve") => {
            "it belongs to `#[task(serve)]`, a resumable task \
                                                         that receives a stream of calls"
        }
        (Macro::WorkflowTool, "background" | "execution") => {
            "a `#[workflow_tool]` call ends with the model step; \
                                                               use `#[task]` for a workflow that returns a receipt \
                                                               now and its result later"
        }
        (Macro::Task, "background" | "execution") => "a `#[task]` always runs in the background; remove it",
        (Macro::Tool | Macro::WorkflowTool | Macro::Task, "description") => {
            "the description is the fn's doc comment; write it as `///` lines above the fn"
        }
        _ => return None,
    };
    Some(advice.to_owned())
}

fn is_misplaced(attr: Macro, name: &str) -> bool {
    misplaced(attr, name).is_some() || is_background_tool(attr, name)
}

/// Whether an argument asks for the removed background plain tool.
fn is_background_tool(attr: Macro, name: &str) -> bool {
    attr == Macro::Tool && matches!(name, "background" | "execution")
}

fn path_of(item: &NestedMeta) -> proc_macro2::TokenStream {
    match item {
        NestedMeta::Meta(meta) => meta.path().to_token_stream(),
        NestedMeta::NameValueInvalidExpr(meta) => meta.path.to_token_stream(),
        NestedMeta::Lit(lit) => lit.to_token_stream(),
    }
}

/// Whether a type cannot deserialize from a JSON object: primitives, strings, sequences, tuples, options.
fn is_not_an_object(ty: &Type) -> bool {
    const NOT_OBJECTS: &[&str] = &[
        "bool", "char", "str", "String", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128",
        "isize", "f32", "f64", "Vec", "VecDeque", "HashSet", "BTreeSet", "Option",
    ];
    match ty {
        Type::Tuple(_) | Type::Array(_) | Type::Slice(_) | Type::Ptr(_) | Type::Never(_) | Type::FnPtr(_) => true,
        Type::Paren(paren) => is_not_an_object(&paren.elem),
        Type::Group(group) => is_not_an_object(&group.elem),
        Type::Path(_) => model::last_segment(ty).is_some_and(|segment| {
            let name = segment.ident.to_string();
            match name.as_str() {
                "Box" | "Arc" | "Rc" => model::type_arguments(segment).next().is_some_and(is_not_an_object),
                name => NOT_OBJECTS.contains(&name),
            }
        }),
        _ => false,
    }
}

fn mentions_impl(ty: &Type) -> bool {
    idents(ty).iter().any(|ident| ident == "impl")
}

/// Every identifier in a type, however deeply nested: `Option`, `Vec` and `Token` in `Option<Vec<Token>>`.
fn idents(ty: &Type) -> Vec<proc_macro2::Ident> {
    fn walk(stream: proc_macro2::TokenStream, idents: &mut Vec<proc_macro2::Ident>) {
        for token in stream {
            match token {
                proc_macro2::TokenTree::Ident(ident) => idents.push(ident),
                proc_macro2::TokenTree::Group(group) => walk(group.stream(), idents),
                _ => {}
            }
        }
    }
    let mut idents = Vec::new();
    walk(ty.to_token_stream(), &mut idents);
    idents
}

/// The owned form to suggest for a borrowed step argument: `String` for `str`, `Vec<T>` for `[T]`.
fn owned_form(ty: &Type) -> String {
    match ty {
        Type::Path(path) if path.path.is_ident("str") => "String".to_owned(),
        Type::Slice(slice) => format!("Vec<{}>", display(&slice.elem)),
        other => display(other),
    }
}

/// Tokens as a user would write them: `Vec<String>`, not `Vec < String >`.
pub fn display(tokens: impl ToTokens) -> String {
    const CLOSE_UP: &[(&str, &str)] = &[
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        (" : ", ": "),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
    ];
    let mut text = tokens.to_token_stream().to_string();
    for (from, to) in CLOSE_UP {
        text = text.replace(from, to);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{display, is_not_an_object};

    #[test]
    fn only_object_shaped_types_pass_as_tool_inputs() {
        let cases: &[(&str, bool)] = &[
            ("String", true),
            ("u32", true),
            ("Vec<Item>", true),
            ("Option<Input>", true),
            ("(String, u32)", true),
            ("()", true),
            ("[u8; 4]", true),
            ("Box<str>", true),
            ("std::string::String", true),
            ("DeployInput", false),
            ("Box<DeployInput>", false),
            ("HashMap<String, u32>", false),
            ("serde_json::Value", false),
        ];
        for (ty, expected) in cases {
            let ty: syn::Type = syn::parse_str(ty).expect("test types parse");
            assert_eq!(is_not_an_object(&ty), *expected, "judging `{}`", display(&ty));
        }
    }

    #[test]
    fn types_display_as_written() {
        let cases = [
            "Vec<String>",
            "&str",
            "std::result::Result<Vec<u8>, E>",
            "(u8, u16)",
            "&'a mut [u8]",
            "HashMap<String, Vec<u8>>",
        ];
        for ty in cases {
            let parsed: syn::Type = syn::parse_str(ty).expect("test types parse");
            assert_eq!(display(&parsed), ty);
        }
    }
}
