//! How a run stays one trace across parking, restarts and workers, without this crate knowing
//! OpenTelemetry.
//!
//! The runtime's spans are `tracing` spans: `start` around creating a run, `run` around each
//! activation (a start, a resume from the warm cache, a replay after a restart or on another
//! worker), and `step` around each step attempt, inside its activation's `run`. An exporter (the
//! host's `otel` feature) turns them into OpenTelemetry spans. An activation a day after the start,
//! in another process, has no span in memory to be the child of, so the run's trace context is
//! journaled: [`Entry::RunStarted`](crate::journal::Entry::RunStarted) keeps a [`TraceParent`]
//! (the `start` span's, or the parent run's), and every activation's `run` span is made its child.
//!
//! Reading a span's context and setting a span's parent are the exporter's business, so the
//! exporter installs a [`Propagation`] here, once per process. Until one is, nothing is journaled
//! and no span is touched: the runtime asks once when a run starts and once per activation, never
//! per step, so a process that exports nothing pays one atomic load there and nothing on a step
//! (whose span, below the default `INFO` of most subscribers, is not even created).
//!
//! ```
//! use eve_tools::journal::TraceParent;
//! use eve_tools::trace::{self, Propagation};
//!
//! /// Journals the same made-up trace for every run, and adopts nothing.
//! struct Fixed;
//!
//! impl Propagation for Fixed {
//!     fn traceparent(&self, _span: &tracing::Span) -> Option<TraceParent> {
//!         TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
//!     }
//!
//!     fn set_parent(&self, _span: &tracing::Span, _parent: &TraceParent) {}
//! }
//!
//! static FIXED: Fixed = Fixed;
//! assert!(trace::install(&FIXED));
//! assert!(!trace::install(&FIXED), "one propagation per process");
//! ```

use std::sync::OnceLock;

use crate::journal::TraceParent;

/// Reads and sets the trace context of the runtime's spans: what an exporter (such as the host's
/// `otel` feature, over `tracing-opentelemetry`) installs with [`install`].
pub trait Propagation: Send + Sync {
    /// The trace context of `span`, as a child of it would carry it; `None` if the span is not
    /// exported (no subscriber takes it).
    fn traceparent(&self, span: &tracing::Span) -> Option<TraceParent>;

    /// Makes `parent` the parent of `span`, which has not been entered yet.
    fn set_parent(&self, span: &tracing::Span, parent: &TraceParent);
}

static PROPAGATION: OnceLock<&'static dyn Propagation> = OnceLock::new();

/// Installs the propagation the runtime journals and adopts trace contexts with, for the rest of
/// the process. Returns `false`, changing nothing, if one was installed already.
pub fn install(propagation: &'static dyn Propagation) -> bool {
    PROPAGATION.set(propagation).is_ok()
}

/// The trace context of `span`, if a propagation is installed and the span is exported.
pub(crate) fn traceparent(span: &tracing::Span) -> Option<TraceParent> {
    PROPAGATION.get()?.traceparent(span)
}

/// Makes `parent`, if any, the parent of `span`, if a propagation is installed.
pub(crate) fn set_parent(span: &tracing::Span, parent: Option<&TraceParent>) {
    if let (Some(propagation), Some(parent)) = (PROPAGATION.get(), parent) {
        propagation.set_parent(span, parent);
    }
}
