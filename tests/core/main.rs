//! The core of durable execution, driven through the facade as a user drives it: replay and its
//! checks, steps, hooks, timers, asks, cancellation, concurrency, long runs, crashes of a real
//! process, the runtime's API and spans, and the examples' tools.

mod ask;
mod cancel;
mod concurrency;
mod crash;
mod duplicate_names;
mod examples;
mod executor;
mod fork;
mod held;
mod hooks;
mod inputs;
mod journal;
mod long_runs;
mod patches;
mod replay;
mod replay_check;
mod replay_properties;
mod runtime_api;
mod steps;
mod timers;
mod tracing;
