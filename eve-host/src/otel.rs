//! Traces and metrics over OTLP: the runtime's `tracing` spans, and eve's metrics, exported to an
//! OpenTelemetry collector (feature `otel`; gRPC with `otel-grpc`).
//!
//! The standard variables configure both: `OTEL_EXPORTER_OTLP_ENDPOINT` (the collector's base URL,
//! such as `http://localhost:4318`; traces go to its `/v1/traces`, metrics to its `/v1/metrics`),
//! `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, or `grpc`),
//! and the SDK's own (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_METRIC_EXPORT_INTERVAL`, …); `OTEL_METRICS_EXPORTER=none`
//! exports traces alone. `host serve`, `host worker`, `host mcp` and `host call` export when the
//! endpoint is set, and flush as they exit; a binary of its own makes a [`Traces`] and a
//! [`Metrics`] with their `from_env` or `builder`, and installs them.
//!
//! # Traces
//!
//! What is exported: a `start` span when a run is created, a `run` span for each activation (a
//! start, a resume, a replay after a restart or on another worker), and a `step` span for each step
//! attempt under its activation. A run is one trace for its whole life: its first entry journals
//! the `start` span's context (see `eve_runtime::trace`), and every later activation, in whatever
//! process, is made its child. A run a step or a session starts is a child of its starter's span,
//! and a run started by a request that carries a `traceparent` header is a child of the caller's.
//! Attributes name the run (`eve.run.id`), the tool (`gen_ai.tool.name`), the activation
//! (`eve.activation`: `fresh`, `warm` or `cold`) and the step (`eve.step.name`, `eve.op`,
//! `eve.step.attempt`); never an input, an output, a token or a secret.
//!
//! Without an endpoint nothing is installed, and a step costs what it costs without the feature:
//! its span is at `DEBUG`, below what an ordinary subscriber takes, so it is not even created.
//!
//! # Metrics
//!
//! [`Metrics`] exports the metrics [`eve_runtime::metrics`] lists, with the names, labels (as
//! attributes) and meaning they have at `/metrics`: counters as cumulative sums, gauges as gauges,
//! histograms with the buckets Prometheus gets. A process has one metrics recorder:
//! [`Metrics::install`] makes the OTLP one the global one, and with Prometheus too (feature
//! `metrics`), `eve_tools::metrics::install_with(metrics.recorder())` installs both, fanned out.
//! `host serve` and `host worker` do that when the endpoint is set. Metrics are exported every
//! `OTEL_METRIC_EXPORT_INTERVAL` milliseconds (a minute unless set), and on
//! [`shutdown`](Metrics::shutdown).
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use eve_host::otel::Traces;
//!
//! let traces = Traces::builder().endpoint("http://localhost:4318").service_name("refunds").build()?;
//! traces.install()?;
//! // … build the runtime and serve …
//! traces.shutdown()?; // exports what is still buffered
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use eve_host::otel::Metrics;
//!
//! // `None` without OTEL_EXPORTER_OTLP_ENDPOINT, or with OTEL_METRICS_EXPORTER=none.
//! if let Some(metrics) = Metrics::from_env()? {
//!     metrics.install()?;
//!     // … build the runtime and run tools …
//!     metrics.shutdown()?; // exports the totals
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use eve_runtime::journal::TraceParent;

mod metrics;
mod recorder;

pub use metrics::{METRICS_EXPORTER_VARIABLE, Metrics, MetricsBuilder, MetricsError};

/// The variable naming the collector's base URL; without it, [`Traces::from_env`] and
/// [`Metrics::from_env`] export nothing.
pub const ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The variable naming the service the spans and metrics come from.
pub const SERVICE_NAME_VARIABLE: &str = "OTEL_SERVICE_NAME";

