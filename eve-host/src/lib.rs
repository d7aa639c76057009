//! The host of eve-tools: what a user's binary serves its tools with. The command line
//! ([`cli::Host`]: `manifest`, `call`, `runs`, `inspect`, `serve`, `worker`, `chat`, `mcp`, …), the
//! HTTP API with the web inspector ([`http`], feature `http`), and the Model Context Protocol
//! server ([`mcp`], feature `mcp`), all over the public API of the runtime and its sessions.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cli;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
pub mod timeline;

/// What the `mcp` command and `/mcp` say in a binary built without the `mcp` feature: a user who
/// reaches for MCP learns how to get it, rather than meeting an unknown command or an empty 404.
#[cfg(not(feature = "mcp"))]
pub(crate) const WITHOUT_MCP: &str = "this binary was built without MCP; enable the `mcp` feature of eve-tools \
                                      (eve-tools = { ..., features = [\"mcp\"] }) and build again";
