//! Worker processes on Postgres, each test with a schema of its own on the shared test server:
//!
//! - **a killed worker**: a worker SIGKILLed in the middle of a step keeps its run until its lease
//!   expires; then the other worker takes it over;
//! - **fencing**: a worker paused (SIGSTOP) in the middle of a step, past its lease, loses the run
//!   to another worker, which completes it; woken (SIGCONT), the paused worker finds its claim
//!   taken over, lets the run go, and writes nothing;
//! - **everything at once**: three workers, while hook payloads arrive through every worker at
//!   once (each payload sent three times under one idempotency key), questions are answered from
//!   a CLI process and over HTTP at the same moment, and runs are cancelled from CLI processes
//!   and over HTTP while their payloads still arrive: every payload is taken once, every question
//!   resolved once, every cancellation recorded once, and no step completion recorded twice;
//! - **the CLI beside workers**: `call`, `resume-hook`, `questions`, `answer`, `cancel`, `runs`
//!   and `inspect`, run as separate processes, work on runs the workers advance, and `worker`
//!   refuses to start without a database.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use eve_tools::journal::StepOutcome;
use eve_tools::store::{PostgresStore, Store};
use eve_tools::{Entry, RunId, RunStatus};
use serde_json::{Value, json};

use crate::cluster::Schema;
use crate::processes::{Fleet, Timing};

/// A fleet on a fresh schema of the shared test server.
fn fleet(schema: &Schema, timing: Timing) -> Fleet {
    Fleet::new(&schema.store_url(), &schema.name, timing)
}

