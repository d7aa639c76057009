//! The compile-time rules of the eve-tools macros (ARCHITECTURE.md, "Compile-time rules"), one trybuild case per rule.
//!
//! `tests/fail/<rule>.rs` opens with a comment stating its rule, and its `.stderr` snapshot shows
//! the error, spanned on the offending token. `tests/pass/*.rs` compile and run: hygiene, lints,
//! `crate = "…"`, optional contexts, and what the manifest records. The toolchain is pinned
//! (rust-toolchain.toml), so the snapshots are stable; regenerate them with `TRYBUILD=overwrite`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/fail/*.rs");
    cases.pass("tests/pass/*.rs");
}
