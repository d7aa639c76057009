//! Conformance cases for claims beyond the core suite:
//! [`claims_conformance_suite!`](crate::claims_conformance_suite) holds cases every store passes
//! ([`Store::claimable`] and [`Store::renew`] as a single process sees them), and
//! [`shared_conformance_suite!`](crate::shared_conformance_suite) the cases only a shared store
//! (`is_shared() == true`) must pass: leases that bind other workers and expire, stale workers
//! that write nothing, and many workers claiming one run at once.
//!
//! ```
//! eve_runtime::claims_conformance_suite!(memory_claims, async { eve_runtime::store::MemoryStore::new() });
//! ```
//!
//! Like [`conformance_suite!`](crate::conformance_suite), each macro expands to a module with one
//! `#[tokio::test]` per case, each given a fresh store (or `(store, guard)` pair) made by the async
//! expression.

use std::time::Duration;

use futures::future::join_all;
use serde_json::json;

use super::{Append, Claimed, Created, Delivery, DeliveryPayload, Fence, NewRun, Store, StoreError, Target, WorkerId};
use crate::journal::{Entry, Op, RecordKind, RunId};
use crate::secret::TokenHash;
use crate::time::Timestamp;

/// Expands to a module named `$name` with one `#[tokio::test]` per case every store passes.
#[macro_export]
macro_rules! claims_conformance_suite {
    ($name:ident, $make:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::__shared_conformance_cases!($make;
                claimable_lists_runs_with_something_to_do,
                renewing_a_current_claim_keeps_it,
            );
        }
    };
}

/// Expands to a module named `$name` with one `#[tokio::test]` per case a shared store must pass.
#[macro_export]
macro_rules! shared_conformance_suite {
    ($name:ident, $make:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::__shared_conformance_cases!($make;
                the_creator_holds_a_new_run,
                an_expired_lease_moves_the_run_to_another_worker,
                a_stale_workers_writes_are_refused_and_write_nothing,
                park_and_release_give_the_lease_up_at_once,
                renew_extends_the_lease_until_another_claim,
                claimable_leaves_out_runs_under_a_live_lease,
                concurrent_claims_by_many_workers_have_one_winner,
            );
        }
    };
}

/// One `#[tokio::test]` per named case of this module; used by the macros above.
#[doc(hidden)]
#[macro_export]
macro_rules! __shared_conformance_cases {
    ($make:expr; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $case() {
                let fixture = $make.await;
                $crate::store::shared_conformance::$case($crate::store::conformance::Fixture::store(&fixture)).await;
            }
        )*
    };
}

// ---- Helpers -------------------------------------------------------------------------------

fn worker(name: &str) -> WorkerId {
    WorkerId(format!("worker-{name}"))
}

fn at(millis: u64) -> Timestamp {
    Timestamp::from_millis(millis)
}

/// Creates the run `name` at time `created_at` for worker `a`, and returns its id and fence.
async fn create(store: &dyn Store, name: &str, created_at: u64) -> (RunId, Fence) {
    let id: RunId = name.parse().expect("case run ids are valid");
    let run = NewRun {
        id: id.clone(),
        workflow_id: "claims::workflow".into(),
        tool: "claims_tool".into(),
        input: json!({}),
        created_at: at(created_at),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    };
    match store.create_run(run, &worker("a")).await {
        Ok(Created::New(fence)) => (id, fence),
        other => panic!("creating the new run {id} should return Created::New, got {other:?}"),
    }
}

async fn claim(store: &dyn Store, run: &RunId, who: &str, lease: u64, now: u64) -> Result<Claimed, StoreError> {
    store.claim(run, &worker(who), Duration::from_millis(lease), at(now), 0).await
}

async fn claimed(store: &dyn Store, run: &RunId, who: &str, lease: u64, now: u64) -> Claimed {
    let result = claim(store, run, who, lease, now).await;
    result.unwrap_or_else(|error| panic!("worker {who} should claim run {run} at {now}, got {error}"))
}

