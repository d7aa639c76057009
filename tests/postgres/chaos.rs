//! Chaos: four worker processes share many runs on Postgres while one of them is SIGKILLed each
//! time another tenth to sixth of the runs has completed, at least a second apart (and started
//! again under its name), and the server itself restarts once
//! (`pg_ctl restart -m fast`). Each run takes ten steps, a durable sleep and a hook that the
//! outside world (this test) delivers over HTTP to whichever worker it picks. Runs are started
//! both through a worker's run API (`POST /v1/tools/chaos/runs`, which that worker runs first) and
//! as a client does (created and handed over through the store, which wakes the workers).
//!
//! Then: every run completed with the output computed without eve; no run's journal records a
//! step's completion twice; and the effect each step applies through its idempotency key (a row
//! in a table keyed by it) is there exactly once per step, with the journaled value, however many
//! times steps ran (the test reports how many ran again).
//!
//! Size: 1,000 runs, the size issue 11 names (under a minute on two cores in a debug build);
//! `EVE_CHAOS_RUNS=N` runs another number. The test starts a cluster of its own (it restarts it),
//! with `scripts/postgres.sh`.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eve_tools::journal::StepOutcome;
use eve_tools::store::{NewRun, Store, WorkerId};
use eve_tools::{Entry, RunId, RunStatus, Timestamp};
use serde_json::json;

use crate::cluster::Cluster;
use crate::processes::{Fleet, Timing};

/// The step's computation, as the worker binary does it.
fn mix(round: u64, acc: u64) -> u64 {
    acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(round + 1) >> 1
}

/// The hook payload the outside world sends to run `index`.
fn payload(index: u64) -> u64 {
    index * 7_919 + 13
}

/// The output run `index` must have: five steps, the payload, five steps.
fn expected(index: u64) -> u64 {
    let acc = (0..5).fold(index, |acc, round| mix(round, acc)) ^ payload(index);
    (5..10).fold(acc, |acc, round| mix(round, acc))
}

fn run_id(index: u64) -> RunId {
    format!("chaos-{index:05}").parse().expect("a valid run id")
}

fn index_of(run: &str) -> u64 {
    run.trim_start_matches("chaos-").parse().expect("a chaos run id")
}

