//! An OTLP/HTTP collector in the test process: it accepts `POST /v1/traces` (protobuf), decodes
//! each `ExportTraceServiceRequest`, and keeps the spans for the test to read.
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
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as Any, KeyValue};
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

/// The collector: see the module documentation. It stops with the test process.
pub struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

impl Collector {
    /// Starts a collector on a free loopback port.
    pub fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (sender, receiver) = std::sync::mpsc::channel();
        let kept = spans.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
                sender.send(listener.local_addr().expect("a bound address")).expect("the test waits");
                let app = axum::Router::new().route("/v1/traces", axum::routing::post(receive)).with_state(kept);
                axum::serve(listener, app).await.expect("the collector serves");
            });
        });
        let address = receiver.recv().expect("the collector binds");
        Collector { endpoint: format!("http://{address}"), spans }
    }

    /// Its base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("never poisoned").clone()
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
}

async fn receive(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else { return StatusCode::BAD_REQUEST };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let attributes = resource_spans.resource.map(|resource| resource.attributes).unwrap_or_default();
        let service = texts(attributes).remove("service.name").unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
            received.push(ReceivedSpan {
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                name: span.name,
                attributes: texts(span.attributes),
                service: service.clone(),
            });
        }
    }
    spans.lock().expect("never poisoned").extend(received);
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
