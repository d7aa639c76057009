//! The Model Context Protocol server: over stdio, driven by rmcp's client as a user's agent drives
//! it; over Streamable HTTP at `/mcp`, behind the run API's rules; and against the official
//! conformance suite; and runs as resources, read and watched (`resources.rs`).

mod conformance;
mod http;
mod logging;
mod resources;
mod stdio;
