//! Metrics over OTLP. With the Prometheus recorder and the OTLP exporter installed together, the
//! collector receives every series `/metrics` renders, under the same name and labels, with the
//! same counts and the same histogram buckets. `host call` exports its metrics as it exits, and
//! none with `OTEL_METRICS_EXPORTER=none`.
//!
//! The in-process test installs the process's one metrics recorder, so it is the only test of this
//! binary that does; it compares the series of its own tools only, since under `cargo test` other
//! tests run tools in the same process.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use eve_tests::otlp::{Collector, ReceivedMetric};
use eve_tools::otel;
use eve_tools::prelude::*;
use eve_tools::{RunOutcome, Runtime};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The buckets of every `_seconds` histogram, as `/metrics` renders them.
const SECONDS: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Parcels to weigh.
#[derive(Deserialize, JsonSchema)]
pub struct Parcels {
    /// Their sizes.
    parcels: Vec<u32>,
}

/// Whether `otlp_weigh` has failed its one attempt yet.
static FAILED_ONCE: AtomicBool = AtomicBool::new(false);

/// Weighs a parcel; its very first attempt in the process fails, so that one retry is counted.
#[step(max_attempts = 2, backoff = "1ms")]
async fn otlp_weigh(parcel: u32) -> Result<u32, StepError> {
    if !FAILED_ONCE.swap(true, Ordering::Relaxed) {
        return Err(StepError::msg("the scale is not ready"));
    }
    Ok(parcel * 2)
}

/// Weighs each parcel in a step of its own and adds the weights up.
#[workflow_tool]
pub async fn otlp_weigh_parcels(input: Parcels) -> Result<u32, ToolError> {
    let mut total = 0;
    for parcel in input.parcels {
        total += otlp_weigh(parcel).await?;
    }
    Ok(total)
}

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Refuses, always.
#[workflow_tool]
pub async fn otlp_refuse(_input: Nothing) -> Result<(), ToolError> {
    Err(ToolError::new("refused"))
}

/// A word to shout.
#[derive(Deserialize, JsonSchema)]
pub struct Word {
    /// The word.
    word: String,
}

/// Shouts a word, at once.
#[tool]
pub async fn otlp_shout(input: Word) -> Result<String, ToolError> {
    Ok(input.word.to_uppercase())
}

/// A series: a sample's name and its labels.
type Series = (String, BTreeMap<String, String>);

/// The samples of a Prometheus text exposition, by series.
fn exposition(text: &str) -> BTreeMap<Series, f64> {
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|line| !line.starts_with('#') && !line.is_empty()) {
        let (series, value) = line.rsplit_once(' ').expect("a sample line ends in its value");
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let mut parsed = BTreeMap::new();
        for pair in labels.trim_end_matches('}').split(',').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').expect("a label is key=\"value\"");
            let value = value.trim_matches('"');
            // Bucket bounds are compared as numbers: `1` and `1.0` are one bound.
            let value = if key == "le" { bound(value.parse().expect("a bound is a number")) } else { value.into() };
            parsed.insert(key.to_owned(), value);
        }
        samples.insert((name.to_owned(), parsed), value.parse().expect("a sample's value is a number"));
    }
    samples
}

/// A bucket bound as the samples are keyed by it.
fn bound(value: f64) -> String {
    if value.is_infinite() { "+Inf".to_owned() } else { value.to_string() }
}

/// The samples Prometheus would render for the metrics of one OTLP export: a sum or a gauge as
/// itself; a histogram as its `_count`, `_sum` and cumulative `_bucket`s.
fn as_prometheus(metrics: &[ReceivedMetric]) -> BTreeMap<Series, f64> {
    let mut samples = BTreeMap::new();
    for metric in metrics {
        for point in &metric.points {
            let series = |suffix: &str| (format!("{}{suffix}", metric.name), point.attributes.clone());
            if metric.kind != "histogram" {
                assert!(samples.insert(series(""), point.value).is_none(), "{} twice: {metrics:#?}", metric.name);
                continue;
            }
            samples.insert(series("_count"), point.value);
            samples.insert(series("_sum"), point.sum);
            let mut cumulative = 0;
            let bounds = point.bounds.iter().copied().chain([f64::INFINITY]);
            for (upper, count) in bounds.zip(&point.buckets) {
                cumulative += count;
                let (name, mut labels) = series("_bucket");
                labels.insert("le".to_owned(), bound(upper));
                samples.insert((name, labels), cumulative as f64);
            }
        }
    }
    samples
}

