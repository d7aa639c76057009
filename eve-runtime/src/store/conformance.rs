//! The store conformance suite: the [`Store`] contract as executable cases.
//!
//! Every store runs the same cases, so the runtime can rely on one behaviour whichever store it
//! is given. Each case is a function taking a fresh, empty store and panicking if the store breaks
//! the contract; [`conformance_suite!`](crate::conformance_suite) turns them into one
//! `#[tokio::test]` per case:
//!
//! ```
//! eve_runtime::conformance_suite!(memory, async { eve_runtime::store::MemoryStore::new() });
//! eve_runtime::conformance_suite!(sqlite, async {
//!     let dir = tempfile::tempdir().expect("a temporary directory");
//!     let store = eve_runtime::store::SqliteStore::open(dir.path().join("eve.db")).expect("a fresh store");
//!     (store, dir) // the directory lives as long as the store
//! });
//! ```
//!
//! The expression may yield a store or a `(store, guard)` pair (see [`Fixture`]). The crate using
//! the macro needs `tokio` with the `macros` and `rt` features.

use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};

use super::{
    Append, Created, Delivered, Delivery, DeliveryPayload, Fence, HookMeta, InboxItem, InboxLimits, NewRun, RunCursor,
    RunPage, RunQuery, Store, StoreError, Target, TimerKind, TimerRow, WaitingSignIn, WorkerId,
};
use crate::journal::{Entry, InputHash, Op, Payload, RecordKind, RunFailure, RunId, RunStatus, StepOutcome};
use crate::secret::TokenHash;
use crate::time::Timestamp;

/// Expands to a module named `$name` with one `#[tokio::test]` per conformance case, each run
/// against a fresh fixture made by the async expression `$make` (a store, or a `(store, guard)`
/// pair; see [`Fixture`](crate::store::conformance::Fixture)).
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $make:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::__conformance_cases!($make;
                create_run_is_idempotent,
                journal_is_densely_numbered_from_run_started,
                append_at_the_wrong_seq_is_refused,
                stale_fence_is_refused_and_allocates_nothing,
                claim_returns_the_journal_and_pending_inbox,
                concurrent_claims_leave_exactly_one_writer,
                hook_tokens_are_unique_until_their_run_ends,
                find_hook_names_the_holder,
                deliveries_are_deduplicated_and_refused_after_the_end,
                appends_consume_inbox_items_of_their_own_run,
                timers_follow_sleeps_and_retries,
                unicode_and_large_payloads_round_trip_exactly,
                the_deepest_accepted_values_round_trip,
                list_runs_is_newest_first_with_filter_and_limit,
                finished_runs_refuse_appends,
                unknown_runs_are_reported,
                hook_kinds_round_trip_and_sign_in_callbacks_are_released,
                answers_and_sign_in_markers_reach_the_right_inbox,
                payloads_reach_only_their_kind_of_hook,
                tail_is_the_summary_and_the_last_entry,
                read_returns_pages_of_the_current_history_and_those_before,
                parked_runs_are_left_out_of_recovery_until_they_have_something_to_do,
                continue_as_new_replaces_the_history_and_keeps_a_pending_cancel,
                continue_as_new_can_keep_the_inbox_whole,
                inboxes_refuse_deliveries_beyond_their_limits,
                notices_reach_other_runs_with_the_append_that_implies_them,
                appends_create_the_runs_they_start,
                append_writes_a_batch_as_given_and_leaves_a_refused_one_whole,
                continue_as_new_starts_the_history_as_given_and_leaves_a_refused_entry,
                payloads_held_as_text_read_back_as_the_values_they_hold,
            );
        }
    };
}

/// One `#[tokio::test]` per named case; used by [`conformance_suite!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($make:expr; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $case() {
                let fixture = $make.await;
                $crate::store::conformance::$case($crate::store::conformance::Fixture::store(&fixture)).await;
            }
        )*
    };
}

/// What a suite's expression yields: a store, or a store with something that must outlive it
/// (such as the temporary directory holding its file).
pub trait Fixture: Send + Sync {
    /// The store under test.
    fn store(&self) -> &dyn Store;
}

impl<S: Store> Fixture for S {
    fn store(&self) -> &dyn Store {
        self
    }
}

impl<S: Store, G: Send + Sync> Fixture for (S, G) {
    fn store(&self) -> &dyn Store {
        &self.0
    }
}

// ---- Helpers -------------------------------------------------------------------------------

fn run_id(name: &str) -> RunId {
    name.parse().expect("conformance run ids are valid")
}

fn worker() -> WorkerId {
    WorkerId("conformance-worker".into())
}

fn new_run(name: &str, input: Value, created_at: u64) -> NewRun {
    NewRun {
        id: run_id(name),
        workflow_id: "conformance::workflow".into(),
        tool: "conformance_tool".into(),
        input,
        created_at: Timestamp::from_millis(created_at),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    }
}

/// Creates `run`, which must be new, and returns its fence.
async fn create(store: &dyn Store, run: NewRun) -> Fence {
    let id = run.id.clone();
    match store.create_run(run, &worker()).await {
        Ok(Created::New(fence)) => fence,
        other => panic!("creating the new run {id} should return Created::New, got {other:?}"),
    }
}

