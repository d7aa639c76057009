//! The fn an attribute is on, as a shell: attributes, visibility and signature are parsed, and the
//! body stays the token stream the user wrote.
//!
//! Keeping the body opaque means a body that does not parse yet (mid-edit in an IDE) still expands,
//! and the user's tokens reach the compiler untouched, with their spans.

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Signature, Visibility};

use crate::args::Macro;

/// A free fn: `#[attrs] vis async fn name(params) -> Output { body }`.
#[derive(Clone)]
pub struct ItemFn {
    /// The attributes left on the fn (the macro's own attribute is already gone).
    pub attrs: Vec<Attribute>,
    /// `pub`, `pub(crate)` or nothing.
    pub vis: Visibility,
    /// Everything from `const`/`async`/`fn` to the return type and where clause.
    pub sig: Signature,
    /// The `{ … }` body, exactly as written.
    pub body: Group,
}

impl ItemFn {
    /// Parses the item `attr` is on. Anything but a fn with a body is an error that says so.
    pub fn parse(attr: Macro, tokens: TokenStream) -> syn::Result<Self> {
        syn::parse2(tokens.clone()).map_err(|error| match syn::parse2::<syn::Item>(tokens) {
            // The rule: the attribute goes on an `async fn` (see also `validate::is_async`).
            Ok(item) if !matches!(item, syn::Item::Fn(_)) => {
                let keyword = item_keyword(&item);
                let message = format!("`#[{}]` must be on an `async fn`, not on a `{keyword}`", attr.name());
                syn::Error::new_spanned(keyword, message)
            }
            _ => error,
        })
    }
}

/// The keyword that says what an item is (`struct`, `impl`, …), or the whole item if unknown.
fn item_keyword(item: &syn::Item) -> TokenStream {
    match item {
        syn::Item::Struct(item) => item.struct_token.to_token_stream(),
        syn::Item::Enum(item) => item.enum_token.to_token_stream(),
        syn::Item::Impl(item) => item.impl_token.to_token_stream(),
        syn::Item::Mod(item) => item.mod_token.to_token_stream(),
        syn::Item::Trait(item) => item.trait_token.to_token_stream(),
        syn::Item::Const(item) => item.const_token.to_token_stream(),
        syn::Item::Static(item) => item.static_token.to_token_stream(),
        syn::Item::Type(item) => item.type_token.to_token_stream(),
        other => other.to_token_stream(),
    }
}

impl Parse for ItemFn {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(body.span(), "expected a function body `{ … }`"));
        }
        Ok(ItemFn { attrs, vis, sig, body })
    }
}

impl ToTokens for ItemFn {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.append_all(&self.attrs);
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.body.to_tokens(tokens);
    }
}