/// Waits (up to `within`) until the run's summary satisfies `check`.
async fn until_run(store: &PostgresStore, run: &RunId, within: Duration, check: impl Fn(RunStatus, bool) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        if let Some((summary, _)) = store.tail(run).await.expect("the store reads")
            && check(summary.status, summary.parked)
        {
            return;
        }
        assert!(Instant::now() < deadline, "run {run} did not get there within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every step completion of the run's journal is recorded once.
fn completions_once(entries: &[Entry], run: &RunId) {
    let mut seen = HashSet::new();
    for entry in entries {
        if let Entry::StepCompleted { op, .. } = entry {
            assert!(seen.insert(op.0), "run {run}: the completion of {op} is journaled twice");
        }
    }
}

fn count(entries: &[Entry], pick: impl Fn(&Entry) -> bool) -> usize {
    entries.iter().filter(|entry| pick(entry)).count()
}

async fn post(http: &reqwest::Client, url: String, body: Value, key: Option<&str>) -> u16 {
    let mut request = http.post(url).json(&body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    request.send().await.map(|response| response.status().as_u16()).unwrap_or(0)
}

/// Starts `tool` as run `id` through the run API of the worker at `base`.
async fn start(http: &reqwest::Client, base: &str, tool: &str, id: &str, input: Value) {
    let status = post(http, format!("{base}/v1/tools/{tool}/runs"), json!({ "input": input, "runId": id }), None).await;
    assert_eq!(status, 201, "run {id} starts");
}

/// A worker stopped with SIGSTOP in the middle of a slow step, for longer than its lease, loses
/// the run to the other worker, which runs the step again and completes the run. Continued with
/// SIGCONT, it learns that its claim was taken over (its renewal or its append is refused), lets
/// the run go, and writes nothing: the journal is as the other worker left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_writes_nothing_after_it_wakes() {
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_millis(1_500),
        heartbeat: Duration::from_millis(300),
        poll: Duration::from_millis(100),
    };
    let mut fleet = fleet(&schema, timing);
    let (first, second) = (fleet.start("w1"), fleet.start("w2"));
    let store = fleet.store().await;
    let admin = fleet.admin().await;
    let http = reqwest::Client::new();
    start(&http, &fleet.workers[first].base, "probe", "fenced", json!({ "millis": 2_000 })).await;
    let run: RunId = "fenced".parse().unwrap();

    let started = "SELECT count(*) FROM attempts WHERE run_id = 'fenced' AND step = 'slow started' AND worker = 'w1'";
    let deadline = Instant::now() + Duration::from_secs(20);
    while admin.query_one(started, &[]).await.map(|row| row.get::<_, i64>(0)).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "w1 did not start the slow step");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fleet.workers[first].signal("STOP");
    let paused = Instant::now();
    until_run(&store, &run, Duration::from_secs(30), |status, _| status.is_finished()).await;
    eprintln!("w2 completed the run {:.2} s after w1 was paused", paused.elapsed().as_secs_f64());
    let finished = store.load(&run).await.unwrap().unwrap().entries;
    assert_eq!(finished.last(), Some(&Entry::RunCompleted { output: json!(["w1", "w2", "w2"]) }));

    fleet.workers[first].signal("CONT");
    let log = fleet.dir().join("w1-1.err");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("another worker took the run over") {
        assert!(Instant::now() < deadline, "w1 never noticed it lost the run; see {}", log.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Whatever w1 had in hand when it woke, give it time to try to write it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = store.load(&run).await.unwrap().unwrap().entries;
    assert_eq!(after, finished, "w1 wrote nothing after it woke");
    completions_once(&after, &run);
    let slow_runs: i64 = admin
        .query_one("SELECT count(*) FROM attempts WHERE run_id = 'fenced' AND step = 'slow started'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(slow_runs, 2, "the slow step ran on w1, then again on w2");
    let _ = second;
    fleet.stop();
}

/// A worker SIGKILLed in the middle of a slow step says no goodbye: its claim stays until its
/// lease expires, and then the other worker's poll finds the run, runs the step again and
/// completes the run. The run is taken over no sooner than the lease allows and within a poll
/// (plus some slack for a loaded machine) after it; the measured delay is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_runs_are_taken_over_once_its_lease_expires() {
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_millis(2_000),
        heartbeat: Duration::from_millis(500),
        poll: Duration::from_millis(200),
    };
    let mut fleet = fleet(&schema, timing);
    let (first, _second) = (fleet.start("w1"), fleet.start("w2"));
    let store = fleet.store().await;
    let admin = fleet.admin().await;
    let http = reqwest::Client::new();
    start(&http, &fleet.workers[first].base, "probe", "orphaned", json!({ "millis": 3_000 })).await;
    let run: RunId = "orphaned".parse().unwrap();

    let slow_on = |worker: &'static str| {
        format!(
            "SELECT count(*) FROM attempts WHERE run_id = 'orphaned' AND step = 'slow started' AND worker = '{worker}'"
        )
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while admin.query_one(&slow_on("w1"), &[]).await.map(|row| row.get::<_, i64>(0)).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "w1 did not start the slow step");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fleet.kill(first);
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(30);
    while admin.query_one(&slow_on("w2"), &[]).await.map(|row| row.get::<_, i64>(0)).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "w2 never took the run over");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taken_over = killed.elapsed();
    eprintln!("w2 took the run over {:.2} s after w1 was killed (lease 2 s, poll 0.2 s)", taken_over.as_secs_f64());
    // The lease was last renewed at most one heartbeat before the kill.
    assert!(taken_over >= timing.lease - timing.heartbeat, "not before the lease expired: {taken_over:?}");
    assert!(taken_over < timing.lease + timing.poll + Duration::from_secs(3), "soon after it: {taken_over:?}");

    until_run(&store, &run, Duration::from_secs(30), |status, _| status.is_finished()).await;
    let entries = store.load(&run).await.unwrap().unwrap().entries;
    assert_eq!(entries.last(), Some(&Entry::RunCompleted { output: json!(["w1", "w2", "w2"]) }));
    completions_once(&entries, &run);
    fleet.stop();
}

/// The number of payloads each hammered run takes.
const PAYLOADS: u64 = 5;

/// Payload `index` of run `run` (distinct, so a payload taken twice would show in the sum).
fn hammer_payload(run: usize, index: u64) -> u64 {
    (run as u64 + 1) * 1_000 + index * 10 + 1
}

