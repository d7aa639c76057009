//! Issue 10's long-session figure: resuming a 10,000-turn session after a restart costs at most
//! twice as much as resuming a 10-turn one.
//!
//! On `MemoryStore` (no fsync to hide CPU costs), a runtime with the warm cache off
//! (`warm_cache(0)`), so every message reaches a session that must be rebuilt from its journal,
//! as after a restart. Timed: `Session::send` and `Runtime::settle()` until the session is parked
//! again, which is the replay of the session's current history and one turn (one model step of a
//! scripted model that answers with text). Measured for sessions that have taken 10 turns (a
//! fresh one for every resume, built outside the timing) and for one that has taken 10,000
//! (each resume adds a turn to it). A session continues as new every 20 turns by default, so the
//! long one replays at most 20 turns and carries its state (the model's history, at most 100
//! messages) in its input.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use eve_benches::{current_thread, heading, micros, record, report, secret_key, size};
use eve_tools::prelude::*;
use eve_tools::session::{ModelResponse, ScriptedModel, Session, SessionOptions};
use eve_tools::store::MemoryStore;

fn runtime(store: Arc<MemoryStore>) -> Runtime {
    let model =
        ScriptedModel::new(|request| ModelResponse::text(format!("noted ({} messages)", request.messages.len())));
    let builder = Runtime::builder().shared_store(store).secret_key(secret_key()).model(model);
    builder.warm_cache(0).build().expect("a runtime builds inside Tokio")
}

/// A session that has taken `turns` turns.
async fn session_of(runtime: &Runtime, turns: u64) -> Session {
    let session = runtime.session(SessionOptions::new().system("Take notes.")).await.expect("a session starts");
    for turn in 0..turns {
        session.send(format!("note {turn}")).await.expect("the session takes it");
        runtime.settle().await;
    }
    session
}

async fn resume(runtime: &Runtime, session: &Session) -> Duration {
    let start = Instant::now();
    session.send("one more").await.expect("the session takes it");
    runtime.settle().await;
    start.elapsed()
}

fn long_sessions(c: &mut Criterion) {
    let tokio = current_thread();
    let store = Arc::new(MemoryStore::new());
    let runtime = tokio.block_on(async { runtime(store) });
    let _guard = tokio.enter();
    let long_turns = size(10_000, 200);
    let long = tokio.block_on(session_of(&runtime, long_turns));
    let mut group = c.benchmark_group("long_sessions");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    group.bench_function("resume_10_turns", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let session = tokio.block_on(session_of(&runtime, 10));
                total += tokio.block_on(resume(&runtime, &session));
            }
            record("long_sessions/resume_10_turns", iters, total)
        })
    });
    group.bench_function("resume_10000_turns", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += tokio.block_on(resume(&runtime, &long));
            }
            record("long_sessions/resume_10000_turns", iters, total)
        })
    });
    group.finish();
    let events = tokio.block_on(long.history(0)).expect("the feed reads");
    let journal = tokio.block_on(runtime.journal(long.id())).expect("the journal loads").entries.len();
    println!(
        "the long session: {long_turns} turns and more; its journal holds {journal} entries, its feed {} events",
        events.len()
    );
}

fn main() {
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    long_sessions(&mut criterion);
    criterion.final_summary();
    heading("issue 10: resuming a long session after a restart (MemoryStore, warm cache off)");
    let (short, long) = (micros("long_sessions/resume_10_turns"), micros("long_sessions/resume_10000_turns"));
    report("resume a 10-turn session: replay + one turn", format!("{short:.0} µs"), "");
    report("resume a 10,000-turn session: replay + one turn", format!("{long:.0} µs"), "");
    report("  ratio 10,000 / 10", format!("{:.2}", long / short), "≤ 2");
}
