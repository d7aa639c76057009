//! Traces over OTLP, received by a collector in the test process (`eve_tests::otlp`): a run is one
//! trace across parking and a restart of its runtime; a child run (a step's, a session's tool
//! call) joins its parent's trace; a request's `traceparent` becomes the parent of the run it
//! starts; and `host serve` exports when the endpoint variable is set. The same across worker
//! processes on Postgres is in the `postgres` binary (`traces.rs`). Metrics go to the same
//! collector with the same series `/metrics` renders, and `host call` exports them as it exits.

mod host;
mod metrics;
mod requests;
mod runs;