/// The samples with a label whose value is one of `names` (tools and steps).
fn of(names: &[&str], samples: BTreeMap<Series, f64>) -> BTreeMap<Series, f64> {
    samples
        .into_iter()
        .filter(|((_, labels), _)| labels.values().any(|value| names.contains(&value.as_str())))
        .collect()
}

/// Sums differ in their last bits if the two recorders add in different orders.
fn rounded(samples: BTreeMap<Series, f64>) -> BTreeMap<Series, String> {
    samples.into_iter().map(|(series, value)| (series, format!("{value:.9}"))).collect()
}

#[tokio::test]
async fn otlp_receives_every_series_prometheus_renders_with_the_same_counts_and_buckets() {
    let collector = Collector::start();
    // An hour between exports: what arrives was flushed by the test.
    let otlp = otel::Metrics::builder()
        .endpoint(collector.endpoint())
        .service_name("weighing")
        .interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let prometheus = eve_tools::metrics::install_with(otlp.recorder()).expect("the recorders install together");
    let runtime = Runtime::in_memory().unwrap();
    for parcels in [vec![1], vec![2, 3], vec![4, 5, 6]] {
        let run = runtime.start("otlp_weigh_parcels", json!({ "parcels": parcels })).await.unwrap();
        run.outcome().await.unwrap();
    }
    let refused = runtime.start("otlp_refuse", json!({})).await.unwrap();
    assert!(matches!(refused.outcome().await.unwrap(), RunOutcome::Failed(_)), "the run fails");
    for word in ["hey", "ho"] {
        runtime.call_tool("otlp_shout", json!({ "word": word })).await.unwrap();
    }
    otlp.flush().unwrap();
    let exported = collector.wait_for_metrics(Duration::from_secs(10));
    let rendered = prometheus.render();

    let mut names: Vec<&str> = exported.iter().map(|metric| metric.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "each metric once in an export: {exported:#?}");
    for metric in &exported {
        assert!(!metric.description.is_empty(), "{} carries its help text", metric.name);
        assert_eq!(metric.service, "weighing");
    }
    let ours = ["otlp_weigh_parcels", "otlp_weigh", "otlp_refuse", "otlp_shout"];
    let (otlp_samples, prometheus_samples) = (of(&ours, as_prometheus(&exported)), of(&ours, exposition(&rendered)));
    assert_eq!(rounded(otlp_samples.clone()), rounded(prometheus_samples), "OTLP as /metrics renders it:\n{rendered}");

    let sample = |name: &str, labels: &[(&str, &str)]| {
        let labels = labels.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        otlp_samples.get(&(name.to_owned(), labels)).copied()
    };
    let weigh = [("tool", "otlp_weigh_parcels")];
    assert_eq!(sample("eve_runs_started_total", &weigh), Some(3.0));
    assert_eq!(sample("eve_runs_finished_total", &[weigh[0], ("outcome", "completed")]), Some(3.0));
    assert_eq!(sample("eve_runs_finished_total", &[("tool", "otlp_refuse"), ("outcome", "failed")]), Some(1.0));
    assert_eq!(sample("eve_step_attempts_total", &[("step", "otlp_weigh")]), Some(7.0), "six parcels, one retried");
    assert_eq!(sample("eve_step_retries_total", &[("step", "otlp_weigh")]), Some(1.0));
    assert_eq!(sample("eve_step_duration_seconds_count", &[("step", "otlp_weigh")]), Some(7.0));
    let shouted = [("tool", "otlp_shout"), ("outcome", "ok")];
    assert_eq!(sample("eve_tool_call_duration_seconds_count", &shouted), Some(2.0));
    let step = exported.iter().find(|metric| metric.name == "eve_step_duration_seconds").expect("the step histogram");
    assert_eq!(step.kind, "histogram");
    assert_eq!(step.points[0].bounds, SECONDS, "the buckets /metrics renders");
    otlp.shutdown().unwrap();
}

