//! placeholder
use proc_macro::TokenStream;
#[proc_macro_attribute]
pub fn step(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}
#[proc_macro_attribute]
pub fn task(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}
#[proc_macro_attribute]
pub fn tool(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}
#[proc_macro_attribute]
pub fn workflow_tool(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}
