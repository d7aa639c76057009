//! A property of replay: restarts are invisible.
//!
//! proptest draws a small workflow program (steps, concurrent steps, sleeps, a hook racing a
//! sleep, reads of `ctx.now()`, a step taking a `HashMap`, a hook whose token another run holds)
//! and a schedule of outside events (the clock moving, payloads
//! delivered to the races' hooks, process restarts). The program runs through the schedule twice
//! on fresh in-memory worlds: once in one process with a warm cache, and once where every resume
//! replays from the journal (warm cache 0) and each restart in the schedule drops the process and
//! recovers the run in a new one. Both must end with the same outcome and the *same journal*,
//! entry for entry (apart from how long each step took, which the machine's clock measures), and
//! no step whose result was recorded may run again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use eve_tests::World;
use eve_tools::prelude::*;
use eve_tools::{Entry, Phase, RunId, RunOutcome};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One instruction of a program.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Instr {
    /// Run `add_one(value)`.
    Step {
        /// The argument.
        value: u32,
    },
    /// Run `add_one` on both values at once.
    Join {
        /// The first step's argument.
        left: u32,
        /// The second step's argument.
        right: u32,
    },
    /// Sleep durably.
    Sleep {
        /// For how long, in milliseconds.
        ms: u32,
    },
    /// Race the hook `race-{index}-{run}` against a sleep.
    Race {
        /// The sleep, in milliseconds.
        ms: u32,
    },
    /// Read the recorded clock.
    Now,
    /// Run `tally` on a `HashMap` of this many entries (each process iterates it in another order).
    Tally {
        /// How many entries.
        entries: u32,
    },
    /// Race a hook whose token the holder run holds against a future that is ready at once.
    Contested,
}

/// A program to interpret.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Program {
    instrs: Vec<Instr>,
}

/// Step executions: (run, op) for every attempt, across every process of the test binary.
static EXECUTED: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());

#[step]
async fn add_one(ctx: &StepCtx, value: u32) -> Result<u32, StepError> {
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    EXECUTED.lock().unwrap().push((run, ctx.op().map_or(u32::MAX, |op| op.0)));
    Ok(value + 1)
}

#[step]
async fn tally(ctx: &StepCtx, counts: HashMap<String, u32>) -> Result<u32, StepError> {
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    EXECUTED.lock().unwrap().push((run, ctx.op().map_or(u32::MAX, |op| op.0)));
    Ok(counts.values().sum())
}

/// Holds the token `held-{run}` for the run `run` until its hook receives something.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Hold {
    run: String,
}

/// Holds a hook token another run of the test will choose too.
#[workflow_tool]
pub async fn hold(input: Hold, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let _ = ctx;
    let mut hook = create_hook_with_token::<u32>(held_token(&input.run));
    hook.recv().await?;
    Ok(())
}

fn held_token(run: &str) -> String {
    format!("held-{run}")
}

/// Runs a program and returns what each instruction saw.
#[workflow_tool]
pub async fn interpret(input: Program, ctx: &WorkflowCtx) -> Result<Vec<String>, ToolError> {
    let mut seen = Vec::new();
    for (index, instr) in input.instrs.into_iter().enumerate() {
        let line = match instr {
            Instr::Step { value } => format!("step {}", add_one(ctx, value).await?),
            Instr::Join { left, right } => {
                let (left, right) = futures::join!(add_one(ctx, left), add_one(ctx, right));
                format!("join {} {}", left?, right?)
            }
            Instr::Sleep { ms } => {
                sleep(Duration::from_millis(ms.into())).await?;
                "slept".to_owned()
            }
            Instr::Race { ms } => {
                let mut hook = create_hook_with_token::<u32>(race_token(index, ctx.run_id().as_str()));
                let timer = sleep(Duration::from_millis(ms.into()));
                tokio::select! {
                    biased;
                    payload = hook.recv() => format!("hook {}", payload?),
                    fired = timer => {
                        fired?;
                        "timer".to_owned()
                    }
                }
            }
            Instr::Now => format!("now {}", ctx.now().as_millis()),
            Instr::Tally { entries } => {
                let counts: HashMap<String, u32> = (0..entries).map(|n| (format!("key-{n}"), n)).collect();
                format!("tally {}", tally(ctx, counts).await?)
            }
            Instr::Contested => {
                let mut hook = create_hook_with_token::<u32>(held_token(ctx.run_id().as_str()));
                tokio::select! {
                    biased;
                    received = hook.recv() => format!("contested hook {}", received.is_err()),
                    () = std::future::ready(()) => "contested ready".to_owned(),
                }
            }
        };
        seen.push(line);
    }
    Ok(seen)
}

fn race_token(index: usize, run: &str) -> String {
    format!("race-{index}-{run}")
}

/// Something that happens to the run from outside.
#[derive(Clone, Debug)]
enum Action {
    /// The clock moves on.
    Advance(u32),
    /// A payload arrives for the race at this instruction index (refused if it has no hook yet).
    Deliver { race: usize, payload: u32 },
    /// The process dies and a new one recovers the run (only in the replaying world).
    Restart,
}

