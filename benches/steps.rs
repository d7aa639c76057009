//! Measure 1: what a step adds to a plain awaited call, on the in-memory store.
//!
//! - `plain_1000`: a plain async fn that awaits `add_one` 1,000 times.
//! - `workflow_1000`: a workflow tool whose body awaits 1,000 sequential steps, each of which
//!   awaits the same `add_one`; timed from `Runtime::start` until `RunHandle::outcome` returns, on
//!   a fresh runtime and `MemoryStore` per run (built and dropped outside the timing).
//! - `workflow_10`: the same with 10 steps, to separate the fixed cost of a run from the cost per
//!   step.
//!
//! Both Tokio flavours are measured: `multi_thread` (2 workers, as a server runs) and
//! `current_thread` (everything on one thread, no cross-thread wake-ups).
//!
//! On two threads the bench's own thread, blocked in `block_on` outside the runtime, starts each
//! run and waits for its outcome, so the run executes on another thread than the one that built
//! its runtime and store and will drop them. `multi_thread/workflow_1000_from_worker` times the
//! same runs started by a task on the runtime, as a server's request handler starts them: the
//! difference between the two is where the work happens, not what a step does (on a 2-vCPU
//! machine both threads pinned to one vCPU, `taskset -c 1`, read as one thread does).
//!
//! The floor (`steps_memory/current_thread/essential_1000`): the work a step cannot do without,
//! done 1,000 times with the crates the runtime uses and no runtime (see [`essential_steps`]).
//! What a step costs above it is the runtime's own machinery: the driver's loop, its
//! bookkeeping and the store's. It is a model, not eve's code, so it says how low a step path
//! could go, not where eve's goes.
//!
//! Metrics (issue 55): with `EVE_BENCH_METRICS=1` the bench installs the Prometheus recorder
//! that `serve` installs, so every step records its attempt and its duration, and every commit
//! its latency and size; without it no recorder is installed and each of those places reads one
//! flag. Alternating the two runs of one binary gives what the metrics add to a step. Built with
//! the `otel` feature, `EVE_BENCH_TRACES=1` installs the OTLP exporter the same way (every run's
//! and step's span exported, to an endpoint where nothing listens).
//!
//! Tracing (issue 8: the hot path pays nothing measurable when no subscriber listens):
//! `steps_memory/tracing/*` runs `workflow_1000` on the current-thread runtime three ways, one
//! after the other and after every other group (a subscriber, once set, changes how `tracing`'s
//! callsites are cached for the rest of the process): with no subscriber at all (`none`), under a
//! subscriber that listens at `WARN` (`warn_listener`: a subscriber is there, but the run and
//! step spans and the debug events are below its level), and under one that takes every span and
//! event at `TRACE` (`trace_listener`, the contrast: what the spans cost when someone listens).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use eve_benches::{current_thread, heading, micros, multi_thread, record, report, secret_key, size};
use eve_tools::RunOutcome;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use serde_json::json;

/// How many steps a run takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    n: u64,
}

/// The work of one step and of one plain call alike.
#[inline(never)]
async fn add_one(x: u64) -> u64 {
    x + 1
}

#[step]
async fn add_one_step(x: u64) -> Result<u64, StepError> {
    Ok(add_one(x).await)
}

/// Runs `n` trivial steps one after another and returns how many ran.
#[workflow_tool]
pub async fn sequential_steps(input: Steps) -> Result<u64, ToolError> {
    let mut x = 0;
    for _ in 0..input.n {
        x = add_one_step(x).await?;
    }
    Ok(x)
}

/// The baseline: the same inner fn, awaited `n` times without eve.
async fn plain(n: u64) -> u64 {
    let mut x = 0;
    for _ in 0..n {
        x = add_one(black_box(x)).await;
    }
    x
}

/// A step's attempt, boxed as the runtime boxes it: called once an attempt, returning its future.
type Attempt = Box<dyn FnMut(u32) -> futures::future::BoxFuture<'static, Result<serde_json::Value, String>> + Send>;

/// An op's slot in the model of a run's op table.
struct Slot {
    attempt: Option<Attempt>,
    outcome: Option<serde_json::Value>,
    _rest: [u64; 10],
}

/// A journal entry in the model, the size of eve's (128 bytes).
struct Entry {
    _op: u32,
    _attempt: u32,
    _input_hash: u64,
    _took_ms: Option<u64>,
    _outcome: serde_json::Value,
    _name: &'static str,
    _rest: [u64; 6],
}

