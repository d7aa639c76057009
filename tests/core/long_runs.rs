//! Long runs stay bounded: a history limit with a warning before it, `continue_as_new` to start a
//! fresh history under the same run id, a hook buffer and inbox limits that slow a sender down
//! (`429` over HTTP), and a start-up that loads only the runs with something to do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eve_tests::{World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::store::{InboxLimits, MemoryStore};
use eve_tools::{Entry, Phase, RunEvent, RunFailure, RunOutcome};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Where a counting loop stands.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Round {
    round: u32,
    rounds: u32,
    total: u32,
}

#[step]
async fn count_round(ctx: &StepCtx, round: u32) -> Result<u32, StepError> {
    executed(ctx, "count_round");
    Ok(round * 10)
}

/// Counts one round per history: a step, a sleep, then continues as new until the last round.
#[workflow_tool]
pub async fn count_rounds(input: Round, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let total = input.total + count_round(ctx, input.round).await?;
    sleep(Duration::from_secs(60)).await?;
    if input.round == input.rounds {
        return Ok(total);
    }
    ctx.continue_as_new(Round { round: input.round + 1, total, ..input })
}

fn started_continued(entries: &[Entry]) -> Option<u32> {
    match entries.first()? {
        Entry::RunStarted { continued, .. } => Some(*continued),
        _ => None,
    }
}

#[tokio::test]
async fn a_run_that_continues_as_new_keeps_its_id_and_a_short_journal() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("count_rounds", json!({ "round": 1, "rounds": 5, "total": 0 })).await.unwrap();
    for round in 1..=5 {
        run.parked().await.unwrap();
        let journal = runtime.journal(run.id()).await.unwrap().entries;
        assert_eq!(started_continued(&journal), Some(round - 1), "history {round} starts the journal");
        assert!(journal.len() <= 4, "each history holds one round: {journal:?}");
        world.clock.advance(Duration::from_secs(60));
        runtime.settle().await;
    }
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(150)));
    assert_eq!(executions(run.id(), "count_round"), [1, 1, 1, 1, 1], "each round's step ran once");
    let continued: Vec<u32> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| match event {
            RunEvent::ContinuedAsNew { continued, .. } => Some(continued),
            _ => None,
        })
        .collect();
    assert_eq!(continued, [1, 2, 3, 4]);
}

#[tokio::test]
async fn a_continued_run_replays_its_new_history_after_a_restart() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("count_rounds", json!({ "round": 1, "rounds": 3, "total": 0 })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(60));
    runtime.settle().await;
    runtime.shutdown().await;
    // A new process: the second history replays from its own journal, not the first's.
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    for _ in 0..2 {
        world.clock.advance(Duration::from_secs(60));
        runtime.settle().await;
    }
    assert_eq!(runtime.handle(run.id().clone()).outcome().await.unwrap(), RunOutcome::Completed(json!(60)));
    assert_eq!(executions(run.id(), "count_round"), [1, 1, 1]);
}

/// A step per entry of `steps`, for ever if asked.
#[derive(Deserialize, JsonSchema)]
pub struct Steps {
    steps: u32,
}

#[step]
async fn tick(n: u32) -> Result<u32, StepError> {
    Ok(n)
}

/// Runs `steps` steps one after another.
#[workflow_tool]
pub async fn many_steps(input: Steps, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let _ = ctx;
    for n in 0..input.steps {
        tick(n).await?;
    }
    Ok(input.steps)
}

#[tokio::test]
async fn a_run_past_the_history_limit_fails_with_a_clear_error_after_a_warning() {
    let world = World::in_memory();
    let runtime = world.builder(16).history_limit(20).build().unwrap();
    let mut events = runtime.events();
    let run = runtime.start("many_steps", json!({ "steps": 100 })).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Failed(RunFailure::HistoryLimit { limit: 20 }));
    let journal = runtime.journal(run.id()).await.unwrap().entries;
    assert!(journal.len() <= 21, "nothing is journaled past the limit but the failure: {}", journal.len());
    let warned = std::iter::from_fn(|| events.try_recv().ok()).find_map(|event| match event {
        RunEvent::HistoryWarning { entries, limit, .. } => Some((entries, limit)),
        _ => None,
    });
    assert_eq!(warned, Some((4, 20)), "a warning at a fifth of the limit");
    let fine = runtime.start("many_steps", json!({ "steps": 5 })).await.unwrap();
    assert_eq!(fine.outcome().await.unwrap(), RunOutcome::Completed(json!(5)), "a short run is unaffected");
}

