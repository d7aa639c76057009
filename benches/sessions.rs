//! Issue 9's figures: what a session adds to the tools it calls, on the scripted model.
//!
//! 1. `sessions_memory/{flavour}/turn_with_one_tool_call`: one turn of a session on `MemoryStore`:
//!    `Session::send`, then `Runtime::settle()` until the session is parked again. The scripted
//!    model calls the plain `#[tool]` `lookup` in its first step (the tool runs inside that step)
//!    and answers with text in its second, so a turn is two model steps, one tool call and the
//!    feed's events (`turn.started` … `session.waiting`). A session takes at most
//!    [`TURNS_PER_SESSION`] turns before a fresh one is made outside the timing (the model is shown
//!    the whole conversation, which grows with every turn). Measured beside, in the same run:
//!    - `direct_fn_call`: `lookup` called as the Rust fn it is;
//!    - `call_tool`: `Runtime::call_tool("lookup", …)` (input checked against the schema);
//!    - `bare_workflow_run`: a `#[workflow_tool]` whose body awaits one `#[step]` calling `lookup`,
//!      `Runtime::start` then `settle()`, the smallest durable run.
//!
//!    The summary gives the turn's added cost over the direct call (target ≤ 20 µs), and its added
//!    cost over and ratio to the bare workflow run: on two workers most of either run's time is
//!    the wake-up of a parked worker thread, which that difference takes out. A count that the machine's load does not move: the instructions
//!    of one turn, from two runs of this binary under callgrind, `EVE_BENCH_COUNTED_TURNS=2000`
//!    and `=2000/0` (see `counted_turns`).
//! 2. A task's receipt: a session on a [`Counting`] store (around `MemoryStore`) whose model calls
//!    the `#[task]` `deploy`. Counted: the store's commits after the one that journals the model's
//!    tool call (the model step's completion), up to the moment the model is called again and is
//!    shown the receipt (target ≤ 1 commit), by run and kind, over [`RECEIPT_ROUNDS`] sessions.
//! 3. 1,000 sessions parked between turns: a child process (this binary again, so its memory holds
//!    nothing of criterion's) starts 1,000 sessions on the embedded SQLite store and on
//!    `MemoryStore`, runs one turn of each, and reports its resident memory (`VmRSS`, and its growth
//!    since before the runtime was built; target < 20 MB) and the Tokio tasks alive once every
//!    session is parked (target: no task per session). A third child, `sqlite_cold`, does the
//!    same on SQLite with the warm cache off (`warm_cache(0)`), so no parked session's body is
//!    kept in memory: the difference is what the default warm cache holds.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use eve_benches::counting::{Counting, WriteKind};
use eve_benches::{current_thread, heading, heading_once, micros, multi_thread, record, report, secret_key, size};
use eve_tools::prelude::*;
use eve_tools::session::{Message, ModelRequest, ModelResponse, ScriptedModel, Session, SessionOptions};
use eve_tools::store::{MemoryStore, SqliteStore, Store};
use serde_json::json;

/// Which service.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ServiceInput {
    /// The service.
    pub service: String,
}

/// Looks a service up.
#[tool]
pub async fn lookup(input: ServiceInput) -> Result<String, ToolError> {
    Ok(format!("{} is healthy", input.service))
}

#[step]
async fn lookup_step(service: String) -> Result<String, StepError> {
    lookup(ServiceInput { service }).await.map_err(StepError::msg)
}

/// Looks a service up in a step: the smallest durable run around the same tool fn.
#[workflow_tool]
pub async fn lookup_once(input: ServiceInput) -> Result<String, ToolError> {
    Ok(lookup_step(input.service).await?)
}

/// Deploys a service: a task that works until its hook is resumed (never, in this bench).
#[task]
pub async fn deploy(input: ServiceInput, _ctx: &TaskCtx) -> Result<String, ToolError> {
    let mut done = create_hook::<u64>();
    let _ = done.recv().await;
    Ok(input.service)
}

/// How many turns a session of figure 1 takes before a fresh one replaces it.
const TURNS_PER_SESSION: u64 = 20;

/// How many sessions figure 2 counts the commits of.
const RECEIPT_ROUNDS: usize = 20;

