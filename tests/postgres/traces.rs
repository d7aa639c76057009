//! One trace for a run that moves between worker processes: started on one worker by a request
//! that carries a `traceparent`, taken over by the other after the first is SIGKILLed in the
//! middle of a step, and completed there. Both workers export to a collector in this process
//! (`eve_tests::otlp`) through `OTEL_EXPORTER_OTLP_ENDPOINT`.

use std::time::{Duration, Instant};

use eve_tests::otlp::{Collector, ReceivedSpan};
use eve_tools::store::Store;
use eve_tools::{Entry, RunId};
use serde_json::json;

use crate::cluster::Schema;
use crate::processes::{Fleet, Timing};

/// The caller's trace and span, as the starting request's `traceparent` names them.
const CALLER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";

/// Waits (up to `within`) until the collector holds spans satisfying `done`.
async fn spans_until(
    collector: &Collector,
    within: Duration,
    done: impl Fn(&[ReceivedSpan]) -> bool,
) -> Vec<ReceivedSpan> {
    let deadline = Instant::now() + within;
    loop {
        let spans = collector.spans();
        if done(&spans) {
            return spans;
        }
        assert!(Instant::now() < deadline, "the spans expected never arrived; received: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn step_on<'a>(spans: &'a [ReceivedSpan], worker: &str, step: &str) -> Option<&'a ReceivedSpan> {
    spans
        .iter()
        .find(|span| span.service == worker && span.name == "step" && span.attribute("eve.step.name") == Some(step))
}

/// The `probe` run (a quick step, a slow one, a quick one) starts on w1, under the caller's span;
/// w1 is SIGKILLed in the slow step; w2 takes the run over once w1's lease expires and completes
/// it. The collector receives one trace: w1's `start` span is the caller's child, w2's activation
/// (a `cold` replay) is the start's child as the journal says, each worker's steps are under its
/// own activation, and every span has the caller's trace id. (w1's activation never ends, so it
/// is never exported: its steps name it as their parent all the same.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_from_a_killed_worker_stays_one_trace() {
    let collector = Collector::start();
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_millis(2_000),
        heartbeat: Duration::from_millis(500),
        poll: Duration::from_millis(200),
    };
    let mut fleet = Fleet::new(&schema.store_url(), &schema.name, timing);
    fleet.env(eve_tools::otel::ENDPOINT_VARIABLE, collector.endpoint());
    // Spans leave a worker a moment after they end, before it is killed.
    fleet.env("OTEL_BSP_SCHEDULE_DELAY", "50");
    let (first, _second) = (fleet.start("w1"), fleet.start("w2"));
    let store = fleet.store().await;

    let response = reqwest::Client::new()
        .post(format!("{}/v1/tools/probe/runs", fleet.workers[first].base))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({ "input": { "millis": 5_000 }, "runId": "traced" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let run: RunId = "traced".parse().unwrap();

    // w1 has exported its first step (it is in the slow one by then) and the start.
    spans_until(&collector, Duration::from_secs(20), |spans| {
        step_on(spans, "w1", "whoami").is_some() && spans.iter().any(|span| span.name == "start")
    })
    .await;
    fleet.kill(first);

    let deadline = Instant::now() + Duration::from_secs(30);
    let journal = loop {
        let journal = store.load(&run).await.unwrap().unwrap().entries;
        if journal.last().is_some_and(Entry::is_terminal) {
            break journal;
        }
        assert!(Instant::now() < deadline, "w2 never completed the run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(journal.last(), Some(&Entry::RunCompleted { output: json!(["w1", "w2", "w2"]) }));
    let spans = spans_until(&collector, Duration::from_secs(20), |spans| {
        spans.iter().any(|span| span.service == "w2" && span.name == "run")
    })
    .await;

    let start = spans.iter().find(|span| span.name == "start").unwrap();
    assert_eq!((start.service.as_str(), start.trace_id.as_str()), ("w1", CALLER_TRACE));
    assert_eq!(start.parent_span_id, CALLER_SPAN, "the request's span is the parent of the run's trace");
    let w1_step = step_on(&spans, "w1", "whoami").unwrap();
    let taken_over = spans.iter().find(|span| span.service == "w2" && span.name == "run").unwrap();
    assert_eq!(taken_over.attribute("eve.activation"), Some("cold"), "w2 replays the run");
    assert_eq!(taken_over.parent_span_id, start.span_id, "w2's activation is the start's child");
    assert_ne!(w1_step.parent_span_id, start.span_id, "w1's step is under w1's own activation");
    let w2_steps: Vec<_> = spans.iter().filter(|span| span.service == "w2" && span.name == "step").collect();
    let names: Vec<_> = w2_steps.iter().map(|span| span.attribute("eve.step.name").unwrap()).collect();
    assert_eq!(names, ["slow", "whoami"], "w2 runs the slow step again, then the last");
    assert!(w2_steps.iter().all(|span| span.parent_span_id == taken_over.span_id), "under w2's activation");
    let of_run = [start, w1_step, taken_over].into_iter().chain(w2_steps);
    assert!(of_run.into_iter().all(|span| span.trace_id == CALLER_TRACE), "one trace across both workers");

    let Some(Entry::RunStarted { traceparent: Some(traceparent), .. }) = journal.first() else {
        panic!("the run's start journals its trace: {:?}", journal.first())
    };
    assert_eq!(traceparent.as_str(), format!("00-{CALLER_TRACE}-{}-01", start.span_id));
    fleet.stop();
}