/// The variable choosing the protocol: `http/protobuf` (the default) or `grpc`.
pub const PROTOCOL_VARIABLE: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracesError {
    /// The exporter could not be made from its settings.
    #[error("cannot export traces to the OTLP endpoint: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The protocol named is not one this build speaks.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0} is not a protocol this build exports traces with; use `http/protobuf`, or `grpc` with the cargo feature `otel-grpc`"
    )]
    Protocol(String),
    /// A `tracing` subscriber was installed already, so this one could not be.
    #[error(
        "cannot install the trace exporter: this process has a tracing subscriber already; add `Traces::layer` to it instead"
    )]
    SubscriberSet,
    /// Flushing or shutting the exporter down failed.
    #[error("cannot flush the traces: {0}")]
    Flush(#[from] opentelemetry_sdk::error::OTelSdkError),
}

/// How a [`Traces`] or a [`Metrics`] reaches the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// Protobuf over HTTP, to the endpoint's `/v1/traces` and `/v1/metrics`.
    HttpProtobuf,
    /// gRPC (feature `otel-grpc`).
    #[cfg(feature = "otel-grpc")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel-grpc")))]
    Grpc,
}

/// What a [`TracesBuilder`] and a [`MetricsBuilder`] are given; what is not set comes from the
/// standard variables.
#[derive(Clone, Debug, Default)]
struct Settings {
    endpoint: Option<String>,
    service_name: Option<String>,
    protocol: Option<Protocol>,
}

impl Settings {
    /// The protocol given, or the one `OTEL_EXPORTER_OTLP_PROTOCOL` names (HTTP when it is unset),
    /// or the value this build does not speak.
    fn protocol(&self) -> Result<Protocol, String> {
        if let Some(protocol) = self.protocol {
            return Ok(protocol);
        }
        match std::env::var(PROTOCOL_VARIABLE).ok().as_deref() {
            None | Some("" | "http/protobuf") => Ok(Protocol::HttpProtobuf),
            #[cfg(feature = "otel-grpc")]
            Some("grpc") => Ok(Protocol::Grpc),
            Some(other) => Err(other.to_owned()),
        }
    }

    /// The URL an HTTP exporter posts `path` (`v1/traces`, `v1/metrics`) to, if an endpoint was
    /// given: it means what the variable does, the base the signal's path goes under.
    fn http_endpoint(&self, path: &str) -> Option<String> {
        Some(format!("{}/{path}", self.endpoint.as_deref()?.trim_end_matches('/')))
    }

    /// The resource the exports describe: the service name given, or the variables'.
    fn resource(&self) -> Resource {
        let mut resource = Resource::builder();
        if let Some(name) = &self.service_name {
            resource = resource.with_service_name(name.clone());
        }
        resource.build()
    }

    /// Whether `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector.
    fn endpoint_in_env() -> bool {
        std::env::var_os(ENDPOINT_VARIABLE).is_some_and(|url| !url.is_empty())
    }
}

/// Settings of a [`Traces`]; what is not set comes from the standard variables.
#[derive(Clone, Debug, Default)]
pub struct TracesBuilder {
    settings: Settings,
}

impl TracesBuilder {
    /// The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it (over HTTP, traces
    /// go to its `/v1/traces`).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.settings.endpoint = Some(url.into());
        self
    }

    /// The service the spans come from, instead of `OTEL_SERVICE_NAME`.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.settings.service_name = Some(name.into());
        self
    }

    /// The protocol, instead of `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.settings.protocol = Some(protocol);
        self
    }

    /// The exporter, with a batch processor that exports from a thread of its own. Over gRPC it
    /// must be built inside a Tokio runtime.
    pub fn build(self) -> Result<Traces, TracesError> {
        let exporter = match self.settings.protocol().map_err(TracesError::Protocol)? {
            Protocol::HttpProtobuf => {
                let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
                if let Some(url) = self.settings.http_endpoint("v1/traces") {
                    exporter = exporter.with_endpoint(url);
                }
                exporter.build()?
            }
            #[cfg(feature = "otel-grpc")]
            Protocol::Grpc => {
                let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
                if let Some(url) = &self.settings.endpoint {
                    exporter = exporter.with_endpoint(url.clone());
                }
                exporter.build()?
            }
        };
        let provider =
            SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(self.settings.resource()).build();
        Ok(Traces { provider })
    }
}

