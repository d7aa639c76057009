//! What the executor journals instead of an entry too large for the store.
//!
//! A store may cap the size of one journal entry (`SqliteOptions::max_entry_bytes`), and declares
//! the cap (`Store::max_entry_bytes`, read once as the runtime is built). A refusal there would
//! not be transient: appending the same entry again fails again, and because a step's completion
//! is journaled before the body sees it, retrying the activation would run the step again, and
//! again. So the executor fits every batch to the cap before the store sees it: a delivery before
//! the body sees it ([`fit_entries`]), a record before its commit ([`fit_records`]). Each entry
//! over the cap is replaced by one that records why it could not be kept:
//!
//! - a step's result becomes a fatal failure of that step, naming the sizes, so the body decides
//!   what to do and the step is not rerun;
//! - the tool's output becomes a failure of the run;
//! - an error message (a step failure or retry, a run failure) is cut to fit.
//!
//! The body only ever observes the replacement, live and on replay alike. What cannot be made to
//! fit (a record with nothing to cut, such as an `ask` with a huge prompt; a delivery to another
//! run or a run the batch starts, [`check_sent`]) fails the run instead
//! (`Driver::fail_unrecordable`), before the store sees the batch. So a store that refuses a
//! fitted batch as [`StoreError::TooLarge`] holds a limit it does not declare: a bug in the store
//! ([`store_bug`]), which fails the run too rather than be retried.

use crate::error::StoreError;
use crate::journal::string_bound;
use crate::journal::{Entry, RunFailure, StepOutcome};
use crate::store::Append;

/// The longest error message kept when one has to be cut, in bytes.
const MAX_MESSAGE: usize = 512;

/// Replaces each entry over `limit` bytes of JSON; returns whether any changed.
pub(super) fn fit_entries(entries: &mut [Entry], limit: usize) -> bool {
    let mut changed = false;
    for entry in entries.iter_mut() {
        if over(entry, limit).is_some() {
            changed |= fit(entry, limit);
        }
    }
    changed
}

/// Replaces each record (not a delivery, which was fitted before the body saw it) over `limit`
/// bytes; fails with the first that cannot be made to fit.
pub(super) fn fit_records(entries: &mut [Entry], limit: usize) -> Result<(), StoreError> {
    for entry in entries.iter_mut().filter(|entry| !entry.is_delivery()) {
        if over(entry, limit).is_some() {
            fit(entry, limit);
            check(entry, limit, "a journal entry")?;
        }
    }
    Ok(())
}

/// Fails if `entry` is over `limit` bytes of JSON, saying it is `what`.
pub(super) fn check(entry: &Entry, limit: usize, what: &'static str) -> Result<(), StoreError> {
    match over(entry, limit) {
        Some(size) => Err(StoreError::TooLarge { what, size, limit }),
        None => Ok(()),
    }
}

/// Fails if what `batch` sends beside its journal entries is over `limit` bytes of JSON, as the
/// stores encode it: each delivery to another run (a child's report to its parent, a call to a
/// task) and the first entry of each run the batch starts. Neither can be cut to fit.
pub(super) fn check_sent(batch: &Append, limit: usize) -> Result<(), StoreError> {
    for notice in &batch.notices {
        let size = json_size(&notice.delivery);
        if size > limit {
            return Err(StoreError::TooLarge { what: "a delivery to another run", size, limit });
        }
    }
    for run in &batch.runs {
        check(&run.started_entry(), limit, "the first entry of a run it starts, with the run's input,")?;
    }
    Ok(())
}

/// A store's refusal, as too large, of a batch fitted to the limit the store declares, named for
/// what it is: a bug in the store. The run fails with it rather than retry an append that the store
/// would refuse forever. Any other error is returned as it is.
pub(super) fn store_bug(error: StoreError) -> StoreError {
    let StoreError::TooLarge { size, limit, .. } = error else { return error };
    tracing::error!(size, limit, "the store refused as too large a batch fitted to the limit it declares");
    let what = "a bug in the store: it refused as too large a batch the runtime fitted to the limit the store \
                declares (Store::max_entry_bytes); what it refused";
    StoreError::TooLarge { what, size, limit }
}

/// The size of `entry` as JSON if it is over `limit`, or `None` if it fits: found without
/// serializing the entry when its size is bounded (see [`size_bound`]).
fn over(entry: &Entry, limit: usize) -> Option<usize> {
    if size_bound(entry).is_some_and(|bound| bound <= limit) {
        return None;
    }
    let size = json_size(entry);
    (size > limit).then_some(size)
}

/// Room for all of an entry but its strings and values: its kind, its field names, its numbers
/// and its hash, each a few dozen bytes at most.
const FRAME: usize = 256;

