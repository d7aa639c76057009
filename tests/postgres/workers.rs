//! Many workers on one Postgres database, in one process: each "worker" is a runtime of its own
//! with a store (a connection pool) of its own, as a worker process has. They show that work moves
//! between workers through the store alone: a run parked on one worker is resumed through another
//! worker's HTTP server; a client hands its runs to the workers; a run whose creator vanished, or
//! whose timer fell due while no worker held it, is found by a worker's poll; a worker that misses
//! its renewals loses the run to another, lets it go at once, and writes nothing more for it.
//! What a real process does (SIGKILL, SIGSTOP, a restarted server) is in `worker_processes.rs`.
//!
//! Each test has a schema of its own on the server `EVE_TEST_DATABASE_URL` names, or on a
//! throwaway cluster started with `scripts/postgres.sh` (see `cluster.rs`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use eve_tools::prelude::*;
use eve_tools::secret::{SecretKey, TokenHash};
use eve_tools::store::{
    Append, Claimed, Commit, Created, Delivered, DeliveryPayload, Fence, HookRow, InboxItem, NewRun, PostgresOptions,
    PostgresStore, Recovery, RunPage, RunQuery, RunRecord, RunSummary, Store, StoreError, Target, TimerRow, WakeUp,
    WorkerId,
};
use eve_tools::{Entry, RunId, RunOutcome, RunStatus, Runtime, RuntimeBuilder, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::cluster::Schema;

// ---- Workflows -----------------------------------------------------------------------------------

/// Which runtime a step ran in: each test runtime gets its name as state.
struct Name(&'static str);

/// A relay's input.
#[derive(Deserialize, JsonSchema)]
pub struct Relay {
    token: String,
    count: u64,
}

#[step]
async fn add(sum: u64, value: u64) -> Result<u64, StepError> {
    Ok(sum + value)
}

/// Takes `count` payloads from its hook, adding each up in a step.
#[workflow_tool]
pub async fn relay(input: Relay) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<u64>(input.token);
    let mut sum = 0;
    for _ in 0..input.count {
        let value = hook.recv().await?;
        sum = add(sum, value).await?;
    }
    Ok(sum)
}

/// A count's input.
#[derive(Deserialize, JsonSchema)]
pub struct Count {
    n: u64,
    #[serde(default)]
    sleep_ms: u64,
}

/// Counts to `n` in steps, then sleeps durably and counts one more.
#[workflow_tool]
pub async fn count_up(input: Count) -> Result<u64, ToolError> {
    let mut x = 0;
    for _ in 0..input.n {
        x = add(x, 1).await?;
    }
    if input.sleep_ms > 0 {
        sleep(Duration::from_millis(input.sleep_ms)).await?;
        x = add(x, 1).await?;
    }
    Ok(x)
}

/// The attempts of `stall` that started, and those that were dropped before they finished.
static STALL_STARTED: AtomicUsize = AtomicUsize::new(0);
static STALL_DROPPED: AtomicBool = AtomicBool::new(false);

/// Sets [`STALL_DROPPED`] if dropped before it is disarmed: an attempt that was let go.
struct DropFlag(bool);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if self.0 {
            STALL_DROPPED.store(true, Ordering::SeqCst);
        }
    }
}

/// Its first attempt waits far longer than any lease; a later one returns at once. Either names
/// the runtime it ran in.
#[step]
async fn stall(ctx: &StepCtx) -> Result<String, StepError> {
    let name = ctx.state::<Name>()?.0;
    if STALL_STARTED.fetch_add(1, Ordering::SeqCst) == 0 {
        let mut flag = DropFlag(true);
        tokio::time::sleep(Duration::from_secs(600)).await;
        flag.0 = false;
    }
    Ok(name.to_owned())
}

/// One step that stalls, then one more.
#[workflow_tool]
pub async fn stalling(
    _input: serde_json::Map<String, serde_json::Value>,
    ctx: &WorkflowCtx,
) -> Result<String, ToolError> {
    let who = stall(ctx).await?;
    let _ = add(0, 1).await?;
    Ok(who)
}

