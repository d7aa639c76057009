//! Sign-in inside steps, end to end against a fake OAuth server: tokens asked for in steps, runs
//! parked on their sign-in, callbacks, refreshes and restarts; and secrets that never reach the
//! journal, logs, traces, errors or output.
//!
//! `secrets` installs the process's `tracing` subscriber, so no other test of this binary may
//! install one (under `cargo test` they share the process).

mod secrets;
mod sign_in;