/// Three workers while everything arrives at once: payloads through every worker at once (three
/// copies of each under one idempotency key), answers from a CLI process and over HTTP at the same
/// moment, cancellations from CLI processes and over HTTP while payloads still arrive, and the
/// workers' own claims racing for each woken run. Every payload is taken once, every question
/// resolved once, every cancellation recorded once, every tally's effect applied once, and no
/// step completion is recorded twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_point_at_once_gives_each_delivery_one_effect() {
    const RUNS: usize = 24;
    const CANCELLED: usize = 6;
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_secs(2),
        heartbeat: Duration::from_millis(500),
        poll: Duration::from_millis(100),
    };
    let mut fleet = fleet(&schema, timing);
    for name in ["w1", "w2", "w3"] {
        fleet.start(name);
    }
    let bases = fleet.bases();
    let store = fleet.store().await;
    let http = reqwest::Client::new();
    let ids: Vec<String> = (0..RUNS).map(|run| format!("hammer-{run:02}")).collect();
    for (run, id) in ids.iter().enumerate() {
        start(&http, &bases[run % bases.len()], "hammer", id, json!({ "payloads": PAYLOADS })).await;
    }
    let fleet = std::sync::Arc::new(fleet);

    // Payloads: three copies of each, one through each worker, all at once, early or not.
    let mut tasks = tokio::task::JoinSet::new();
    for (run, id) in ids.iter().enumerate() {
        for index in 0..PAYLOADS {
            for base in &bases {
                let (http, url) = (http.clone(), format!("{base}/.well-known/workflow/v1/hook/hammer-{id}"));
                let key = format!("payload-{index}");
                tasks.spawn(async move {
                    let status = post(&http, url, json!(hammer_payload(run, index)), Some(&key)).await;
                    // 404: the run was cancelled and ended before this copy arrived.
                    assert!(status == 202 || status == 404, "a payload gets 202 (or 404 once its run ended): {status}");
                });
            }
        }
    }
    // Cancellations of the first runs, from CLI processes and over HTTP at once, while their
    // payloads arrive.
    for id in ids.iter().take(CANCELLED) {
        let (fleet, cancelled) = (fleet.clone(), id.clone());
        tasks.spawn_blocking(move || {
            let (ok, stdout, stderr) = fleet.client(&["cancel", &cancelled, "--reason", "hammered"]);
            assert!(ok, "cancel {cancelled}: {stderr}");
            assert!(stdout.contains("cancel"), "cancel {cancelled}: {stdout}");
        });
        let (http, url) = (http.clone(), format!("{}/v1/runs/{id}/cancel", bases[1]));
        tasks.spawn(async move {
            let status = post(&http, url, json!({ "reason": "hammered over HTTP" }), None).await;
            assert!(status == 202 || status == 409, "a cancel gets 202 (or 409 once the run has ended): {status}");
        });
    }
    // Answers: once a run asks, from a CLI process and over HTTP at the same moment.
    for id in ids.iter().skip(CANCELLED) {
        let (fleet, http, base, id) = (fleet.clone(), http.clone(), bases[2].clone(), id.clone());
        tasks.spawn(async move {
            let request = loop {
                let listed = http.get(format!("{base}/v1/runs/{id}/questions")).send().await;
                let questions: Value = listed.unwrap().json().await.unwrap();
                if let Some(request) = questions["questions"][0]["requestId"].as_str() {
                    break request.to_owned();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let cli = {
                let (fleet, id, request) = (fleet.clone(), id.clone(), request.clone());
                tokio::task::spawn_blocking(move || fleet.client(&["answer", &id, &request, "--option", "double"]))
            };
            let url = format!("{base}/v1/runs/{id}/questions/{request}");
            let over_http = post(&http, url, json!({ "optionId": "double" }), None).await;
            let (cli_ok, _, cli_err) = cli.await.unwrap();
            assert!(
                (over_http == 204) != cli_ok,
                "run {id}: exactly one answer is accepted (HTTP {over_http}, CLI {cli_ok}: {cli_err})"
            );
        });
    }
    // Listing and inspecting while all of this happens.
    {
        let fleet = fleet.clone();
        tasks.spawn_blocking(move || {
            for _ in 0..3 {
                let (ok, stdout, stderr) = fleet.client(&["runs", "--limit", "100"]);
                assert!(ok && stdout.contains("hammer-00"), "runs: {stdout} {stderr}");
                let (ok, stdout, stderr) = fleet.client(&["inspect", "hammer-10"]);
                assert!(ok && stdout.contains("hook created"), "inspect: {stdout} {stderr}");
            }
        });
    }
    while let Some(result) = tasks.join_next().await {
        result.expect("every client task succeeds");
    }
    let admin = fleet.admin().await;
    for (run, id) in ids.iter().enumerate() {
        let run_id: RunId = id.parse().unwrap();
        until_run(&store, &run_id, Duration::from_secs(60), |status, _| status.is_finished()).await;
        let record = store.load(&run_id).await.unwrap().unwrap();
        let entries = &record.entries;
        completions_once(entries, &run_id);
        let received = count(entries, |entry| matches!(entry, Entry::HookReceived { .. }));
        if run < CANCELLED {
            assert_eq!(record.summary.status, RunStatus::Cancelled, "run {id}");
            assert_eq!(count(entries, |entry| matches!(entry, Entry::CancelRequested { .. })), 1, "run {id}");
            assert!(received as u64 <= PAYLOADS, "run {id}: no payload taken twice");
        } else {
            let sum: u64 = (0..PAYLOADS).map(|index| hammer_payload(run, index)).sum();
            assert_eq!(entries.last(), Some(&Entry::RunCompleted { output: json!({ "sum": sum * 2 }) }), "run {id}");
            assert_eq!(received as u64, PAYLOADS, "run {id}: each payload taken once");
            assert_eq!(count(entries, |entry| matches!(entry, Entry::AskResolved { .. })), 1, "run {id}");
        }
        // A tally that waited to retry when the cancel came is completed as failed, with no
        // effect: only the successful ones applied theirs.
        let tallies =
            count(entries, |entry| matches!(entry, Entry::StepCompleted { outcome: StepOutcome::Ok { .. }, .. }));
        let sql = "SELECT count(*) FROM effects WHERE key LIKE $1";
        let effects: i64 = admin.query_one(sql, &[&format!("{id}:%")]).await.unwrap().get(0);
        assert!(effects as usize >= tallies, "run {id}: every journaled tally applied its effect: {entries:#?}");
        assert!(effects as usize <= tallies + 1, "run {id}: at most the tally cut short by the cancel unjournaled");
    }
    std::sync::Arc::try_unwrap(fleet).ok().expect("the client tasks are done").stop();
}

/// The host commands, each a process of its own, work on runs that two workers advance: `call`
/// hands its run over and follows it, `resume-hook`, `answer` and `cancel` deliver through the
/// store and follow the run as a worker carries it on, `questions`, `runs` and `inspect` read it.
/// `worker` without a database, and a database URL that cannot be used, are refused clearly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_commands_work_beside_running_workers() {
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_secs(2),
        heartbeat: Duration::from_millis(500),
        poll: Duration::from_millis(100),
    };
    let mut fleet = fleet(&schema, timing);
    fleet.start("w1");
    fleet.start("w2");

    let (ok, stdout, stderr) = fleet.client(&["call", "probe", r#"{"millis": 10}"#, "--id", "cli-probe"]);
    assert!(ok, "{stderr}");
    let workers: Value = serde_json::from_str(stdout.trim()).expect("the run's output");
    assert!(workers.as_array().unwrap().iter().all(|name| name == "w1" || name == "w2"), "{workers}");

    let (ok, stdout, stderr) = fleet.client(&["call", "hammer", r#"{"payloads": 1}"#, "--id", "cli-hammer"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "run cli-hammer is parked on a durable wait; a worker (`worker`) keeps it moving");
    let (ok, stdout, stderr) = fleet.client(&["resume-hook", "hammer-cli-hammer", "5"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "delivered to run cli-hammer; a worker (`worker`) carries it on");
    let deadline = Instant::now() + Duration::from_secs(20);
    let request = loop {
        let (ok, stdout, _) = fleet.client(&["questions", "cli-hammer"]);
        assert!(ok);
        if let Some(line) = stdout.lines().find(|line| line.contains("Double it?")) {
            break line.split_whitespace().next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the question was never asked: {stdout}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (ok, stdout, stderr) = fleet.client(&["answer", "cli-hammer", &request, "--option", "double"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), r#"{"sum":10}"#, "the answer's command follows the run to its end");

    let (ok, stdout, _) = fleet.client(&["call", "hammer", r#"{"payloads": 3}"#, "--id", "cli-cancel"]);
    assert!(ok && stdout.contains("parked"), "{stdout}");
    let (ok, stdout, stderr) = fleet.client(&["cancel", "cli-cancel"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "run cli-cancel cancelled; its cleanup ran");

    let (ok, stdout, _) = fleet.client(&["runs"]);
    assert!(ok);
    let listed: Vec<String> =
        stdout.lines().skip(1).map(|line| line.split_whitespace().take(2).collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(listed, ["cli-cancel cancelled", "cli-hammer completed", "cli-probe completed"], "{stdout}");
    let (ok, stdout, _) = fleet.client(&["inspect", "cli-hammer"]);
    assert!(ok && stdout.contains("op 0: hook received 5"), "{stdout}");

    let mut without = fleet.command("client");
    without.env_remove("EVE_DATABASE_URL").env_remove("EVE_DATABASE_SCHEMA").args(["worker", "--addr", "127.0.0.1:0"]);
    let output = without.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.starts_with("error: `worker` shares runs through Postgres: give --database-url"), "{stderr}");
    let output = fleet
        .command("client")
        .args(["runs", "--database-url", "postgres://eve:hunter2@db:port/eve"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("the Postgres URL cannot be used"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the password is not shown: {stderr}");
    fleet.stop();
}

/// A worker started before its database can be reached waits for it, saying what it waits for,
/// and goes to work once it can be: here the database's port answers only two seconds after the
/// worker starts (a forwarder to the test server opens then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_before_its_database_waits_for_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let schema = Schema::new().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // postgres://user:password@host:port/database?…: the same URL with the forwarder's port.
    let url = schema.store_url();
    let (credentials, rest) = url.split_once('@').expect("the test server's URL names its user");
    let (upstream, database) = rest.split_once('/').expect("and its database");
    let upstream = upstream.to_owned();
    let later = format!("{credentials}@127.0.0.1:{port}/{database}");
    let fleet = Fleet::new(
        &later,
        &schema.name,
        Timing {
            lease: Duration::from_secs(5),
            heartbeat: Duration::from_millis(500),
            poll: Duration::from_millis(200),
        },
    );
    let mut worker = fleet
        .command("early")
        .args(["worker", "--addr", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the worker starts");
    let (stdout, stderr) = (worker.stdout.take().unwrap(), worker.stderr.take().unwrap());
    let lines = |reader: Box<dyn std::io::Read + Send>| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        receiver
    };
    let (out, err) = (lines(Box::new(stdout)), lines(Box::new(stderr)));

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(worker.try_wait().unwrap().is_none(), "the worker did not give up on its database");
    let forwarder = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("the port is still free");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = forwarder.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let sharing = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match out.recv_timeout(left) {
                Ok(line) if line.starts_with("worker early sharing") => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let said: Vec<String> = err.try_iter().collect();
    assert!(sharing.is_some(), "the worker went to work once its database answered; it said: {said:#?}");
    let waited = said.iter().find(|line| line.starts_with("waiting for the database: "));
    assert!(waited.is_some_and(|line| line.contains("trying again in")), "it said what it waited for: {said:#?}");
    assert!(!said.iter().any(|line| line.contains("password")), "no password in what it said: {said:#?}");
}
