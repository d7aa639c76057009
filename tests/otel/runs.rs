//! A run's trace: one for a run that parks on a hook, is resumed by a second runtime on the same
//! SQLite file, and completes; a run a step starts, and a tool call a session's model makes, in
//! the trace of the run that started them.

use eve_tests::otlp::{Collector, ReceivedSpan};
use eve_tools::otel::Traces;
use eve_tools::prelude::*;
use eve_tools::{Entry, Runtime};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

/// Which order to fetch.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    id: String,
}

#[step]
async fn fetch_order(id: String) -> Result<String, StepError> {
    Ok(format!("order {id}"))
}

#[step]
async fn ship_order(order: String, carrier: String) -> Result<String, StepError> {
    Ok(format!("{order} shipped by {carrier}"))
}

/// Fetches the order, waits for a carrier on the hook `carrier-<id>`, then ships it.
#[workflow_tool]
pub async fn ship_after_carrier(input: Order) -> Result<String, ToolError> {
    let order = fetch_order(input.id.clone()).await?;
    let mut hook = create_hook_with_token::<String>(format!("carrier-{}", input.id));
    let carrier = hook.recv().await?;
    Ok(ship_order(order, carrier).await?)
}

/// An exporter to `collector` and a subscriber of its layer alone, the test thread's default
/// (the tests' runtimes run on this one thread).
pub fn export_to(collector: &Collector) -> (Traces, tracing::subscriber::DefaultGuard) {
    let traces = Traces::builder().endpoint(collector.endpoint()).service_name("otel-tests").build().unwrap();
    let subscriber = tracing_subscriber::registry().with(traces.layer());
    let default = tracing::subscriber::set_default(subscriber);
    (traces, default)
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|span| span.name == name).collect()
}

/// The spans of run `run`: those naming it, and the steps under its activations.
fn of_run(spans: &[ReceivedSpan], run: &str) -> Vec<ReceivedSpan> {
    let own: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.attribute("eve.run.id") == Some(run)).collect();
    let mut found: Vec<ReceivedSpan> = own.iter().map(|span| (*span).clone()).collect();
    for span in spans {
        if span.name == "step" && own.iter().any(|parent| parent.span_id == span.parent_span_id) {
            found.push(span.clone());
        }
    }
    found
}

/// A run parks on its hook; the runtime stops; a second runtime on the same SQLite file takes the
/// hook's payload, replays the run and completes it. The collector receives one trace: the
/// `start` span is its root, both activations (`fresh`, then `cold`) are the start's children, each
/// step is a child of the activation that ran it, and the journal keeps the start's context.
#[tokio::test]
async fn a_run_resumed_after_a_restart_is_one_trace() {
    let collector = Collector::start();
    let (traces, _default) = export_to(&collector);
    let dir = tempfile::tempdir().unwrap();

    let runtime = Runtime::builder().data_dir(dir.path()).build().unwrap();
    runtime.recover().await.unwrap();
    let run = runtime.start("ship_after_carrier", json!({ "id": "o-17" })).await.unwrap();
    run.parked().await.unwrap();
    let id = run.id().clone();
    drop(run);
    runtime.shutdown().await;

    let runtime = Runtime::builder().data_dir(dir.path()).build().unwrap();
    runtime.recover().await.unwrap();
    runtime.resume_hook("carrier-o-17", json!("ups")).await.unwrap();
    let outcome = runtime.handle(id.clone()).outcome().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("order o-17 shipped by ups")));
    let journal = runtime.journal(&id).await.unwrap().entries;
    runtime.shutdown().await;
    traces.flush().unwrap();

    let spans = of_run(&collector.spans(), id.as_str());
    let starts = named(&spans, "start");
    let [start] = starts.as_slice() else { panic!("one start span: {spans:#?}") };
    assert_eq!(start.parent_span_id, "", "nothing was current where the run started: the start is the root");
    assert_eq!(start.service, "otel-tests");
    assert!(spans.iter().all(|span| span.trace_id == start.trace_id), "one trace id across the run: {spans:#?}");

    let runs = named(&spans, "run");
    let activations: Vec<_> = runs.iter().map(|span| span.attribute("eve.activation").unwrap()).collect();
    assert_eq!(activations, ["fresh", "cold"], "the start, then the replay after the restart");
    for activation in &runs {
        assert_eq!(activation.parent_span_id, start.span_id, "every activation is the start's child");
        assert_eq!(activation.attribute("gen_ai.tool.name"), Some("ship_after_carrier"));
    }
    let steps: Vec<_> = named(&spans, "step")
        .iter()
        .map(|step| {
            let under = runs.iter().find(|run| run.span_id == step.parent_span_id).expect("a step is under a run span");
            (step.attribute("eve.step.name").unwrap(), under.attribute("eve.activation").unwrap())
        })
        .collect();
    assert_eq!(steps, [("fetch_order", "fresh"), ("ship_order", "cold")], "each step under the activation that ran it");
    for span in &spans {
        let values = span.attributes.values().collect::<Vec<_>>();
        assert!(
            !values.iter().any(|value| value.contains("o-17\"") || value.contains("ups")),
            "no input or output in {span:?}"
        );
    }

    let Some(Entry::RunStarted { traceparent: Some(traceparent), .. }) = journal.first() else {
        panic!("the run's start journals its trace: {:?}", journal.first())
    };
    assert_eq!(traceparent.as_str(), format!("00-{}-{}-01", start.trace_id, start.span_id));
}