fn assert_leased(result: Result<Claimed, StoreError>, owner: &str, until: Option<u64>) {
    match result {
        Err(StoreError::Leased { owner: held_by, until: held_until, .. }) => {
            assert_eq!(held_by, worker(owner).0, "the error names the worker holding the lease");
            if let Some(until) = until {
                assert_eq!(held_until, at(until), "the error says when the lease expires");
            }
        }
        other => panic!("the claim should be refused with Leased by {owner}, got {:?}", other.map(|c| c.fence)),
    }
}

fn record(op: u32) -> Entry {
    Entry::Recorded { op: Op(op), kind: RecordKind::Random, value: json!(op).into() }
}

async fn append(store: &dyn Store, run: &RunId, fence: Fence, first_seq: u64, entries: Vec<Entry>) {
    let result = store
        .append(
            run,
            fence,
            &mut Append { first_seq, entries, consumed: Vec::new(), notices: Vec::new(), runs: Vec::new() },
        )
        .await;
    result.unwrap_or_else(|error| panic!("appending to run {run} at {first_seq} should succeed, got {error}"));
}

async fn journal_length(store: &dyn Store, run: &RunId) -> usize {
    let record = store.load(run).await.unwrap_or_else(|error| panic!("loading run {run} failed: {error}"));
    record.unwrap_or_else(|| panic!("run {run} should exist")).entries.len()
}

async fn sorted_claimable(store: &dyn Store, now: u64) -> Vec<String> {
    let runs = store.claimable(at(now), 100).await.unwrap_or_else(|error| panic!("claimable failed: {error}"));
    let mut names: Vec<String> = runs.iter().map(ToString::to_string).collect();
    names.sort();
    names
}

// ---- Cases every store passes ----------------------------------------------------------------

/// `claimable` lists unfinished runs with something to do: one not parked, a parked one with a
/// delivery waiting or a timer due; not a parked run without either, nor a finished one; and no
/// more than `limit`.
pub async fn claimable_lists_runs_with_something_to_do(store: &dyn Store) {
    let (busy, busy_fence) = create(store, "busy", 1).await;
    let (waiting, waiting_fence) = create(store, "waiting", 2).await;
    let (sleeping, sleeping_fence) = create(store, "sleeping", 3).await;
    let (later, later_fence) = create(store, "later", 4).await;
    let (done, done_fence) = create(store, "done", 5).await;
    store.release(&busy, busy_fence).await.expect("release succeeds");
    let hash = TokenHash::of("claimable-hook");
    let hook =
        Entry::HookCreated { op: Op(0), token_hash: hash.as_str().into(), nonce: None, conflict: false, webhook: None };
    append(store, &waiting, waiting_fence, 1, vec![hook]).await;
    append(store, &sleeping, sleeping_fence, 1, vec![Entry::TimerScheduled { op: Op(0), deadline: at(500) }]).await;
    append(store, &later, later_fence, 1, vec![Entry::TimerScheduled { op: Op(0), deadline: at(1 << 40) }]).await;
    append(store, &done, done_fence, 1, vec![Entry::RunCompleted { output: json!(1) }]).await;
    for (run, fence) in [(&waiting, waiting_fence), (&sleeping, sleeping_fence), (&later, later_fence)] {
        store.park(run, fence, 2).await.expect("park succeeds");
    }
    assert_eq!(sorted_claimable(store, 100).await, ["busy"], "before the timer is due and anything is delivered");
    assert_eq!(sorted_claimable(store, 1_000).await, ["busy", "sleeping"], "a due timer gives a parked run work");
    let delivered = store.deliver(Target::Hook(hash), None, DeliveryPayload::Hook(json!("hi"))).await;
    assert!(delivered.is_ok(), "the delivery is accepted: {delivered:?}");
    assert_eq!(sorted_claimable(store, 1_000).await, ["busy", "sleeping", "waiting"], "so does a delivery");
    let limited = store.claimable(at(1_000), 2).await.expect("claimable succeeds");
    assert_eq!(limited.len(), 2, "at most `limit` runs");
    assert!(store.claimable(at(1_000), 0).await.expect("claimable succeeds").is_empty());
}

/// Renewing the current claim succeeds and keeps it: its fence still appends.
pub async fn renewing_a_current_claim_keeps_it(store: &dyn Store) {
    let (run, _) = create(store, "renewed", 1).await;
    let claim = claimed(store, &run, "a", 1_000, 100_000).await;
    let renewed = store.renew(&run, claim.fence, Duration::from_millis(1_000), at(100_500)).await;
    assert!(renewed.is_ok(), "renewing the current claim succeeds: {renewed:?}");
    append(store, &run, claim.fence, 1, vec![record(0)]).await;
}

