//! The examples' tools (the library `eve_examples`, which `cargo run --example` runs), each driven
//! as its example drives it, against the examples' fakes on loopback; and a corpus of their
//! recorded journals, replayed on this build.

mod approve_with_deadline;
mod deploy;
mod devbox;
mod journals;
mod refund_order;
mod remind;
mod render_video;
mod support;
