//! Metrics as an operator meets them: `/metrics` behind the run API's rules, the gauges of runs
//! after a restart, and a real Prometheus server (installed by `scripts/prometheus.sh`) scraping
//! a `serve` process while it runs a known workload, whose exposition `promtool` accepts.
//!
//! The recorder is the process's own, so these tests sit in a binary of their own; under
//! `cargo nextest` each has a process, and the numbers they check are exact.

mod endpoint;
mod prometheus;