// ---- Cases only a shared store passes ------------------------------------------------------------

/// The creator of a run holds it: another worker's claim just after creation is refused.
pub async fn the_creator_holds_a_new_run(store: &dyn Store) {
    assert!(store.is_shared(), "the shared-store cases are for stores whose is_shared() is true");
    let (run, fence) = create(store, "created", 1_000).await;
    assert_leased(claim(store, &run, "b", 1_000, 1_001).await, "a", None);
    append(store, &run, fence, 1, vec![record(0)]).await;
}

/// Another worker's claim is refused with `Leased` (naming the holder and the expiry) until the
/// lease expires, then succeeds with a higher epoch; the first worker is then refused in turn.
pub async fn an_expired_lease_moves_the_run_to_another_worker(store: &dyn Store) {
    let (run, _) = create(store, "expiring", 1_000).await;
    let first = claimed(store, &run, "a", 5_000, 100_000).await;
    assert_leased(claim(store, &run, "b", 5_000, 104_999).await, "a", Some(105_000));
    let second = claimed(store, &run, "b", 5_000, 105_000).await;
    assert!(second.fence.epoch > first.fence.epoch, "the new claim's epoch is higher");
    assert_leased(claim(store, &run, "a", 5_000, 105_001).await, "b", Some(110_000));
    append(store, &run, second.fence, 1, vec![record(0)]).await;
}

/// A worker whose lease expired and was taken over (it stalled) is refused everything that
/// writes: its append (with entries implying timers, a hook and a consumed inbox item) and its
/// continue-as-new are `Fenced` and write nothing; its park, release and renewal change nothing
/// of the new claim.
pub async fn a_stale_workers_writes_are_refused_and_write_nothing(store: &dyn Store) {
    let (run, _) = create(store, "stalled", 1_000).await;
    let stale = claimed(store, &run, "a", 10_000, 100_000).await.fence;
    let cancel = DeliveryPayload::Run(Delivery::Cancel { reason: "stop".into(), keep_output: false });
    let item = match store.deliver(Target::Run(run.clone()), None, cancel).await {
        Ok(super::Delivered::Accepted { id, .. }) => id,
        other => panic!("the cancellation should be accepted, got {other:?}"),
    };
    let current = claimed(store, &run, "b", 10_000, 110_000).await.fence;
    let hash = TokenHash::of("stalled-hook");
    let doomed = vec![
        Entry::TimerScheduled { op: Op(0), deadline: at(500_000) },
        Entry::HookCreated { op: Op(1), token_hash: hash.as_str().into(), nonce: None, conflict: false, webhook: None },
    ];
    let result = store
        .append(
            &run,
            stale,
            &mut Append { first_seq: 1, entries: doomed, consumed: vec![item], notices: vec![], runs: vec![] },
        )
        .await;
    assert!(
        matches!(&result, Err(StoreError::Fenced { held, current: now, .. }) if *held == stale.epoch && *now == current.epoch),
        "the stale worker's append should be Fenced, got {result:?}"
    );
    let started = store.load(&run).await.expect("load succeeds").expect("the run exists").entries[0].clone();
    let result = store.continue_as_new(&run, stale, &mut Some(started.clone()), false).await;
    assert!(matches!(result, Err(StoreError::Fenced { .. })), "continue-as-new should be Fenced, got {result:?}");
    assert_eq!(journal_length(store, &run).await, 1, "nothing was appended");
    assert!(store.timers().await.expect("timers succeed").is_empty(), "no timer was written");
    assert!(store.find_hook(&hash).await.expect("find_hook succeeds").is_none(), "no hook was indexed");
    assert_eq!(store.inbox(&run).await.expect("inbox succeeds").len(), 1, "nothing was consumed");
    store.park(&run, stale, 1).await.expect("a stale park is not an error");
    store.release(&run, stale).await.expect("a stale release is not an error");
    let renewed = store.renew(&run, stale, Duration::from_secs(3_600), at(111_000)).await;
    assert!(matches!(renewed, Err(StoreError::Fenced { .. })), "a stale renewal should be Fenced, got {renewed:?}");
    assert_leased(claim(store, &run, "c", 10_000, 115_000).await, "b", Some(120_000));
    append(store, &run, current, 1, vec![record(0)]).await;
}