/// Asks one question and says whether the answer was yes.
#[workflow_tool]
pub async fn asking(_input: serde_json::Map<String, serde_json::Value>, ctx: &WorkflowCtx) -> Result<bool, ToolError> {
    let answer = ctx.ask(Ask::select("Go on?").option("yes", "Yes").option("no", "No")).await;
    Ok(answer.chose("yes"))
}

// ---- Helpers -------------------------------------------------------------------------------------

static KEY: LazyLock<SecretKey> = LazyLock::new(SecretKey::generate);

/// A runtime on the test's schema with short leases, named `name`; a worker once recovered.
fn builder(schema: &Schema, name: &'static str) -> RuntimeBuilder {
    Runtime::builder()
        .postgres_with(schema.store_url(), schema.options())
        .worker_id(name)
        .secret_key(KEY.clone())
        .state(Name(name))
        .lease(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(250))
        .poll_interval(Duration::from_millis(100))
}

async fn worker(schema: &Schema, name: &'static str) -> Runtime {
    let runtime = builder(schema, name).build().expect("a worker builds");
    runtime.recover().await.expect("the worker starts");
    runtime
}

/// Serves `runtime` over HTTP on a free loopback port; returns its base URL.
async fn serve(runtime: &Runtime) -> (String, eve_tools::http::ServerHandle) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = eve_tools::http::Server::new(runtime.clone()).serve(listener).expect("the server starts");
    (format!("http://{}", server.local_addr()), server)
}

/// Delivers `payload` to the hook `token` through the HTTP server at `base`.
async fn post_hook(base: &str, token: &str, payload: u64, key: &str) {
    let response = reqwest::Client::new()
        .post(format!("{base}/.well-known/workflow/v1/hook/{token}"))
        .header("Idempotency-Key", key)
        .json(&payload)
        .send()
        .await
        .expect("the worker answers");
    assert_eq!(response.status(), 202, "the delivery is accepted");
}

/// Waits (up to 20 s) until `check` holds for the run's journal.
async fn until(runtime: &Runtime, run: &RunId, what: &str, check: impl Fn(&RunRecord) -> bool) -> RunRecord {
    for _ in 0..400 {
        let record = runtime.journal(run).await.expect("the run exists");
        if check(&record) {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run}: {what} did not happen within 20 s");
}

fn hooks_received(record: &RunRecord) -> usize {
    record.entries.iter().filter(|entry| matches!(entry, Entry::HookReceived { .. })).count()
}

/// Every step's completion is recorded once.
fn completions_once(record: &RunRecord) {
    let mut ops: Vec<u32> = record
        .entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::StepCompleted { op, .. } => Some(op.0),
            _ => None,
        })
        .collect();
    let total = ops.len();
    ops.sort_unstable();
    ops.dedup();
    assert_eq!(ops.len(), total, "run {}: a step completion was recorded twice", record.summary.id);
}

// ---- Tests ---------------------------------------------------------------------------------------

/// A run parked on worker A takes the payloads delivered through worker B's HTTP server and A's,
/// alternately; whichever worker resumes it each time (A from its warm cache after claiming it
/// again, or B by replaying it), it takes them all, in order, each added once.
#[tokio::test]
async fn a_hook_delivered_through_any_worker_resumes_the_run_wherever_it_parked() {
    let schema = Schema::new().await;
    let (a, b) = (worker(&schema, "a").await, worker(&schema, "b").await);
    let ((url_a, server_a), (url_b, server_b)) = (serve(&a).await, serve(&b).await);
    let run = a.start("relay", json!({ "token": "relay-hook", "count": 4 })).await.unwrap();
    assert_eq!(run.parked().await.unwrap(), eve_tools::Phase::Parked, "the run parks on its hook");
    for (index, base) in [&url_b, &url_a, &url_b, &url_b].into_iter().enumerate() {
        post_hook(base, "relay-hook", 10_u64.pow(index as u32), &format!("payload-{index}")).await;
        until(&a, run.id(), "the payload is taken in", |record| {
            hooks_received(record) > index && record.summary.parked || record.summary.status.is_finished()
        })
        .await;
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(1_111)));
    let record = a.journal(run.id()).await.unwrap();
    completions_once(&record);
    assert_eq!(hooks_received(&record), 4);
    server_a.shutdown().await;
    server_b.shutdown().await;
}