/// The floor: `n` steps of `add_one` doing only what a durable step must, in the order eve does
/// it, with the crates eve uses. Each step encodes its argument as JSON, hashes it (xxh3) and
/// keeps a copy inline; boxes its attempt function; takes an op slot under the run's lock;
/// takes the attempt out again under the lock, times it with two clock reads, polls its boxed
/// future once (the attempt's handle on the run cloned and dropped, as its context does) and
/// encodes the output as a JSON value; journals a 128-byte entry (under the store's lock);
/// delivers the output to the slot under the lock; and takes and decodes it under the lock.
/// That is the five lock pairs and two `Arc` clones of eve's step, and none of its driver.
fn essential_steps(n: u64) -> u64 {
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    let run = Arc::new(Mutex::new(Vec::<Slot>::new()));
    let store = Mutex::new(Vec::<Entry>::new());
    let mut encoded = Vec::with_capacity(64);
    let mut x = 0u64;
    for op in 0..n as usize {
        let call = run.clone();
        encoded.clear();
        serde_json::to_writer(&mut encoded, &x).expect("a number encodes");
        let input_hash = xxhash_rust::xxh3::xxh3_64(&encoded);
        let kept: smallvec::SmallVec<[u8; 24]> = smallvec::SmallVec::from_slice(&encoded);
        let arg = x;
        let attempt: Attempt = Box::new(move |_number| {
            let _retries_decode = &kept;
            Box::pin(async move { serde_json::to_value(add_one(arg).await).map_err(|error| error.to_string()) })
        });
        call.lock().unwrap().push(Slot { attempt: Some(attempt), outcome: None, _rest: [0; 10] });
        drop(call.lock().unwrap()); // the first poll marks the call polled
        let mut attempt = run.lock().unwrap()[op].attempt.take().expect("taken once");
        let started = Instant::now();
        let context = run.clone();
        let mut future = attempt(1);
        let Poll::Ready(Ok(output)) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
            unreachable!("`add_one` is ready at once")
        };
        drop((context, future, attempt));
        let took_ms = started.elapsed().as_millis() as u64;
        store.lock().unwrap().push(Entry {
            _op: op as u32,
            _attempt: 1,
            _input_hash: input_hash,
            _took_ms: Some(took_ms),
            _outcome: output.clone(),
            _name: "add_one_step",
            _rest: [0; 6],
        });
        run.lock().unwrap()[op].outcome = Some(output);
        let taken = call.lock().unwrap()[op].outcome.take().expect("delivered");
        x = serde_json::from_value(taken).expect("a number decodes");
    }
    x
}

const FLAVOURS: [&str; 2] = ["multi_thread", "current_thread"];

fn step_overhead(c: &mut Criterion) {
    let n = size(1_000, 20);
    for flavour in FLAVOURS {
        let tokio = if flavour == "multi_thread" { multi_thread() } else { current_thread() };
        let mut group = c.benchmark_group(format!("steps_memory/{flavour}"));
        group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        let name = format!("steps_memory/{flavour}/plain_1000");
        group.bench_function("plain_1000", |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(plain(black_box(n)).await);
                    }
                    record(&name, iters, start.elapsed())
                })
            })
        });
        if flavour == "current_thread" {
            let name = format!("steps_memory/{flavour}/essential_1000");
            group.bench_function("essential_1000", |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        assert_eq!(essential_steps(black_box(n)), n);
                    }
                    record(&name, iters, start.elapsed())
                })
            });
        }
        for steps in [n, 10] {
            let id = if steps == 10 { "workflow_10".to_owned() } else { "workflow_1000".to_owned() };
            let name = format!("steps_memory/{flavour}/{id}");
            group.bench_function(id, |b| {
                b.iter_custom(|iters| tokio.block_on(async { record(&name, iters, workflow_runs(steps, iters).await) }))
            });
        }
        if flavour == "multi_thread" {
            // The same runs started by a task on the runtime, as a server's request handler starts
            // them, instead of by the thread blocked in `block_on` outside it.
            let name = format!("steps_memory/{flavour}/workflow_1000_from_worker");
            group.bench_function("workflow_1000_from_worker", |b| {
                b.iter_custom(|iters| {
                    let elapsed = tokio.block_on(tokio.spawn(workflow_runs(n, iters))).expect("the runs complete");
                    record(&name, iters, elapsed)
                })
            });
        }
        group.finish();
    }
}

/// Runs `iters` runs of `steps` steps, each on a fresh runtime and store, timing start to outcome.
async fn workflow_runs(steps: u64, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let runtime = Runtime::builder()
            .store(MemoryStore::new())
            .secret_key(secret_key())
            .build()
            .expect("a runtime builds inside Tokio");
        let start = Instant::now();
        let run = runtime.start("sequential_steps", json!({ "n": steps })).await.expect("the tool exists");
        let outcome = run.outcome().await.expect("the run is known");
        total += start.elapsed();
        assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    }
    total
}

/// A subscriber that takes what is at or above `max` and counts it (the spans' fields are handed
/// to it; it keeps none of them).
struct Listener {
    max: tracing::Level,
    spans: AtomicU64,
    events: AtomicU64,
}

impl Listener {
    fn new(max: tracing::Level) -> Arc<Self> {
        Arc::new(Listener { max, spans: AtomicU64::new(0), events: AtomicU64::new(0) })
    }
}