/// The size at most of `entry` as JSON, found without serializing it, for the entries a run
/// journals most: a step's result, and a recorded value, whose value is a scalar or JSON text
/// already; a retry, a sleep and the small entries of fixed shape. `None` for any other entry,
/// which is then measured. So the store alone encodes these entries, once.
fn size_bound(entry: &Entry) -> Option<usize> {
    match entry {
        Entry::StepCompleted { name, outcome: StepOutcome::Ok { value }, .. } => {
            Some(FRAME + string_bound(name) + value.json_size_bound()?)
        }
        Entry::Recorded { value, .. } => Some(FRAME + value.json_size_bound()?),
        Entry::StepRetrying { name, error, .. } => Some(FRAME + string_bound(name) + string_bound(error)),
        Entry::TimerScheduled { .. }
        | Entry::TimerFired { .. }
        | Entry::HookTokenTaken { .. }
        | Entry::RunCancelled {} => Some(FRAME),
        _ => None,
    }
}

/// The size of `value` as JSON, as the stores encode it, counted without keeping the text.
fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);

    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[cfg(test)]
    tests::SERIALIZED.with(|serialized| serialized.set(serialized.get() + 1));
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(usize::MAX, |()| count.0)
}

fn fit(entry: &mut Entry, limit: usize) -> bool {
    match entry {
        Entry::StepCompleted { name, outcome, .. } => match outcome {
            StepOutcome::Ok { value } => {
                let message = format!("step `{name}` returned {}", over_limit(json_size(value), limit));
                *outcome = StepOutcome::Err { fatal: true, message };
                true
            }
            StepOutcome::Err { message, .. } => cut(message),
        },
        Entry::RunCompleted { output } => {
            let message = format!("the tool's output is {}", over_limit(json_size(output), limit));
            *entry = Entry::RunFailed { failure: RunFailure::Tool { message } };
            true
        }
        Entry::StepRetrying { error: message, .. }
        | Entry::RunFailed { failure: RunFailure::Tool { message } | RunFailure::Panicked { message } } => cut(message),
        _ => false,
    }
}

fn over_limit(size: usize, limit: usize) -> String {
    format!(
        "{size} bytes of JSON, too large for the store's {limit}-byte limit on one journal entry; return a \
         smaller value (keep large data elsewhere and return a reference to it)"
    )
}