/// A client (a runtime that never recovers) runs nothing: it hands the runs it starts to the
/// workers, which take them at once (woken by the store), and follows them to their outcomes
/// through the store.
#[tokio::test]
async fn a_client_hands_its_runs_to_the_workers() {
    let schema = Schema::new().await;
    let client = builder(&schema, "client").build().unwrap();
    let mut started = Vec::new();
    for n in 1..=12 {
        started.push((n, client.start("count_up", json!({ "n": n })).await.unwrap()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = client.runs(Some(RunStatus::Active), 100).await.unwrap();
    assert_eq!(waiting.len(), 12, "nothing ran while there was no worker");
    assert!(waiting.iter().all(|run| run.entries == 1), "not a step ran in the client");
    let workers = [worker(&schema, "a").await, worker(&schema, "b").await];
    for (n, run) in &started {
        assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(n)), "the client follows the run");
    }
    drop(workers);
}

/// A run whose creator vanished without a word (its claim's lease expired; nothing announces it)
/// and a run whose sleep fell due while no worker held it are both found by a worker's poll.
#[tokio::test]
async fn runs_nobody_announces_are_found_by_polling() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let long_ago = Timestamp::from_system_time(std::time::SystemTime::now() - Duration::from_secs(120));
    let orphan: RunId = "orphan".parse().unwrap();
    let new = NewRun {
        id: orphan.clone(),
        workflow_id: "postgres::workers::count_up".into(),
        tool: "count_up".into(),
        input: json!({ "n": 3 }),
        created_at: long_ago,
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    };
    let created = store.create_run(new, &WorkerId("vanished".into())).await.unwrap();
    assert!(matches!(created, Created::New(_)), "the orphan is created, leased to a worker that is gone");

    let a = worker(&schema, "a").await;
    let sleeper = a.start("count_up", json!({ "n": 1, "sleep_ms": 1_500 })).await.unwrap();
    until(&a, sleeper.id(), "the sleep is scheduled", |record| record.summary.parked).await;
    a.shutdown().await;

    let b = worker(&schema, "b").await;
    let orphaned = b.handle(orphan);
    assert_eq!(orphaned.outcome().await.unwrap(), RunOutcome::Completed(json!(3)), "the orphan is taken over");
    assert_eq!(b.handle(sleeper.id().clone()).outcome().await.unwrap(), RunOutcome::Completed(json!(2)));
    let record = b.journal(sleeper.id()).await.unwrap();
    let fired = record.entries.iter().any(|entry| matches!(entry, Entry::TimerFired { .. }));
    assert!(fired, "the sleep fired on the worker that found it due");
}

/// A worker that polls the store once a minute: only a wake-up brings it work sooner.
async fn deaf_to_polls(schema: &Schema, name: &'static str) -> Runtime {
    let runtime = builder(schema, name).poll_interval(Duration::from_secs(60)).build().expect("a worker builds");
    runtime.recover().await.expect("the worker starts");
    runtime
}

