//! What a binary says when asked for something a cargo feature it was built without provides: a
//! user who reaches for it learns how to get it, rather than meeting an unknown command or an
//! empty 404. The command line and the HTTP server both say it, so it lives below both.

/// What the `mcp` command and `/mcp` say in a binary built without the `mcp` feature.
#[cfg(not(feature = "mcp"))]
pub(crate) const MCP: &str = "this binary was built without MCP; enable the `mcp` feature of eve-tools \
                              (eve-tools = { ..., features = [\"mcp\"] }) and build again";

/// What `/metrics` says in a binary built without the `metrics` feature.
#[cfg(all(feature = "http", not(feature = "metrics")))]
pub(crate) const METRICS: &str = "this binary was built without metrics; enable the `metrics` feature of eve-tools \
                                  (eve-tools = { ..., features = [\"metrics\"] }) and build again";