/// The environment variable that makes this binary the child process of figure 3.
const PARKED_CHILD: &str = "EVE_BENCH_PARKED_SESSIONS";

/// The environment variable that makes this binary run that many turns of figure 1 and exit:
/// for counting instructions, which a shared machine's load does not change (see [`counted_turns`]).
/// `EVE_BENCH_COUNTED_TURNS=2000/0` starts the sessions of 2,000 turns and runs none.
const COUNTED_TURNS: &str = "EVE_BENCH_COUNTED_TURNS";

/// Calls `lookup`, then says what it returned: a turn with one plain tool call.
fn lookup_model() -> ScriptedModel {
    ScriptedModel::new(|request| match request.last() {
        Some(Message::Tool { content, .. }) => ModelResponse::text(content.clone()),
        _ => ModelResponse::call("lookup", json!({ "service": "api" })),
    })
}

fn memory_runtime(model: ScriptedModel, store: Arc<dyn Store>) -> Runtime {
    let builder = Runtime::builder().shared_store(store).secret_key(secret_key()).model(model);
    builder.build().expect("a runtime builds inside Tokio")
}

// ----- figure 1: one turn -----

/// A session that has taken fewer than [`TURNS_PER_SESSION`] turns.
struct Sessions {
    current: Option<(Session, u64)>,
}

impl Sessions {
    async fn next(&mut self, runtime: &Runtime) -> Session {
        match &mut self.current {
            Some((session, turns)) if *turns < TURNS_PER_SESSION => {
                *turns += 1;
                session.clone()
            }
            _ => {
                let options = SessionOptions::new().system("You look services up.").tools(["lookup"]);
                let session = runtime.session(options).await.expect("the session starts");
                runtime.settle().await;
                self.current = Some((session.clone(), 1));
                session
            }
        }
    }
}

async fn turns(runtime: &Runtime, sessions: &mut Sessions, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let session = sessions.next(runtime).await;
        let start = Instant::now();
        session.send("Is api healthy?").await.expect("the session takes the message");
        runtime.settle().await;
        total += start.elapsed();
    }
    total
}

async fn bare_runs(runtime: &Runtime, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        runtime.start("lookup_once", json!({ "service": "api" })).await.expect("the tool exists");
        runtime.settle().await;
    }
    start.elapsed()
}

const FLAVOURS: [&str; 2] = ["current_thread", "multi_thread"];

fn turn_cost(c: &mut Criterion) {
    for flavour in FLAVOURS {
        let tokio = if flavour == "multi_thread" { multi_thread() } else { current_thread() };
        let runtime = tokio.block_on(async { memory_runtime(lookup_model(), Arc::new(MemoryStore::new())) });
        check_turn(&tokio, &runtime);
        let mut group = c.benchmark_group(format!("sessions_memory/{flavour}"));
        group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        let name = format!("sessions_memory/{flavour}/direct_fn_call");
        group.bench_function("direct_fn_call", |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let input = ServiceInput { service: black_box("api").to_owned() };
                        black_box(lookup(input).await.ok());
                    }
                    record(&name, iters, start.elapsed())
                })
            })
        });
        let name = format!("sessions_memory/{flavour}/call_tool");
        group.bench_function("call_tool", |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(runtime.call_tool("lookup", json!({ "service": "api" })).await.ok());
                    }
                    record(&name, iters, start.elapsed())
                })
            })
        });
        let name = format!("sessions_memory/{flavour}/bare_workflow_run");
        group.bench_function("bare_workflow_run", |b| {
            b.iter_custom(|iters| tokio.block_on(async { record(&name, iters, bare_runs(&runtime, iters).await) }))
        });
        let name = format!("sessions_memory/{flavour}/turn_with_one_tool_call");
        let mut sessions = Sessions { current: None };
        group.bench_function("turn_with_one_tool_call", |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async { record(&name, iters, turns(&runtime, &mut sessions, iters).await) })
            })
        });
        group.finish();
        tokio.block_on(async { drop(runtime) });
    }
}