/// Parking a run, or releasing its claim, gives up the lease: another worker claims it at once,
/// long before the lease would have expired.
pub async fn park_and_release_give_the_lease_up_at_once(store: &dyn Store) {
    let (run, _) = create(store, "handed-over", 1_000).await;
    let hour = 3_600_000;
    let first = claimed(store, &run, "a", hour, 100_000).await;
    assert_leased(claim(store, &run, "b", hour, 100_001).await, "a", Some(100_000 + hour));
    store.park(&run, first.fence, first.next_seq).await.expect("park succeeds");
    let second = claimed(store, &run, "b", hour, 100_002).await;
    assert_leased(claim(store, &run, "c", hour, 100_003).await, "b", Some(100_002 + hour));
    store.release(&run, second.fence).await.expect("release succeeds");
    let third = claimed(store, &run, "c", hour, 100_004).await;
    append(store, &run, third.fence, 1, vec![record(0)]).await;
}

/// Renewing moves the lease's expiry; once another worker claims the run, the old claim's
/// renewal is `Fenced`.
pub async fn renew_extends_the_lease_until_another_claim(store: &dyn Store) {
    let (run, _) = create(store, "heartbeat", 1_000).await;
    let first = claimed(store, &run, "a", 1_000, 100_000).await;
    store.renew(&run, first.fence, Duration::from_millis(1_000), at(100_900)).await.expect("renew succeeds");
    assert_leased(claim(store, &run, "b", 1_000, 101_500).await, "a", Some(101_900));
    let second = claimed(store, &run, "b", 1_000, 101_900).await;
    let late = store.renew(&run, first.fence, Duration::from_millis(1_000), at(101_950)).await;
    assert!(
        matches!(&late, Err(StoreError::Fenced { held, current, .. }) if *held == first.fence.epoch && *current == second.fence.epoch),
        "renewing a superseded claim should be Fenced, got {late:?}"
    );
    let ghost = store.renew(&"no-such-run".parse().expect("valid"), first.fence, Duration::ZERO, at(0)).await;
    assert!(matches!(ghost, Err(StoreError::RunNotFound(_))), "got {ghost:?}");
}

/// A run with something to do is claimable only once its lease has expired.
pub async fn claimable_leaves_out_runs_under_a_live_lease(store: &dyn Store) {
    let (run, _) = create(store, "leased", 1_000).await;
    claimed(store, &run, "a", 5_000, 100_000).await;
    assert!(sorted_claimable(store, 104_999).await.is_empty(), "a live lease keeps the run from others");
    assert_eq!(sorted_claimable(store, 105_000).await, ["leased"], "an expired lease frees it");
}

/// Many workers claiming one run at the same instant: exactly one wins, every other is refused
/// with `Leased` naming the winner, and the winner's fence appends. Repeated over many runs.
pub async fn concurrent_claims_by_many_workers_have_one_winner(store: &dyn Store) {
    const WORKERS: usize = 16;
    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        let (run, _) = create(store, &format!("contested-{round}"), 1_000).await;
        let now = 10_000_000 + round as u64;
        let names: Vec<String> = (0..WORKERS).map(|index| format!("w{index}")).collect();
        let results = join_all(names.iter().map(|name| claim(store, &run, name, 60_000, now))).await;
        let winners: Vec<usize> = (0..WORKERS).filter(|index| results[*index].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one of {WORKERS} claims wins");
        let winner = &names[winners[0]];
        for (index, result) in results.into_iter().enumerate() {
            match result {
                Ok(claim) => append(store, &run, claim.fence, 1, vec![record(0)]).await,
                Err(StoreError::Leased { owner, .. }) => {
                    assert_eq!(owner, worker(winner).0, "round {round}: worker {index} is told who won");
                }
                Err(other) => panic!("round {round}: worker {index} should be refused with Leased, got {other}"),
            }
        }
        assert_eq!(journal_length(store, &run).await, 2, "round {round}: only the winner wrote");
    }
}
