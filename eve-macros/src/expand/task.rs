//! `#[task]` and `#[task(serve)]` (task / workflow): the call returns a receipt at once and the
//! result arrives later. A plain task is entered like a workflow tool but with a `TaskCtx`; a
//! serve task is entered with its stream of calls, typed to the user's `Receive<T>`, and a
//! `ServeCtx`. Hand-simplified in `examples/task-expanded.rs`.

use proc_macro2::TokenStream;
use quote::quote;

use super::descriptor::{self, Entry};
use super::ident;
use crate::model::{Cell, ToolModel, alias};

/// The fn and its registration as `EntryPoint::Task` or `EntryPoint::Serve`.
pub fn expand(model: &ToolModel) -> TokenStream {
    if model.cell == Cell::Serve {
        let function = serve_entry(model);
        return descriptor::expand(model, Entry { variant: "Serve", shape: "TASK", function });
    }
    let function = descriptor::value_entry(model, "TaskCtx");
    descriptor::expand(model, Entry { variant: "Task", shape: "TASK", function })
}

/// `fn __eve_entry(receive: Receive, ctx: ServeCtx) -> BodyFuture`: the runtime's untyped stream
/// becomes the `Receive<T>` the body declared.
fn serve_entry(model: &ToolModel) -> TokenStream {
    let private = alias();
    let name = &model.func.item.sig.ident;
    let input = descriptor::input_type(model, &private);
    let (entry, receive) = (ident("__eve_entry"), ident("__eve_receive"));
    let (context_param, context_arg) = descriptor::context_parts(model);
    let encode = descriptor::with_progress(model, &private, |progress| {
        descriptor::encode_output(
            model,
            &private,
            quote!(#name(#receive.typed::<#input>() #context_arg #progress).await),
        )
    });
    quote! {
        fn #entry(#receive: #private::Receive, #context_param: #private::ServeCtx) -> #private::BodyFuture {
            ::std::boxed::Box::pin(async move {
                #encode
            })
        }
    }
}