async fn claim(store: &dyn Store, run: &RunId, from_seq: u64) -> super::Claimed {
    let claimed = store.claim(run, &worker(), Duration::from_secs(60), Timestamp::from_millis(0), from_seq).await;
    claimed.unwrap_or_else(|error| panic!("claiming run {run} should succeed, got {error}"))
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

async fn entries(store: &dyn Store, run: &RunId) -> Vec<Entry> {
    let loaded = store.load(run).await.unwrap_or_else(|error| panic!("loading run {run} failed: {error}"));
    loaded.unwrap_or_else(|| panic!("run {run} should exist")).entries
}

async fn timers(store: &dyn Store) -> Vec<(String, u32, &'static str, u64)> {
    let rows = store.timers().await.unwrap_or_else(|error| panic!("listing timers failed: {error}"));
    let mut rows: Vec<_> = rows.into_iter().map(timer_key).collect();
    rows.sort();
    rows
}

fn timer_key(row: TimerRow) -> (String, u32, &'static str, u64) {
    let kind = match row.kind {
        TimerKind::Sleep => "sleep",
        TimerKind::Retry => "retry",
    };
    (row.run.to_string(), row.op.0, kind, row.due.as_millis())
}

async fn inbox(store: &dyn Store, run: &RunId) -> Vec<InboxItem> {
    store.inbox(run).await.unwrap_or_else(|error| panic!("reading run {run}'s inbox failed: {error}"))
}

async fn find_hook(store: &dyn Store, hash: &TokenHash) -> Option<(RunId, Op)> {
    let hook = store.find_hook(hash).await.unwrap_or_else(|error| panic!("looking up a hook failed: {error}"));
    hook.map(|hook| (hook.run, hook.op))
}

async fn deliver(store: &dyn Store, target: Target, id: Option<&str>, payload: DeliveryPayload) -> Delivered {
    store.deliver(target, id, payload).await.unwrap_or_else(|error| panic!("delivering failed: {error}"))
}

fn accepted_id(delivered: Delivered) -> u64 {
    match delivered {
        Delivered::Accepted { id, .. } => id,
        other => panic!("the delivery should be accepted, got {other:?}"),
    }
}

fn record(op: u32, value: Value) -> Entry {
    Entry::Recorded { op: Op(op), kind: RecordKind::Random, value: value.into() }
}

fn sleep(op: u32, deadline: u64) -> Entry {
    Entry::TimerScheduled { op: Op(op), deadline: Timestamp::from_millis(deadline) }
}

fn hook(op: u32, hash: &TokenHash) -> Entry {
    Entry::HookCreated { op: Op(op), token_hash: hash.as_str().to_owned(), nonce: None, conflict: false, webhook: None }
}

fn retrying(op: u32, attempt: u32, next_attempt_at: u64) -> Entry {
    Entry::StepRetrying {
        op: Op(op),
        name: "flaky".into(),
        input_hash: InputHash::of(b"[]"),
        attempt,
        error: "try again".into(),
        next_attempt_at: Timestamp::from_millis(next_attempt_at),
    }
}

fn completed(op: u32, attempt: u32) -> Entry {
    Entry::StepCompleted {
        op: Op(op),
        name: "flaky".into(),
        input_hash: InputHash::of(b"[]"),
        attempt,
        outcome: StepOutcome::Ok { value: json!("done").into() },
        took_ms: Some(12),
    }
}

fn run_completed() -> Entry {
    Entry::RunCompleted { output: json!({"ok": true}) }
}

/// A run holding a hook of each kind, at ops 0, 1 and 2: a plain hook (token `hook`), a webhook
/// answering as `webhook` says (token `webhook`), and a sign-in's callback (provider `github`,
/// nonce `n`, state `state`). Returns the run, its fence and the three token hashes in that order.
async fn hooks_of_each_kind(
    store: &dyn Store,
    webhook: crate::journal::webhook::WebhookOptions,
) -> (RunId, Fence, [TokenHash; 3]) {
    let run = run_id("kinds");
    let fence = create(store, new_run("kinds", json!({}), 1)).await;
    let hashes = [TokenHash::of("hook"), TokenHash::of("webhook"), TokenHash::of("state")];
    let entries = vec![
        hook(0, &hashes[0]),
        Entry::HookCreated {
            op: Op(1),
            token_hash: hashes[1].as_str().into(),
            nonce: None,
            conflict: false,
            webhook: Some(Box::new(webhook)),
        },
        Entry::AuthRequired {
            op: Op(2),
            provider: "github".into(),
            attempt: 1,
            nonce: "n".into(),
            state_hash: hashes[2].as_str().into(),
        },
    ];
    append(store, &run, fence, 1, entries).await;
    (run, fence, hashes)
}

fn hook_payload(value: Value) -> DeliveryPayload {
    DeliveryPayload::Hook(value)
}

fn token(name: &str) -> TokenHash {
    TokenHash::of(&format!("conformance-token-{name}"))
}

// ---- Cases ---------------------------------------------------------------------------------

/// Creating a run whose id exists returns `Existing` and changes nothing: not the journal, not
/// the creator's fence.
pub async fn create_run_is_idempotent(store: &dyn Store) {
    let original = new_run("run-idempotent", json!({"attempt": 1}), 1_000);
    let fence = create(store, original.clone()).await;
    let again = store.create_run(new_run("run-idempotent", json!({"attempt": 2}), 2_000), &worker()).await;
    assert!(matches!(again, Ok(Created::Existing)), "a second create of one id should be Existing, got {again:?}");
    let loaded = store.load(&original.id).await.expect("load succeeds").expect("the run exists");
    assert_eq!(loaded.entries, vec![original.started_entry()], "the second create must not touch the journal");
    assert_eq!(loaded.summary.created_at, Timestamp::from_millis(1_000));
    let listed = store.list_runs(&RunQuery::newest(10)).await.expect("listing succeeds").runs;
    assert_eq!(listed.len(), 1, "one id is one run");
    append(store, &original.id, fence, 1, vec![record(0, json!(1))]).await;
}

/// The journal is numbered densely from 0, entry 0 is `RunStarted`, and appends keep their order.
pub async fn journal_is_densely_numbered_from_run_started(store: &dyn Store) {
    let run = new_run("run-dense", json!({"n": 7}), 1_000);
    let fence = create(store, run.clone()).await;
    let added = vec![record(0, json!("a")), record(1, json!("b")), record(2, json!("c"))];
    append(store, &run.id, fence, 1, added[..2].to_vec()).await;
    append(store, &run.id, fence, 3, added[2..].to_vec()).await;
    let loaded = store.load(&run.id).await.expect("load succeeds").expect("the run exists");
    let mut expected = vec![run.started_entry()];
    expected.extend(added);
    assert_eq!(loaded.entries, expected);
    assert_eq!(loaded.summary.entries, 4, "the summary counts the entries");
    assert_eq!(loaded.summary.status, RunStatus::Active);
    assert_eq!(claim(store, &run.id, 0).await.next_seq, 4, "the next sequence number is the journal length");
}

/// An append that does not start at the journal's length is refused with `SeqConflict` and writes
/// nothing, not even the index rows its entries imply.
pub async fn append_at_the_wrong_seq_is_refused(store: &dyn Store) {
    let run = new_run("run-seq", json!(null), 1_000);
    let fence = create(store, run.clone()).await;
    append(store, &run.id, fence, 1, vec![record(0, json!(0))]).await;
    for first_seq in [0, 1, 3, 100] {
        let mut refused = Append {
            first_seq,
            entries: vec![sleep(1, 5_000)],
            consumed: Vec::new(),
            notices: Vec::new(),
            runs: Vec::new(),
        };
        let result = store.append(&run.id, fence, &mut refused).await;
        assert!(
            matches!(&result, Err(StoreError::SeqConflict { expected, actual: 2, .. }) if *expected == first_seq),
            "an append at {first_seq} to a journal of 2 should be a SeqConflict, got {result:?}"
        );
    }
    assert_eq!(entries(store, &run.id).await.len(), 2, "refused appends write no entries");
    assert!(timers(store).await.is_empty(), "refused appends write no timers");
}

/// After a new claim, the old fence is refused with `Fenced` and nothing is written or allocated:
/// no entries, no timers, no hooks, no consumed inbox items.
pub async fn stale_fence_is_refused_and_allocates_nothing(store: &dyn Store) {
    let run = new_run("run-stale", json!(null), 1_000);
    let stale = create(store, run.clone()).await;
    let cancel = DeliveryPayload::Run(Delivery::Cancel { reason: "test".into(), keep_output: false });
    let item = accepted_id(deliver(store, Target::Run(run.id.clone()), None, cancel).await);
    let current = claim(store, &run.id, 0).await.fence;
    assert!(current.epoch > stale.epoch, "a claim's epoch is higher than any before it");
    let hash = token("stale");
    let doomed = vec![sleep(0, 5_000), hook(1, &hash), retrying(2, 1, 6_000)];
    let result = store
        .append(
            &run.id,
            stale,
            &mut Append { first_seq: 1, entries: doomed, consumed: vec![item], notices: Vec::new(), runs: Vec::new() },
        )
        .await;
    assert!(
        matches!(&result, Err(StoreError::Fenced { held, current: now, .. }) if *held == stale.epoch && *now == current.epoch),
        "a stale fence should be refused with Fenced, got {result:?}"
    );
    assert_eq!(entries(store, &run.id).await.len(), 1, "a fenced append writes no entries");
    assert!(timers(store).await.is_empty(), "a fenced append writes no timers");
    assert_eq!(find_hook(store, &hash).await, None, "a fenced append indexes no hook");
    assert_eq!(inbox(store, &run.id).await.len(), 1, "a fenced append consumes nothing");
    append(store, &run.id, current, 1, vec![record(0, json!(0))]).await;
}

/// A claim returns a fresh fence, the journal from `from_seq`, the journal length and the pending
/// inbox, oldest first.
pub async fn claim_returns_the_journal_and_pending_inbox(store: &dyn Store) {
    let run = new_run("run-claim", json!({"x": 1}), 1_000);
    let created = create(store, run.clone()).await;
    let hash = token("claim");
    let added = vec![record(0, json!(0)), hook(1, &hash), record(2, json!(2)), record(3, json!(3))];
    append(store, &run.id, created, 1, added.clone()).await;
    let first = accepted_id(deliver(store, Target::Hook(hash.clone()), Some("d1"), hook_payload(json!(1))).await);
    let second = accepted_id(deliver(store, Target::Hook(hash.clone()), Some("d2"), hook_payload(json!(2))).await);
    assert!(second > first, "inbox ids grow");
    let claimed = claim(store, &run.id, 2).await;
    assert!(claimed.fence.epoch > created.epoch);
    assert_eq!(claimed.entries, added[1..].to_vec(), "entries from sequence number 2 on");
    assert_eq!(claimed.next_seq, 5);
    let pending: Vec<_> = claimed.inbox.iter().map(|item| (item.id, item.delivery.clone())).collect();
    let expected = vec![
        (first, Delivery::Hook { op: Op(1), payload: json!(1) }),
        (second, Delivery::Hook { op: Op(1), payload: json!(2) }),
    ];
    assert_eq!(pending, expected, "the pending inbox, oldest first");
    let beyond = claim(store, &run.id, 99).await;
    assert!(beyond.entries.is_empty() && beyond.next_seq == 5, "a claim from past the end returns no entries");
}

/// Of several claims made at once, only the last one's fence may append; every other append at the
/// same sequence number is refused.
pub async fn concurrent_claims_leave_exactly_one_writer(store: &dyn Store) {
    let run = new_run("run-race", json!(null), 1_000);
    create(store, run.clone()).await;
    let claims = join_all((0..8).map(|_| claim(store, &run.id, 0))).await;
    let mut epochs: Vec<u64> = claims.iter().map(|claimed| claimed.fence.epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    assert_eq!(epochs.len(), 8, "every claim gets its own epoch");
    let attempts = claims.iter().enumerate().map(|(index, claimed)| {
        let mut append = Append {
            first_seq: 1,
            entries: vec![record(0, json!(index))],
            consumed: Vec::new(),
            notices: Vec::new(),
            runs: Vec::new(),
        };
        let run = &run.id;
        async move { store.append(run, claimed.fence, &mut append).await }
    });
    let results = join_all(attempts).await;
    let winners: Vec<usize> = (0..results.len()).filter(|index| results[*index].is_ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one append should succeed, got {results:?}");
    let latest = claims.iter().map(|claimed| claimed.fence.epoch).max();
    assert_eq!(Some(claims[winners[0]].fence.epoch), latest, "the winner holds the latest claim");
    for (index, result) in results.iter().enumerate().filter(|(index, _)| *index != winners[0]) {
        assert!(matches!(result, Err(StoreError::Fenced { .. })), "claim {index} should be fenced, got {result:?}");
    }
    assert_eq!(entries(store, &run.id).await[1], record(0, json!(winners[0])));
}

/// A token hash held by an unfinished run cannot be created by another run (the whole append is
/// refused with `HookTokenInUse`); once its run ends, the token is released for reuse.
pub async fn hook_tokens_are_unique_until_their_run_ends(store: &dyn Store) {
    let (holder, other) = (new_run("run-holder", json!(null), 1_000), new_run("run-other", json!(null), 2_000));
    let holder_fence = create(store, holder.clone()).await;
    let other_fence = create(store, other.clone()).await;
    let hash = token("unique");
    append(store, &holder.id, holder_fence, 1, vec![hook(0, &hash)]).await;
    let clash = vec![record(0, json!(0)), sleep(1, 9_000), hook(2, &hash)];
    let result = store
        .append(
            &other.id,
            other_fence,
            &mut Append { first_seq: 1, entries: clash, consumed: Vec::new(), notices: Vec::new(), runs: Vec::new() },
        )
        .await;
    assert!(
        matches!(&result, Err(StoreError::HookTokenInUse { run, op: Op(2) }) if *run == other.id),
        "a held token should be refused with HookTokenInUse, got {result:?}"
    );
    assert_eq!(entries(store, &other.id).await.len(), 1, "the refused append writes no entries");
    assert!(timers(store).await.is_empty(), "the refused append writes no timers");
    let conflicted =
        Entry::HookCreated { op: Op(0), token_hash: hash.as_str().into(), nonce: None, conflict: true, webhook: None };
    append(store, &other.id, other_fence, 1, vec![conflicted]).await;
    assert_eq!(find_hook(store, &hash).await, Some((holder.id.clone(), Op(0))), "a conflicted hook is not indexed");
    append(store, &holder.id, holder_fence, 2, vec![run_completed()]).await;
    assert_eq!(find_hook(store, &hash).await, None, "a finished run releases its tokens");
    append(store, &other.id, other_fence, 2, vec![hook(1, &hash)]).await;
    assert_eq!(find_hook(store, &hash).await, Some((other.id.clone(), Op(1))), "a released token can be reused");
}

/// `find_hook` names the run and operation holding a token hash, and nothing for unknown hashes.
pub async fn find_hook_names_the_holder(store: &dyn Store) {
    let run = new_run("run-find-hook", json!(null), 1_000);
    let fence = create(store, run.clone()).await;
    let (first, second) = (token("find-1"), token("find-2"));
    assert_eq!(find_hook(store, &first).await, None, "no hook before it is created");
    append(store, &run.id, fence, 1, vec![hook(3, &first), record(4, json!(4)), hook(5, &second)]).await;
    assert_eq!(find_hook(store, &first).await, Some((run.id.clone(), Op(3))));
    assert_eq!(find_hook(store, &second).await, Some((run.id.clone(), Op(5))));
    assert_eq!(find_hook(store, &token("never-created")).await, None);
}

/// Deliveries: `NotFound` for an unknown token or run, `Accepted` with a fresh id, `Duplicate` for
/// a delivery id seen before for the run (even once its item was consumed), and `NotFound` once the
/// run has finished.
pub async fn deliveries_are_deduplicated_and_refused_after_the_end(store: &dyn Store) {
    let hash = token("deliveries");
    let unknown = deliver(store, Target::Hook(hash.clone()), Some("d1"), hook_payload(json!(0))).await;
    assert_eq!(unknown, Delivered::NotFound, "no run holds the token yet");
    let run = new_run("run-deliveries", json!(null), 1_000);
    let fence = create(store, run.clone()).await;
    append(store, &run.id, fence, 1, vec![hook(0, &hash)]).await;
    let to_hook =
        |id: Option<&'static str>, value: Value| deliver(store, Target::Hook(hash.clone()), id, hook_payload(value));
    let first = accepted_id(to_hook(Some("d1"), json!(1)).await);
    assert_eq!(to_hook(Some("d1"), json!("again")).await, Delivered::Duplicate { run: run.id.clone() });
    let (anonymous_a, anonymous_b) =
        (accepted_id(to_hook(None, json!(2)).await), accepted_id(to_hook(None, json!(2)).await));
    assert!(first < anonymous_a && anonymous_a < anonymous_b, "deliveries without an id are never duplicates");
    let mut consumed = Append {
        first_seq: 2,
        entries: vec![Entry::HookReceived { op: Op(0), payload: json!(1) }],
        consumed: vec![first],
        notices: Vec::new(),
        runs: Vec::new(),
    };
    store.append(&run.id, fence, &mut consumed).await.expect("consuming an inbox item succeeds");
    assert_eq!(
        to_hook(Some("d1"), json!(1)).await,
        Delivered::Duplicate { run: run.id.clone() },
        "also after consumption"
    );
    let cancel = || DeliveryPayload::Run(Delivery::Cancel { reason: "stop".into(), keep_output: false });
    accepted_id(deliver(store, Target::Run(run.id.clone()), Some("c1"), cancel()).await);
    let nobody = deliver(store, Target::Run(run_id("run-nobody")), None, cancel()).await;
    assert_eq!(nobody, Delivered::NotFound, "a cancel for an unknown run");
    let mismatched = store.deliver(Target::Run(run.id.clone()), None, hook_payload(json!(0))).await;
    assert!(mismatched.is_err(), "a hook payload for a run target is an error, got {mismatched:?}");
    append(store, &run.id, fence, 3, vec![Entry::RunCancelled {}]).await;
    assert_eq!(to_hook(Some("d9"), json!(9)).await, Delivered::NotFound, "a finished run's hook accepts nothing");
    assert_eq!(deliver(store, Target::Run(run.id.clone()), None, cancel()).await, Delivered::NotFound);
    assert!(inbox(store, &run.id).await.is_empty(), "a finished run has no pending inbox");
}

/// `Append::consumed` removes the named items from the run's pending inbox in the same
/// transaction; an id belonging to another run is left alone.
pub async fn appends_consume_inbox_items_of_their_own_run(store: &dyn Store) {
    let (run, other) = (new_run("run-consumer", json!(null), 1_000), new_run("run-bystander", json!(null), 2_000));
    let fence = create(store, run.clone()).await;
    let other_fence = create(store, other.clone()).await;
    let (hash, other_hash) = (token("consume"), token("bystander"));
    append(store, &run.id, fence, 1, vec![hook(0, &hash)]).await;
    append(store, &other.id, other_fence, 1, vec![hook(0, &other_hash)]).await;
    let mut ids = Vec::new();
    for value in 1..=3 {
        ids.push(accepted_id(deliver(store, Target::Hook(hash.clone()), None, hook_payload(json!(value))).await));
    }
    let foreign = accepted_id(deliver(store, Target::Hook(other_hash), None, hook_payload(json!("b"))).await);
    let received = |value| Entry::HookReceived { op: Op(0), payload: json!(value) };
    let mut consume = Append {
        first_seq: 2,
        entries: vec![received(1), received(3)],
        consumed: vec![ids[0], ids[2], foreign],
        notices: Vec::new(),
        runs: Vec::new(),
    };
    store.append(&run.id, fence, &mut consume).await.expect("consuming inbox items succeeds");
    let pending: Vec<u64> = inbox(store, &run.id).await.iter().map(|item| item.id).collect();
    assert_eq!(pending, vec![ids[1]], "consumed items leave the inbox, the rest stay in order");
    let untouched: Vec<u64> = inbox(store, &other.id).await.iter().map(|item| item.id).collect();
    assert_eq!(untouched, vec![foreign], "another run's item is not consumed by this run's append");
    let claimed: Vec<u64> = claim(store, &run.id, 0).await.inbox.iter().map(|item| item.id).collect();
    assert_eq!(claimed, vec![ids[1]], "a claim sees the same pending inbox");
}

/// The timer index holds one row per pending sleep and per pending retry (a later retry of the
/// same step replaces the earlier row), drops rows when the sleep fires or the step completes, and
/// drops a run's rows when it ends.
pub async fn timers_follow_sleeps_and_retries(store: &dyn Store) {
    let (run, other) = (new_run("run-timers", json!(null), 1_000), new_run("run-timers-other", json!(null), 2_000));
    let fence = create(store, run.clone()).await;
    let other_fence = create(store, other.clone()).await;
    let row = |run: &NewRun, op, kind, due| (run.id.to_string(), op, kind, due);
    append(store, &run.id, fence, 1, vec![sleep(0, 5_000), retrying(1, 1, 6_000)]).await;
    assert_eq!(timers(store).await, vec![row(&run, 0, "sleep", 5_000), row(&run, 1, "retry", 6_000)]);
    append(store, &run.id, fence, 3, vec![retrying(1, 2, 9_000), sleep(2, 7_000)]).await;
    let expected = vec![row(&run, 0, "sleep", 5_000), row(&run, 1, "retry", 9_000), row(&run, 2, "sleep", 7_000)];
    assert_eq!(timers(store).await, expected, "a second retry of one step replaces the first");
    append(store, &run.id, fence, 5, vec![Entry::TimerFired { op: Op(0) }, completed(1, 3)]).await;
    assert_eq!(timers(store).await, vec![row(&run, 2, "sleep", 7_000)], "fired and completed operations leave");
    append(store, &other.id, other_fence, 1, vec![sleep(0, 8_000)]).await;
    append(store, &run.id, fence, 7, vec![run_completed()]).await;
    assert_eq!(timers(store).await, vec![row(&other, 0, "sleep", 8_000)], "a finished run's timers leave");
}

/// Text survives byte for byte: non-ASCII and astral-plane characters, NUL inside strings, extreme
/// numbers, and a payload of over 1 MiB, in the run's input, its entries and its inbox.
pub async fn unicode_and_large_payloads_round_trip_exactly(store: &dyn Store) {
    let text = "héllo wörld ✓ — 𝄞 𝕏 😀 \u{10FFFF} nul:\u{0}:end \"quoted\" \\ \n\t";
    let large: String = (0..(1 << 20) / 5).map(|index| if index % 64 == 0 { "🦀𝄞" } else { "eve-rs" }).collect();
    assert!(large.len() > 1 << 20);
    let input = json!({"text": text, "keys": {text: [text, 0.1, -0.0, 1e300, u64::MAX, i64::MIN]}});
    let mut run = new_run("run-unicode", input, 1_000);
    run.workflow_id = format!("conformance::wörkflow::{text}");
    run.tool = "tøøl_𝄞".into();
    let fence = create(store, run.clone()).await;
    let hash = token("unicode");
    let added = vec![record(0, json!({"large": large})), record(1, json!(text)), hook(2, &hash)];
    append(store, &run.id, fence, 1, added.clone()).await;
    let loaded = store.load(&run.id).await.expect("load succeeds").expect("the run exists");
    let mut expected = vec![run.started_entry()];
    expected.extend(added);
    assert!(loaded.entries == expected, "the journal should read back exactly as written");
    assert_eq!(
        (loaded.summary.workflow_id.as_str(), loaded.summary.tool.as_str()),
        (run.workflow_id.as_str(), "tøøl_𝄞")
    );
    let payload = json!({"text": text, "large": large});
    deliver(store, Target::Hook(hash), None, hook_payload(payload.clone())).await;
    let items = inbox(store, &run.id).await;
    assert!(
        matches!(&items[..], [InboxItem { delivery: Delivery::Hook { payload: got, .. }, .. }] if *got == payload),
        "the delivery should read back exactly as written"
    );
}

/// `[[[…]]]`, as deep as a journaled value may nest.
fn deepest() -> Value {
    (1..crate::journal::depth::MAX_DEPTH).fold(json!([]), |inner, _| json!([inner]))
}

/// A value nested as deeply as the runtime accepts (as deep as a JSON parser allows) reads back
/// from every place a store keeps one: a run's input, a step result, a recorded value, a hook
/// payload in the inbox and in the journal, and a run's output.
pub async fn the_deepest_accepted_values_round_trip(store: &dyn Store) {
    let deep = deepest();
    let run = new_run("run-deep", deep.clone(), 1_000);
    let fence = create(store, run.clone()).await;
    let hash = token("deep");
    let step = Entry::StepCompleted {
        op: Op(0),
        name: "deep".into(),
        input_hash: InputHash::of(b"[]"),
        attempt: 1,
        outcome: StepOutcome::Ok { value: deep.clone().into() },
        took_ms: None,
    };
    append(store, &run.id, fence, 1, vec![step, record(1, deep.clone()), hook(2, &hash)]).await;
    deliver(store, Target::Hook(hash), None, hook_payload(deep.clone())).await;
    let items = inbox(store, &run.id).await;
    assert!(
        matches!(&items[..], [InboxItem { delivery: Delivery::Hook { payload, .. }, .. }] if *payload == deep),
        "the deepest payload reads back from the inbox"
    );
    let received = Entry::HookReceived { op: Op(2), payload: deep.clone() };
    let output = Entry::RunCompleted { output: deep.clone() };
    let consumed = vec![items[0].id];
    let mut batch =
        Append { first_seq: 4, entries: vec![received, output], consumed, notices: Vec::new(), runs: Vec::new() };
    store.append(&run.id, fence, &mut batch).await.expect("the deepest values are accepted");
    let loaded = entries(store, &run.id).await;
    assert_eq!(loaded.len(), 6);
    assert_eq!(loaded[0], run.started_entry(), "the deepest input reads back");
    assert!(matches!(&loaded[1], Entry::StepCompleted { outcome: StepOutcome::Ok { value }, .. } if *value == deep));
    assert!(matches!(&loaded[4], Entry::HookReceived { payload, .. } if *payload == deep));
    assert!(matches!(&loaded[5], Entry::RunCompleted { output } if *output == deep));
    let tail = store.tail(&run.id).await.expect("tail succeeds").expect("the run exists");
    assert!(matches!(tail.1, Entry::RunCompleted { output } if output == deep));
}

/// `list_runs` returns runs newest first, filtered by status, parked and tool, a page at a time:
/// each page's cursor leads to the next without a run repeated or skipped, and the last page
/// has no cursor.
pub async fn list_runs_is_newest_first_with_filter_and_limit(store: &dyn Store) {
    let runs = [
        new_run("run-list-1", json!(1), 1_000),
        new_run("run-list-2", json!(2), 2_000),
        NewRun { tool: "other_tool".into(), ..new_run("run-list-3", json!(3), 3_000) },
        new_run("run-list-4", json!(4), 4_000),
        NewRun { tool: "other_tool".into(), ..new_run("run-list-5", json!(5), 5_000) },
    ];
    let mut fences = Vec::new();
    for run in &runs {
        fences.push(create(store, run.clone()).await);
    }
    append(store, &runs[1].id, fences[1], 1, vec![run_completed()]).await;
    let failure = RunFailure::Tool { message: "no".into() };
    append(store, &runs[2].id, fences[2], 1, vec![record(0, json!(0)), Entry::RunFailed { failure }]).await;
    store.park(&runs[3].id, fences[3], 1).await.expect("the run parks");
    let list = |query: RunQuery| async move { store.list_runs(&query).await.expect("listing succeeds") };
    let ids = |page: &RunPage| page.runs.iter().map(|summary| summary.id.to_string()).collect::<Vec<_>>();

    let all = list(RunQuery::newest(10)).await;
    let shape: Vec<_> = all
        .runs
        .iter()
        .map(|summary| (summary.id.to_string(), summary.status, summary.entries, summary.parked))
        .collect();
    let expected = vec![
        ("run-list-5".to_owned(), RunStatus::Active, 1, false),
        ("run-list-4".to_owned(), RunStatus::Active, 1, true),
        ("run-list-3".to_owned(), RunStatus::Failed, 3, false),
        ("run-list-2".to_owned(), RunStatus::Completed, 2, false),
        ("run-list-1".to_owned(), RunStatus::Active, 1, false),
    ];
    assert_eq!(shape, expected, "newest first, with status, entry count and parked");
    assert_eq!(all.runs[4].created_at, Timestamp::from_millis(1_000));
    assert_eq!(all.next, None, "one page holds them all");

    assert_eq!(
        ids(&list(RunQuery::newest(10).status(RunStatus::Active)).await),
        ["run-list-5", "run-list-4", "run-list-1"]
    );
    assert_eq!(ids(&list(RunQuery::newest(10).status(RunStatus::Completed)).await), ["run-list-2"]);
    assert!(list(RunQuery::newest(10).status(RunStatus::Cancelled)).await.runs.is_empty());
    assert_eq!(ids(&list(RunQuery::newest(10).state("parked").expect("a state")).await), ["run-list-4"]);
    assert_eq!(ids(&list(RunQuery::newest(10).state("running").expect("a state")).await), ["run-list-5", "run-list-1"]);
    assert_eq!(ids(&list(RunQuery::newest(10).tool("other_tool")).await), ["run-list-5", "run-list-3"]);
    let other_failed = RunQuery::newest(10).tool("other_tool").status(RunStatus::Failed);
    assert_eq!(ids(&list(other_failed).await), ["run-list-3"]);
    assert!(list(RunQuery::newest(10).tool("no_such_tool")).await.runs.is_empty());
    assert!(list(RunQuery::newest(0)).await.runs.is_empty());

    // Pages of two: 5 4 | 3 2 | 1, and filtered pages of one: 5 | 4 | 1.
    let mut pages = Vec::new();
    let mut query = RunQuery::newest(2);
    loop {
        let page = list(query.clone()).await;
        pages.push(ids(&page));
        let Some(next) = page.next else { break };
        assert!(pages.len() < 10, "paging must end");
        query = query.before(next);
    }
    assert_eq!(pages, [vec!["run-list-5", "run-list-4"], vec!["run-list-3", "run-list-2"], vec!["run-list-1"]]);
    let first = list(RunQuery::newest(1).status(RunStatus::Active)).await;
    let second = list(RunQuery::newest(1).status(RunStatus::Active).before(first.next.expect("more"))).await;
    let third = list(RunQuery::newest(1).status(RunStatus::Active).before(second.next.expect("more"))).await;
    assert_eq!([ids(&first), ids(&second), ids(&third)], [["run-list-5"], ["run-list-4"], ["run-list-1"]]);
    assert_eq!(third.next, None, "the last page says so");
    let cursor: RunCursor = first.next.expect("more").to_string().parse().expect("a cursor reads back from its text");
    assert_eq!(Some(cursor), first.next);
}

/// A finished run's journal is closed: appends are refused with `RunFinished`, even under a new
/// claim, and nothing is written.
pub async fn finished_runs_refuse_appends(store: &dyn Store) {
    let run = new_run("run-finished", json!(null), 1_000);
    let fence = create(store, run.clone()).await;
    append(store, &run.id, fence, 1, vec![run_completed()]).await;
    let loaded = store.load(&run.id).await.expect("load succeeds").expect("the run exists");
    assert_eq!(loaded.summary.status, RunStatus::Completed);
    let late = store
        .append(
            &run.id,
            fence,
            &mut Append {
                first_seq: 2,
                entries: vec![record(0, json!(0))],
                consumed: Vec::new(),
                notices: Vec::new(),
                runs: Vec::new(),
            },
        )
        .await;
    assert!(matches!(&late, Err(StoreError::RunFinished(id)) if *id == run.id), "got {late:?}");
    let reclaimed = claim(store, &run.id, 0).await;
    assert_eq!(reclaimed.entries.last(), Some(&run_completed()), "a claim still reads a finished journal");
    let again = store
        .append(
            &run.id,
            reclaimed.fence,
            &mut Append {
                first_seq: 2,
                entries: vec![sleep(0, 1)],
                consumed: Vec::new(),
                notices: Vec::new(),
                runs: Vec::new(),
            },
        )
        .await;
    assert!(matches!(&again, Err(StoreError::RunFinished(_))), "got {again:?}");
    assert_eq!(entries(store, &run.id).await.len(), 2, "nothing was written after the end");
    assert!(timers(store).await.is_empty());
}

/// An unknown run loads as `None`, and claiming, releasing or appending to it is `RunNotFound`.
pub async fn unknown_runs_are_reported(store: &dyn Store) {
    let ghost = run_id("run-ghost");
    assert!(store.load(&ghost).await.expect("load succeeds").is_none(), "an unknown run loads as None");
    let claimed = store.claim(&ghost, &worker(), Duration::from_secs(1), Timestamp::from_millis(0), 0).await;
    assert!(matches!(&claimed, Err(StoreError::RunNotFound(id)) if *id == ghost), "claim: got {:?}", claimed.err());
    let released = store.release(&ghost, Fence { epoch: 1 }).await;
    assert!(matches!(&released, Err(StoreError::RunNotFound(_))), "release: got {released:?}");
    let appended = store.append(&ghost, Fence { epoch: 1 }, &mut Append { first_seq: 1, ..Append::default() }).await;
    assert!(matches!(&appended, Err(StoreError::RunNotFound(_))), "append: got {appended:?}");
    let run = new_run("run-known", json!(null), 1_000);
    let fence = create(store, run.clone()).await;
    store.release(&run.id, fence).await.expect("releasing a current claim succeeds");
    store.release(&run.id, Fence { epoch: 0 }).await.expect("releasing a stale claim is ignored");
    assert!(store.inbox(&ghost).await.expect("inbox succeeds").is_empty());
}

/// A hook's kind (hook, webhook with its response, sign-in callback) is stored with its hash, and
/// a completed sign-in releases its callback while the run's other hooks stay.
pub async fn hook_kinds_round_trip_and_sign_in_callbacks_are_released(store: &dyn Store) {
    let respond = crate::journal::webhook::Respond::Static(
        crate::journal::webhook::WebhookResponse::status(201).body("thanks ✓"),
    );
    let keeping = crate::journal::webhook::WebhookOptions::from(respond.clone()).keep_header("authorization");
    let (run, fence, [plain, webhook, callback]) = hooks_of_each_kind(store, keeping.clone()).await;
    let meta = |hash| async move { store.find_hook(&hash).await.unwrap().map(|row| row.meta) };
    assert_eq!(meta(plain.clone()).await, Some(HookMeta::Hook));
    assert_eq!(meta(webhook.clone()).await, Some(HookMeta::Webhook { respond, redaction: keeping.redaction }));
    assert_eq!(meta(callback.clone()).await, Some(HookMeta::Auth { provider: "github".into(), nonce: "n".into() }));
    append(store, &run, fence, 4, vec![Entry::AuthCompleted { op: Op(2) }]).await;
    assert_eq!(meta(callback).await, None, "a completed sign-in's callback is released");
    assert!(meta(plain).await.is_some() && meta(webhook).await.is_some(), "the run's other hooks stay");
}

/// Answers go to the run named, sign-in markers to the run holding the callback, and a payload
/// sent to the wrong kind of target is refused without changes.
pub async fn answers_and_sign_in_markers_reach_the_right_inbox(store: &dyn Store) {
    let run = run_id("asker");
    let fence = create(store, new_run("asker", json!({}), 1)).await;
    let state = TokenHash::of("callback-state");
    let required = Entry::AuthRequired {
        op: Op(1),
        provider: "github".into(),
        attempt: 1,
        nonce: "n".into(),
        state_hash: state.as_str().into(),
    };
    append(store, &run, fence, 1, vec![required]).await;
    let answer = crate::journal::ask::Answer::option("approve");
    let payload = DeliveryPayload::Run(Delivery::Answer { op: Op(0), answer: answer.clone() });
    assert!(matches!(
        deliver(store, Target::Run(run.clone()), Some("ask-0"), payload.clone()).await,
        Delivered::Accepted { .. }
    ));
    assert!(matches!(
        deliver(store, Target::Run(run.clone()), Some("ask-0"), payload).await,
        Delivered::Duplicate { .. }
    ));
    let marker = deliver(store, Target::Hook(state.clone()), Some("auth"), DeliveryPayload::AuthCompleted).await;
    assert!(matches!(marker, Delivered::Accepted { .. }));
    let items: Vec<Delivery> = inbox(store, &run).await.into_iter().map(|item| item.delivery).collect();
    assert_eq!(items, [Delivery::Answer { op: Op(0), answer }, Delivery::AuthCompleted { op: Op(1) }]);
    let wrong = store.deliver(Target::Run(run.clone()), None, DeliveryPayload::Hook(json!(1))).await;
    assert!(wrong.is_err(), "a hook payload sent to a run target is refused");
    assert_eq!(inbox(store, &run).await.len(), 2, "and changes nothing");
}

/// A payload reaches only the kind of hook it is for: a JSON payload neither a webhook nor a
/// sign-in's callback, an HTTP request neither a plain hook nor a callback, a sign-in marker
/// neither of the other two. The store answers each of those as it answers a token nobody holds,
/// [`Delivered::NotFound`], and changes nothing: the runtime does not look the hook up before it
/// delivers, so this is the only check.
pub async fn payloads_reach_only_their_kind_of_hook(store: &dyn Store) {
    let webhook_options = crate::journal::webhook::Respond::Accepted.into();
    let (run, _, [plain, webhook, callback]) = hooks_of_each_kind(store, webhook_options).await;
    let request = || DeliveryPayload::Webhook(json!({ "method": "POST", "body": "hi" }));
    let wrong = [
        (&plain, "plain hook", request()),
        (&plain, "plain hook", DeliveryPayload::AuthCompleted),
        (&webhook, "webhook", hook_payload(json!(1))),
        (&webhook, "webhook", DeliveryPayload::AuthCompleted),
        (&callback, "callback", hook_payload(json!(1))),
        (&callback, "callback", request()),
    ];
    for (hash, kind, payload) in wrong {
        let delivered = deliver(store, Target::Hook(hash.clone()), None, payload.clone()).await;
        assert!(matches!(delivered, Delivered::NotFound), "{payload:?} to the {kind}: {delivered:?}");
    }
    assert!(inbox(store, &run).await.is_empty(), "nothing was delivered");
    let right = [(&plain, hook_payload(json!(1))), (&webhook, request()), (&callback, DeliveryPayload::AuthCompleted)];
    for (hash, payload) in right {
        let delivered = deliver(store, Target::Hook(hash.clone()), None, payload.clone()).await;
        assert!(matches!(delivered, Delivered::Accepted { .. }), "{payload:?}: {delivered:?}");
    }
    let ops: Vec<Option<Op>> = inbox(store, &run).await.iter().map(|item| item.delivery.hook_op()).collect();
    assert_eq!(ops, [Some(Op(0)), Some(Op(1)), Some(Op(2))], "each reached its own hook");
}

/// `tail` gives the summary and the last entry only: `RunStarted` for a new run, the terminal
/// entry once it ends, and nothing for an unknown run.
pub async fn tail_is_the_summary_and_the_last_entry(store: &dyn Store) {
    let run = new_run("tail", json!({ "n": 1 }), 7);
    let fence = create(store, run.clone()).await;
    let (summary, last) = store.tail(&run.id).await.unwrap().expect("the run exists");
    assert_eq!((summary.entries, last), (1, run.started_entry()));
    append(store, &run.id, fence, 1, vec![record(0, json!(1)), Entry::RunCompleted { output: json!("done") }]).await;
    let (summary, last) = store.tail(&run.id).await.unwrap().expect("the run exists");
    assert_eq!(summary.status, RunStatus::Completed);
    assert_eq!(summary.entries, 3);
    assert_eq!(last, Entry::RunCompleted { output: json!("done") });
    assert!(store.tail(&run_id("no-such-run")).await.unwrap().is_none());
}

/// `read` returns a history a page at a time from any sequence number, empty past its end, with
/// the current history's number; after a continue-as-new the history before stays readable to
/// its end, until [`KEPT_HISTORIES`](super::KEPT_HISTORIES) newer ones came after it.
pub async fn read_returns_pages_of_the_current_history_and_those_before(store: &dyn Store) {
    use crate::journal::Position;
    let run = new_run("read", json!({ "n": 1 }), 7);
    let fence = create(store, run.clone()).await;
    let records: Vec<Entry> = (0..9).map(|op| record(op, json!(op))).collect();
    append(store, &run.id, fence, 1, records.clone()).await;
    let mut first = vec![run.started_entry()];
    first.extend(records);
    let id = &run.id;
    let page = |history: u32, seq: u64, limit: usize| async move {
        store.read(id, Position::new(history, seq), limit).await.unwrap().unwrap()
    };
    assert_eq!(page(0, 0, 4).await, super::JournalPage::new(0, first[..4].to_vec()));
    assert_eq!(page(0, 4, 4).await.entries, first[4..8]);
    assert_eq!(page(0, 8, 4).await.entries, first[8..], "the last page is short");
    assert_eq!(page(0, 10, 4).await.entries, [], "nothing past the end");
    assert_eq!(page(0, u64::MAX, usize::MAX).await.entries, []);
    assert_eq!(page(0, 3, usize::MAX).await.entries, first[3..], "a limit past the end reads to the end");
    assert_eq!(page(1, 0, 4).await, super::JournalPage::new(0, Vec::new()), "no history after the current");
    assert!(store.read(&run_id("no-such-run"), Position::START, 1).await.unwrap().is_none());

    let started = |continued: u32| {
        let mut next = new_run("read", json!({ "n": continued + 1 }), 8).started_entry();
        if let Entry::RunStarted { continued: number, .. } = &mut next {
            *number = continued;
        }
        next
    };
    store.continue_as_new(&run.id, fence, &mut Some(started(1)), true).await.expect("continue as new");
    append(store, &run.id, fence, 1, vec![record(0, json!("again"))]).await;
    let second = vec![started(1), record(0, json!("again"))];
    assert_eq!(page(1, 0, 10).await, super::JournalPage::new(1, second.clone()));
    assert_eq!(page(1, 1, 10).await, super::JournalPage::new(1, second[1..].to_vec()));
    assert_eq!(page(0, 0, 10).await, super::JournalPage::new(1, first.clone()), "the history before is kept");
    assert_eq!(page(0, 7, 10).await.entries, first[7..]);
    assert_eq!(page(0, 10, 10).await, super::JournalPage::new(1, Vec::new()), "read past the end of the one before");

    // Up to KEPT_HISTORIES histories before the current one stay; the first then goes.
    let last = super::KEPT_HISTORIES + 1;
    for history in 2..=last {
        store.continue_as_new(&run.id, fence, &mut Some(started(history)), true).await.expect("continue as new again");
    }
    append(store, &run.id, fence, 1, vec![run_completed()]).await;
    assert_eq!(page(last, 0, 10).await, super::JournalPage::new(last, vec![started(last), run_completed()]));
    assert_eq!(page(last - 1, 0, 10).await.entries, [started(last - 1)]);
    assert_eq!(page(1, 0, 10).await.entries, second, "the oldest history kept");
    assert_eq!(page(0, 0, 10).await, super::JournalPage::new(last, Vec::new()), "the first is gone");
}

/// A run marked parked is not runnable at recovery (its timers and sign-ins are listed instead),
/// unless a delivery waits for it; an append clears the mark, and a stale or outdated mark is
/// ignored.
pub async fn parked_runs_are_left_out_of_recovery_until_they_have_something_to_do(store: &dyn Store) {
    let (busy, sleeping, waiting) = (run_id("busy"), run_id("sleeping"), run_id("waiting"));
    let busy_fence = create(store, new_run("busy", json!({}), 1)).await;
    let sleeping_fence = create(store, new_run("sleeping", json!({}), 2)).await;
    let waiting_fence = create(store, new_run("waiting", json!({}), 3)).await;
    append(store, &sleeping, sleeping_fence, 1, vec![sleep(0, 5_000)]).await;
    let sign_in = Entry::AuthRequired {
        op: Op(0),
        provider: "github".into(),
        attempt: 1,
        nonce: "nonce-1".into(),
        state_hash: token("sign-in").as_str().into(),
    };
    append(store, &waiting, waiting_fence, 1, vec![sign_in, hook(1, &token("waiting"))]).await;
    store.park(&sleeping, sleeping_fence, 2).await.expect("park succeeds");
    store.park(&waiting, waiting_fence, 3).await.expect("park succeeds");
    // Outdated marks change nothing: the journal has grown past them, or the fence is stale.
    store.park(&busy, busy_fence, 0).await.expect("an outdated park is not an error");
    let recovery = store.recovery().await.expect("recovery reads");
    assert_eq!(recovery.unfinished, 3);
    assert_eq!(recovery.runnable, vec![busy.clone()], "only the run that was not parked has something to do");
    assert_eq!(timers(store).await, vec![("sleeping".into(), 0, "sleep", 5_000)]);
    let expected = WaitingSignIn {
        run: waiting.clone(),
        tool: "conformance_tool".into(),
        op: Op(0),
        provider: "github".into(),
        nonce: "nonce-1".into(),
    };
    assert_eq!(recovery.sign_ins, vec![expected]);
    let summary = store.tail(&sleeping).await.unwrap().unwrap().0;
    assert!(summary.parked, "the summary says the run is parked");

    // A delivery makes a parked run runnable; so does an append, which clears the mark.
    deliver(store, Target::Hook(token("waiting")), None, hook_payload(json!(1))).await;
    append(store, &sleeping, sleeping_fence, 2, vec![record(1, json!(1))]).await;
    let mut runnable = store.recovery().await.unwrap().runnable;
    runnable.sort();
    assert_eq!(runnable, vec![busy, sleeping.clone(), waiting]);
    assert!(!store.tail(&sleeping).await.unwrap().unwrap().0.parked);
    let stale = claim(store, &sleeping, 0).await;
    store.park(&sleeping, sleeping_fence, 3).await.expect("a stale fence's park is not an error");
    assert!(!store.tail(&sleeping).await.unwrap().unwrap().0.parked, "a stale fence cannot park the run");
    store.park(&sleeping, stale.fence, 3).await.unwrap();
    assert!(store.tail(&sleeping).await.unwrap().unwrap().0.parked);
}

/// Continuing as new replaces the journal with one entry at sequence 0, releases the old
/// history's timers and hooks and drops its inbox but for a pending cancellation; a stale fence
/// or a finished run is refused, writing nothing.
pub async fn continue_as_new_replaces_the_history_and_keeps_a_pending_cancel(store: &dyn Store) {
    let run = run_id("looping");
    let fence = create(store, new_run("looping", json!({"round": 1}), 1)).await;
    let held = token("looping-hook");
    append(store, &run, fence, 1, vec![sleep(0, 9_000), hook(1, &held), record(2, json!(7))]).await;
    deliver(store, Target::Hook(held.clone()), Some("first"), hook_payload(json!("early"))).await;
    let cancel = DeliveryPayload::Run(Delivery::Cancel { reason: "stop".into(), keep_output: false });
    deliver(store, Target::Run(run.clone()), None, cancel).await;
    let mut next = new_run("looping", json!({"round": 2}), 2).started_entry();
    if let Entry::RunStarted { continued, .. } = &mut next {
        *continued = 1;
    }
    let stale = Fence { epoch: fence.epoch + 100 };
    let refused = store.continue_as_new(&run, stale, &mut Some(next.clone()), false).await;
    assert!(matches!(refused, Err(StoreError::Fenced { .. })), "a stale fence is refused: {refused:?}");
    assert_eq!(entries(store, &run).await.len(), 4, "nothing was written");
    store.continue_as_new(&run, fence, &mut Some(next.clone()), false).await.expect("continue as new");
    assert_eq!(entries(store, &run).await, vec![next.clone()], "the new history starts at sequence 0");
    assert_eq!(store.load(&run).await.unwrap().unwrap().summary.entries, 1);
    assert!(timers(store).await.is_empty(), "the old history's timers are released");
    assert_eq!(find_hook(store, &held).await, None, "the old history's hooks are released");
    let waiting = inbox(store, &run).await;
    assert!(matches!(&waiting[..], [InboxItem { delivery: Delivery::Cancel { .. }, .. }]), "{waiting:?}");
    // The new history appends from sequence 1 and may take the same token again.
    append(store, &run, fence, 1, vec![hook(0, &held), run_completed()]).await;
    let finished = store.continue_as_new(&run, fence, &mut Some(next.clone()), false).await;
    assert!(matches!(finished, Err(StoreError::RunFinished(_))), "{finished:?}");
}

/// Continuing as new with `keep_inbox` keeps the deliveries still waiting for the new history and
/// the delivery ids seen, so a repeat stays a duplicate; the journal, timers and hooks go as ever.
pub async fn continue_as_new_can_keep_the_inbox_whole(store: &dyn Store) {
    let run = run_id("conversing");
    let fence = create(store, new_run("conversing", json!({"round": 1}), 1)).await;
    append(store, &run, fence, 1, vec![sleep(0, 9_000), record(1, json!(7))]).await;
    let message = |text: &str| DeliveryPayload::Run(Delivery::Hook { op: Op(0), payload: json!(text) });
    deliver(store, Target::Run(run.clone()), Some("message:1"), message("waiting")).await;
    let next = new_run("conversing", json!({"round": 2}), 2).started_entry();
    store.continue_as_new(&run, fence, &mut Some(next.clone()), true).await.expect("continue as new");
    assert_eq!(entries(store, &run).await, vec![next], "the new history starts at sequence 0");
    assert!(timers(store).await.is_empty(), "the old history's timers are released");
    let waiting = inbox(store, &run).await;
    assert!(
        matches!(&waiting[..], [InboxItem { delivery: Delivery::Hook { op: Op(0), .. }, .. }]),
        "the waiting delivery reaches the new history: {waiting:?}"
    );
    let again = store.deliver(Target::Run(run.clone()), Some("message:1"), message("again")).await.unwrap();
    assert!(matches!(again, Delivered::Duplicate { .. }), "a delivery id seen before is still a duplicate: {again:?}");
}

/// A delivery beyond the per-hook limit, or the per-run limit, is refused with `InboxFull` and
/// changes nothing; a repeat of an accepted delivery is still a duplicate; taking deliveries in
/// makes room.
pub async fn inboxes_refuse_deliveries_beyond_their_limits(store: &dyn Store) {
    let InboxLimits { per_run, per_hook } = InboxLimits::DEFAULT;
    let run = run_id("flooded");
    let fence = create(store, new_run("flooded", json!({}), 1)).await;
    let hooks: Vec<TokenHash> = (0..=per_run / per_hook).map(|index| token(&format!("flood-{index}"))).collect();
    let created = hooks.iter().enumerate().map(|(op, hash)| hook(op as u32, hash)).collect();
    append(store, &run, fence, 1, created).await;
    let to = |index: usize, id: usize| {
        let hash = hooks[index].clone();
        async move { store.deliver(Target::Hook(hash), Some(&format!("d{id}")), hook_payload(json!(id))).await }
    };
    let first: Vec<_> = join_all((0..per_hook).map(|id| to(0, id))).await;
    assert!(first.iter().all(|delivered| matches!(delivered, Ok(Delivered::Accepted { .. }))));
    let refused = to(0, per_hook).await;
    assert!(matches!(refused, Err(StoreError::InboxFull { hook: Some(Op(0)), .. })), "{refused:?}");
    assert!(matches!(to(0, 0).await, Ok(Delivered::Duplicate { .. })), "a repeat is still a duplicate");
    for index in 1..per_run / per_hook {
        let batch: Vec<_> = join_all((0..per_hook).map(|id| to(index, index * per_hook + id))).await;
        assert!(batch.iter().all(Result::is_ok), "hook {index} takes its share");
    }
    let refused = to(per_run / per_hook, per_run).await;
    assert!(matches!(refused, Err(StoreError::InboxFull { hook: None, .. })), "{refused:?}");
    assert_eq!(inbox(store, &run).await.len(), per_run, "refusals wrote nothing");
    let taken: Vec<u64> = inbox(store, &run).await.iter().take(10).map(|item| item.id).collect();
    let received = (0..10).map(|_| Entry::HookReceived { op: Op(0), payload: json!(0) }).collect();
    let next = hooks.len() as u64 + 1;
    store
        .append(
            &run,
            fence,
            &mut Append { first_seq: next, entries: received, consumed: taken, notices: Vec::new(), runs: Vec::new() },
        )
        .await
        .unwrap();
    assert!(matches!(to(per_run / per_hook, per_run).await, Ok(Delivered::Accepted { .. })), "taking in makes room");
}

/// A notice rides on an append: it lands in the other run's inbox exactly when the append is
/// journaled (not when it is refused), once per delivery id, and not at all for a finished run.
pub async fn notices_reach_other_runs_with_the_append_that_implies_them(store: &dyn Store) {
    let (parent, child, done) = (run_id("parent"), run_id("child"), run_id("done"));
    create(store, new_run("parent", json!({}), 1)).await;
    let child_fence = create(store, new_run("child", json!({}), 2)).await;
    let done_fence = create(store, new_run("done", json!({}), 3)).await;
    append(store, &done, done_fence, 1, vec![run_completed()]).await;
    let notice = |run: &RunId, id: &str| super::Notice {
        run: run.clone(),
        delivery_id: id.to_owned(),
        delivery: Delivery::Hook { op: Op(0), payload: json!({ "from": "child", "id": id }) },
    };
    let stale = Fence { epoch: child_fence.epoch + 100 };
    let mut refused = Append {
        first_seq: 1,
        entries: vec![record(0, json!(1))],
        consumed: Vec::new(),
        notices: vec![notice(&parent, "n0")],
        runs: Vec::new(),
    };
    assert!(store.append(&child, stale, &mut refused).await.is_err(), "a stale fence is refused");
    assert!(inbox(store, &parent).await.is_empty(), "a refused append sends nothing");
    let notices = vec![notice(&parent, "n1"), notice(&done, "n1")];
    let mut batch =
        Append { first_seq: 1, entries: vec![record(0, json!(1))], consumed: Vec::new(), notices, runs: Vec::new() };
    store.append(&child, child_fence, &mut batch).await.expect("the append succeeds");
    let again = vec![notice(&parent, "n1"), notice(&parent, "n2")];
    let mut batch = Append {
        first_seq: 2,
        entries: vec![record(1, json!(2))],
        consumed: Vec::new(),
        notices: again,
        runs: Vec::new(),
    };
    store.append(&child, child_fence, &mut batch).await.expect("the append succeeds");
    let received: Vec<Value> = inbox(store, &parent)
        .await
        .into_iter()
        .map(|item| match item.delivery {
            Delivery::Hook { payload, .. } => payload["id"].clone(),
            other => panic!("a hook delivery: {other:?}"),
        })
        .collect();
    assert_eq!(received, [json!("n1"), json!("n2")], "each delivery id once, in order");
    assert!(inbox(store, &done).await.is_empty(), "a finished run takes no notice");
}

/// A run an append starts is created in the same transaction (not when the append is refused),
/// unclaimed, with the notices to it in its inbox, ready for a claim; an id that exists is left as
/// it is.
pub async fn appends_create_the_runs_they_start(store: &dyn Store) {
    let (parent, child) = (run_id("parent"), run_id("parent.1"));
    let fence = create(store, new_run("parent", json!({}), 1)).await;
    let first = super::Notice {
        run: child.clone(),
        delivery_id: "call:1".to_owned(),
        delivery: Delivery::Hook { op: Op(0), payload: json!({ "call": 1 }) },
    };
    let starts = |first_seq: u64, op: u32, input: Value| Append {
        first_seq,
        entries: vec![record(op, json!({ "run": child.as_str() }))],
        consumed: Vec::new(),
        notices: vec![first.clone()],
        runs: vec![new_run("parent.1", input, 5)],
    };
    let stale = Fence { epoch: fence.epoch + 100 };
    assert!(
        store.append(&parent, stale, &mut starts(1, 0, json!({ "n": 1 }))).await.is_err(),
        "a stale fence is refused"
    );
    assert!(store.load(&child).await.unwrap().is_none(), "a refused append creates no run");

    store.append(&parent, fence, &mut starts(1, 0, json!({ "n": 1 }))).await.expect("the append succeeds");
    let created = store.load(&child).await.unwrap().expect("the append created the run");
    assert_eq!(created.entries, [new_run("parent.1", json!({ "n": 1 }), 5).started_entry()]);
    assert_eq!(created.summary.status, RunStatus::Active);
    assert!(store.recovery().await.unwrap().runnable.contains(&child), "a new run has something to do");
    let claimed = claim(store, &child, 0).await;
    assert_eq!(claimed.entries.len(), 1, "the new run can be claimed: it is nobody's yet");
    let delivered: Vec<Delivery> = claimed.inbox.into_iter().map(|item| item.delivery).collect();
    assert_eq!(delivered, std::slice::from_ref(&first.delivery), "the notice to the new run is in its inbox");
    append(store, &child, claimed.fence, 1, vec![record(0, json!(1))]).await;

    store.append(&parent, fence, &mut starts(2, 1, json!({ "n": 2 }))).await.expect("an existing id is no error");
    let again = store.load(&child).await.unwrap().expect("the run is still there");
    assert_eq!(again.entries.len(), 2, "the existing run is left as it is");
    assert!(matches!(&again.entries[0], Entry::RunStarted { input, .. } if input == &json!({ "n": 1 })));
}

/// `append` may take its batch's entries. One it refuses (a wrong sequence number, a stale fence) writes
/// nothing and is left exactly as it was, its entries, consumed items, notices and runs included,
/// to be retried. One it accepts is journaled and indexed as given, whether the store took its
/// entries (leaving `entries` empty) or kept them (leaving them as they were); the rest of the
/// batch is left as it was.
pub async fn append_writes_a_batch_as_given_and_leaves_a_refused_one_whole(store: &dyn Store) {
    let (run, other) = (run_id("given"), run_id("given-other"));
    let fence = create(store, new_run("given", json!(null), 1_000)).await;
    create(store, new_run("given-other", json!(null), 1_001)).await;
    let cancel = Delivery::Cancel { reason: "enough".into(), keep_output: false };
    let item = accepted_id(deliver(store, Target::Run(run.clone()), Some("c1"), DeliveryPayload::Run(cancel)).await);
    let given = Append {
        first_seq: 3,
        entries: vec![record(0, json!({ "kept": "whole" })), sleep(1, 5_000)],
        consumed: vec![item],
        notices: vec![super::Notice {
            run: other.clone(),
            delivery_id: "given:1".into(),
            delivery: Delivery::Hook { op: Op(0), payload: json!({ "from": "given" }) },
        }],
        runs: vec![new_run("given.1", json!({ "n": 1 }), 1_002)],
    };
    let left_whole = |batch: &Append, why: &str| {
        assert_eq!(batch.first_seq, given.first_seq, "{why}: its sequence number");
        assert_eq!(batch.entries, given.entries, "{why}: its entries");
        assert_eq!(batch.consumed, given.consumed, "{why}: its consumed items");
        assert_eq!(batch.notices, given.notices, "{why}: its notices");
        let runs = |batch: &Append| batch.runs.iter().map(|run| run.started_entry()).collect::<Vec<_>>();
        assert_eq!(runs(batch), runs(&given), "{why}: its runs");
    };
    let nothing_written = async |why: &str| {
        assert_eq!(entries(store, &run).await.len(), 1, "{why} writes no entries");
        assert!(timers(store).await.is_empty(), "{why} writes no timers");
        assert_eq!(inbox(store, &run).await.len(), 1, "{why} consumes nothing");
        assert!(inbox(store, &other).await.is_empty(), "{why} sends no notice");
        assert!(store.load(&run_id("given.1")).await.unwrap().is_none(), "{why} starts no run");
    };

    let mut batch = given.clone();
    let result = store.append(&run, fence, &mut batch).await;
    assert!(matches!(result, Err(StoreError::SeqConflict { .. })), "a wrong sequence number is refused: {result:?}");
    left_whole(&batch, "a batch at the wrong sequence number is left whole");
    nothing_written("a batch at the wrong sequence number").await;

    batch.first_seq = 1;
    let current = claim(store, &run, 0).await.fence;
    let result = store.append(&run, fence, &mut batch).await;
    assert!(matches!(result, Err(StoreError::Fenced { .. })), "a stale fence is refused: {result:?}");
    left_whole(&Append { first_seq: 3, ..batch.clone() }, "a fenced batch is left whole");
    nothing_written("a fenced batch").await;

    store.append(&run, current, &mut batch).await.expect("the batch appends at the journal's length");
    assert!(batch.entries.is_empty() || batch.entries == given.entries, "the entries are taken or left as they were");
    left_whole(&Append { first_seq: 3, entries: given.entries.clone(), ..batch }, "the rest of an accepted batch");
    assert_eq!(entries(store, &run).await[1..], given.entries[..], "the entries are journaled as given, in order");
    assert_eq!(timers(store).await, vec![("given".to_owned(), 1, "sleep", 5_000)], "the sleep's timer is indexed");
    assert!(inbox(store, &run).await.is_empty(), "the inbox item is consumed");
    assert_eq!(inbox(store, &other).await.len(), 1, "the notice is sent");
    assert!(store.load(&run_id("given.1")).await.unwrap().is_some(), "the run is started");
}

/// `continue_as_new` may take its entry. One it refuses (a stale fence, a finished run) writes
/// nothing and is left to the caller, to be retried; one it accepts starts the new history as
/// given, whether the store took it (leaving `None`) or kept it.
pub async fn continue_as_new_starts_the_history_as_given_and_leaves_a_refused_entry(store: &dyn Store) {
    let run = run_id("taken-on");
    let fence = create(store, new_run("taken-on", json!({"round": 1}), 1)).await;
    append(store, &run, fence, 1, vec![sleep(0, 9_000), record(1, json!(7))]).await;
    let next = new_run("taken-on", json!({"round": 2}), 2).started_entry();
    let stale = Fence { epoch: fence.epoch + 100 };
    let mut started = Some(next.clone());
    let refused = store.continue_as_new(&run, stale, &mut started, true).await;
    assert!(matches!(refused, Err(StoreError::Fenced { .. })), "a stale fence is refused: {refused:?}");
    assert_eq!(started.as_ref(), Some(&next), "a refused entry is left to the caller");
    assert_eq!(entries(store, &run).await.len(), 3, "nothing was written");
    store.continue_as_new(&run, fence, &mut started, true).await.expect("continue as new");
    assert!(started.is_none() || started.as_ref() == Some(&next), "the entry is taken or left as it was");
    assert_eq!(entries(store, &run).await, vec![next.clone()], "the new history starts at sequence 0");
    assert!(timers(store).await.is_empty(), "the old history's timers are released");
    append(store, &run, fence, 1, vec![run_completed()]).await;
    let mut again = Some(next.clone());
    let finished = store.continue_as_new(&run, fence, &mut again, true).await;
    assert!(matches!(finished, Err(StoreError::RunFinished(_))), "{finished:?}");
    assert_eq!(again, Some(next), "an entry a finished run refused is left to the caller");
}

/// A payload the runtime holds as JSON text ([`Payload::text`]: a session's feed events and its
/// carried state) is written as the JSON it holds and reads back as that value: in a recorded
/// entry, and in the first entry of a history continued as new; unicode, escapes and the deepest
/// value the journal keeps included.
pub async fn payloads_held_as_text_read_back_as_the_values_they_hold(store: &dyn Store) {
    let run = run_id("held-as-text");
    let fence = create(store, new_run("held-as-text", json!(1), 1)).await;
    let text = "héllo ✓ 𝄞 \"quoted\" \\ nul:\u{0}:end </task_result>\n";
    let event = json!({ "sequence": 1, "type": "turn.started", "data": { "turnId": text, "deep": deepest() } });
    let recorded = Entry::Recorded { op: Op(0), kind: RecordKind::Published, value: Payload::text(&event).unwrap() };
    append(store, &run, fence, 1, vec![recorded.clone()]).await;
    let read = entries(store, &run).await;
    assert_eq!(read[1], recorded, "the recorded text reads back as the value it holds");
    assert!(matches!(&read[1], Entry::Recorded { value, .. } if *value == event));
    let carried = json!({ "system": text, "carried": { "messages": [{ "role": "user", "content": text }] } });
    let mut next = new_run("held-as-text", json!(null), 2).started_entry();
    if let Entry::RunStarted { input, continued, .. } = &mut next {
        *input = Payload::text(&carried).unwrap();
        *continued = 1;
    }
    let mut started = Some(next.clone());
    store.continue_as_new(&run, fence, &mut started, true).await.expect("continue as new");
    let read = entries(store, &run).await;
    assert_eq!(read, vec![next], "the new history's input reads back as the value it holds");
    assert!(matches!(&read[0], Entry::RunStarted { input, .. } if *input == carried));
}
