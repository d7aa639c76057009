//! `#[step]`: the `async fn` becomes a plain fn of the same name that returns a `StepCall`, the
//! future that journals the call.
//!
//! ```text
//! #[step(max_attempts = 5)]
//! async fn apply(plan: Plan) -> Result<String, StepError> { body }
//! ```
//!
//! becomes (hand-simplified in `examples/step-expanded.rs`)
//!
//! ```text
//! #[track_caller] // a divergence names the body's line that called the step
//! fn apply(plan: Plan) -> eve_tools::__private::StepCall<String> {
//!     use eve_tools::__private as __eve;
//!     async fn __eve_body(plan: Plan) -> Result<String, StepError> { body }
//!     static __EVE_STEP: __eve::StepDef = __eve::StepDef::new(concat!(module_path!(), "::", "apply"), "apply", …);
//!     __eve::register!(__EVE_STEP);
//!     const { __eve::assert_step_arg::<Plan>(); __eve::assert_step_output::<String>(); … }
//!     let __eve_args = (plan,);
//!     __eve::StepCall::new(&__EVE_STEP, __eve_args, |(plan,), _| __eve_body(plan))
//! }
//! ```
//!
//! The user's fn survives whole as `__eve_body` (renamed, body untouched), so its spans, lints and
//! errors are the user's own. A `ctx: &StepCtx` first parameter becomes `ctx: &impl StepCtxSource`
//! in the wrapper: callers pass the body's own context, and the runtime builds a fresh `StepCtx`
//! for each attempt, which the closure hands to the body. It is never part of the journaled
//! arguments.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{LitStr, Type};

use super::ident;
use crate::duration::Backoff;
use crate::item::ItemFn;
use crate::model::{Context, Param, StepModel, alias};

/// The wrapper fn.
pub fn expand(model: &StepModel) -> TokenStream {
    // The signature names the runtime by its path; the body, by the alias it declares.
    let (path, use_private, private) = (model.private(), model.use_private(), alias());
    let item = model.func.item;
    let (attrs, vis, name) = (&item.attrs, &item.vis, &item.sig.ident);
    let ok = model.func.output.ok.expect("validated: a step returns `Result<T, E>`");
    let context = context_name(model);
    let context_param = context.as_ref().map(|context| quote!(#context: &impl #path::StepCtxSource,));
    let discard_context = context.as_ref().map(|context| quote!(let _ = #context;));
    let arguments = arguments(model);
    let (names, types): (Vec<&Ident>, Vec<&Type>) = arguments.iter().map(|(name, ty)| (name, *ty)).unzip();
    let body = body_fn(item);
    let (step, def) = (ident("__EVE_STEP"), step_def(model, &private));
    let assertions = assertions(model, &private, &types);
    let call = call(&private, &step, context.is_some(), &names, item.sig.paren_token.span.join());
    quote! {
        #(#attrs)*
        // So that a divergence names the line of the body that called the step.
        #[track_caller]
        #vis fn #name(#context_param #(#names: #types),*) -> #path::StepCall<#ok> {
            #use_private
            #body
            static #step: #private::StepDef = #def;
            #private::register!(#step);
            #assertions
            #discard_context
            #call
        }
    }
}

/// The name of the wrapper's context parameter, when the step takes `&StepCtx`.
fn context_name(model: &StepModel) -> Option<Ident> {
    let first = model.func.params.first().filter(|param| matches!(param.context(), Some((Context::Step, _))))?;
    Some(first.ident().cloned().unwrap_or_else(|| ident("__eve_source")))
}

/// The journaled arguments: every parameter but the context, by the user's name when it is a
/// plain identifier (so the wrapper documents well), else by a fresh one.
fn arguments<'a>(model: &'a StepModel) -> Vec<(Ident, &'a Type)> {
    let values = model.func.params.iter().filter(|param| param.is_supplied()).enumerate();
    let name =
        |index: usize, param: &Param| param.ident().cloned().unwrap_or_else(|| ident(&format!("__eve_arg{index}")));
    values.map(|(index, param)| (name(index, param), param.ty())).collect()
}

/// The user's fn, renamed `__eve_body`, with its signature and body as written.
fn body_fn(item: &ItemFn) -> TokenStream {
    let mut sig = item.sig.clone();
    sig.ident = ident("__eve_body");
    let body = &item.body;
    quote!(#sig #body)
}

/// `StepDef::new(id, name, policy)`.
fn step_def(model: &StepModel, private: &TokenStream) -> TokenStream {
    let fn_name = LitStr::new(&model.func.name(), Span::call_site());
    let step_name = model.step_name();
    let policy = match model.policy() {
        None => quote!(#private::RetryPolicy::DEFAULT),
        Some(policy) => {
            let max_attempts = Literal::u32_unsuffixed(policy.max_attempts);
            let backoff = match policy.backoff {
                Backoff::Exponential { initial_millis } => {
                    let millis = Literal::u64_unsuffixed(initial_millis);
                    quote!(#private::Backoff::exponential_millis(#millis))
                }
                Backoff::Fixed { millis } => {
                    let millis = Literal::u64_unsuffixed(millis);
                    quote!(#private::Backoff::fixed_millis(#millis))
                }
            };
            quote!(#private::RetryPolicy { max_attempts: #max_attempts, backoff: #backoff })
        }
    };
    quote! {
        #private::StepDef::new(
            ::core::concat!(::core::module_path!(), "::", #fn_name),
            #step_name,
            #policy,
        )
    }
}

/// Trait checks spanned on the user's types, so "`Foo` cannot be a `#[step]` argument" points at
/// `Foo`. An inline `const` block is checked with the wrapper's body and before the
/// `StepCall::new` call below, so these messages come first.
fn assertions(model: &StepModel, private: &TokenStream, arguments: &[&Type]) -> TokenStream {
    let output = &model.func.output;
    let arguments = arguments.iter().map(|ty| quote_spanned!(ty.span()=> #private::assert_step_arg::<#ty>();));
    let ok = output.ok.map(|ty| quote_spanned!(ty.span()=> #private::assert_step_output::<#ty>();));
    let err = output.err.map(|ty| quote_spanned!(ty.span()=> #private::assert_step_error::<#ty>();));
    quote! {
        const {
            #(#arguments)*
            #ok
            #err
        }
    }
}

/// `StepCall::new(&__EVE_STEP, args, attempt)`: the closure runs one attempt of the body. The
/// arguments are named at the parameter list, so rustc's own errors about them point there
/// rather than at the attribute.
fn call(private: &TokenStream, step: &Ident, with_context: bool, names: &[&Ident], params: Span) -> TokenStream {
    let (body, context) = (ident("__eve_body"), ident("__eve_ctx"));
    let args = ident("__eve_args");
    let located = Ident::new("__eve_args", Span::mixed_site().located_at(params));
    let attempt = if with_context {
        quote!(move |(#(#names,)*), #context| async move { #body(&#context, #(#names),*).await })
    } else {
        quote!(|(#(#names,)*), _| #body(#(#names),*))
    };
    quote! {
        let #args = (#(#names,)*);
        #private::StepCall::new(&#step, #located, #attempt)
    }
}