/// Continues with an input its own tool does not take.
#[workflow_tool]
pub async fn continue_wrongly(_input: Steps, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    ctx.continue_as_new(json!({ "steps": "many" }))
}

#[tokio::test]
async fn continuing_with_an_input_the_tool_does_not_take_fails_the_run_saying_why() {
    let runtime = World::in_memory().runtime(16);
    let run = runtime.start("continue_wrongly", json!({ "steps": 1 })).await.unwrap();
    let RunOutcome::Failed(RunFailure::Tool { message }) = run.outcome().await.unwrap() else {
        panic!("the run fails")
    };
    assert!(
        message.starts_with("`continue_as_new` was given an input tool `continue_wrongly` does not take"),
        "{message}"
    );
    assert_eq!(runtime.journal(run.id()).await.unwrap().entries.len(), 2, "no new history was started");
}

/// A note to carry into the next history.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Note {
    note: String,
}

/// Continues with a note longer than one journal entry may be.
#[workflow_tool]
pub async fn continue_too_long(_input: Note, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    ctx.continue_as_new(Note { note: "n".repeat(4_096) })
}

/// The new history's first entry is fitted to the store's limit before the store sees it: an
/// input too large to journal fails the run, saying why, and the old history is left as it was.
#[tokio::test]
async fn continuing_with_an_input_too_large_to_journal_fails_the_run_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let options = eve_tools::store::SqliteOptions { max_entry_bytes: 1_024, ..Default::default() };
    let store = eve_tools::store::SqliteStore::open_with(dir.path().join("eve.db"), options).unwrap();
    let runtime = World::over(Arc::new(store)).runtime(16);
    let run = runtime.start("continue_too_long", json!({ "note": "short" })).await.unwrap();
    let RunOutcome::Failed(RunFailure::Tool { message }) = run.outcome().await.unwrap() else {
        panic!("the run fails")
    };
    assert!(
        message.starts_with(
            "`continue_as_new` was given an input tool `continue_too_long` cannot journal: the new history's \
             first entry, with the input, is"
        ),
        "{message}"
    );
    assert!(message.contains("over the 1024-byte limit"), "{message}");
    let journal = runtime.journal(run.id()).await.unwrap().entries;
    assert_eq!(started_continued(&journal), Some(0), "no new history was started");
    assert!(matches!(journal.last(), Some(Entry::RunFailed { .. })), "the failure is journaled");
}

/// The first history leaves a long sleep unawaited behind; the second sleeps longer at the same op.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Stage {
    second: bool,
}

/// Leaves a timer behind in its first history.
#[workflow_tool]
pub async fn leave_a_timer(input: Stage, ctx: &WorkflowCtx) -> Result<&'static str, ToolError> {
    if input.second {
        sleep(Duration::from_secs(200)).await?;
        return Ok("woke after 200 s");
    }
    let abandoned = sleep(Duration::from_secs(100));
    drop(abandoned);
    ctx.continue_as_new(Stage { second: true })
}

#[tokio::test]
async fn a_timer_of_the_old_history_does_not_fire_the_new_one_early() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("leave_a_timer", json!({ "second": false })).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(100));
    runtime.settle().await;
    assert_eq!(runtime.handle(run.id().clone()).parked().await.unwrap(), Phase::Parked, "still asleep at 100 s");
    world.clock.advance(Duration::from_secs(100));
    runtime.settle().await;
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("woke after 200 s")));
}

