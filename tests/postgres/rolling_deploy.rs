//! A rolling deploy on Postgres with two real builds of one tool: the worker binary as it is (v1),
//! and built again with the tests crate's feature `v2`, whose `rolling` tool calls `second_v2`
//! where v1 calls `second` (op 2). The test builds both with cargo (the dependencies are built
//! already, so only the binary compiles: about a minute the first time, seconds after) and copies
//! each aside.
//!
//! 100 runs start on v1 workers and wait at their gate (op 1). 40 pass the gate on v1, taking
//! `second`, and wait for `done`: from then on only v1 replays them. v2 workers start while all
//! are in flight; 20 of the 40 get `done` through a v2 worker and must finish on a v1 worker (v2
//! passes them over). The v1 workers stop. The other 20 get `done` too, which v2 passes over:
//! they stay unfinished, never failed. `runs upgrade` (v2) moves the 60 runs still at their gate,
//! which replay on v2, and refuses the 20, naming op 2; the 60 then finish on v2, and the 20
//! finish once a v1 worker comes back. No run diverges anywhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use eve_tools::store::{PostgresStore, Store};
use eve_tools::{Entry, RunId, RunStatus};
use serde_json::json;

use crate::cluster::Schema;
use crate::processes::{Fleet, Timing, WORKER_BIN};

const RUNS: usize = 100;
/// The runs that pass their gate on v1 (so only v1 replays them): the first 40.
const PAST_THE_GATE: usize = 40;
/// Of those, the runs that get `done` while v1 workers live: the first 20.
const DONE_ON_V1: usize = 20;

/// Builds the worker binary without and with the feature `v2`, copies each into `dir`, and leaves
/// the v1 build where the other tests find it.
fn builds(dir: &Path) -> (PathBuf, PathBuf) {
    let started = Instant::now();
    let bin = Path::new(WORKER_BIN);
    let profile_dir = bin.parent().expect("the binary is in a profile directory");
    let target = profile_dir.parent().expect("the profile directory is in the target directory");
    let profile = profile_dir.file_name().and_then(|name| name.to_str()).expect("a profile name");
    let build = |features: &[&str], copy: Option<&str>| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cargo.args(["build", "--quiet", "--bin", "pg-worker", "--manifest-path"]).arg(&manifest);
        cargo.env("CARGO_TARGET_DIR", target).args(features);
        if profile != "debug" {
            cargo.args(["--profile", profile]);
        }
        let status = cargo.status().expect("cargo runs");
        assert!(status.success(), "cargo build {features:?} of the worker binary failed");
        copy.map(|name| {
            let copy = dir.join(name);
            std::fs::copy(bin, &copy).expect("the binary is copied aside");
            copy
        })
    };
    let v1 = build(&[], Some("pg-worker-v1")).expect("copied");
    let v2 = build(&["--features", "v2"], Some("pg-worker-v2")).expect("copied");
    build(&[], None);
    eprintln!("built both worker binaries in {:?}", started.elapsed());
    (v1, v2)
}

/// Waits (up to `within`) until `check` holds for the run's status and parked flag.
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

