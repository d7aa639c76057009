//! An OTLP/HTTP collector in the test process: it accepts `POST /v1/traces` and `POST /v1/metrics`
//! (protobuf), decodes each `ExportTraceServiceRequest` and `ExportMetricsServiceRequest`, and keeps
//! the spans and the metrics for the test to read.
//!
//! It serves on a loopback port from a thread and a Tokio runtime of its own, so an exporter
//! flushing from the test's runtime, blocking its thread until the collector answers, cannot wait
//! on itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as Any, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use prost::Message;

/// One span as the collector received it, with its ids in hex and its attributes as text.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// The trace id, 32 hex digits.
    pub trace_id: String,
    /// The span id, 16 hex digits.
    pub span_id: String,
    /// The parent's span id, or empty for a root.
    pub parent_span_id: String,
    /// The span's name (`start`, `run`, `step`, …).
    pub name: String,
    /// Its attributes, each value as text.
    pub attributes: BTreeMap<String, String>,
    /// Its resource's `service.name`.
    pub service: String,
}

impl ReceivedSpan {
    /// The attribute `key`, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One metric of one export, as the collector received it.
#[derive(Clone, Debug)]
pub struct ReceivedMetric {
    /// Which export it came in, counting from 0: with cumulative temporality the last export of a
    /// process holds every metric's total.
    pub export: usize,
    /// The metric's name.
    pub name: String,
    /// Its description (the help text).
    pub description: String,
    /// `sum`, `gauge`, `histogram`, or the name of another kind.
    pub kind: &'static str,
    /// Its data points, one per set of attributes.
    pub points: Vec<ReceivedPoint>,
    /// Its resource's `service.name`.
    pub service: String,
}

/// One data point of a [`ReceivedMetric`].
#[derive(Clone, Debug)]
pub struct ReceivedPoint {
    /// Its attributes (the labels), each value as text.
    pub attributes: BTreeMap<String, String>,
    /// A sum's or a gauge's value; a histogram's count.
    pub value: f64,
    /// A histogram's sum of what it recorded.
    pub sum: f64,
    /// A histogram's bucket boundaries (upper bounds, the last bucket's unbounded).
    pub bounds: Vec<f64>,
    /// A histogram's count in each bucket (not cumulative), one more than `bounds`.
    pub buckets: Vec<u64>,
}

/// What the collector received.
#[derive(Default)]
struct Received {
    spans: Mutex<Vec<ReceivedSpan>>,
    metrics: Mutex<Vec<ReceivedMetric>>,
    exports: Mutex<usize>,
}

/// The collector: see the module documentation. It stops with the test process.
pub struct Collector {
    endpoint: String,
    received: Arc<Received>,
}

impl Collector {
    /// Starts a collector on a free loopback port.
    pub fn start() -> Collector {
        let received = Arc::new(Received::default());
        let (sender, receiver) = std::sync::mpsc::channel();
        let kept = received.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
                sender.send(listener.local_addr().expect("a bound address")).expect("the test waits");
                let app = axum::Router::new()
                    .route("/v1/traces", axum::routing::post(receive))
                    .route("/v1/metrics", axum::routing::post(receive_metrics))
                    .with_state(kept);
                axum::serve(listener, app).await.expect("the collector serves");
            });
        });
        let address = receiver.recv().expect("the collector binds");
        Collector { endpoint: format!("http://{address}"), received }
    }

    /// Its base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.spans.lock().expect("never poisoned").clone()
    }

    /// Every metric received so far, export after export.
    pub fn metrics(&self) -> Vec<ReceivedMetric> {
        self.received.metrics.lock().expect("never poisoned").clone()
    }

    /// Waits (up to `within`) until the spans received satisfy `done`, and returns them; panics
    /// naming what arrived if they never do.
    pub fn wait_for(&self, within: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "the spans expected never arrived; received: {spans:#?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to `within`) until an export of metrics has arrived, and returns the metrics of
    /// the last one; panics if none does.
    pub fn wait_for_metrics(&self, within: Duration) -> Vec<ReceivedMetric> {
        let deadline = Instant::now() + within;
        loop {
            let metrics = self.metrics();
            if let Some(last) = metrics.last().map(|metric| metric.export) {
                return metrics.into_iter().filter(|metric| metric.export == last).collect();
            }
            assert!(Instant::now() < deadline, "no metrics arrived; spans received: {:#?}", self.spans());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn receive_metrics(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportMetricsServiceRequest::decode(body) else { return StatusCode::BAD_REQUEST };
    let mut exports = received.exports.lock().expect("never poisoned");
    let export = *exports;
    *exports += 1;
    let mut metrics = Vec::new();
    for resource_metrics in request.resource_metrics {
        let attributes = resource_metrics.resource.map(|resource| resource.attributes).unwrap_or_default();
        let service = texts(attributes).remove("service.name").unwrap_or_default();
        for metric in resource_metrics.scope_metrics.into_iter().flat_map(|scope| scope.metrics) {
            let (kind, points) = points(metric.data);
            let (name, description, service) = (metric.name, metric.description, service.clone());
            metrics.push(ReceivedMetric { export, name, description, kind, points, service });
        }
    }
    received.metrics.lock().expect("never poisoned").extend(metrics);
    StatusCode::OK
}

/// A metric's kind and its points, with the numbers as `f64`.
fn points(data: Option<Data>) -> (&'static str, Vec<ReceivedPoint>) {
    let number = |attributes, value: Option<Number>| {
        let value = match value {
            Some(Number::AsDouble(value)) => value,
            Some(Number::AsInt(value)) => value as f64,
            None => f64::NAN,
        };
        ReceivedPoint { attributes: texts(attributes), value, sum: 0.0, bounds: Vec::new(), buckets: Vec::new() }
    };
    match data {
        Some(Data::Sum(sum)) => ("sum", sum.data_points.into_iter().map(|p| number(p.attributes, p.value)).collect()),
        Some(Data::Gauge(gauge)) => {
            ("gauge", gauge.data_points.into_iter().map(|p| number(p.attributes, p.value)).collect())
        }
        Some(Data::Histogram(histogram)) => {
            let points = histogram.data_points.into_iter().map(|point| ReceivedPoint {
                attributes: texts(point.attributes),
                value: point.count as f64,
                sum: point.sum.unwrap_or_default(),
                bounds: point.explicit_bounds,
                buckets: point.bucket_counts,
            });
            ("histogram", points.collect())
        }
        Some(Data::ExponentialHistogram(_)) => ("exponential histogram", Vec::new()),
        Some(Data::Summary(_)) => ("summary", Vec::new()),
        None => ("none", Vec::new()),
    }
}

async fn receive(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else { return StatusCode::BAD_REQUEST };
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let attributes = resource_spans.resource.map(|resource| resource.attributes).unwrap_or_default();
        let service = texts(attributes).remove("service.name").unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
            spans.push(ReceivedSpan {
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                name: span.name,
                attributes: texts(span.attributes),
                service: service.clone(),
            });
        }
    }
    received.spans.lock().expect("never poisoned").extend(spans);
    StatusCode::OK
}

fn texts(attributes: Vec<KeyValue>) -> BTreeMap<String, String> {
    attributes.into_iter().map(|pair| (pair.key, text(pair.value))).collect()
}

fn text(value: Option<Any>) -> String {
    match value.and_then(|value| value.value) {
        Some(AnyValue::StringValue(text)) => text,
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        Some(AnyValue::DoubleValue(number)) => number.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
