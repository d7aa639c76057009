//! The Model Context Protocol server: over stdio, driven by rmcp's client as a user's agent drives
//! it; over Streamable HTTP at `/mcp`, behind the run API's rules; against the official
//! conformance suite; runs as resources, read and watched (`resources.rs`); and requests for the
//! client's model and forms across killed servers (`sampling.rs`).

mod conformance;
mod http;
mod logging;
mod resources;
mod sampling;
mod stdio;
