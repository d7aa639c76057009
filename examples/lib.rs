//! Runnable examples of eve-tools: run one with `cargo run --example <name>`.
//!
//! - `tour`: a durable tool that parks on a timer, survives the process exiting, and finishes
//!   when the same command runs again.
//! - `approve_with_deadline`: one question, a page after 4 hours, giving up after 24.
//! - `*-expanded`: what each macro expands to, simplified for reading.
//!
//! The tools themselves live in this library, one module per scenario, so the tests in `tests/`
//! exercise exactly what the examples run.

#[path = "scenarios/approve_with_deadline.rs"]
pub mod approve_with_deadline;