/// Waits (up to 10 s, reading every millisecond) until the run's summary satisfies `check`.
async fn until_summary(store: &PostgresStore, run: &RunId, check: impl Fn(&RunSummary) -> bool) -> RunSummary {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (summary, _) = store.tail(run).await.expect("the store reads").expect("the run exists");
        if check(&summary) {
            return summary;
        }
        assert!(std::time::Instant::now() < deadline, "run {run} did not get there within 10 s: {summary:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// With polling all but off (once a minute, after a first look at start-up), hook payloads, an
/// answer and a cancellation given to worker B reach runs that worker A started and that parked
/// (giving their claims back) through the store's wake-ups alone: each is taken in within
/// milliseconds, far below any poll. The payloads' delays are printed (p50, max).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_wake_runs_parked_on_another_worker_without_polling() {
    const PAYLOADS: u64 = 20;
    let schema = Schema::new().await;
    let store = schema.store().await;
    let (a, b) = (deaf_to_polls(&schema, "a").await, deaf_to_polls(&schema, "b").await);

    let relay = a.start("relay", json!({ "token": "wake-hook", "count": PAYLOADS })).await.unwrap();
    let asking = a.start("asking", json!({})).await.unwrap();
    let doomed = a.start("relay", json!({ "token": "doomed-hook", "count": 1 })).await.unwrap();
    for run in [&relay, &asking, &doomed] {
        assert_eq!(run.parked().await.unwrap(), eve_tools::Phase::Parked, "run {} parks", run.id());
    }

    let (mut delays, mut commits) = (Vec::new(), Vec::new());
    for _ in 0..PAYLOADS {
        let before = until_summary(&store, relay.id(), |summary| summary.parked).await.entries;
        let sent = std::time::Instant::now();
        b.resume_hook("wake-hook", json!(1)).await.expect("B takes the payload");
        commits.push(sent.elapsed());
        until_summary(&store, relay.id(), |summary| summary.entries > before).await;
        delays.push(sent.elapsed());
    }
    assert_eq!(relay.outcome().await.unwrap(), RunOutcome::Completed(json!(PAYLOADS)));
    delays.sort();
    commits.sort();
    let (p50, max) = (delays[delays.len() / 2], delays[delays.len() - 1]);
    eprintln!(
        "a payload given to B reached the run parked by A in {p50:?} at p50 (the delivery's own commit: {:?}), \
         {max:?} at most",
        commits[commits.len() / 2]
    );
    assert!(max < Duration::from_secs(5), "every payload arrived by a wake-up, not a poll: {delays:?}");

    let questions = b.open_questions(asking.id()).await.unwrap();
    let sent = std::time::Instant::now();
    b.answer(asking.id(), &questions[0].request_id, eve_tools::Answer::option("yes")).await.unwrap();
    assert_eq!(asking.outcome().await.unwrap(), RunOutcome::Completed(json!(true)));
    let answered = sent.elapsed();

    let sent = std::time::Instant::now();
    b.cancel(doomed.id(), "no longer needed").await.unwrap();
    assert_eq!(doomed.outcome().await.unwrap(), RunOutcome::Cancelled);
    let cancelled = sent.elapsed();
    eprintln!("an answer given to B ended the run in {answered:?}; a cancellation, in {cancelled:?}");
    assert!(answered < Duration::from_secs(5) && cancelled < Duration::from_secs(5), "both by a wake-up, not a poll");
    for run in [&relay, &asking, &doomed] {
        completions_once(&a.journal(run.id()).await.unwrap());
    }
}

/// A store that stops renewing leases on request, as a worker stalled past its lease would.
struct Stalling {
    inner: Arc<dyn Store>,
    stalled: AtomicBool,
    fenced_renewals: Mutex<usize>,
}

#[async_trait]
impl Store for Stalling {
    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
        self.inner.create_run(run, owner).await
    }
    async fn claim(
        &self,
        run: &RunId,
        owner: &WorkerId,
        lease: Duration,
        now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError> {
        self.inner.claim(run, owner, lease, now, from_seq).await
    }
    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
        self.inner.release(run, fence).await
    }
    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        self.inner.append(run, fence, append)
    }
    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        self.inner.park(run, fence, next_seq).await
    }
    async fn recovery(&self) -> Result<Recovery, StoreError> {
        self.inner.recovery().await
    }
    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a> {
        self.inner.continue_as_new(run, fence, started, keep_inbox)
    }
    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        delivery: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        self.inner.deliver(target, delivery_id, delivery).await
    }
    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        self.inner.inbox(run).await
    }
    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        self.inner.find_hook(token).await
    }
    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
        self.inner.timers().await
    }
    async fn read(
        &self,
        run: &RunId,
        at: eve_tools::journal::Position,
        limit: usize,
    ) -> Result<Option<eve_tools::store::JournalPage>, StoreError> {
        self.inner.read(run, at, limit).await
    }
    async fn watch(&self, run: &RunId) -> Result<Option<eve_tools::store::Watch>, StoreError> {
        self.inner.watch(run).await
    }
    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.inner.load(run).await
    }
    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        self.inner.list_runs(query).await
    }
    async fn renew(&self, run: &RunId, fence: Fence, lease: Duration, now: Timestamp) -> Result<(), StoreError> {
        if self.stalled.load(Ordering::SeqCst) {
            return Ok(());
        }
        let renewed = self.inner.renew(run, fence, lease, now).await;
        if matches!(renewed, Err(StoreError::Fenced { .. })) {
            *self.fenced_renewals.lock().unwrap() += 1;
        }
        renewed
    }
    async fn claimable(&self, now: Timestamp, limit: usize) -> Result<Vec<RunId>, StoreError> {
        self.inner.claimable(now, limit).await
    }
    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }
    fn wake_ups(&self) -> Option<tokio::sync::broadcast::Receiver<WakeUp>> {
        self.inner.wake_ups()
    }
}

