//! Issue 11's figures: eve's workers on Postgres against what the server can commit, in one run.
//!
//! The server is the one `EVE_TEST_DATABASE_URL` names, or a throwaway cluster that
//! `scripts/postgres.sh` starts for this process (`fsync=on`, `synchronous_commit=on`), with a schema
//! of its own, dropped at the end. Two worker runtimes (`a` and `b`), each with a connection pool of
//! its own as a worker process has, share it for the whole run.
//!
//! - `postgres/raw/insert_per_txn_{before,after}`: tokio-postgres, one `INSERT` of a
//!   journal-entry-sized row per transaction: the server's commit rate. Measured before and after
//!   the worker benches, since a shared disk drifts.
//! - `postgres/workers/sequential_1000`: one run of 1,000 sequential trivial steps on worker `a`,
//!   from `Runtime::start` until `RunHandle::outcome` returns.
//! - `postgres/workers/concurrent_200x10_on_2`: 200 runs of 10 steps each, started at once, half on
//!   each worker; from the first start until the last outcome.
//!
//! - `postgres/store/append_sequential`: `PostgresStore::append` of one journal entry to one run,
//!   each waiting for its commit (no runtime): what the store adds to a raw commit.
//!
//! Each worker iteration, and each block of appends, first times 100 raw commits (`…/paired_raw`),
//! so each ratio can also be taken against the server as it was at that moment.
//!
//! Measured once, outside criterion: the wake-up latency of a hook payload given to worker `b` for a
//! run that worker `a` started and that parked (giving its claim back): from the call to
//! `resume_hook` on `b` until a worker (whichever claimed the run on hearing the store's `NOTIFY`)
//! publishes `RunEvent::HookReceived`. The delivery's own commit is part of it.

#[path = "../tests/postgres/cluster.rs"]
#[allow(dead_code, reason = "the bench uses part of the tests' helper")]
mod cluster;

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use eve_benches::{heading, heading_once, micros, multi_thread, record, report, secret_key, size};
use eve_tools::prelude::*;
use eve_tools::{Phase, RunEvent, RunOutcome};
use serde_json::json;

use self::cluster::Schema;

/// How many steps a run takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    n: u64,
}

#[step]
async fn add_one_step(x: u64) -> Result<u64, StepError> {
    Ok(x + 1)
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

/// Nothing.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Nothing {}

#[step]
async fn note(payload: u64) -> Result<u64, StepError> {
    Ok(payload)
}

/// Waits on its hook (`echo-<run id>`); records each payload with a step and waits again, until a
/// payload is 0.
#[workflow_tool]
pub async fn echo(_input: Nothing, ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<u64>(format!("echo-{}", ctx.run_id()));
    let mut total = 0;
    loop {
        match hook.recv().await? {
            0 => return Ok(total),
            payload => total += note(payload).await?,
        }
    }
}

/// A row about as long as the journal entry of one of these steps.
const ROW: &str = r#"{"step_completed":{"op":417,"name":"add_one_step","input_hash":"9c1185a5c5e9fc54","attempt":1,"outcome":{"ok":{"value":418}}}}"#;

/// How many raw commits run just before each worker iteration.
const RAW_BURST: u64 = 100;

/// The server, the schema and the two workers every bench of this binary uses.
struct Setup {
    schema: Schema,
    admin: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    a: Runtime,
    b: Runtime,
}

impl Setup {
    async fn new() -> Setup {
        let schema = Schema::alone().await;
        let (a, b) = (worker(&schema, "a").await, worker(&schema, "b").await);
        let admin = schema.admin().await;
        admin
            .batch_execute("CREATE TABLE raw_commits (id bigserial PRIMARY KEY, entry text NOT NULL)")
            .await
            .expect("the raw table is created");
        let insert = admin.prepare("INSERT INTO raw_commits (entry) VALUES ($1)").await.expect("prepares");
        Setup { schema, admin, insert, a, b }
    }

    /// Times `count` raw single-insert transactions.
    async fn raw(&self, count: u64) -> Duration {
        let start = Instant::now();
        for _ in 0..count {
            self.admin.execute(&self.insert, &[&ROW]).await.expect("inserts");
        }
        start.elapsed()
    }
}

/// A worker on the bench's schema, with the default lease, heartbeat and poll interval.
async fn worker(schema: &Schema, name: &str) -> Runtime {
    let runtime = Runtime::builder()
        .postgres_with(schema.store_url(), schema.options())
        .worker_id(name)
        .secret_key(secret_key())
        .build()
        .expect("a worker builds inside Tokio");
    runtime.recover().await.expect("the worker starts");
    runtime
}

fn raw_single(c: &mut Criterion, tokio: &tokio::runtime::Runtime, setup: &Setup, id: &str) {
    let mut group = c.benchmark_group("postgres/raw");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1));
    let name = format!("postgres/raw/{id}");
    group.bench_function(id, |b| b.iter_custom(|iters| record(&name, iters, tokio.block_on(setup.raw(iters)))));
    group.finish();
}