impl tracing::Subscriber for Listener {
    fn register_callsite(&self, metadata: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        if self.enabled(metadata) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::from_level(self.max))
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.spans.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, _: &tracing::Event<'_>) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// How many spans and events the trace listener took per step.
static TRACED: AtomicU64 = AtomicU64::new(0);

const LISTENERS: [&str; 3] = ["none", "warn_listener", "trace_listener"];

fn tracing_overhead(c: &mut Criterion) {
    let n = size(1_000, 20);
    let tokio = current_thread();
    let mut group = c.benchmark_group("steps_memory/tracing");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for listener in LISTENERS {
        let name = format!("steps_memory/tracing/{listener}");
        group.bench_function(listener, |b| {
            b.iter_custom(|iters| {
                let routine = || tokio.block_on(async { record(&name, iters, workflow_runs(n, iters).await) });
                match listener {
                    "none" => routine(),
                    level => {
                        let max = if level == "warn_listener" { tracing::Level::WARN } else { tracing::Level::TRACE };
                        let subscriber = Listener::new(max);
                        let elapsed = tracing::subscriber::with_default(subscriber.clone(), routine);
                        if level == "trace_listener" {
                            let taken =
                                subscriber.spans.load(Ordering::Relaxed) + subscriber.events.load(Ordering::Relaxed);
                            TRACED.store(taken / (iters * n).max(1), Ordering::Relaxed);
                        }
                        elapsed
                    }
                }
            })
        });
    }
    group.finish();
}

fn summary() {
    let n = size(1_000, 20) as f64;
    heading("measure 1: added cost per step, MemoryStore");
    for flavour in FLAVOURS {
        let plain = micros(&format!("steps_memory/{flavour}/plain_1000"));
        let workflow = micros(&format!("steps_memory/{flavour}/workflow_1000"));
        let small = micros(&format!("steps_memory/{flavour}/workflow_10"));
        println!("  [{flavour}]");
        report("plain awaited call", format!("{:.1} ns", plain * 1_000.0 / n), "anchor ≈ 20 ns");
        report("workflow of n steps, per step (start → outcome)", format!("{:.2} µs", workflow / n), "");
        report(
            "added cost per step (t_workflow − t_plain) / n",
            format!("{:.2} µs", (workflow - plain) / n),
            "≤ 0.5 µs",
        );
        report("ratio t_workflow / t_plain", format!("{:.0}×", workflow / plain), "");
        let marginal = (workflow - small) / (n - 10.0);
        report("marginal cost per step (t_1000 − t_10) / 990", format!("{marginal:.2} µs"), "");
        report("fixed cost of a run (t_10 − 10 × marginal)", format!("{:.1} µs", small - 10.0 * marginal), "");
        if flavour == "multi_thread" {
            let from_worker = micros(&format!("steps_memory/{flavour}/workflow_1000_from_worker"));
            report(
                "  the same, the runs started by a task on a worker",
                format!("{:.2} µs", (from_worker - plain) / n),
                "(see the doc)",
            );
        }
        if flavour == "current_thread" {
            let essential = micros(&format!("steps_memory/{flavour}/essential_1000"));
            report(
                "the floor: a step's own work, no runtime (see the doc)",
                format!("{:.2} µs", (essential - plain) / n),
                "",
            );
            report(
                "  the runtime's machinery per step (t_workflow − t_floor) / n",
                format!("{:.2} µs", (workflow - essential) / n),
                "",
            );
        }
    }
    heading("issue 8: tracing on the step path, current-thread runtime, workflow of n steps");
    let per_step = |listener: &str| micros(&format!("steps_memory/tracing/{listener}")) / n;
    let none = per_step("none");
    report("per step, no subscriber", format!("{none:.2} µs"), "");
    report("per step, a subscriber listening at WARN", format!("{:.2} µs", per_step("warn_listener")), "");
    report("  ratio WARN listener / none", format!("{:.2}", per_step("warn_listener") / none), "≈ 1");
    report("per step, a subscriber taking everything (TRACE)", format!("{:.2} µs", per_step("trace_listener")), "");
    report("  ratio TRACE listener / none", format!("{:.2}", per_step("trace_listener") / none), "(contrast)");
    report("  spans and events it took per step", TRACED.load(Ordering::Relaxed).to_string(), "");
}

fn main() {
    if std::env::var_os("EVE_BENCH_METRICS").is_some_and(|on| on == "1") {
        eve_tools::metrics::install().expect("the Prometheus recorder installs in a fresh process");
    }
    // Kept alive for the whole run: dropping it would stop the exporter.
    #[cfg(feature = "otel")]
    let _traces = std::env::var_os("EVE_BENCH_TRACES").is_some_and(|on| on == "1").then(|| {
        // Nothing listens on the discard port, so each batch fails at once: what is measured is
        // what a step pays in its own thread.
        let traces = eve_tools::otel::Traces::builder().endpoint("http://127.0.0.1:9").build();
        let traces = traces.expect("the exporter builds");
        traces.install().expect("the exporter's subscriber is the first");
        traces
    });
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    step_overhead(&mut criterion);
    // Last: a subscriber, once set, changes tracing's callsite cache for the rest of the process.
    tracing_overhead(&mut criterion);
    criterion.final_summary();
    summary();
}