/// A small deterministic random source (xorshift), seeded from the process id.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// POSTs `body` to `path` on some worker, trying others while one is down (being killed).
async fn post_somewhere(
    http: &reqwest::Client,
    bases: &Mutex<Vec<String>>,
    path: &str,
    body: serde_json::Value,
    key: &str,
) -> u16 {
    for attempt in 0..200 {
        let base = {
            let bases = bases.lock().unwrap();
            bases[attempt % bases.len()].clone()
        };
        let sent = http.post(format!("{base}{path}")).header("Idempotency-Key", key).json(&body).send().await;
        match sent {
            Ok(response) if response.status().is_server_error() => {}
            Ok(response) => return response.status().as_u16(),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no worker took {path}");
}

/// How many runs have completed, or `None` if the connection was lost (the server restarted).
async fn completed(admin: &tokio_postgres::Client) -> Option<u64> {
    let row = admin.query_one("SELECT count(*) FROM runs WHERE status = 'completed'", &[]).await.ok()?;
    Some(row.get::<_, i64>(0) as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_complete_once_while_workers_are_killed_and_postgres_restarts() {
    let runs: u64 = std::env::var("EVE_CHAOS_RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(1_000);
    let cluster = Cluster::start()
        .unwrap_or_else(|reason| panic!("the chaos test starts its own cluster, which failed: {reason}"));
    let timing =
        Timing { lease: Duration::from_secs(3), heartbeat: Duration::from_secs(1), poll: Duration::from_millis(250) };
    let mut fleet = Fleet::new(&cluster.url, "chaos", timing);
    for name in ["w1", "w2", "w3", "w4"] {
        fleet.start(name);
    }
    let store = fleet.store().await;
    let admin = fleet.admin().await;
    let started = Instant::now();
    let bases = Arc::new(Mutex::new(fleet.bases()));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();

    // Half the runs start through a worker's run API, half as a client starts them.
    for index in 0..runs {
        let input = json!({ "seed": index, "sleep_ms": 300 });
        if index % 2 == 0 {
            let body = json!({ "input": input, "runId": run_id(index) });
            let status = post_somewhere(&http, &bases, "/v1/tools/chaos/runs", body, "start").await;
            assert_eq!(status, 201, "run {index} is started");
        } else {
            let new = NewRun {
                id: run_id(index),
                workflow_id: "pg_worker::chaos".into(),
                tool: "chaos".into(),
                input,
                created_at: Timestamp::from_system_time(std::time::SystemTime::now()),
                principal: None,
                interactive: true,
                parent: None,
                traceparent: None,
                build: None,
                forked_from: None,
            };
            if let eve_tools::store::Created::New(fence) =
                store.create_run(new, &WorkerId("chaos-client".into())).await.unwrap()
            {
                store.release(&run_id(index), fence).await.unwrap();
            }
        }
    }
    eprintln!("started {runs} runs in {:.1} s", started.elapsed().as_secs_f64());

    // The outside world: delivers each run's hook payload once its hook exists, to any worker.
    let done = Arc::new(AtomicBool::new(false));
    let deliveries = Arc::new(AtomicUsize::new(0));
    let outside = tokio::spawn({
        let (bases, http, done, deliveries, fleet_url, schema) =
            (bases.clone(), http.clone(), done.clone(), deliveries.clone(), fleet.url.clone(), fleet.schema.clone());
        async move {
            let (watcher, connection) = tokio_postgres::connect(&fleet_url, tokio_postgres::NoTls).await.unwrap();
            let connection = tokio::spawn(connection);
            let _ = watcher.batch_execute(&format!("SET search_path = {schema}")).await;
            let mut delivered = HashSet::new();
            let mut watcher = Some(watcher);
            while !done.load(Ordering::SeqCst) {
                let waiting = match &watcher {
                    Some(client) => client.query("SELECT run_id FROM hooks", &[]).await,
                    None => break,
                };
                let Ok(rows) = waiting else {
                    // The server restarted: open a new connection.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Ok((client, connection)) = tokio_postgres::connect(&fleet_url, tokio_postgres::NoTls).await {
                        tokio::spawn(connection);
                        let _ = client.batch_execute(&format!("SET search_path = {schema}")).await;
                        watcher = Some(client);
                    }
                    continue;
                };
                for row in rows {
                    let run: String = row.get(0);
                    if delivered.contains(&run) {
                        continue;
                    }
                    let path = format!("/.well-known/workflow/v1/hook/chaos-{run}");
                    let status = post_somewhere(&http, &bases, &path, json!(payload(index_of(&run))), "payload").await;
                    if status == 202 {
                        delivered.insert(run);
                        deliveries.fetch_add(1, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            drop(watcher);
            connection.abort();
        }
    });

    // Chaos: a worker killed and started again each time another tenth to sixth of the runs has
    // completed (by progress, not by the clock, so a fast machine gets its kills too), at least
    // 1 s apart; the server restarted once, when a third of the runs have completed.
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
    let (mut kills, mut restarted_after) = (0, None);
    let mut admin = admin;
    let mut next_kill = (runs / 10, Instant::now() + Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let finished = match completed(&admin).await {
            Some(count) => count,
            None => {
                // The server restarted under this connection.
                admin = fleet.admin().await;
                continue;
            }
        };
        if finished == runs {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {finished} of {runs} runs completed within 10 minutes; logs in {}",
            fleet.dir().display()
        );
        if restarted_after.is_none() && finished >= runs / 3 {
            let restart = Instant::now();
            cluster.restart("fast");
            restarted_after = Some((finished, restart.elapsed()));
            eprintln!(
                "Postgres restarted after {finished} runs completed, in {:.2} s",
                restart.elapsed().as_secs_f64()
            );
            admin = fleet.admin().await;
        }
        if finished >= next_kill.0 && Instant::now() >= next_kill.1 {
            let slot = dice.roll(4) as usize;
            fleet.kill_and_restart(slot);
            *bases.lock().unwrap() = fleet.bases();
            kills += 1;
            let more = runs / 10 + dice.roll(runs / 15 + 1);
            next_kill = (finished + more, Instant::now() + Duration::from_secs(1));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::SeqCst);
    outside.await.unwrap();

    // Every run completed with its expected output, each step's completion journaled once.
    let mut journaled: BTreeMap<String, i64> = BTreeMap::new();
    for index in 0..runs {
        let record = store.load(&run_id(index)).await.unwrap().expect("the run exists");
        assert_eq!(record.summary.status, RunStatus::Completed, "run {index}");
        assert_eq!(record.entries.last(), Some(&Entry::RunCompleted { output: json!(expected(index)) }), "run {index}");
        let mut ops = HashSet::new();
        for entry in &record.entries {
            if let Entry::StepCompleted { op, outcome: StepOutcome::Ok { value }, .. } = entry {
                assert!(ops.insert(op.0), "run {index}: the completion of {op} is journaled twice");
                let key = format!("{}:{}", run_id(index), op.0);
                journaled.insert(key, value.to_value().as_u64().expect("a step result is a number") as i64 & i64::MAX);
            }
        }
        assert_eq!(ops.len(), 10, "run {index}: ten steps completed");
    }
    // Each guarded effect applied exactly once, with the journaled value.
    let admin = fleet.admin().await;
    let effects: BTreeMap<String, i64> = admin
        .query("SELECT key, value FROM effects", &[])
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(effects.len(), journaled.len(), "one effect per step, no more");
    for (key, value) in &journaled {
        assert_eq!(effects.get(key), Some(value), "the effect of step {key} (its idempotency key)");
    }
    let attempts: i64 = admin.query_one("SELECT count(*) FROM attempts", &[]).await.unwrap().get(0);
    let (restart_at, restart_took) = restarted_after.expect("the server was restarted");
    eprintln!(
        "chaos: {runs} runs × 10 steps on 4 workers in {:.1} s; {kills} SIGKILLs; Postgres restarted once (after {restart_at} \
         runs, {:.2} s); {} hook deliveries; {attempts} step attempts for {} steps ({} ran again after a kill or a lost commit)",
        elapsed.as_secs_f64(),
        restart_took.as_secs_f64(),
        deliveries.load(Ordering::SeqCst),
        journaled.len(),
        attempts - journaled.len() as i64,
    );
    assert!(kills >= 3, "workers were killed while runs were under way ({kills})");
    fleet.stop();
}