fn instr() -> impl Strategy<Value = Instr> {
    prop_oneof![
        1 => (0..100u32).prop_map(|value| Instr::Step { value }),
        1 => (0..100u32, 0..100u32).prop_map(|(left, right)| Instr::Join { left, right }),
        1 => (1..2_000u32).prop_map(|ms| Instr::Sleep { ms }),
        2 => (500..5_000u32).prop_map(|ms| Instr::Race { ms }),
        1 => Just(Instr::Now),
        1 => (2..12u32).prop_map(|entries| Instr::Tally { entries }),
        1 => Just(Instr::Contested),
    ]
}

/// An action; deliveries go to the instructions that are races.
fn action(races: Vec<usize>) -> BoxedStrategy<Action> {
    let others = prop_oneof![3 => (1..1_000u32).prop_map(Action::Advance), 2 => Just(Action::Restart)];
    if races.is_empty() {
        return others.boxed();
    }
    let deliver =
        (prop::sample::select(races), 0..1_000u32).prop_map(|(race, payload)| Action::Deliver { race, payload });
    prop_oneof![5 => others, 2 => deliver].boxed()
}

fn case() -> impl Strategy<Value = (Vec<Instr>, Vec<Action>)> {
    prop::collection::vec(instr(), 1..10).prop_flat_map(|instrs| {
        let races = instrs.iter().enumerate().filter(|(_, instr)| matches!(instr, Instr::Race { .. }));
        let actions = prop::collection::vec(action(races.map(|(index, _)| index).collect()), 0..20);
        (Just(instrs), actions)
    })
}

/// What a world saw: where the run ended up, and its journal.
#[derive(Debug, PartialEq)]
struct Seen {
    phase: Phase,
    journal: Vec<Entry>,
}

/// Drives `instrs` through `actions` on a fresh world; `replaying` means a cold replay on every
/// resume and a new process at every `Restart`.
async fn drive(id: &RunId, instrs: &[Instr], actions: &[Action], replaying: bool) -> Seen {
    let world = World::in_memory();
    let cache = if replaying { 0 } else { 16 };
    let mut runtime = world.runtime(cache);
    let program = json!({ "instrs": instrs });
    runtime.start("hold", json!({ "run": id })).await.unwrap();
    runtime.settle().await;
    runtime.start_with_id(id.clone(), "interpret", program).await.unwrap();
    runtime.settle().await;
    for action in actions {
        match action {
            Action::Advance(ms) => world.clock.advance(Duration::from_millis((*ms).into())),
            Action::Deliver { race, payload } => {
                let _unknown_until_created = runtime.resume_hook(&race_token(*race, id.as_str()), json!(payload)).await;
            }
            Action::Restart if replaying => {
                runtime.shutdown().await;
                runtime = world.runtime(cache);
                runtime.recover().await.unwrap();
            }
            Action::Restart => {}
        }
        runtime.settle().await;
    }
    // Let every remaining sleep and race end on its timer.
    for _ in 0..instrs.len() {
        world.clock.advance(Duration::from_secs(3_600));
        runtime.settle().await;
    }
    let phase = runtime.handle(id.clone()).parked().await.unwrap();
    let journal = runtime.journal(id).await.unwrap().entries.into_iter().map(untimed).collect();
    runtime.shutdown().await;
    Seen { phase, journal }
}

/// `entry` without the step's duration: it is read from the machine's monotonic clock, not the
/// world's, so two worlds on a busy machine may measure one step differently.
fn untimed(mut entry: Entry) -> Entry {
    if let Entry::StepCompleted { took_ms, .. } = &mut entry {
        *took_ms = None;
    }
    entry
}

/// How often each step op of `run` executed.
fn executions(run: &RunId) -> BTreeMap<u32, usize> {
    let mut counts = BTreeMap::new();
    for (of, op) in EXECUTED.lock().unwrap().iter() {
        if of == run.as_str() {
            *counts.entry(*op).or_default() += 1;
        }
    }
    counts
}

proptest! {
    // Failures print their minimal case; nothing is written next to the sources.
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn restarts_and_cold_replays_are_invisible((instrs, actions) in case()) {
        let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let id = RunId::generate();
        let (live, live_executions, replayed, replayed_executions) = tokio.block_on(async {
            let live = drive(&id, &instrs, &actions, false).await;
            let live_executions = executions(&id);
            EXECUTED.lock().unwrap().retain(|(run, _)| run != id.as_str());
            let replayed = drive(&id, &instrs, &actions, true).await;
            (live, live_executions, replayed, executions(&id))
        });
        prop_assert!(matches!(live.phase, Phase::Finished(RunOutcome::Completed(_))), "it completes: {:?}", live.phase);
        prop_assert_eq!(&replayed.phase, &live.phase, "the same outcome");
        prop_assert_eq!(&replayed.journal, &live.journal, "the same journal, entry for entry");
        prop_assert!(replayed_executions.values().all(|count| *count == 1), "no step ran twice: {:?}", replayed_executions);
        prop_assert_eq!(replayed_executions, live_executions, "the same steps ran");
    }
}