/// Sequential appends straight to the store, in blocks of [`RAW_BURST`], each block after as many
/// raw commits. (A test used to hold this figure to a ratio; a timed test fails on a busy machine,
/// so it is a bench.)
fn store_appends(c: &mut Criterion, tokio: &tokio::runtime::Runtime, setup: &Setup) {
    use eve_tools::journal::{Op, RecordKind};
    use eve_tools::store::{Append, Created, NewRun, PostgresOptions, PostgresStore, Store, WorkerId};

    // A schema of its own: the workers on the bench's schema would take a run nobody works on.
    let schema = format!("{}_appends", setup.schema.options().schema);
    let options = PostgresOptions { schema: schema.clone(), ..setup.schema.options() };
    let store = tokio.block_on(PostgresStore::connect_with(&setup.schema.store_url(), options));
    let store = store.expect("a store in a fresh schema opens");
    let run = NewRun {
        id: "appends".parse().expect("a valid run id"),
        workflow_id: "bench::appends".into(),
        tool: "appends".into(),
        input: json!({}),
        created_at: eve_tools::Timestamp::from_millis(1_000),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    };
    let created = tokio.block_on(store.create_run(run.clone(), &WorkerId("bench".into())));
    let Ok(Created::New(fence)) = created else { panic!("the run is created: {created:?}") };
    let mut next_seq = 1_u64;
    let name = "postgres/store/append_sequential";
    let mut group = c.benchmark_group("postgres/store");
    group.sample_size(20).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3)).throughput(Throughput::Elements(1));
    group.bench_function("append_sequential", |b| {
        b.iter_custom(|iters| {
            let (mut total, mut raw) = (Duration::ZERO, Duration::ZERO);
            let mut left = iters;
            while left > 0 {
                let block = left.min(RAW_BURST);
                raw += tokio.block_on(setup.raw(RAW_BURST));
                let start = Instant::now();
                tokio.block_on(async {
                    for _ in 0..block {
                        let op = Op(u32::try_from(next_seq).expect("fewer than 4 billion appends"));
                        let entries =
                            vec![eve_tools::Entry::Recorded { op, kind: RecordKind::Random, value: json!(1).into() }];
                        let mut append = Append { first_seq: next_seq, entries, ..Append::default() };
                        store.append(&run.id, fence, &mut append).await.expect("the append commits");
                        next_seq += 1;
                    }
                });
                total += start.elapsed();
                left -= block;
            }
            record(&format!("{name}/paired_raw"), iters.div_ceil(RAW_BURST) * RAW_BURST, raw);
            record(name, iters, total)
        })
    });
    group.finish();
    drop(store);
    let drop_schema = format!("DROP SCHEMA {schema} CASCADE");
    tokio.block_on(setup.admin.batch_execute(&drop_schema)).expect("the schema is dropped");
}

fn worker_benches(c: &mut Criterion, tokio: &tokio::runtime::Runtime, setup: &Setup) {
    let (sequential, runs, steps) = (size(1_000, 20), size(200, 4), 10);
    let mut group = c.benchmark_group("postgres/workers");
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (id, runs, steps, workers) in
        [("sequential_1000", 1, sequential, 1), ("concurrent_200x10_on_2", runs, steps, 2)]
    {
        let name = format!("postgres/workers/{id}");
        group.throughput(Throughput::Elements(runs * steps));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let (mut total, mut raw) = (Duration::ZERO, Duration::ZERO);
                for _ in 0..iters {
                    raw += tokio.block_on(setup.raw(RAW_BURST));
                    total += tokio.block_on(timed_runs(&[&setup.a, &setup.b][..workers], runs, steps));
                }
                record(&format!("{name}/paired_raw"), iters * RAW_BURST, raw);
                record(&name, iters, total)
            })
        });
    }
    group.finish();
}

/// Starts `runs` runs of `steps` steps at once, spread over `workers`, and times until every one
/// has its outcome.
async fn timed_runs(workers: &[&Runtime], runs: u64, steps: u64) -> Duration {
    let start = Instant::now();
    let input = json!({ "n": steps });
    let starts =
        (0..runs).map(|index| workers[index as usize % workers.len()].start("sequential_steps", input.clone()));
    let handles = futures::future::try_join_all(starts).await.expect("the tool exists");
    let outcomes = futures::future::try_join_all(handles.iter().map(|run| run.outcome())).await;
    let elapsed = start.elapsed();
    for outcome in outcomes.expect("every run is known") {
        assert_eq!(outcome, RunOutcome::Completed(json!(steps)));
    }
    elapsed
}

