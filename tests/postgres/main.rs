//! Postgres: the store against the conformance suite and bad input, and many workers sharing its
//! runs, as runtimes in this process, as worker processes killed and paused, and under chaos; and
//! one trace for a run that moves between worker processes; pinned runs, and a rolling deploy of two
//! builds of one tool.
//!
//! The tests share the server in `EVE_TEST_DATABASE_URL`, or one throwaway cluster this process
//! starts (see `cluster.rs`); a test that restarts its server starts a cluster of its own.

mod chaos;
mod cluster;
mod follow;
mod pinning;
mod processes;
mod rolling_deploy;
mod store;
mod traces;
mod worker_processes;
mod workers;
