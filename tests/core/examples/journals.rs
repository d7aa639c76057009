//! A corpus of recorded journals of the examples' tools, replayed against today's code in CI: a
//! change to an example's workflow that would break its runs in flight fails here, as it would
//! fail a user's CI that keeps such a folder (`host export` writes the files, `host replay` or
//! `eve_tools::testing::replay` checks them).
//!
//! The files under `tests/journals/` were recorded by this test itself:
//! `EVE_RECORD_JOURNALS=1 cargo test -p eve-tests --test core examples::journals` writes them again
//! (do it only on purpose: a re-recorded corpus no longer guards the runs recorded before).

use std::path::{Path, PathBuf};
use std::time::Duration;

// The examples' tools, linked into this test.
use eve_examples as _;
use eve_tests::World;
use eve_tools::testing::{JournalFile, ReplayVerdict, replay};
use eve_tools::{Answer, Clock, RunHandle, Runtime};
use serde_json::json;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("journals")
}

#[test]
fn every_recorded_journal_of_the_examples_replays_on_this_build() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("tests/journals exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".journal.json"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the corpus holds the examples' journals: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let journal = JournalFile::read(file).unwrap();
        let report = replay(&journal);
        if !report.replays() {
            failures.push(format!("{}: {report}", file.display()));
        }
        if let ReplayVerdict::Replays { ops, .. } = report.verdict {
            assert!(ops > 0, "{} replays no operation at all", file.display());
        }
    }
    assert!(failures.is_empty(), "journals that no longer replay:\n{}", failures.join("\n"));
}

/// Records the corpus again when `EVE_RECORD_JOURNALS` is set; otherwise does nothing.
#[tokio::test]
async fn record_the_corpus_when_asked() {
    if std::env::var_os("EVE_RECORD_JOURNALS").is_none() {
        return;
    }
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let save = |runtime: Runtime, run: RunHandle, name: &'static str| {
        let clock = world.clock.clone();
        async move {
            let record = runtime.journal(run.id()).await.unwrap();
            let file = JournalFile::of(&record, clock.now());
            std::fs::write(corpus().join(format!("{name}.journal.json")), file.to_text() + "\n").unwrap();
        }
    };

    let asked = runtime.start("deploy", json!({ "service": "api" })).await.unwrap();
    asked.parked().await.unwrap();
    save(runtime.clone(), asked, "deploy-asked").await;

    let approved = runtime.start("deploy", json!({ "service": "web" })).await.unwrap();
    approved.parked().await.unwrap();
    let question = runtime.open_questions(approved.id()).await.unwrap().remove(0);
    runtime.answer(approved.id(), &question.request_id, Answer::option("approve")).await.unwrap();
    approved.outcome().await.unwrap();
    save(runtime.clone(), approved, "deploy-approved").await;

    let paged = runtime.start("deploy_with_deadline", json!({ "service": "api" })).await.unwrap();
    paged.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(4 * 3600 + 1));
    runtime.settle().await;
    paged.parked().await.unwrap();
    save(runtime.clone(), paged, "approve_with_deadline-paged").await;

    let refund = runtime.start("refund_order", json!({ "orderId": "A-17", "amount": 42.5 })).await.unwrap();
    refund.parked().await.unwrap();
    save(runtime.clone(), refund, "refund_order-asked").await;

    let remind = runtime.start("remind", json!({ "note": "stand up", "delay": "10m" })).await.unwrap();
    remind.parked().await.unwrap();
    save(runtime.clone(), remind, "remind-sleeping").await;

    let reminded = runtime.start("remind", json!({ "note": "stretch", "delay": "1m" })).await.unwrap();
    reminded.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(61));
    reminded.outcome().await.unwrap();
    save(runtime.clone(), reminded, "remind-done").await;
}