/// One turn, checked: the feed tells the turn the bench times, and the tool ran in it.
fn check_turn(tokio: &tokio::runtime::Runtime, runtime: &Runtime) {
    tokio.block_on(async {
        let mut sessions = Sessions { current: None };
        let session = sessions.next(runtime).await;
        turns(runtime, &mut sessions, 1).await;
        let names: Vec<String> =
            session.history(0).await.expect("the feed reads").into_iter().map(|event| event.name).collect();
        let expected = [
            "turn.started",
            "step.started",
            "actions.requested",
            "action.result",
            "step.started",
            "message.completed",
            "turn.completed",
            "session.waiting",
        ];
        assert_eq!(names, expected, "one turn, one tool call, two model steps");
        let events = session.history(0).await.expect("the feed reads");
        let result = events.iter().find(|event| event.name == "action.result").expect("the tool answered");
        assert_eq!(result.field("output"), Some("api is healthy"));
    });
}

// ----- figure 2: commits until a task's receipt reaches the model -----

/// What one session of figure 2 showed.
struct Receipt {
    /// Commits after the tool call was journaled, before the model saw the receipt.
    commits: usize,
    /// Of those: the session's own appends, runs created, other runs' appends, deliveries.
    own: usize,
    created: usize,
    others: usize,
    delivered: usize,
    /// From the commit journaling the call to the model being shown the receipt.
    latency: Duration,
}

/// What the model was shown since its last answer.
fn shown(request: &ModelRequest) -> String {
    let from = request.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
    request.messages[from.map_or(0, |at| at + 1)..].iter().map(Message::content).collect::<Vec<_>>().join("\n")
}

async fn receipt_round() -> Receipt {
    let counting = Counting::new(Arc::new(MemoryStore::new()));
    let seen: Arc<Mutex<Option<(usize, Instant)>>> = Arc::default();
    let (log, mark) = (counting.clone(), seen.clone());
    let model = ScriptedModel::new(move |request| {
        if shown(request).contains("Started task deploy-") {
            mark.lock().expect("never poisoned").get_or_insert((log.len(), Instant::now()));
            ModelResponse::text("Deploying api.")
        } else if matches!(request.last(), Some(Message::User { content }) if content == "Deploy api") {
            ModelResponse::call("deploy", json!({ "service": "api" }))
        } else {
            ModelResponse::text("(nothing to do)")
        }
    });
    let runtime = memory_runtime(model, counting.clone());
    let session = runtime.session(SessionOptions::new().tools(["deploy"])).await.expect("the session starts");
    session.send("Deploy api").await.expect("the session takes the message");
    runtime.settle().await;
    let (receipt_at, shown_at) = seen.lock().expect("never poisoned").expect("the model was shown the receipt");
    let log = counting.log();
    let call_at = log
        .iter()
        .position(|write| {
            &write.run == session.id()
                && matches!(&write.kind, WriteKind::Append(kinds) if kinds.iter().any(|kind| kind == "step_completed:session.model"))
        })
        .expect("the model step that called deploy was journaled");
    let between: Vec<_> = log[call_at + 1..receipt_at].iter().filter(|write| write.kind.is_commit()).collect();
    let own = |write: &&eve_benches::counting::Write| &write.run == session.id();
    Receipt {
        commits: between.len(),
        own: between.iter().filter(|write| own(write) && matches!(write.kind, WriteKind::Append(_))).count(),
        created: between.iter().filter(|write| write.kind == WriteKind::CreateRun).count(),
        others: between.iter().filter(|write| !own(write) && matches!(write.kind, WriteKind::Append(_))).count(),
        delivered: between.iter().filter(|write| write.kind == WriteKind::Deliver).count(),
        latency: shown_at.duration_since(log[call_at].at),
    }
}

fn receipts() -> Vec<Receipt> {
    let tokio = current_thread();
    let rounds = if eve_benches::quick() { 3 } else { RECEIPT_ROUNDS };
    (0..rounds).map(|_| tokio.block_on(receipt_round())).collect()
}

// ----- figure 3: parked sessions, in a child process -----

/// The process's resident memory in bytes (Linux `VmRSS`).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// What the child process found.
struct Parked {
    store: String,
    sessions: u64,
    parked: u64,
    rss: u64,
    growth: u64,
    tasks: usize,
    elapsed: Duration,
}

