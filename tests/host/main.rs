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