/// Waits (up to 30 s) until the run is parked with `entries` entries in its journal, not counting
/// retries: a step's attempt may fail while the fleet's effects database is busy, and retry.
async fn until_entries(store: &PostgresStore, run: &RunId, entries: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (summary, _) = store.tail(run).await.expect("the store reads").expect("the run exists");
        if summary.parked {
            let journal = store.load(run).await.expect("the store reads").expect("the run exists").entries;
            let counted = journal.iter().filter(|entry| !matches!(entry, Entry::StepRetrying { .. })).count();
            if counted == entries {
                return;
            }
            if Instant::now() >= deadline {
                let kinds: Vec<String> =
                    journal.iter().map(|entry| format!("{entry:?}").chars().take(120).collect()).collect();
                // The last entry whole: a retried step's error says why it keeps failing.
                let last = journal.last().map(|entry| format!("{entry:?}")).unwrap_or_default();
                panic!(
                    "run {run} did not park with {entries} entries: {summary:?}\n{}\nlast: {last}",
                    kinds.join("\n")
                );
            }
        }
        assert!(Instant::now() < deadline, "run {run} did not park: {summary:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Posts `payload` to the hook `token` through the worker at `base`.
async fn deliver(http: &reqwest::Client, base: &str, token: &str, payload: u64) {
    let url = format!("{base}/.well-known/workflow/v1/hook/{token}");
    let response = http.post(url).header("Idempotency-Key", token).json(&payload).send().await;
    let status = response.map(|response| response.status().as_u16()).unwrap_or(0);
    assert_eq!(status, 202, "the payload for {token} is accepted");
}

/// The workers the attempts of `step` in `run` ran on.
async fn ran_on(admin: &tokio_postgres::Client, run: &RunId, step: &str) -> Vec<String> {
    let sql = "SELECT DISTINCT worker FROM attempts WHERE run_id = $1 AND step = $2";
    let rows = admin.query(sql, &[&run.as_str(), &step]).await.expect("the attempts read");
    rows.iter().map(|row| row.get(0)).collect()
}

/// Every run of the deploy: none failed, and none journals a divergence.
async fn none_diverged(store: &PostgresStore, runs: &[RunId]) {
    for run in runs {
        let record = store.load(run).await.expect("the store reads").expect("the run exists");
        assert_ne!(record.summary.status, RunStatus::Failed, "run {run} failed: {:?}", record.entries.last());
        assert!(!record.entries.iter().any(|entry| matches!(entry, Entry::RunFailed { .. })), "run {run}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_finishes_old_runs_on_old_workers_or_upgrades_them() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let (v1, v2) = tokio::task::block_in_place(|| builds(dir.path()));
    let schema = Schema::new().await;
    let timing =
        Timing { lease: Duration::from_secs(3), heartbeat: Duration::from_secs(1), poll: Duration::from_millis(100) };
    let mut fleet = Fleet::new(&schema.store_url(), &schema.name, timing);
    let store = fleet.store().await;
    let http = reqwest::Client::new();
    for name in ["v1-a", "v1-b"] {
        fleet.start_binary(name, &v1);
    }
    let v1_bases = fleet.bases();

    // 100 runs start on v1 and wait at their gate; the first 40 pass it on v1.
    let mut runs = Vec::new();
    for index in 0..RUNS {
        let id = format!("rolling-{index:03}");
        let url = format!("{}/v1/tools/rolling/runs", v1_bases[index % 2]);
        let response = http.post(url).json(&json!({ "input": { "n": index }, "runId": id })).send().await;
        assert_eq!(response.map(|response| response.status().as_u16()).unwrap_or(0), 201, "run {id} starts");
        runs.push(id.parse::<RunId>().unwrap());
    }
    for run in &runs {
        // Parked at the gate: started, first, gate created.
        until_entries(&store, run, 3).await;
    }
    for run in &runs[..PAST_THE_GATE] {
        deliver(&http, &v1_bases[0], &format!("gate-{run}"), 10).await;
    }
    for run in &runs[..PAST_THE_GATE] {
        // Parked again with `second` taken: started, first, gate created and received, second, done created.
        until_entries(&store, run, 6).await;
    }

    // v2 workers start beside v1; 20 runs past the gate get `done` through a v2 worker and finish on v1.
    let v2_slots = [fleet.start_binary("v2-a", &v2), fleet.start_binary("v2-b", &v2)];
    let v2_bases: Vec<String> = v2_slots.iter().map(|slot| fleet.workers[*slot].base.clone()).collect();
    for run in &runs[..DONE_ON_V1] {
        deliver(&http, &v2_bases[0], &format!("done-{run}"), 100).await;
    }
    let admin = fleet.admin().await;
    for run in &runs[..DONE_ON_V1] {
        until_run(&store, run, Duration::from_secs(30), |status, _| status.is_finished()).await;
        let last = ran_on(&admin, run, "last").await;
        assert!(last.iter().all(|worker| worker.starts_with("v1-")), "run {run} finished on v1, not {last:?}");
    }

    // The v1 workers stop; the other 20 past the gate get `done`, which v2 passes over.
    fleet.kill(0);
    fleet.kill(1);
    for run in &runs[DONE_ON_V1..PAST_THE_GATE] {
        deliver(&http, &v2_bases[1], &format!("done-{run}"), 100).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for run in &runs[DONE_ON_V1..PAST_THE_GATE] {
        let (summary, _) = store.tail(run).await.unwrap().unwrap();
        assert_eq!(summary.status, RunStatus::Active, "run {run} waits for a v1 worker, unfailed");
    }

    // The upgrade moves the 60 runs at their gate and refuses the 20, naming op 2.
    let (ok, out, err) = fleet.client_of(&v2, &["runs", "upgrade", "--json"]);
    assert!(!ok, "the upgrade fails while runs cannot move: {out}{err}");
    assert!(err.contains("20 runs are left on the build that started them"), "{err}");
    let upgrade: serde_json::Value = serde_json::from_str(out.trim()).expect("the upgrade prints JSON");
    let ids = |key: &str| -> Vec<String> {
        let mut ids: Vec<String> =
            upgrade[key].as_array().unwrap().iter().map(|run| run["run"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    let expected = |range: &[RunId]| range.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(ids("upgraded"), expected(&runs[PAST_THE_GATE..]), "every run at its gate moves");
    assert_eq!(ids("refused"), expected(&runs[DONE_ON_V1..PAST_THE_GATE]), "every run past it is refused");
    for refused in upgrade["refused"].as_array().unwrap() {
        assert_eq!(refused["verdict"]["verdict"], "diverges", "{refused}");
        assert_eq!(refused["verdict"]["op"], 2, "the refusal names op 2: {refused}");
    }
    let (_, text, _) = fleet.client_of(&v2, &["runs", "upgrade"]);
    assert!(text.contains("op 2"), "the listing names the op: {text}");

    // The upgraded runs finish on v2; the refused ones once a v1 worker is back.
    for run in &runs[PAST_THE_GATE..] {
        deliver(&http, &v2_bases[0], &format!("gate-{run}"), 10).await;
    }
    for run in &runs[PAST_THE_GATE..] {
        // Started, first, gate created, upgraded, gate received, second_v2, done created.
        until_entries(&store, run, 7).await;
        deliver(&http, &v2_bases[1], &format!("done-{run}"), 100).await;
    }
    for run in &runs[PAST_THE_GATE..] {
        until_run(&store, run, Duration::from_secs(30), |status, _| status.is_finished()).await;
        assert_eq!(ran_on(&admin, run, "second_v2").await.len(), 1, "run {run} took v2's step");
        let last = ran_on(&admin, run, "last").await;
        assert!(last.iter().all(|worker| worker.starts_with("v2-")), "run {run} finished on v2, not {last:?}");
    }
    fleet.start_binary("v1-c", &v1);
    for run in &runs[DONE_ON_V1..PAST_THE_GATE] {
        until_run(&store, run, Duration::from_secs(30), |status, _| status.is_finished()).await;
        assert_eq!(ran_on(&admin, run, "last").await, ["v1-c"], "run {run} finished on the v1 worker");
    }
    none_diverged(&store, &runs).await;
    for run in &runs {
        let (summary, _) = store.tail(run).await.unwrap().unwrap();
        assert_eq!(summary.status, RunStatus::Completed, "run {run}");
    }
    fleet.stop();
}
