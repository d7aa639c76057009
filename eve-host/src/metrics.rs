//! The Prometheus recorder (cargo feature `metrics`): what `serve` and `worker` install, and what
//! `/metrics` on the [HTTP server](crate::http::Server) renders.
//!
//! [`install`] makes a recorder the process's global one and enables eve's metrics
//! ([`eve_runtime::metrics`] lists them, with what each means); [`Server::metrics`] serves it:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let metrics = eve_tools::metrics::install()?;
//! let runtime = eve_tools::Runtime::in_memory()?;
//! let server = eve_tools::http::Server::new(runtime).metrics(metrics).bind("127.0.0.1:0").await?;
//! // `GET /metrics` now answers in Prometheus's text format, behind the run API's key.
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Histograms have buckets (a Prometheus histogram, not a summary): durations from a tenth of a
//! millisecond to a minute, and counts of entries or deliveries from 1 to 1,000. A thread of the
//! recorder's own folds recorded durations into them every [`UPKEEP`], so memory stays bounded
//! however rarely Prometheus scrapes.
//!
//! A process has one global metrics recorder. To send every metric somewhere else too, such as to
//! an OpenTelemetry collector ([`otel::Metrics`](crate::otel::Metrics), feature `otel`), install
//! the two together with [`install_with`], which fans each metric out to both.
//!
//! [`Server::metrics`]: crate::http::Server::metrics

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use metrics_util::layers::FanoutBuilder;

/// How often the recorder folds recorded durations into its histograms.
pub const UPKEEP: Duration = Duration::from_secs(5);

/// The recorder installed by [`install`], once per process.
static INSTALLED: Mutex<Option<Metrics>> = Mutex::new(None);

/// The process's Prometheus recorder, as [`install`] returns it; give it to
/// [`Server::metrics`](crate::http::Server::metrics) to serve it at `/metrics`.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl Metrics {
    /// Every metric recorded so far, in Prometheus's text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Why [`install`] or [`install_with`] could not install the recorder: another recorder came
/// first, or a Prometheus one without the recorder `install_with` was given.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let metrics = eve_tools::metrics::install()?;
/// let refused = eve_tools::metrics::install_with(metrics::NoopRecorder).unwrap_err();
/// assert!(refused.to_string().contains("call `install_with` once, before anything calls `install`"));
/// # drop(metrics);
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("cannot install the Prometheus recorder: {0}")]
pub struct InstallError(String);

impl InstallError {
    /// Another recorder is the global one.
    fn taken() -> Self {
        InstallError(
            "this process has a metrics recorder already; a process has one, so install eve's before any other, \
             and give `install_with` a recorder to fan out to beside Prometheus"
                .to_owned(),
        )
    }
}

/// Installs a Prometheus recorder as the process's global metrics recorder and enables eve's
/// metrics ([`eve_runtime::metrics::enable`]). Once per process: later calls return the same
/// recorder, also when [`install_with`] installed it. Fails if another recorder was installed first.
pub fn install() -> Result<Metrics, InstallError> {
    // Held throughout, so two callers at once install one recorder.
    let mut installed = installed();
    if let Some(metrics) = &*installed {
        return Ok(metrics.clone());
    }
    let recorder = prometheus()?;
    let handle = recorder.handle();
    ::metrics::set_global_recorder(recorder).map_err(|_| InstallError::taken())?;
    started(handle, &mut installed)
}

/// Installs a Prometheus recorder and `other` together, as the process's global metrics recorder,
/// and enables eve's metrics: every metric goes to both, so `/metrics` renders what `other` gets.
/// Call it once, before anything calls [`install`] (which then returns the same recorder). Fails
/// if another recorder was installed first, or a Prometheus one without `other`.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Prometheus at `/metrics`, and the same metrics to an OpenTelemetry collector (feature `otel`).
/// let otlp = eve_tools::otel::Metrics::builder().endpoint("http://localhost:4318").build()?;
/// let metrics = eve_tools::metrics::install_with(otlp.recorder())?;
/// // … serve with `Server::metrics(metrics)` …
/// otlp.shutdown()?; // exports what is left
/// # Ok(()) }
/// ```
pub fn install_with(other: impl ::metrics::Recorder + Sync + 'static) -> Result<Metrics, InstallError> {
    let mut installed = installed();
    if installed.is_some() {
        return Err(InstallError(
            "it was installed already, without the recorder given to `install_with`; \
             call `install_with` once, before anything calls `install`"
                .to_owned(),
        ));
    }
    let recorder = prometheus()?;
    let handle = recorder.handle();
    let fanout = FanoutBuilder::default().add_recorder(recorder).add_recorder(other).build();
    ::metrics::set_global_recorder(fanout).map_err(|_| InstallError::taken())?;
    started(handle, &mut installed)
}

/// The recorder [`install`] records into, if it was called.
fn installed() -> MutexGuard<'static, Option<Metrics>> {
    INSTALLED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Prometheus recorder with eve's buckets (see [`crate::buckets`]).
fn prometheus() -> Result<PrometheusRecorder, InstallError> {
    let mut builder = PrometheusBuilder::new();
    for (suffix, buckets) in crate::buckets::BY_SUFFIX {
        builder = builder
            .set_buckets_for_metric(Matcher::Suffix((*suffix).into()), buckets)
            .map_err(|error| InstallError(error.to_string()))?;
    }
    Ok(builder.build_recorder())
}

/// Starts the upkeep thread of the recorder just installed, enables eve's metrics, and keeps the
/// recorder for later calls of [`install`].
fn started(handle: PrometheusHandle, installed: &mut Option<Metrics>) -> Result<Metrics, InstallError> {
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("eve-metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP);
                upkeep.run_upkeep();
            }
        })
        .map_err(|error| InstallError(format!("cannot start its upkeep thread ({error})")))?;
    eve_runtime::metrics::enable();
    let metrics = Metrics { handle };
    *installed = Some(metrics.clone());
    Ok(metrics)
}
