//! Pinned runs on Postgres, in one process: a run another build started is advanced by a worker of
//! this build only if its journal replays here; one that would diverge is passed over (given back
//! untouched, not failed, not claimed again in a loop) for a worker of its own build, until
//! `Runtime::upgrade_runs` moves the runs that replay and lists those that do not, with the op.
//! The other build is played by runs created through the store with another build's stamp; the
//! rolling deploy of two real builds is in `rolling_deploy.rs`.

use std::time::Duration;

use eve_tools::journal::{BuildStamp, RecordKind};
use eve_tools::prelude::*;
use eve_tools::store::{Append, Created, Fence, NewRun, PostgresStore, Store, WorkerId};
use eve_tools::testing::ReplayVerdict;
use eve_tools::{Entry, Op, RunId, RunOutcome, RunStatus, Runtime, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::cluster::Schema;

/// A pinned run's input.
#[derive(Deserialize, JsonSchema)]
pub struct Steps {
    n: u64,
}

#[step]
async fn bump(value: u64) -> Result<u64, StepError> {
    Ok(value + 1)
}

/// Bumps a counter `n` times, a step each.
#[workflow_tool]
pub async fn bumps(input: Steps) -> Result<u64, ToolError> {
    let mut value = 0;
    for _ in 0..input.n {
        value = bump(value).await?;
    }
    Ok(value)
}

/// The stamp of a build other than this one.
fn old_build() -> BuildStamp {
    BuildStamp { fingerprint: "0123456789abcdef".into(), version: "0.9.0-old".into() }
}

/// Creates a run of `bumps` as the old build would, with `entries` after its `RunStarted`, and
/// gives its claim back so any worker may take it.
async fn old_run(store: &PostgresStore, id: &str, entries: Vec<Entry>) -> RunId {
    let run: RunId = id.parse().unwrap();
    let new = NewRun {
        id: run.clone(),
        workflow_id: "postgres::pinning::bumps".into(),
        tool: "bumps".into(),
        input: json!({ "n": 2 }),
        created_at: Timestamp::from_system_time(std::time::SystemTime::now()),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: Some(old_build()),
        forked_from: None,
    };
    let Created::New(fence) = store.create_run(new, &WorkerId("old-worker".into())).await.unwrap() else {
        panic!("run {id} is new")
    };
    if !entries.is_empty() {
        let mut append = Append { first_seq: 1, entries, ..Append::default() };
        store.append(&run, fence, &mut append).await.unwrap();
    }
    store.release(&run, fence).await.unwrap();
    run
}

/// A journal this build's `bumps` does not replay: op 0 is a recorded clock read, where it asks
/// for the step `bump`.
fn diverging() -> Vec<Entry> {
    vec![Entry::Recorded { op: Op(0), kind: RecordKind::Now, value: json!(0).into() }]
}

/// A runtime of this build on the schema, a worker once recovered.
fn runtime(schema: &Schema, name: &str) -> Runtime {
    Runtime::builder()
        .postgres_with(schema.store_url(), schema.options())
        .worker_id(name)
        .lease(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(250))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("the runtime builds")
}

/// The run's epoch: how many claims it has seen (a claim by a test raises it, then is released).
async fn claims(store: &PostgresStore, run: &RunId) -> u64 {
    let probe = WorkerId("probe".into());
    let claimed = store.claim(run, &probe, Duration::from_secs(1), Timestamp::from_millis(0), 0);
    let fence: Fence = claimed.await.expect("nobody holds the run").fence;
    store.release(run, fence).await.unwrap();
    fence.epoch - 1
}

/// A worker takes a run another build started when its journal replays here, and passes over one
/// that would diverge: it gives the claim back, writes nothing, does not fail it, and does not
/// claim it again however often it polls.
#[tokio::test]
async fn a_worker_runs_what_replays_and_passes_over_what_diverges() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let replays = old_run(&store, "replays", Vec::new()).await;
    let diverges = old_run(&store, "diverges", diverging()).await;

    let worker = runtime(&schema, "new");
    worker.recover().await.unwrap();
    let handle = worker.handle(replays.clone());
    let outcome = tokio::time::timeout(Duration::from_secs(20), handle.outcome());
    assert_eq!(outcome.await.unwrap().unwrap(), RunOutcome::Completed(json!(2)), "a run that replays is taken");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let passed_once = claims(&store, &diverges).await;
    assert_eq!(passed_once, 2, "the creator's claim, then the worker's one look at the diverging run");
    // Twenty polls later, still not claimed again: the worker remembers it passed the run over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(claims(&store, &diverges).await, passed_once + 1, "only the probe's claim came since");
    let record = worker.journal(&diverges).await.unwrap();
    assert_eq!(record.summary.status, RunStatus::Active, "the run is not failed");
    assert_eq!(record.entries.len(), 2, "nothing was written to it");
    worker.shutdown().await;
}

/// `upgrade_runs` moves a run whose journal replays on this build to it (journaling
/// `RunUpgraded`, after which a worker takes it as its own) and lists a run that would diverge
/// with the op, leaving it unfailed.
#[tokio::test]
async fn an_upgrade_moves_the_runs_that_replay_and_lists_the_others() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let replays = old_run(&store, "replays", Vec::new()).await;
    let diverges = old_run(&store, "diverges", diverging()).await;

    let client = runtime(&schema, "upgrader");
    let upgrade = client.upgrade_runs().await.unwrap();
    assert_eq!(upgrade.upgraded.len(), 1, "{upgrade:?}");
    let moved = &upgrade.upgraded[0];
    assert_eq!((&moved.run, moved.from.as_ref()), (&replays, Some(&old_build())));
    assert_eq!(moved.to.fingerprint, eve_runtime::registry::tool("bumps").unwrap().fingerprint);
    assert_eq!(upgrade.refused.len(), 1, "{upgrade:?}");
    let refused = &upgrade.refused[0];
    assert_eq!(refused.run, diverges);
    assert!(matches!(refused.verdict, ReplayVerdict::Diverges { op: Op(0), .. }), "{:?}", refused.verdict);
    assert!(refused.to_string().contains("op 0"), "the refusal names the op: {refused}");

    let record = client.journal(&replays).await.unwrap();
    assert!(matches!(record.entries.last(), Some(Entry::RunUpgraded { .. })), "the move is journaled");
    let again = client.upgrade_runs().await.unwrap();
    assert_eq!((again.current, again.upgraded.len(), again.refused.len()), (1, 0, 1), "{again:?}");

    let worker = runtime(&schema, "new");
    worker.recover().await.unwrap();
    let handle = worker.handle(replays.clone());
    let outcome = tokio::time::timeout(Duration::from_secs(20), handle.outcome());
    assert_eq!(outcome.await.unwrap().unwrap(), RunOutcome::Completed(json!(2)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let record = worker.journal(&diverges).await.unwrap();
    assert_eq!((record.summary.status, record.entries.len()), (RunStatus::Active, 2), "left as it was");
    worker.shutdown().await;
}
