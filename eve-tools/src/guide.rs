//! The guide: how to write durable tools and run them, one topic a module.
//!
//! The README is the front page (what eve is, the two commands, a first tool crate); this is
//! the rest. Every Rust snippet here is a doctest: `cargo test -p eve-tools --doc` compiles each
//! against the public API (and runs those that need no disk, network or server), so the guide
//! cannot drift from the code. Snippets that need a cargo feature (`postgres`, `mcp`, `oauth2`,
//! `openai`, `otel`, `metrics`) compile when it is on.
//!
//! | module | what it covers |
//! |---|---|
//! | [`durability`] | what a tool gets: steps and retries, durable waits, cancellation, divergence, the compile-time rules, the manifest |
//! | [`long_runs`] | the history limit and `continue_as_new` |
//! | [`in_the_loop`] | questions to people (`ask`) and forms (`ask_form`), hooks and webhooks |
//! | [`progress`] | reporting progress from a workflow body |
//! | [`running_tools`] | the runtime, the host command line, `chat` and `inspect`, the stores |
//! | [`versions`] | changing a workflow with runs in flight: `export` and `replay`, patches, forks |
//! | [`postgres`] | the shared store and many workers |
//! | [`http`] | the HTTP server, its routes and the web inspector |
//! | [`sessions`] | agent sessions, tasks, subagents and models |
//! | [`mcp`] | serving the tools over the Model Context Protocol |
//! | [`sign_in`] | sign-in inside steps, with tokens kept out of the journal |
//! | [`traces`] | traces over OTLP: one trace per run across parks, restarts and workers; metrics beside them |
//! | [`operations`] | running in production: health probes, the drain on SIGTERM, metrics for Prometheus and over OTLP |

#[doc = include_str!("../guide/durability.md")]
pub mod durability {}

#[doc = include_str!("../guide/long_runs.md")]
pub mod long_runs {}

#[doc = include_str!("../guide/in_the_loop.md")]
pub mod in_the_loop {}

#[doc = include_str!("../guide/progress.md")]
pub mod progress {}

#[doc = include_str!("../guide/running_tools.md")]
pub mod running_tools {}

#[doc = include_str!("../guide/versions.md")]
pub mod versions {}

#[doc = include_str!("../guide/postgres.md")]
pub mod postgres {}

#[doc = include_str!("../guide/http.md")]
pub mod http {}

#[doc = include_str!("../guide/sessions.md")]
pub mod sessions {}

#[doc = include_str!("../guide/mcp.md")]
pub mod mcp {}

#[doc = include_str!("../guide/sign_in.md")]
pub mod sign_in {}

#[doc = include_str!("../guide/traces.md")]
pub mod traces {}
#[doc = include_str!("../guide/operations.md")]
pub mod operations {}
