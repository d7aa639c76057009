//! The replay check's figure (`host replay`): 1,000 recorded journals of 100 steps each, parsed
//! from their file text and replayed against this binary's code, with a target of at most 0.5 s.
//!
//! One run of `hundred_steps` is recorded on a memory store (100 steps, then parked on a hook),
//! exported as a journal file's text, and copied 1,000 times under distinct run ids. Timed:
//! `JournalFile::parse` and `testing::replay` of all 1,000 texts, as `host replay` does after
//! reading the files (reading 1,000 small files is not timed).

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use eve_benches::{heading, micros, multi_thread, record, report, secret_key, size};
use eve_tools::Clock as _;
use eve_tools::prelude::*;
use eve_tools::testing::{JournalFile, replay};
use serde_json::json;

/// How many steps to run before parking.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    n: u64,
}

#[step]
async fn add_one(x: u64) -> Result<u64, StepError> {
    Ok(x + 1)
}

/// Runs `n` trivial steps, then waits on a hook.
#[workflow_tool]
pub async fn hundred_steps(input: Steps, _ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut x = 0;
    for _ in 0..input.n {
        x = add_one(x).await?;
    }
    let mut hook = create_hook::<u64>();
    Ok(x + hook.recv().await?)
}

/// The text of `count` journal files, each a run parked after `steps` steps.
fn corpus(count: u64, steps: u64) -> Vec<String> {
    let tokio = multi_thread();
    let journal = tokio.block_on(async {
        let store = std::sync::Arc::new(eve_tools::store::MemoryStore::new());
        let runtime = Runtime::builder().shared_store(store).secret_key(secret_key());
        let runtime = runtime.build().expect("a runtime builds inside Tokio");
        let run = runtime.start("hundred_steps", json!({ "n": steps })).await.expect("the tool exists");
        run.parked().await.expect("the run parks");
        let record = runtime.journal(run.id()).await.expect("the journal loads");
        JournalFile::of(&record, eve_tools::SystemClock.now())
    });
    assert!(replay(&journal).replays(), "the recorded journal replays");
    (0..count)
        .map(|index| {
            let mut copy = journal.clone();
            copy.run = format!("run-{index}").parse().expect("a valid run id");
            copy.to_text()
        })
        .collect()
}

fn check(c: &mut Criterion) {
    let (count, steps) = (size(1_000, 50), 100);
    let texts = corpus(count, steps);
    let mut group = c.benchmark_group("replay_check");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    group.bench_function("files_1000x100", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for text in &texts {
                    let journal = JournalFile::parse(text).expect("the text parses");
                    assert!(replay(&journal).replays());
                }
            }
            record("replay_check/files_1000x100", iters, start.elapsed())
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    check(&mut criterion);
    criterion.final_summary();
    heading("replay check");
    let total = micros("replay_check/files_1000x100") / 1_000.0;
    report("host replay of 1,000 journals of 100 steps (parse + replay)", format!("{total:.0} ms"), "≤ 500 ms");
}
