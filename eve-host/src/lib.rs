//! The host of eve-tools: what a user's binary serves its tools with. The command line
//! ([`cli::Host`]: `manifest`, `call`, `runs`, `inspect`, `serve`, `worker`, `chat`, `mcp`, …), the
//! HTTP API with the web inspector ([`http`], feature `http`), the Model Context Protocol server
//! ([`mcp`], feature `mcp`), the Prometheus recorder behind `/metrics` ([`metrics`], feature
//! `metrics`) and traces and metrics over OTLP ([`otel`], feature `otel`), all over the public API of the
//! runtime and its sessions.

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "metrics", feature = "otel"))]
mod buckets;
pub mod cli;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
pub mod timeline;
mod without;
