//! The host's surfaces, driven as people and outside systems drive them: the CLI, the HTTP server
//! (webhooks, hooks, answers, sign-in callbacks, the run API and its event stream, forks) and its
//! defences, and the inspector's API and page.
//!
//! `http_security` installs the process's `tracing` subscriber, so no other test of this binary may
//! install one (under `cargo test` they share the process).

mod cli;
mod forks;
mod held;
mod http;
mod http_security;
mod inspector;
mod run_api;

/// Runs the `host` binary with `args` over the data directory `dir`: whether it succeeded, its
/// stdout and its stderr.
fn host(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(args)
        .env("EVE_DATA_DIR", dir)
        .output()
        .expect("the host binary runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8 output");
    (output.status.success(), text(output.stdout), text(output.stderr))
}
