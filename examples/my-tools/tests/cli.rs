//! This crate is laid out as the README's "Your first tool crate" says, and works as it says:
//! its binary lists the library's tools and runs them.

use std::process::Command;

fn my_tools(args: &[&str]) -> (bool, String, String) {
    let dir = tempfile_dir();
    let output = Command::new(env!("CARGO_BIN_EXE_my-tools"))
        .args(args)
        .env("EVE_DATA_DIR", &dir)
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&dir);
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8 output");
    (output.status.success(), text(output.stdout), text(output.stderr))
}

/// A fresh data directory under the target directory (this crate has no dependency to make one).
fn tempfile_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    std::env::temp_dir().join(format!("my-tools-test-{}-{n}", std::process::id()))
}

#[test]
fn the_binary_lists_the_librarys_tools() {
    let (ok, stdout, stderr) = my_tools(&["manifest"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(r#""name": "checkout""#), "the library's tool is linked in: {stdout}");
    assert!(stdout.contains(r#""description": "Check out a cart: reserve the items, then charge the customer.""#));
}

#[test]
fn the_binary_calls_the_librarys_tools_and_checks_their_input() {
    let (ok, stdout, stderr) = my_tools(&["call", "checkout", r#"{"customer":"Ada","items":2}"#]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), r#""reserved 2 items; charged Ada 2500 cents""#);
    let (ok, _, stderr) = my_tools(&["call", "checkout", r#"{"customer":"Ada","items":0}"#]);
    assert!(!ok);
    assert!(stderr.starts_with("error: invalid input for tool `checkout`: field `items`"), "{stderr}");
}

/// The README shows this crate's files as they are.
#[test]
fn the_readme_shows_this_crate() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let section = readme.split("## Your first tool crate").nth(1).expect("the README has the section");
    let section = section.split("\n## ").next().unwrap();
    let blocks: Vec<&str> = section.split("```").skip(1).step_by(2).collect();
    let block = |lang: &str, first: &str| {
        let found = blocks.iter().find(|block| block.starts_with(lang) && block.contains(first));
        found
            .unwrap_or_else(|| panic!("a ```{lang} block with {first:?} in the section"))
            .trim_start_matches(lang)
            .trim()
    };
    for (file, lang, first) in [("src/lib.rs", "rust", "pub struct Cart"), ("src/main.rs", "rust", "async fn main")] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(block(lang, first), text.trim(), "the README's {file}");
    }
    // The manifest differs in one line: the README depends on the repository, this crate on its folder.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let local = manifest.replace(
        r#"eve-tools = { path = "../../eve-tools" }"#,
        r#"eve-tools = { git = "https://github.com/eve-rs/eve-rs" }"#,
    );
    assert_eq!(block("toml", "[package]"), local.trim(), "the README's Cargo.toml");
}
