//! Metrics over OTLP: a `metrics` recorder that records into an OpenTelemetry meter, and the
//! periodic exporter that sends the meter's totals to the collector. See the [parent](super).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::recorder::OtlpRecorder;
use super::{Protocol, Settings};

/// The variable choosing the metrics exporter: `otlp` (the default when an endpoint is set) or
/// `none`, which exports traces alone.
pub const METRICS_EXPORTER_VARIABLE: &str = "OTEL_METRICS_EXPORTER";

/// The instrumentation scope eve's metrics are exported under.
const SCOPE: &str = "eve-tools";

/// Why metrics cannot be exported over OTLP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The exporter could not be made from its settings.
    #[error("cannot export metrics to the OTLP endpoint: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The protocol named is not one this build speaks.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0} is not a protocol this build exports metrics with; use `http/protobuf`, or `grpc` with the cargo feature `otel-grpc`"
    )]
    Protocol(String),
    /// `OTEL_METRICS_EXPORTER` names an exporter eve does not have.
    #[error(
        "OTEL_METRICS_EXPORTER={0} is not a metrics exporter eve has; use `otlp` or `none` (Prometheus is served at `/metrics` with the cargo feature `metrics`)"
    )]
    UnknownExporter(String),
    /// A metrics recorder was installed already, so this one could not be.
    #[error(
        "cannot install the OTLP metrics recorder: this process has a metrics recorder already; install eve's first, or to have Prometheus too, install both with `eve_tools::metrics::install_with(metrics.recorder())`"
    )]
    RecorderSet,
    /// Flushing or shutting the exporter down failed.
    #[error("cannot flush the metrics: {0}")]
    Flush(#[from] opentelemetry_sdk::error::OTelSdkError),
}

/// Settings of a [`Metrics`]; what is not set comes from the standard variables.
#[derive(Clone, Debug, Default)]
pub struct MetricsBuilder {
    settings: Settings,
    interval: Option<Duration>,
}

impl MetricsBuilder {
    /// The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it (over HTTP, metrics
    /// go to its `/v1/metrics`).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.settings.endpoint = Some(url.into());
        self
    }

    /// The service the metrics come from, instead of `OTEL_SERVICE_NAME`.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.settings.service_name = Some(name.into());
        self
    }

    /// The protocol, instead of `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.settings.protocol = Some(protocol);
        self
    }

    /// How often the totals are exported, instead of `OTEL_METRIC_EXPORT_INTERVAL` (a minute
    /// unless set).
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = Some(every);
        self
    }

    /// The exporter, with a reader that exports from a thread of its own. Over gRPC it must be
    /// built inside a Tokio runtime.
    pub fn build(self) -> Result<Metrics, MetricsError> {
        let exporter = match self.settings.protocol().map_err(MetricsError::Protocol)? {
            Protocol::HttpProtobuf => {
                let mut exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
                if let Some(url) = self.settings.http_endpoint("v1/metrics") {
                    exporter = exporter.with_endpoint(url);
                }
                exporter.build()?
            }
            #[cfg(feature = "otel-grpc")]
            Protocol::Grpc => {
                let mut exporter = opentelemetry_otlp::MetricExporter::builder().with_tonic();
                if let Some(url) = &self.settings.endpoint {
                    exporter = exporter.with_endpoint(url.clone());
                }
                exporter.build()?
            }
        };
        let mut reader = PeriodicReader::builder(exporter);
        if let Some(every) = self.interval {
            reader = reader.with_interval(every);
        }
        let provider =
            SdkMeterProvider::builder().with_reader(reader.build()).with_resource(self.settings.resource()).build();
        Ok(Metrics { provider })
    }
}

/// An OTLP metric exporter and the `metrics` recorder that feeds it: see the [module](super).
///
/// Dropping it neither flushes nor stops the exporter while its recorder is installed: call
/// [`shutdown`](Metrics::shutdown) before the process ends, or what was counted since the last
/// export is lost.
#[derive(Debug)]
pub struct Metrics {
    provider: SdkMeterProvider,
}

/// Whether a recorder was made in this process, so the host does not install a second exporter
/// beside one the binary installed itself.
static RECORDED: AtomicBool = AtomicBool::new(false);

impl Metrics {
    /// Settings to build one with.
    pub fn builder() -> MetricsBuilder {
        MetricsBuilder::default()
    }

    /// The exporter the standard variables configure, or `None` when `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// is not set or `OTEL_METRICS_EXPORTER` is `none`.
    pub fn from_env() -> Result<Option<Metrics>, MetricsError> {
        if !Settings::endpoint_in_env() {
            return Ok(None);
        }
        match std::env::var(METRICS_EXPORTER_VARIABLE).ok().as_deref().map(str::trim) {
            None | Some("" | "otlp") => Metrics::builder().build().map(Some),
            Some("none") => Ok(None),
            Some(other) => Err(MetricsError::UnknownExporter(other.to_owned())),
        }
    }

    /// The `metrics` recorder exporting to this exporter, to install beside others (a fan-out of
    /// your own, or `eve_tools::metrics::install_with` for Prometheus too). Call
    /// `eve_tools::metrics::enable` once it is installed, so eve records its metrics.
    pub fn recorder(&self) -> impl ::metrics::Recorder + Send + Sync + 'static {
        RECORDED.store(true, Ordering::Relaxed);
        OtlpRecorder::new(&self.provider, SCOPE)
    }

    /// Makes [`recorder`](Metrics::recorder) alone the process's global metrics recorder and
    /// enables eve's metrics. Fails if the process has one already.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use eve_host::otel::{Metrics, MetricsError};
    ///
    /// metrics::set_global_recorder(metrics::NoopRecorder)?;
    /// let otlp = Metrics::builder().endpoint("http://localhost:4318").build()?;
    /// let refused = otlp.install().unwrap_err();
    /// assert!(matches!(refused, MetricsError::RecorderSet));
    /// assert!(refused.to_string().contains("install both with `eve_tools::metrics::install_with"));
    /// # Ok(()) }
    /// ```
    pub fn install(&self) -> Result<(), MetricsError> {
        ::metrics::set_global_recorder(self.recorder()).map_err(|_| MetricsError::RecorderSet)?;
        eve_runtime::metrics::enable();
        Ok(())
    }

    /// Exports the totals now, waiting until the collector has them.
    pub fn flush(&self) -> Result<(), MetricsError> {
        Ok(self.provider.force_flush()?)
    }

    /// Exports the totals and stops the exporter.
    pub fn shutdown(self) -> Result<(), MetricsError> {
        Ok(self.provider.shutdown()?)
    }

    /// The exporter the variables configure for a host command, uninstalled, unless the binary
    /// made a recorder of its own. Says on stderr why, if it cannot export.
    pub(crate) fn for_host() -> Option<Metrics> {
        if RECORDED.load(Ordering::Relaxed) {
            return None;
        }
        Metrics::from_env().unwrap_or_else(|error| {
            eprintln!("warning: {error}; going on without exporting metrics over OTLP");
            None
        })
    }
}