/// The child's work: park `count` sessions after one turn each, then print what it costs.
fn parked_child(store_name: &str, count: u64) {
    let tokio = multi_thread();
    let before = resident_bytes();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory under target/");
    let line = tokio.block_on(async {
        let store: Arc<dyn Store> = match store_name {
            "sqlite" | "sqlite_cold" => {
                Arc::new(SqliteStore::open(dir.path().join("sessions.db")).expect("the store opens"))
            }
            _ => Arc::new(MemoryStore::new()),
        };
        let runtime = if store_name == "sqlite_cold" {
            let builder = Runtime::builder().shared_store(store).secret_key(secret_key()).model(lookup_model());
            builder.warm_cache(0).build().expect("a runtime builds inside Tokio")
        } else {
            memory_runtime(lookup_model(), store)
        };
        let start = Instant::now();
        let mut sessions = Vec::new();
        for _ in 0..count {
            let options = SessionOptions::new().system("You look services up.").tools(["lookup"]);
            sessions.push(runtime.session(options).await.expect("the session starts"));
        }
        for session in &sessions {
            session.send("Is api healthy?").await.expect("the session takes the message");
        }
        runtime.settle().await;
        let elapsed = start.elapsed();
        let summaries = runtime.runs(None, count as usize * 2).await.expect("the runs list");
        let parked = summaries.iter().filter(|run| run.tool == "eve.session" && run.parked).count();
        let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let rss = resident_bytes();
        drop(sessions);
        format!("PARKED {count} {parked} {rss} {} {tasks} {}", rss.saturating_sub(before), elapsed.as_micros())
    });
    println!("{line}");
}