/// Worker A stops renewing while a step of its run is under way (a stall); its lease expires and
/// worker B takes the run over and finishes it. When A renews again, the store refuses (its claim
/// was superseded): A drops the step attempt at once and writes nothing more, so the journal shows
/// B's result for the step, recorded once.
#[tokio::test]
async fn a_worker_that_missed_its_renewals_lets_the_run_go() {
    let schema = Schema::new().await;
    // The creator's first lease as short as the workers' leases (`postgres_with` does this itself).
    let options = PostgresOptions { creation_lease: Duration::from_secs(2), ..schema.options() };
    let stalling = Arc::new(Stalling {
        inner: Arc::new(PostgresStore::connect_with(&schema.store_url(), options).await.unwrap()),
        stalled: AtomicBool::new(false),
        fenced_renewals: Mutex::new(0),
    });
    let a = builder(&schema, "a").shared_store(stalling.clone()).build().unwrap();
    a.recover().await.unwrap();
    let run = a.start("stalling", json!({})).await.unwrap();
    while STALL_STARTED.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stalling.stalled.store(true, Ordering::SeqCst);
    let b = worker(&schema, "b").await;
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("b")), "B finished the run");
    let finished = a.journal(run.id()).await.unwrap();

    stalling.stalled.store(false, Ordering::SeqCst);
    for _ in 0..100 {
        if STALL_DROPPED.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(STALL_DROPPED.load(Ordering::SeqCst), "A dropped its attempt once it learned it lost the run");
    assert!(*stalling.fenced_renewals.lock().unwrap() >= 1, "A's renewal was refused");
    let after = a.journal(run.id()).await.unwrap();
    assert_eq!(after.entries, finished.entries, "A wrote nothing after it lost the run");
    completions_once(&after);
    drop(b);
}

/// Settings that cannot work are refused when the runtime is built, naming the setting.
#[tokio::test]
async fn unusable_worker_settings_are_refused_by_name() {
    let cases: [(RuntimeBuilder, &str); 5] = [
        (Runtime::builder().heartbeat(Duration::from_secs(20)), "`heartbeat`"),
        (Runtime::builder().lease(Duration::from_millis(10)), "`lease`"),
        (Runtime::builder().poll_interval(Duration::ZERO), "`poll_interval`"),
        (Runtime::builder().worker_id(""), "`worker_id`"),
        (Runtime::builder().worker_id("two\nlines"), "`worker_id`"),
    ];
    for (builder, setting) in cases {
        let error = builder.store(eve_tools::store::MemoryStore::new()).build().err().expect("refused");
        let message = error.to_string();
        assert!(message.contains(setting), "{message}");
    }
    let error = Runtime::builder().postgres("postgres://eve:pw@db:port/eve").build().err().expect("refused");
    assert!(error.to_string().contains("the Postgres URL cannot be used"), "{error}");
    assert!(!error.to_string().contains("pw@"), "the password is not shown: {error}");
}

/// By default, the worker ids of two runtimes of one process differ, and both name the process.
#[tokio::test]
async fn default_worker_ids_name_the_process_and_differ() {
    let [first, second] =
        [(); 2].map(|()| Runtime::builder().store(eve_tools::store::MemoryStore::new()).build().unwrap());
    let pid = std::process::id().to_string();
    let ids = [first.worker_id().to_owned(), second.worker_id().to_owned()];
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| id.contains(&format!("-{pid}-"))), "{ids:?}");
    assert_eq!(builder_named("w-7").worker_id(), "w-7");
}

fn builder_named(name: &str) -> Runtime {
    Runtime::builder().store(eve_tools::store::MemoryStore::new()).worker_id(name).build().unwrap()
}
