//! The compile-time rules of the eve-tools macros (`eve_tools::guide::durability`), one trybuild case
//! per rule.
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

/// The README and the guide say how many rules there are: the count follows the cases.
#[test]
fn the_readme_counts_every_rule() {
    let cases = std::fs::read_dir("tests/fail").expect("the fail cases are listed");
    let rules =
        cases.filter(|case| case.as_ref().is_ok_and(|case| case.path().extension().is_some_and(|ext| ext == "rs")));
    let rules = rules.count();
    let readme = std::fs::read_to_string("../README.md").expect("the README reads");
    let said = format!("**{rules} compile-time rules**");
    assert!(readme.contains(&said), "the README should say `{said}`, as tests/fail holds {rules} cases");
    let guide = std::fs::read_to_string("../eve-tools/guide/durability.md").expect("the guide reads");
    let said = format!("**Compile-time rules**: {rules} rules");
    assert!(guide.contains(&said), "the guide's durability should say `{said}`, as tests/fail holds {rules} cases");
}
