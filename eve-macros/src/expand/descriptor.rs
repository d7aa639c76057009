//! The registration every tool macro emits next to the untouched user fn:
//!
//! ```text
//! const _: () = {
//!     use eve_tools::__private as __eve;
//!     use __eve::{NoOutputSchema as _, OutputSchema as _};
//!     fn __eve_entry(__eve_input: __eve::Value, __eve_ctx: __eve::WorkflowCtx) -> __eve::BodyFuture { … }
//!     static __EVE_TOOL: __eve::ToolDescriptor = __eve::ToolDescriptor { name, description, workflow_id, shape, … };
//!     // `output_schema: || (&&OutputProbe::<Output>::new()).output_schema()` finds the output's
//!     // schema if it has one.
//!     __eve::register!(__EVE_TOOL);
//!     __eve::assert_tool_input::<Input>();
//!     __eve::assert_tool_return::<Result<Output, ToolError>>();
//! };
//! ```
//!
//! The anonymous `const` keeps every helper out of the user's namespace, and its statements are
//! checked first, so the assertions' messages lead the error list.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{LitStr, Type};

use super::ident;
use crate::model::{Cell, DocLine, ToolModel, alias};

/// How the runtime enters a cell's body: the `EntryPoint` variant, the `Shape` constant, and the
/// entry fn.
pub struct Entry {
    /// `Plain`, `Workflow`, `Task` or `Serve`.
    pub variant: &'static str,
    /// `TOOL`, `WORKFLOW_TOOL` or `TASK`.
    pub shape: &'static str,
    /// `fn __eve_entry(…) -> BodyFuture { … }`.
    pub function: TokenStream,
}

