//! What the executor journals instead of an entry the store refuses as too large.
//!
//! A store may cap the size of one journal entry (`SqliteOptions::max_entry_bytes`). A refusal
//! there is not transient: appending the same entry again fails again, and because a step's
//! completion is journaled before the body sees it, retrying the activation would run the step
//! again, and again. So each entry over the limit is replaced by one that records why it could not
//! be kept: a delivery before the body sees it (against the limit the store declares,
//! `Store::max_entry_bytes`), a record when an append is refused with [`StoreError::TooLarge`]:
//!
//! - a step's result becomes a fatal failure of that step, naming the sizes, so the body decides
//!   what to do and the step is not rerun;
//! - the tool's output becomes a failure of the run;
//! - an error message (a step failure or retry, a run failure) is cut to fit.
//!
//! The body only ever observes the replacement, live and on replay alike. A refused entry that cannot be shrunk (an `ask` with a
//! huge prompt) fails the run instead (`Driver::fail_unrecordable`).
//!
//! [`StoreError::TooLarge`]: crate::store::StoreError::TooLarge

use crate::journal::{Entry, RunFailure, StepOutcome};

/// The longest error message kept when one has to be cut, in bytes.
const MAX_MESSAGE: usize = 512;

/// Replaces each entry over `limit` bytes of JSON; returns whether any changed.
pub(super) fn fit_entries(entries: &mut [Entry], limit: usize) -> bool {
    fit_where(entries, limit, |_| true)
}

/// Replaces each record (not a delivery, which the body may have seen) over `limit` bytes.
pub(super) fn fit_records(entries: &mut [Entry], limit: usize) -> bool {
    fit_where(entries, limit, |entry| !entry.is_delivery())
}

fn fit_where(entries: &mut [Entry], limit: usize, fittable: impl Fn(&Entry) -> bool) -> bool {
    let mut changed = false;
    for entry in entries.iter_mut().filter(|entry| fittable(entry)) {
        if json_size(entry) > limit {
            changed |= fit(entry, limit);
        }
    }
    changed
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
    use serde_json::json;

    use super::*;
    use crate::journal::{InputHash, Op};

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
