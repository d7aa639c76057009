//! The runtime's `tracing` spans, as a user's subscriber (or an OpenTelemetry layer) sees them:
//! one `run` span per activation with the run id (`eve.run.id`), the tool (`gen_ai.tool.name`) and
//! how it started (`eve.activation`: `fresh`, `warm` or `cold`), and one `step` span per attempt
//! with its op, step name and attempt number (`eve.op`, `eve.step.name`, `eve.step.attempt`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eve_tests::World;
use eve_tests::faulty::Faulty;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A span's name and its fields as text.
type Opened = (String, BTreeMap<String, String>);

/// The spans opened, in order.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Opened>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        fields.insert("#id".into(), id.into_u64().to_string());
        self.0.lock().unwrap().push((attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        let key = id.into_u64().to_string();
        if let Some((_, fields)) = spans.iter_mut().rev().find(|(_, fields)| fields.get("#id") == Some(&key)) {
            values.record(&mut Fields(fields));
        }
    }
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

#[step]
async fn traced_step(n: u32) -> Result<u32, StepError> {
    Ok(n + 1)
}

/// A step, a sleep, a step.
#[workflow_tool]
pub async fn traced(_input: Nothing, ctx: &WorkflowCtx) -> Result<u32, ToolError> {
    let _ = ctx;
    let one = traced_step(1).await?;
    sleep(Duration::from_secs(1)).await?;
    Ok(traced_step(one).await?)
}

#[tokio::test]
async fn runs_and_step_attempts_open_spans_a_subscriber_can_route() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("traced", json!({})).await.unwrap();
    run.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(1));
    runtime.settle().await;
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!(3)));

    let spans = spans.0.lock().unwrap();
    let of = |name: &str| spans.iter().filter(|(span, _)| span == name).map(|(_, fields)| fields).collect::<Vec<_>>();
    let runs = of("run");
    let starts: Vec<&str> = runs.iter().map(|fields| fields["eve.activation"].as_str()).collect();
    assert_eq!(starts, ["fresh", "cold"], "the first activation, then a replay after the sleep (no warm cache)");
    for fields in &runs {
        assert_eq!(fields["eve.run.id"], run.id().as_str());
        assert_eq!(fields["gen_ai.tool.name"], "traced");
    }
    let steps: Vec<(String, String, String)> = of("step")
        .iter()
        .map(|fields| (fields["eve.op"].clone(), fields["eve.step.name"].clone(), fields["eve.step.attempt"].clone()))
        .collect();
    let expected =
        [("0", "traced_step", "1"), ("2", "traced_step", "1")].map(|(a, b, c)| (a.into(), b.into(), c.into()));
    assert_eq!(steps, expected, "one span per attempt; the replay runs no step");
}

/// An event's level and its fields as text.
type Logged = (tracing::Level, BTreeMap<String, String>);

/// The events logged, in order.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Logged>>>);

impl<S: tracing::Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((*event.metadata().level(), fields));
    }
}

/// A store that fails for a while (a database restarting) is logged as a warning that says what
/// is retried, not as an error: the run is retried and finishes, and nothing was lost.
#[tokio::test]
async fn a_transient_store_failure_is_a_warning_about_the_retry() {
    let events = Events::default();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(0);
    let run = runtime.start("traced", json!({})).await.unwrap();
    run.parked().await.unwrap();
    // The timer's activation (a cold rebuild) cannot claim the run: the store is away.
    faulty.fail_claims(1);
    for _ in 0..3 {
        world.clock.advance(Duration::from_secs(5));
        runtime.settle().await;
    }
    assert_eq!(faulty.failed(), 1, "the injected failure happened");
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!(3)), "the run was retried and finished");

    let events = events.0.lock().unwrap();
    let errors: Vec<_> = events.iter().filter(|(level, _)| *level == tracing::Level::ERROR).collect();
    assert!(errors.is_empty(), "a transient failure is no error: {errors:?}");
    let retried = events.iter().find(|(level, fields)| {
        *level == tracing::Level::WARN && fields.get("message").is_some_and(|message| message.contains("retrying"))
    });
    let (_, fields) = retried.expect("a warning says the run is retried");
    assert_eq!(fields.get("run").map(String::as_str), Some(run.id().as_str()), "{fields:?}");
}
