//! Runnable examples of eve-tools: run one with `cargo run --example <name>`.
//!
//! - `tour`: a durable tool that parks on a timer, survives the process exiting, and finishes
//!   when the same command runs again.
//! - `*-expanded`: what each macro expands to, simplified for reading.