/// Runs the child for `store` and reads its line.
fn parked_sessions(store: &str) -> Parked {
    let exe = std::env::current_exe().expect("the bench knows its executable");
    let output = std::process::Command::new(exe)
        .env(PARKED_CHILD, store)
        .arg(if eve_benches::quick() { "--quick" } else { "--bench" })
        .output()
        .expect("the child process runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find(|line| line.starts_with("PARKED ")).unwrap_or_else(|| {
        panic!("the child printed no result: {stdout}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|field| field.parse().expect("a number")).collect();
    Parked {
        store: store.to_owned(),
        sessions: fields[0],
        parked: fields[1],
        rss: fields[2],
        growth: fields[3],
        tasks: fields[4] as usize,
        elapsed: Duration::from_micros(fields[5]),
    }
}

// ----- summary -----

fn summary(receipts: &[Receipt], parked: &[Parked]) {
    heading("issue 9, figure 1: one turn with one plain tool call, MemoryStore, scripted model");
    for flavour in FLAVOURS {
        let time = |id: &str| micros(&format!("sessions_memory/{flavour}/{id}"));
        let (direct, call, bare, turn) =
            (time("direct_fn_call"), time("call_tool"), time("bare_workflow_run"), time("turn_with_one_tool_call"));
        println!("  [{flavour}]");
        report("the tool fn called directly", format!("{:.1} ns", direct * 1e3), "");
        report("Runtime::call_tool (input checked)", format!("{call:.2} µs"), "");
        report("bare workflow run, one step calling the fn", format!("{bare:.2} µs"), "");
        report("one turn: send → parked (2 model steps, 1 tool call)", format!("{turn:.2} µs"), "");
        report("  added cost of the turn over the direct call", format!("{:.2} µs", turn - direct), "≤ 20 µs");
        // What the session adds to the smallest durable run: on two workers both wait on the same
        // thread wake-ups, which this takes out.
        report("  added cost of the turn over the bare workflow run", format!("{:.2} µs", turn - bare), "");
        report("  ratio turn / bare workflow run", format!("{:.2}", turn / bare), "");
        report("  ratio turn / direct call", format!("{:.0}×", turn / direct), "");
    }
    heading_once("issue 9, figure 2: commits from the tool call journaled to the receipt shown to the model");
    let mut commits: Vec<usize> = receipts.iter().map(|receipt| receipt.commits).collect();
    commits.sort_unstable();
    let mut latency: Vec<Duration> = receipts.iter().map(|receipt| receipt.latency).collect();
    latency.sort_unstable();
    let median = |values: &[usize]| values[values.len() / 2];
    report(
        &format!("commits in between, median / max of {} sessions", receipts.len()),
        format!("{} / {}", median(&commits), commits.last().copied().unwrap_or(0)),
        "≤ 1",
    );
    let by = |pick: fn(&Receipt) -> usize| {
        let mut values: Vec<usize> = receipts.iter().map(pick).collect();
        values.sort_unstable();
        median(&values)
    };
    report("  the session's own appends (median)", by(|receipt| receipt.own).to_string(), "");
    report("  runs created (the task's run; median)", by(|receipt| receipt.created).to_string(), "");
    report("  other runs' appends (the task's own; median)", by(|receipt| receipt.others).to_string(), "");
    report("  deliveries (median)", by(|receipt| receipt.delivered).to_string(), "");
    report(
        "  time in between, median (MemoryStore)",
        format!("{:.1} µs", latency[latency.len() / 2].as_secs_f64() * 1e6),
        "",
    );
    heading_once("issue 9, figure 3: sessions parked between turns, in a process of their own");
    let megabytes = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    for parked in parked {
        println!("  [{}]", parked.store);
        report(
            &format!("resident memory with {} sessions parked ({} marked parked)", parked.sessions, parked.parked),
            format!("{:.1} MB", megabytes(parked.rss)),
            // `MemoryStore` holds every journal itself: a contrast, not the target's store.
            if parked.store == "memory" { "(contrast)" } else { "< 20 MB" },
        );
        report("  growth since before the runtime was built", format!("{:.1} MB", megabytes(parked.growth)), "");
        report("  Tokio tasks alive while they are parked", parked.tasks.to_string(), "no task per session");
        report("  time to start them and run one turn each", format!("{:.2} s", parked.elapsed.as_secs_f64()), "");
    }
}

/// Starts the sessions of `turns` turns of figure 1 (current-thread, `MemoryStore`, sessions of
/// [`TURNS_PER_SESSION`] turns), runs `run` of those turns and exits without dropping anything.
/// Under `valgrind --tool=callgrind`, the difference between `2000` and `2000/0` divided by 2,000
/// is the instructions one turn costs, continuing as new every 20th included. Both start one
/// more session and run one turn of it first, so one-time set-up (the tool's input validator)
/// is in both.
fn counted_turns(turns: u64, run: u64) {
    let tokio = current_thread();
    tokio.block_on(async {
        let runtime = memory_runtime(lookup_model(), Arc::new(MemoryStore::new()));
        let options = || SessionOptions::new().system("You look services up.").tools(["lookup"]);
        let first = runtime.session(options()).await.expect("the session starts");
        first.send("Is api healthy?").await.expect("the session takes the message");
        runtime.settle().await;
        let mut sessions = Vec::new();
        for _ in 0..turns.div_ceil(TURNS_PER_SESSION) {
            sessions.push(runtime.session(options()).await.expect("the session starts"));
            runtime.settle().await;
        }
        let mut left = run.min(turns);
        for session in &sessions {
            for _ in 0..left.min(TURNS_PER_SESSION) {
                session.send("Is api healthy?").await.expect("the session takes the message");
                runtime.settle().await;
            }
            left = left.saturating_sub(TURNS_PER_SESSION);
        }
        println!("{} turns of {turns}", run.min(turns));
        std::process::exit(0);
    })
}

fn main() {
    if let Ok(store) = std::env::var(PARKED_CHILD) {
        return parked_child(&store, size(1_000, 20));
    }
    if let Ok(counted) = std::env::var(COUNTED_TURNS) {
        let (turns, run) = counted.split_once('/').unwrap_or((&counted, &counted));
        let number = |text: &str| text.parse().expect("EVE_BENCH_COUNTED_TURNS is <turns> or <turns>/<run>");
        return counted_turns(number(turns), number(run));
    }
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    turn_cost(&mut criterion);
    let receipts = receipts();
    let parked = [parked_sessions("sqlite"), parked_sessions("sqlite_cold"), parked_sessions("memory")];
    criterion.final_summary();
    summary(&receipts, &parked);
}