/// Cuts `message` to [`MAX_MESSAGE`] bytes at a character boundary, saying so; false if it was
/// short enough already.
fn cut(message: &mut String) -> bool {
    if message.len() <= MAX_MESSAGE {
        return false;
    }
    let original = message.len();
    let end = (0..=MAX_MESSAGE).rev().find(|at| message.is_char_boundary(*at)).unwrap_or(0);
    message.truncate(end);
    message.push_str(&format!("… (cut from {original} bytes to fit the journal)"));
    true
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::journal::{InputHash, Op, Payload, RecordKind};
    use crate::time::Timestamp;

    thread_local! {
        /// How many times this thread serialized something to measure it.
        pub(super) static SERIALIZED: Cell<usize> = const { Cell::new(0) };
    }

    /// The entries a run journals most, whose size is bounded without serializing them.
    fn frequent() -> Vec<Entry> {
        vec![
            completed(StepOutcome::Ok { value: json!(418).into() }),
            completed(StepOutcome::Ok { value: json!(-1.797_693_134_862_315_7e308).into() }),
            completed(StepOutcome::Ok { value: json!(null).into() }),
            completed(StepOutcome::Ok { value: json!("a short \"quoted\" line\n").into() }),
            completed(StepOutcome::Ok { value: Payload::text(&json!({"answer": [1, 2, 3]})).unwrap() }),
            Entry::Recorded { op: Op(9), kind: RecordKind::Now, value: json!(1_733_400_000_000_u64).into() },
            Entry::Recorded {
                op: Op(10),
                kind: RecordKind::Published,
                value: Payload::text(&json!({"event": "turn.started", "turn": 3})).unwrap(),
            },
        ]
    }

    /// A run's journal is encoded once, by the store: the entries a run journals most are
    /// checked against the store's limit without being serialized to measure them. Others (a
    /// tree of values) still are.
    #[test]
    fn the_frequent_entries_are_checked_without_serializing_them() {
        let mut entries = frequent();
        let before = entries.clone();
        SERIALIZED.with(|serialized| serialized.set(0));
        assert!(!fit_entries(&mut entries, 8 << 20));
        assert_eq!(entries, before);
        assert_eq!(SERIALIZED.with(Cell::get), 0, "no entry was serialized to measure it");

        let mut tree = vec![completed(StepOutcome::Ok { value: json!({"rows": [1, 2, 3]}).into() })];
        assert!(!fit_entries(&mut tree, 8 << 20));
        assert_eq!(SERIALIZED.with(Cell::get), 1, "a tree is measured");
    }

    /// Any scalar or short JSON text, as a step's result or a recorded value.
    fn bounded_payload() -> impl Strategy<Value = Payload> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,40}".prop_map(Value::String),
            prop::collection::vec(any::<char>(), 0..40).prop_map(|chars| Value::String(chars.into_iter().collect())),
        ]
        .prop_flat_map(|value| {
            let text = Payload::text(&value).unwrap();
            prop_oneof![Just(Payload::from(value)), Just(text)]
        })
    }

    proptest! {
        /// The bound is never below the size the entry serializes to, whatever its fields hold.
        #[test]
        fn a_bound_is_never_below_the_size(
            op in any::<u32>(),
            name in prop_oneof![".{0,30}".prop_map(String::from), Just("billing::charge".to_owned())],
            hash in any::<u64>(),
            attempt in any::<u32>(),
            took_ms in any::<Option<u64>>(),
            value in bounded_payload(),
            kind in prop_oneof![
                Just(RecordKind::Now), Just(RecordKind::Random), Just(RecordKind::Uuid),
                Just(RecordKind::Published), Just(RecordKind::Value), Just(RecordKind::Started),
            ],
            error in prop::collection::vec(any::<char>(), 0..60).prop_map(String::from_iter),
            at in any::<u64>(),
        ) {
            let step = Entry::StepCompleted {
                op: Op(op),
                name: name.clone().into(),
                input_hash: InputHash(hash),
                attempt,
                outcome: StepOutcome::Ok { value: value.clone() },
                took_ms,
            };
            let retrying = Entry::StepRetrying {
                op: Op(op),
                name: name.into(),
                input_hash: InputHash(hash),
                attempt,
                error,
                next_attempt_at: Timestamp::from_millis(at),
            };
            let recorded = Entry::Recorded { op: Op(op), kind, value };
            let fixed = [
                Entry::TimerScheduled { op: Op(op), deadline: Timestamp::from_millis(at) },
                Entry::TimerFired { op: Op(op) },
                Entry::HookTokenTaken { op: Op(op) },
                Entry::RunCancelled {},
            ];
            for entry in [step, retrying, recorded].into_iter().chain(fixed) {
                let bound = size_bound(&entry).expect("each entry is bounded");
                prop_assert!(json_size(&entry) <= bound, "{} > {bound}: {entry:?}", json_size(&entry));
            }
        }
    }

    fn completed(outcome: StepOutcome) -> Entry {
        Entry::StepCompleted {
            op: Op(3),
            name: "fetch".into(),
            input_hash: InputHash::of(b"[]"),
            attempt: 1,
            outcome,
            took_ms: None,
        }
    }

    #[test]
    fn entries_within_the_limit_are_left_alone() {
        let mut entries = vec![completed(StepOutcome::Ok { value: json!("small").into() })];
        let before = entries.clone();
        assert!(!fit_entries(&mut entries, 1_024));
        assert_eq!(entries, before);
    }

    #[test]
    fn an_oversized_result_becomes_a_fatal_failure_of_its_step() {
        let mut entries = vec![completed(StepOutcome::Ok { value: json!("x".repeat(2_000)).into() })];
        assert!(fit_entries(&mut entries, 1_024));
        let Entry::StepCompleted { outcome: StepOutcome::Err { fatal: true, message }, op: Op(3), .. } = &entries[0]
        else {
            panic!("the step fails fatally: {entries:?}")
        };
        assert!(message.starts_with("step `fetch` returned 2002 bytes of JSON"), "{message}");
        assert!(message.contains("too large for the store's 1024-byte limit"), "{message}");
        assert!(json_size(&entries[0]) <= 1_024);
    }

    #[test]
    fn an_oversized_output_fails_the_run_and_long_messages_are_cut_at_a_character_boundary() {
        let mut entries = vec![
            Entry::RunCompleted { output: json!("y".repeat(5_000)) },
            completed(StepOutcome::Err { fatal: false, message: "é".repeat(3_000) }),
        ];
        assert!(fit_entries(&mut entries, 2_048));
        assert!(matches!(&entries[0], Entry::RunFailed { failure: RunFailure::Tool { message } }
            if message.starts_with("the tool's output is 5002 bytes of JSON")));
        let Entry::StepCompleted { outcome: StepOutcome::Err { message, .. }, .. } = &entries[1] else { panic!() };
        assert!(message.ends_with("… (cut from 6000 bytes to fit the journal)"), "{message}");
        assert!(entries.iter().all(|entry| json_size(entry) <= 2_048));
    }
}
