//! What a macro emits when the item breaks a rule: the user's item, unchanged, and the errors.
//!
//! Keeping the item means the rest of the crate still sees the fn (so callers do not fail with
//! "cannot find function"), IDEs keep completing it, and rustc reports the body's own errors too.

use proc_macro2::TokenStream;
use quote::quote;

use crate::item::ItemFn;

/// The item as written, and the errors. A fn missing `async` is emitted as an `async fn`: the
/// error already says to add it, and the `.await`s in its body would otherwise bring rustc's
/// own error (E0728, "`await` is only allowed inside `async` functions") on top of ours.
pub fn expand(item: &ItemFn, error: syn::Error) -> TokenStream {
    let errors = error.into_compile_error();
    let mut item = item.clone();
    if item.sig.asyncness.is_none() {
        item.sig.asyncness = Some(syn::Token![async](item.sig.fn_token.span));
    }
    quote! {
        #item
        #errors
    }
}

/// Tokens that are not a fn at all, passed through, and the error.
pub fn unparsed(tokens: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.into_compile_error();
    quote! {
        #tokens
        #errors
    }
}
