//! Runnable examples of eve-tools: run one with `cargo run --example <name>`.
//!
//! - `tour`: a durable tool that parks on a timer, survives the process exiting, and finishes
//!   when the same command runs again.
//! - `deploy`: plan, ask a person to approve, deploy only if they did.
//! - `approve_with_deadline`: one question, a page after 4 hours, giving up after 24.
//! - `refund_order`: a background task that asks now and refunds when answered, across a restart.
//! - `remind`: a background task that sleeps durably and returns the reminder.
//! - `render_video`: wait for a render farm to call a webhook back.
//! - `devbox`: see a Devbox coding task through, from its webhook, with questions and cancellation.
//! - `*-expanded`: what each macro expands to, simplified for reading.
//!
//! The tools themselves live in this library, one module per scenario, so the tests in `tests/`
//! exercise exactly what the examples run. The external systems they talk to are fakes on
//! loopback ([`fakes`]), shared by the examples and the tests.

#[path = "scenarios/approve_with_deadline.rs"]
pub mod approve_with_deadline;
#[path = "scenarios/deploy.rs"]
pub mod deploy;
#[cfg(feature = "devbox")]
#[path = "scenarios/devbox.rs"]
pub mod devbox;
#[path = "fakes/mod.rs"]
pub mod fakes;
#[path = "scenarios/refund_order.rs"]
pub mod refund_order;
#[path = "scenarios/remind.rs"]
pub mod remind;
#[path = "scenarios/render_video.rs"]
pub mod render_video;