/// An OTLP trace exporter and the `tracing` layer that feeds it: see the [module](self).
///
/// Dropping it does not flush: call [`shutdown`](Traces::shutdown) before the process ends.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

/// Whether a layer was made in this process, so the host does not install a second exporter
/// beside one the binary installed itself.
static LAYERED: AtomicBool = AtomicBool::new(false);

impl Traces {
    /// Settings to build one with.
    pub fn builder() -> TracesBuilder {
        TracesBuilder::default()
    }

    /// The exporter the standard variables configure, or `None` when `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// is not set.
    pub fn from_env() -> Result<Option<Traces>, TracesError> {
        if !Settings::endpoint_in_env() {
            return Ok(None);
        }
        Traces::builder().build().map(Some)
    }

    /// The `tracing` layer exporting to this exporter, to add to a subscriber of your own: it takes
    /// spans at `INFO` and above, eve's `DEBUG` spans (a step's), and events at `INFO` and above
    /// (as span events). Making it lets the runtime journal and adopt trace contexts.
    pub fn layer<S>(&self) -> impl Layer<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        LAYERED.store(true, Ordering::Relaxed);
        eve_runtime::trace::install(&W3C);
        let tracer = self.provider.tracer("eve-tools");
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(tracing_subscriber::filter::filter_fn(exported))
    }

    /// Makes a subscriber of [`layer`](Traces::layer) alone the process's global one. Fails if
    /// the process has one already: add the layer to it instead.
    pub fn install(&self) -> Result<(), TracesError> {
        let subscriber = tracing_subscriber::registry().with(self.layer());
        subscriber.try_init().map_err(|_| TracesError::SubscriberSet)
    }

    /// Exports every span that has ended, waiting until the collector has them.
    pub fn flush(&self) -> Result<(), TracesError> {
        Ok(self.provider.force_flush()?)
    }

    /// Exports what is left and stops the exporter.
    pub fn shutdown(self) -> Result<(), TracesError> {
        Ok(self.provider.shutdown()?)
    }

    /// The exporter the host's serving commands install: from the variables, unless the binary
    /// made a layer of its own. Says on stderr why, if it cannot export.
    pub(crate) fn for_host() -> Option<Traces> {
        if LAYERED.load(Ordering::Relaxed) {
            return None;
        }
        let installed = Traces::from_env().and_then(|traces| {
            let Some(traces) = traces else { return Ok(None) };
            traces.install().map(|()| Some(traces))
        });
        installed.unwrap_or_else(|error| {
            eprintln!("warning: {error}; serving without exporting traces");
            None
        })
    }
}

/// What the layer exports: spans and events at `INFO` and above, and eve's own `DEBUG` spans
/// (a step's), whose debug events stay out (a wake-up says nothing a trace does not).
fn exported(metadata: &Metadata<'_>) -> bool {
    let level = *metadata.level();
    level <= Level::INFO || (level == Level::DEBUG && metadata.is_span() && metadata.target().starts_with("eve_"))
}

/// The runtime's trace contexts as W3C `traceparent`s, read and set through tracing-opentelemetry.
struct W3c;

static W3C: W3c = W3c;

impl eve_runtime::trace::Propagation for W3c {
    fn traceparent(&self, span: &tracing::Span) -> Option<TraceParent> {
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
        TraceParent::parse(carrier.get("traceparent")?)
    }

    fn set_parent(&self, span: &tracing::Span, parent: &TraceParent) {
        let carrier = HashMap::from([("traceparent".to_owned(), parent.as_str().to_owned())]);
        if let Err(error) = span.set_parent(TraceContextPropagator::new().extract(&carrier)) {
            tracing::debug!("the span stays out of the run's trace: {error}");
        }
    }
}