/// Runs the test binary's host with `args`, exporting to `collector` with `variables` set too;
/// nothing leaves on a timer, so what arrives was exported at exit.
fn host(collector: &Collector, args: &[&str], variables: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(args)
        .env("EVE_DATA_DIR", dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SERVICE_NAME", "greeter")
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        .env_remove("OTEL_METRICS_EXPORTER")
        .envs(variables.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the call succeeds: {stderr}");
    output
}

/// The value of the point of `name` with exactly `labels`.
fn point(metrics: &[ReceivedMetric], name: &str, labels: &[(&str, &str)]) -> Option<(f64, Vec<f64>)> {
    let labels: BTreeMap<String, String> =
        labels.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
    let metric = metrics.iter().find(|metric| metric.name == name)?;
    let point = metric.points.iter().find(|point| point.attributes == labels)?;
    Some((point.value, point.bounds.clone()))
}

#[test]
fn call_exports_its_metrics_as_it_exits() {
    let collector = Collector::start();
    host(&collector, &["call", "greet_durably", r#"{"name":"Ada"}"#], &[]);
    let metrics = collector.wait_for_metrics(Duration::from_secs(10));
    let tool = ("tool", "greet_durably");
    assert_eq!(point(&metrics, "eve_runs_started_total", &[tool]), Some((1.0, vec![])), "{metrics:#?}");
    let completed = point(&metrics, "eve_runs_finished_total", &[tool, ("outcome", "completed")]);
    assert_eq!(completed, Some((1.0, vec![])));
    assert_eq!(point(&metrics, "eve_step_attempts_total", &[("step", "compose")]), Some((1.0, vec![])));
    let duration = point(&metrics, "eve_step_duration_seconds", &[("step", "compose")]);
    assert_eq!(duration, Some((1.0, SECONDS.to_vec())), "one attempt, in the buckets /metrics has");
    assert!(metrics.iter().all(|metric| metric.service == "greeter"), "{metrics:#?}");
}

#[test]
fn call_exports_no_metrics_when_the_variable_says_none() {
    let collector = Collector::start();
    host(&collector, &["call", "greet_durably", r#"{"name":"Ada"}"#], &[("OTEL_METRICS_EXPORTER", "none")]);
    // The process has exited, so what it exported has arrived: its spans, and no metrics. (The
    // `start` span, which ends before `call` starts following the run; its `run` span may end
    // after `call` has printed the outcome and flushed.)
    assert!(collector.spans().iter().any(|span| span.name == "start"), "the traces are still exported");
    assert!(collector.metrics().is_empty(), "{:#?}", collector.metrics());
}

#[test]
fn an_unknown_metrics_exporter_is_named_with_what_to_write_instead() {
    let collector = Collector::start();
    let output = host(&collector, &["call", "greet", r#"{"name":"Ada"}"#], &[("OTEL_METRICS_EXPORTER", "statsd")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_METRICS_EXPORTER=statsd"), "{stderr}");
    assert!(stderr.contains("`otlp` or `none`"), "{stderr}");
    assert!(collector.metrics().is_empty(), "{:#?}", collector.metrics());
}

#[tokio::test]
async fn serve_gives_prometheus_and_otlp_the_same_series_and_exports_them_when_stopped() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("EVE_DATA_DIR", dir.path())
        .env_remove("EVE_API_KEY")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        .env_remove("OTEL_METRICS_EXPORTER")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let base = lines.by_ref().find_map(|line| line.strip_prefix("serving ").map(str::to_owned)).unwrap();
    let base = base.split(' ').next().unwrap().to_owned();
    std::thread::spawn(move || lines.for_each(drop));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    for name in ["Ada", "Grace"] {
        let body = json!({ "input": { "name": name } });
        let started = client.post(format!("{base}/v1/tools/greet_durably/runs")).json(&body).send().await.unwrap();
        assert_eq!(started.status(), 201);
    }
    // Both runs are counted as finished once `/metrics` says so: their status is journaled a
    // moment before.
    let finished = "eve_runs_finished_total{tool=\"greet_durably\",outcome=\"completed\"} 2";
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let rendered = loop {
        let rendered = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
        if rendered.lines().any(|line| line == finished) {
            break rendered;
        }
        assert!(std::time::Instant::now() < deadline, "the runs never finished: {rendered}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(collector.metrics().is_empty(), "nothing is exported before the interval or the server stops");

    let terminated = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(terminated.success());
    assert!(child.wait().unwrap().success(), "a drained server exits 0");
    let exported = collector.wait_for_metrics(Duration::from_secs(10));
    let ours = ["greet_durably", "compose"];
    let (otlp_samples, prometheus_samples) = (of(&ours, as_prometheus(&exported)), of(&ours, exposition(&rendered)));
    assert_eq!(rounded(otlp_samples.clone()), rounded(prometheus_samples), "OTLP as /metrics renders it:\n{rendered}");
    let attempts = ("eve_step_attempts_total".to_owned(), BTreeMap::from([("step".to_owned(), "compose".to_owned())]));
    assert_eq!(otlp_samples.get(&attempts), Some(&2.0), "{exported:#?}");
}