/// The user's fn and its registration.
pub fn expand(model: &ToolModel, entry: Entry) -> TokenStream {
    let (use_private, private) = (model.use_private(), alias());
    let item = model.func.item;
    let input = input_type(model, &private);
    let (name, description) = (model.tool_name(), description(model));
    let fn_name = LitStr::new(&model.func.name(), Span::call_site());
    let (variant, shape) =
        (syn::Ident::new(entry.variant, Span::call_site()), syn::Ident::new(entry.shape, Span::call_site()));
    let (function, tool, entry_fn) = (entry.function, ident("__EVE_TOOL"), ident("__eve_entry"));
    let assertions = assertions(model, &private, &input);
    // A closed schema is what makes the runtime refuse a field the input does not take.
    let input_schema = match model.allow_unknown_fields {
        Some(_) => quote!(#private::open_schema_for::<#input>),
        None => quote!(#private::schema_for::<#input>),
    };
    // Autoref specialization: `OutputSchema`'s method when the type has a schema, else
    // `NoOutputSchema`'s, which answers `None` (see `OutputProbe`).
    let (probe_traits, output_schema) = match model.func.output.ok {
        Some(ok) => (
            quote! {
                #[allow(unused_imports)]
                use #private::{NoOutputSchema as _, OutputSchema as _};
            },
            quote!(|| (&&#private::OutputProbe::<#ok>::new()).output_schema()),
        ),
        None => (TokenStream::new(), quote!(|| ::core::option::Option::None)),
    };
    let fingerprint = LitStr::new(&fingerprint(&item.body), Span::call_site());
    // The registration exists exactly when the fn does.
    let cfgs = item.attrs.iter().filter(|attr| attr.path().is_ident("cfg"));
    quote! {
        #item

        #(#cfgs)*
        const _: () = {
            #use_private
            #probe_traits
            #function

            static #tool: #private::ToolDescriptor = #private::ToolDescriptor {
                name: #name,
                description: #description,
                workflow_id: ::core::concat!(::core::module_path!(), "::", #fn_name),
                shape: #private::Shape::#shape,
                input_schema: #input_schema,
                validate_input: #private::validate_input::<#input>,
                output_schema: #output_schema,
                entry: #private::EntryPoint::#variant(#entry_fn),
                fingerprint: #fingerprint,
                version: #private::version(::core::option_env!("EVE_BUILD_VERSION"), ::core::env!("CARGO_PKG_VERSION")),
            };
            #private::register!(#tool);
            #assertions
        };
    }
}

/// The fingerprint of a body: FNV-1a over its tokens as text, which spaces tokens the same
/// however the source was formatted and holds no comments, in 16 hex digits. Stable across
/// compilers, unlike `std`'s hasher.
fn fingerprint(body: &proc_macro2::Group) -> String {
    let text = quote!(#body).to_string();
    let hash = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{hash:016x}")
}

/// The entry of `#[tool]`, `#[workflow_tool]` and `#[task]`: decode the JSON input, call the body
/// with the context (by reference, if it takes one), encode what it returns.
///
/// The input is decoded before the body's future is made, and `body` encodes its output as it
/// ends, so a body that borrows nothing of the entry needs no `async` block around its own
/// future: a second state machine for every tool of a crate, paid for at every build.
pub fn value_entry(model: &ToolModel, context: &str) -> TokenStream {
    let private = alias();
    let name = &model.func.item.sig.ident;
    let input_ty = model.input_type().expect("validated: a tool has an input");
    let context_ty = syn::Ident::new(context, Span::call_site());
    let (entry, input, error) = (ident("__eve_entry"), ident("__eve_input"), ident("__eve_error"));
    let (context_param, context_arg) = context_parts(model);
    // Named at the return type: if it cannot be a tool's output, rustc's error points there
    // (after the assertions' clearer messages) rather than at the attribute.
    let span = model.func.output.ty.map_or_else(Span::call_site, Spanned::span);
    if model.context().is_none() && model.progress().is_none() {
        let located = syn::Ident::new(&name.to_string(), Span::call_site().located_at(span));
        return quote! {
            fn #entry(#input: #private::Value, _: #private::#context_ty) -> #private::BodyFuture {
                #private::entry(#input, #located)
            }
        };
    }
    // A body that borrows the context, or reports progress, is called inside an `async` block
    // that owns what it borrows; progress is driven, and the output encoded, inside it.
    let future = match model.progress() {
        None => {
            let (output, located) =
                (ident("__eve_output"), syn::Ident::new("__eve_output", Span::mixed_site().located_at(span)));
            quote!({
                let #output = async move { #name(#input #context_arg).await };
                #private::body(#located)
            })
        }
        Some(_) => {
            let encode = with_progress(model, &private, |progress| {
                encode_output(model, &private, quote!(#name(#input #context_arg #progress).await))
            });
            quote!(::std::boxed::Box::pin(async move { #encode }))
        }
    };
    quote! {
        fn #entry(#input: #private::Value, #context_param: #private::#context_ty) -> #private::BodyFuture {
            match #private::decode_input::<#input_ty>(#input) {
                ::core::result::Result::Ok(#input) => #future,
                ::core::result::Result::Err(#error) => #private::refused(#error),
            }
        }
    }
}

/// `body(progress argument)`, run as a generator when the fn takes `progress: Progress`:
///
/// ```text
/// let __eve_sink = ProgressSink::publish(&__eve_ctx);   // `discard()` for a task
/// drive_progress(__eve_sink, move |__eve_progress| async move { …body(…, __eve_progress)… }).await
/// ```
///
/// The closure moves the input and the context in (the sink keeps its own clone of the
/// context), so the body's future owns what it borrows and stays `Send` and `'static`.
pub fn with_progress(
    model: &ToolModel,
    private: &TokenStream,
    body: impl FnOnce(TokenStream) -> TokenStream,
) -> TokenStream {
    if model.progress().is_none() {
        return body(TokenStream::new());
    }
    let (sink, progress, context) = (ident("__eve_sink"), ident("__eve_progress"), ident("__eve_ctx"));
    let new_sink = match model.cell {
        Cell::WorkflowTool => quote!(#private::ProgressSink::publish(&#context)),
        _ => quote!(#private::ProgressSink::discard()),
    };
    let body = body(quote!(, #progress));
    quote! {
        let #sink = #new_sink;
        #private::drive_progress(#sink, move |#progress| async move { #body }).await
    }
}

/// `encode_output(call)`, with the call's value named at the return type: if it cannot be the
/// tool's output, rustc's error points at that type (after the assertions' clearer messages)
/// rather than at the attribute.
pub fn encode_output(model: &ToolModel, private: &TokenStream, call: TokenStream) -> TokenStream {
    let span = model.func.output.ty.map_or_else(Span::call_site, Spanned::span);
    let output = ident("__eve_output");
    let located = syn::Ident::new("__eve_output", Span::mixed_site().located_at(span));
    quote! {
        let #output = #call;
        #private::encode_output(#located)
    }
}

/// The entry's context parameter and the argument passing it on: `__eve_ctx` and `, &__eve_ctx`
/// when the body takes a context, else `_` (or `__eve_ctx`, for the progress sink) and nothing.
pub fn context_parts(model: &ToolModel) -> (TokenStream, TokenStream) {
    let context = ident("__eve_ctx");
    match (model.context(), model.progress()) {
        (Some(_), _) => (quote!(#context), quote!(, &#context)),
        // A workflow tool's progress is published through its context.
        (None, Some(_)) => (quote!(#context), TokenStream::new()),
        (None, None) => (quote!(_), TokenStream::new()),
    }
}

/// The type the model fills in; a serve task's bare `Receive` takes any JSON value.
pub fn input_type(model: &ToolModel, private: &TokenStream) -> TokenStream {
    match model.input_type() {
        Some(ty) => quote!(#ty),
        None => quote!(#private::Value),
    }
}

/// The doc comment as one string: lines joined with newlines, or a `concat!` when some doc
/// attribute is computed (`#[doc = include_str!("…")]`).
fn description(model: &ToolModel) -> TokenStream {
    if model.description.iter().all(|line| matches!(line, DocLine::Text(_))) {
        let lines: Vec<&str> = model
            .description
            .iter()
            .map(|line| match line {
                DocLine::Text(text) => text.as_str(),
                DocLine::Expr(_) => unreachable!("every line is text"),
            })
            .collect();
        let text = LitStr::new(&lines.join("\n"), Span::call_site());
        return quote!(#text);
    }
    let parts = model.description.iter().map(|line| match line {
        DocLine::Text(text) => quote!(#text),
        DocLine::Expr(expr) => quote!(#expr),
    });
    quote!(::core::concat!(#(#parts),* ))
}

/// Trait checks spanned on the user's types, so "`Foo` cannot be an eve tool input" points at `Foo`.
fn assertions(model: &ToolModel, private: &TokenStream, input: &TokenStream) -> TokenStream {
    let output = &model.func.output;
    let input_span = model.input_type().map_or_else(Span::call_site, Spanned::span);
    let input = quote_spanned!(input_span=> #private::assert_tool_input::<#input>(););
    let ok = output.ok.map(|ty| quote_spanned!(ty.span()=> #private::assert_tool_output::<#ty>();));
    let whole = output.ty.map(|ty: &Type| quote_spanned!(ty.span()=> #private::assert_tool_return::<#ty>();));
    quote! {
        #input
        #ok
        #whole
    }
}
