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
//! [`Server::metrics`]: crate::http::Server::metrics

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The buckets of every `_seconds` histogram, in seconds.
const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The buckets of the histograms that count (entries in an append, deliveries in an inbox).
const COUNTS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1000.0];

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

/// Why [`install`] could not install the recorder.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot install the Prometheus recorder: {0}; a process has one global metrics recorder, so install eve's before any other"
)]
pub struct InstallError(String);

/// Installs a Prometheus recorder as the process's global metrics recorder and enables eve's
/// metrics ([`eve_runtime::metrics::enable`]). Once per process: later calls return the same
/// recorder. Fails if another recorder was installed first.
pub fn install() -> Result<Metrics, InstallError> {
    // Held throughout, so two callers at once install one recorder.
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(metrics) = &*installed {
        return Ok(metrics.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
        .and_then(|builder| builder.set_buckets_for_metric(Matcher::Suffix("_entries".into()), COUNTS))
        .and_then(|builder| builder.set_buckets_for_metric(Matcher::Suffix("_depth".into()), COUNTS))
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|error| InstallError(error.to_string()))?;
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