/// The delays of `count` hook payloads given to worker `b` for a run that worker `a` started and
/// that parked between payloads, sorted.
async fn wake_ups(setup: &Setup, count: u64) -> Vec<Duration> {
    let run = setup.a.start("echo", json!({})).await.expect("the tool exists");
    let token = format!("echo-{}", run.id());
    let mut delays = Vec::new();
    for payload in 1..=count {
        assert_eq!(run.parked().await.expect("the run is known"), Phase::Parked, "the run parks on its hook");
        let (mut on_a, mut on_b) = (setup.a.events(), setup.b.events());
        let sent = Instant::now();
        setup.b.resume_hook(&token, json!(payload)).await.expect("b takes the payload");
        loop {
            let event = tokio::select! {
                event = on_a.recv() => event,
                event = on_b.recv() => event,
            };
            if let Ok(RunEvent::HookReceived { run: received, .. }) = event
                && &received == run.id()
            {
                break;
            }
        }
        delays.push(sent.elapsed());
        // Let the step after the payload be journaled and the run park before the next one.
        wait_parked(setup, run.id()).await;
    }
    setup.b.resume_hook(&token, json!(0)).await.expect("b takes the last payload");
    assert_eq!(run.outcome().await.expect("the run is known"), RunOutcome::Completed(json!(count * (count + 1) / 2)));
    delays.sort();
    delays
}

/// Waits until the run's journal says it is parked.
async fn wait_parked(setup: &Setup, run: &eve_tools::RunId) {
    loop {
        let summary = setup.a.journal(run).await.expect("the run is known").summary;
        if summary.parked {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn summary(wake: &[Duration]) {
    let rate = |name: &str, per_iteration: f64| per_iteration * 1e6 / micros(name);
    let before = rate("postgres/raw/insert_per_txn_before", 1.0);
    let after = rate("postgres/raw/insert_per_txn_after", 1.0);
    heading("issue 11: workers on Postgres against the server's commit rate, same server, same run");
    report("raw single-insert txn/s (before / after the workers)", format!("{before:.0} / {after:.0}"), "");
    let cases = [
        ("sequential_1000", "1 run × 1,000 sequential steps on 1 worker", size(1_000, 20), "≥ 0.5"),
        ("concurrent_200x10_on_2", "200 runs × 10 steps on 2 workers", size(200, 4) * 10, "≥ 3"),
    ];
    for (id, what, steps, target) in cases {
        let name = format!("postgres/workers/{id}");
        let store = rate(&name, steps as f64);
        let paired = rate(&format!("{name}/paired_raw"), 1.0);
        report(&format!("{what}, steps/s"), format!("{store:.0}"), "");
        report("  raw single-insert txn/s just before each iteration", format!("{paired:.0}"), "");
        report("  ratio to that raw rate", format!("{:.2}", store / paired), target);
        report("  ratio to the mean of before / after", format!("{:.2}", store / ((before + after) / 2.0)), target);
    }
    let appends = rate("postgres/store/append_sequential", 1.0);
    let paired = rate("postgres/store/append_sequential/paired_raw", 1.0);
    report("PostgresStore::append, one entry each, sequential, appends/s", format!("{appends:.0}"), "");
    report("  raw single-insert txn/s just before each block of 100", format!("{paired:.0}"), "");
    report("  ratio to that raw rate", format!("{:.2}", appends / paired), "≥ 0.5");
    heading_once("issue 11: wake-up of a run parked on another worker");
    let at = |quantile: f64| wake[((wake.len() - 1) as f64 * quantile).round() as usize];
    let millis = |delay: Duration| format!("{:.2} ms", delay.as_secs_f64() * 1e3);
    report(
        &format!("hook payload to b, received by the run a parked ({} payloads), p50", wake.len()),
        millis(at(0.5)),
        "≤ 10 ms",
    );
    report("  p90 / max", format!("{} / {}", millis(at(0.9)), millis(at(1.0))), "");
}

fn main() {
    let tokio = multi_thread();
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    let setup = tokio.block_on(Setup::new());
    raw_single(&mut criterion, &tokio, &setup, "insert_per_txn_before");
    store_appends(&mut criterion, &tokio, &setup);
    worker_benches(&mut criterion, &tokio, &setup);
    raw_single(&mut criterion, &tokio, &setup, "insert_per_txn_after");
    let wake = tokio.block_on(wake_ups(&setup, size(200, 10)));
    criterion.final_summary();
    summary(&wake);
    let Setup { schema, a, b, .. } = setup;
    tokio.block_on(async {
        a.shutdown().await;
        b.shutdown().await;
    });
    drop(schema);
}