/// What a parent asks its child for.
#[derive(Deserialize, JsonSchema)]
pub struct Parcel {
    weight: u32,
}

#[step]
async fn weigh(weight: u32) -> Result<u32, StepError> {
    Ok(weight * 2)
}

/// A child run: one step.
#[workflow_tool]
pub async fn weigh_parcel(input: Parcel) -> Result<u32, ToolError> {
    Ok(weigh(input.weight).await?)
}

/// Starts the child run `<run>-child` from a step, as a session's tool call does.
#[step]
async fn start_child_run(ctx: &StepCtx, weight: u32) -> Result<String, StepError> {
    let id: eve_tools::RunId = format!("{}-child", ctx.run_id().expect("a step of a run")).parse().unwrap();
    let options = eve_tools::StartOptions::new().id(id);
    let control = ctx.control()?;
    let child =
        control.start(WEIGH_PARCEL_WORKFLOW, json!({ "weight": weight }), options).await.map_err(StepError::msg)?;
    Ok(child.to_string())
}

/// The workflow id of `weigh_parcel`.
const WEIGH_PARCEL_WORKFLOW: &str = concat!(module_path!(), "::weigh_parcel");

/// Starts a child run from a step.
#[workflow_tool]
pub async fn send_parcel(input: Parcel, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(start_child_run(ctx, input.weight).await?)
}

/// A run a step starts is in the trace of the run that started it: its `start` span is a child of
/// the step's span, and its activation a child of its start.
#[tokio::test]
async fn a_child_run_joins_its_parents_trace() {
    let collector = Collector::start();
    let (traces, _default) = export_to(&collector);
    let runtime = Runtime::in_memory().unwrap();
    let parent = runtime.start("send_parcel", json!({ "weight": 3 })).await.unwrap();
    let child: eve_tools::RunId =
        parent.outcome().await.unwrap().output().and_then(|id| id.as_str()).unwrap().parse().unwrap();
    assert_eq!(runtime.handle(child.clone()).outcome().await.unwrap().output(), Some(&json!(6)));
    runtime.shutdown().await;
    traces.flush().unwrap();

    let spans = collector.spans();
    let parents = of_run(&spans, parent.id().as_str());
    let children = of_run(&spans, child.as_str());
    let step = named(&parents, "step")[0];
    let child_start = named(&children, "start")[0];
    assert_eq!(child_start.parent_span_id, step.span_id, "the child starts under the step that started it");
    assert!(
        parents.iter().chain(&children).all(|span| span.trace_id == step.trace_id),
        "parent and child share one trace: {parents:#?} {children:#?}"
    );
    assert_eq!(named(&children, "run")[0].parent_span_id, child_start.span_id);
}

/// A workflow tool a session's model calls is a child run of the session (`start_child`, journaled
/// with the session's step): its activations are in the session's trace, children of the session
/// activation that started it.
#[tokio::test]
async fn a_sessions_tool_call_joins_the_sessions_trace() {
    use eve_tools::session::{ModelRequest, ModelResponse, ScriptedModel, SessionOptions};

    let collector = Collector::start();
    let (traces, _default) = export_to(&collector);
    let model = ScriptedModel::new(|request: &ModelRequest| {
        let shown = request.messages.iter().map(|message| message.content()).collect::<Vec<_>>().join("\n");
        if shown.contains("label for p-3") {
            ModelResponse::text("Labelled.")
        } else {
            ModelResponse::call("label_parcel", json!({ "parcel": "p-3" }))
        }
    });
    let runtime = Runtime::builder().store(eve_tools::store::MemoryStore::new()).model(model).build().unwrap();
    let session = runtime.session(SessionOptions::new().tools(["label_parcel"])).await.unwrap();
    session.send("Label p-3").await.unwrap();
    runtime.settle().await;
    runtime.shutdown().await;
    traces.flush().unwrap();

    let spans = collector.spans();
    let sessions: Vec<_> =
        spans.iter().filter(|span| span.attribute("gen_ai.tool.name") == Some("eve.session")).collect();
    let started = sessions.iter().find(|span| span.name == "start").expect("the session's start span");
    let call = spans
        .iter()
        .find(|span| span.name == "run" && span.attribute("gen_ai.tool.name") == Some("label_parcel"))
        .unwrap_or_else(|| panic!("the tool call's run span: {spans:#?}"));
    assert_eq!(call.trace_id, started.trace_id, "the call is in the session's trace");
    let parent = sessions.iter().find(|span| span.span_id == call.parent_span_id);
    assert_eq!(parent.map(|span| span.name.as_str()), Some("run"), "under the session's activation that called it");
}