/// Takes nothing from its hook until a minute has passed, then takes everything queued.
#[workflow_tool]
pub async fn slow_reader(_input: Stage, ctx: &WorkflowCtx) -> Result<Vec<Value>, ToolError> {
    let mut hook = create_hook_with_token::<Value>(format!("slow-{}", ctx.run_id()));
    sleep(Duration::from_secs(60)).await?;
    let mut taken = Vec::new();
    while taken.len() < 5 {
        taken.push(hook.recv().await?);
    }
    Ok(taken)
}

#[tokio::test]
async fn a_sender_that_outpaces_its_hook_is_slowed_with_429_and_nothing_is_lost() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let store = MemoryStore::with_inbox_limits(InboxLimits { per_run: 100, per_hook: 2 });
    let world = World::over(Arc::new(store));
    let runtime = world.builder(16).hook_buffer(2).public_url(&base).build().unwrap();
    let server = eve_tools::http::Server::new(runtime.clone()).serve(listener).unwrap();
    let run = runtime.start("slow_reader", json!({ "second": false })).await.unwrap();
    run.parked().await.unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{base}/.well-known/workflow/v1/hook/slow-{}", run.id());
    let mut statuses = Vec::new();
    for n in 0..5 {
        let response = client.post(&url).json(&json!(n)).send().await.unwrap();
        let retry_after = response.headers().get("retry-after").map(|value| value.to_str().unwrap().to_owned());
        statuses.push((response.status().as_u16(), retry_after));
        runtime.settle().await;
    }
    let accepted = (202, None);
    let slowed = (429, Some("1".to_owned()));
    // Two payloads fill the hook's buffer, two more wait in the inbox, the fifth is refused.
    assert_eq!(statuses, [accepted.clone(), accepted.clone(), accepted.clone(), accepted.clone(), slowed]);
    world.clock.advance(Duration::from_secs(60));
    runtime.settle().await;
    // The body takes what was buffered, which makes room: the refused payload is sent again.
    assert_eq!(client.post(&url).json(&json!(4)).send().await.unwrap().status().as_u16(), 202);
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!([0, 1, 2, 3, 4])));
    server.shutdown().await;
}

static STARTED_STEPS: AtomicUsize = AtomicUsize::new(0);

#[step]
async fn never_finishes() -> Result<(), StepError> {
    STARTED_STEPS.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
    Ok(())
}

/// A step that is still running when its process stops.
#[workflow_tool]
pub async fn mid_step(_input: Stage, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let _ = ctx;
    Ok(never_finishes().await?)
}

#[tokio::test]
async fn start_up_loads_only_the_runs_with_something_to_do() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let parked = runtime.start("count_rounds", json!({ "round": 1, "rounds": 1, "total": 0 })).await.unwrap();
    parked.parked().await.unwrap();
    let busy = runtime.start("mid_step", json!({ "second": false })).await.unwrap();
    while STARTED_STEPS.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // The process stops without a goodbye: the busy run was never parked.
    drop(runtime);

    let runtime = world.runtime(16);
    let mut events = runtime.events();
    assert_eq!(runtime.recover().await.unwrap(), 2, "both runs are unfinished");
    // The busy run's step never finishes, so the runtime never settles: wait for the step instead.
    let again = async {
        while STARTED_STEPS.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), again).await.expect("the busy run is loaded and its step runs again");
    let resumed: Vec<_> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| match event {
            RunEvent::Resumed { run, .. } => Some(run),
            _ => None,
        })
        .collect();
    assert_eq!(resumed, [busy.id().clone()], "only the busy run is loaded");
    assert_eq!(STARTED_STEPS.load(Ordering::SeqCst), 2, "its step runs again, at least once per crash");
    let handle = runtime.handle(parked.id().clone());
    assert_eq!(handle.parked().await.unwrap(), Phase::Parked, "the parked run is known to be parked, unloaded");
    // Its timer was armed from the store's index: it fires, and only then is the run loaded.
    world.clock.advance(Duration::from_secs(60));
    assert_eq!(handle.outcome().await.unwrap(), RunOutcome::Completed(json!(10)));
}
