//! The OTLP exporters a command installs when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see
//! [`crate::otel`]), and flushes as it exits, so that a short `call` exports its spans and its
//! metrics too.

use crate::otel::{Metrics, Traces};

use super::Command;

/// The exporters one command installed, each `None` if it exports nothing.
pub(super) struct Exporters {
    traces: Option<Traces>,
    metrics: Option<Metrics>,
}

impl Exporters {
    /// Installs the exporters of `command`: the serving commands, and `call`, which starts a run
    /// (and journals its trace for the workers that advance it). A command that serves `/metrics`
    /// (`serve`, `worker`) installs the OTLP recorder beside Prometheus's, so both get every metric.
    pub(super) fn start(command: &Command) -> Exporters {
        let exports =
            matches!(command, Command::Serve { .. } | Command::Worker { .. } | Command::Mcp | Command::Call { .. });
        if !exports {
            return Exporters { traces: None, metrics: None };
        }
        let metrics = Metrics::for_host().filter(|metrics| match install(metrics, command) {
            Ok(()) => true,
            Err(error) => {
                eprintln!("warning: {error}; going on without exporting metrics over OTLP");
                false
            }
        });
        Exporters { traces: Traces::for_host(), metrics }
    }

    /// Exports what is left, saying on stderr what could not be.
    pub(super) fn shutdown(self) {
        if let Some(Err(error)) = self.traces.map(Traces::shutdown) {
            eprintln!("warning: {error}");
        }
        if let Some(Err(error)) = self.metrics.map(Metrics::shutdown) {
            eprintln!("warning: {error}");
        }
    }
}

/// Installs the OTLP recorder: beside Prometheus's for a command that serves `/metrics` (feature
/// `metrics`), alone for the others.
fn install(metrics: &Metrics, command: &Command) -> Result<(), String> {
    match command {
        #[cfg(feature = "metrics")]
        Command::Serve { .. } | Command::Worker { .. } => {
            crate::metrics::install_with(metrics.recorder()).map(drop).map_err(|error| error.to_string())
        }
        _ => metrics.install().map_err(|error| error.to_string()),
    }
}
