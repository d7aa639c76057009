//! The runtime's `tracing` spans, as a user's subscriber (or an OpenTelemetry layer) sees them:
//! one `run` span per activation with the run id, the tool and how it started (`fresh`, `warm` or
//! `cold`), and one `step` span per attempt with its op, step name and attempt number.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eve_tests::World;
use eve_tools::prelude::*;
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
    let starts: Vec<&str> = runs.iter().map(|fields| fields["start"].as_str()).collect();
    assert_eq!(starts, ["fresh", "cold"], "the first activation, then a replay after the sleep (no warm cache)");
    for fields in &runs {
        assert_eq!(fields["run"], run.id().as_str());
        assert_eq!(fields["tool"], "traced");
    }
    let steps: Vec<(String, String, String)> = of("step")
        .iter()
        .map(|fields| (fields["op"].clone(), fields["step"].clone(), fields["attempt"].clone()))
        .collect();
    let expected =
        [("0", "traced_step", "1"), ("2", "traced_step", "1")].map(|(a, b, c)| (a.into(), b.into(), c.into()));
    assert_eq!(steps, expected, "one span per attempt; the replay runs no step");
}
