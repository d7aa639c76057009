//! Metrics: what the runtime and its parts count and time, recorded through the [`metrics`]
//! facade into whichever recorder the process installs (the host's `serve` and `worker` install a
//! Prometheus one and serve it at `/metrics`).
//!
//! Nothing is recorded until [`enable`] is called, after a recorder is installed. Until then each
//! place that records costs one load of a flag: the facade's macros build a key (a vector of
//! labels) on every call even when no recorder listens, which a step, the hot path, should not
//! pay. Once enabled, a step records through handles made on its first attempt, and a commit
//! through handles made once, so neither looks up a key either.
//!
//! # The runtime's metrics
//!
//! | name | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `eve_runs_started_total` | counter | `tool` | runs created by this process (started, handed to workers, or started by a run) |
//! | `eve_runs_finished_total` | counter | `tool`, `outcome` | runs this process ended: `completed`, `failed` or `cancelled` |
//! | `eve_runs_active` | gauge | | runs an executor advances in this process now |
//! | `eve_runs_parked` | gauge | | unfinished runs waiting on durable waits only (a store this process owns; see below) |
//! | `eve_step_attempts_total` | counter | `step` | attempts started |
//! | `eve_step_retries_total` | counter | `step` | failed attempts that will be tried again |
//! | `eve_step_duration_seconds` | histogram | `step` | how long each attempt ran, however it ended |
//! | `eve_tool_call_duration_seconds` | histogram | `tool`, `outcome` | plain tool calls ([`tool_called`]): `ok` or `error` |
//! | `eve_store_commit_duration_seconds` | histogram | | how long a run waited for an append to be durable |
//! | `eve_store_commit_entries` | histogram | | the entries each of those appends wrote |
//! | `eve_inbox_depth` | histogram | | the deliveries a run found in its inbox each time it read it |
//!
//! Parts built on the core add their own ([`Metric`] lists them all, for a recorder's help text).
//!
//! # What the gauges mean, and why they are right after a restart
//!
//! Neither gauge is counted up and down as runs come and go, which would drift as a process
//! restarts or a count is missed. `eve_runs_active` is the size of the runtime's own table of
//! active runs, set whenever the table changes. `eve_runs_parked` is the store's unfinished runs
//! less the active ones, where the unfinished runs are counted by
//! [`Runtime::recover`](crate::Runtime::recover) from the store and then follow the runs this
//! process creates and ends. That holds on a store this process owns (SQLite, memory), which no
//! one else changes. On a shared store (Postgres) other workers start and end runs too, so a
//! worker does not report `eve_runs_parked`: count the parked runs in the database
//! (`runs --status parked`).
//!
//! # Labels
//!
//! Every label's values are bounded by the binary: tool and step names, outcomes. Run ids, inputs
//! and principals are never labels.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use ::metrics::{Counter, Histogram, counter, gauge, histogram};

/// Whether eve records its metrics; see [`enable`].
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Starts recording eve's metrics into the process's global recorder and describes each
/// [`Metric`] to it. Call it once the recorder is installed: handles made before would record
/// nowhere. `eve_tools::metrics::install` installs a Prometheus recorder and calls this.
///
/// ```
/// // A recorder of your own (here the facade's no-op one), then eve's metrics into it.
/// metrics::set_global_recorder(metrics::NoopRecorder).unwrap();
/// eve_tools::metrics::enable();
/// assert!(eve_tools::metrics::enabled());
/// ```
pub fn enable() {
    for metric in inventory::iter::<Metric> {
        metric.describe();
    }
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called: parts built on the core record only then.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A metric's name, kind and help text, submitted with `inventory::submit!` by the crate that
/// records it, so that [`enable`] describes every metric of the binary to the recorder. A part
/// records its own metrics through the facade, and only while [`enabled`]:
///
/// ```
/// use eve_tools::metrics::{Metric, enabled};
///
/// const REPORTS_SENT: &str = "acme_reports_sent_total";
/// inventory::submit! { Metric::counter(REPORTS_SENT, "Reports sent, by format.") }
///
/// fn report_sent(format: &'static str) {
///     if enabled() {
///         metrics::counter!(REPORTS_SENT, "format" => format).increment(1);
///     }
/// }
/// # report_sent("pdf");
/// ```
#[derive(Debug)]
pub struct Metric {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

/// What kind of metric a [`Metric`] is.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Metric {
    /// A counter (its name ends in `_total`).
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Metric { name, kind: Kind::Counter, help }
    }

    /// A gauge.
    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Metric { name, kind: Kind::Gauge, help }
    }

    /// A histogram (its name ends in its unit, `_seconds`, or names what it counts).
    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Metric { name, kind: Kind::Histogram, help }
    }

    /// The metric's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Gives the recorder the metric's help text. The unit is in the name, as Prometheus wants it,
    /// so none is given: an exporter would append it a second time.
    fn describe(&self) {
        match self.kind {
            Kind::Counter => ::metrics::describe_counter!(self.name, self.help),
            Kind::Gauge => ::metrics::describe_gauge!(self.name, self.help),
            Kind::Histogram => ::metrics::describe_histogram!(self.name, self.help),
        }
    }
}

inventory::collect!(Metric);

/// `eve_runs_started_total`.
pub const RUNS_STARTED: &str = "eve_runs_started_total";
/// `eve_runs_finished_total`.
pub const RUNS_FINISHED: &str = "eve_runs_finished_total";
/// `eve_runs_active`.
pub const RUNS_ACTIVE: &str = "eve_runs_active";
/// `eve_runs_parked`.
pub const RUNS_PARKED: &str = "eve_runs_parked";
/// `eve_step_attempts_total`.
pub const STEP_ATTEMPTS: &str = "eve_step_attempts_total";
/// `eve_step_retries_total`.
pub const STEP_RETRIES: &str = "eve_step_retries_total";
/// `eve_step_duration_seconds`.
pub const STEP_DURATION: &str = "eve_step_duration_seconds";
/// `eve_tool_call_duration_seconds`.
pub const TOOL_CALL_DURATION: &str = "eve_tool_call_duration_seconds";
/// `eve_store_commit_duration_seconds`.
pub const COMMIT_DURATION: &str = "eve_store_commit_duration_seconds";
/// `eve_store_commit_entries`.
pub const COMMIT_ENTRIES: &str = "eve_store_commit_entries";
/// `eve_inbox_depth`.
pub const INBOX_DEPTH: &str = "eve_inbox_depth";

inventory::submit! { Metric::counter(RUNS_STARTED, "Runs created by this process, by tool.") }
inventory::submit! { Metric::counter(RUNS_FINISHED, "Runs this process ended, by tool and outcome.") }
inventory::submit! { Metric::gauge(RUNS_ACTIVE, "Runs an executor advances in this process now.") }
inventory::submit! { Metric::gauge(RUNS_PARKED, "Unfinished runs waiting on durable waits only (owned stores).") }
inventory::submit! { Metric::counter(STEP_ATTEMPTS, "Step attempts started, by step.") }
inventory::submit! { Metric::counter(STEP_RETRIES, "Failed step attempts that will be tried again, by step.") }
inventory::submit! { Metric::histogram(STEP_DURATION, "How long each step attempt ran, by step.") }
inventory::submit! { Metric::histogram(TOOL_CALL_DURATION, "How long plain tool calls took, by tool and outcome.") }
inventory::submit! { Metric::histogram(COMMIT_DURATION, "How long a run waited for an append to be durable.") }
inventory::submit! { Metric::histogram(COMMIT_ENTRIES, "Journal entries written by each append.") }
inventory::submit! { Metric::histogram(INBOX_DEPTH, "Deliveries a run found in its inbox each time it read it.") }

/// The handles a step records through, made once per step on its first attempt after [`enable`].
pub(crate) struct StepHandles(OnceLock<StepRecorders>);

/// A step's counters and histogram.
pub(crate) struct StepRecorders {
    pub attempts: Counter,
    pub retries: Counter,
    pub duration: Histogram,
}

impl StepHandles {
    /// No handles yet.
    pub(crate) const fn new() -> Self {
        StepHandles(OnceLock::new())
    }

    /// The handles of the step named `step`, or `None` while metrics are off.
    #[inline]
    pub(crate) fn get(&self, step: &'static str) -> Option<&StepRecorders> {
        if !enabled() {
            return None;
        }
        Some(self.0.get_or_init(|| StepRecorders {
            attempts: counter!(STEP_ATTEMPTS, "step" => step),
            retries: counter!(STEP_RETRIES, "step" => step),
            duration: histogram!(STEP_DURATION, "step" => step),
        }))
    }
}

impl std::fmt::Debug for StepHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "StepHandles(made)" } else { "StepHandles(none)" })
    }
}

/// Counts a run of `tool` created by this process.
pub(crate) fn run_started(tool: impl Into<::metrics::SharedString>) {
    if enabled() {
        counter!(RUNS_STARTED, "tool" => tool).increment(1);
    }
}

/// Counts a run this process ended with `outcome` (`completed`, `failed` or `cancelled`).
pub(crate) fn run_finished(tool: &'static str, outcome: &'static str) {
    if enabled() {
        counter!(RUNS_FINISHED, "tool" => tool, "outcome" => outcome).increment(1);
    }
}

/// Times a call of the plain tool `tool` that ended `ok` or with an `error`: the runtime's own
/// ([`Runtime::call_tool`](crate::Runtime::call_tool)), and those a part makes itself (a
/// session's model step runs the plain tools the model called).
pub fn tool_called(tool: &'static str, ok: bool, took: Duration) {
    if enabled() {
        let outcome = if ok { "ok" } else { "error" };
        histogram!(TOOL_CALL_DURATION, "tool" => tool, "outcome" => outcome).record(took);
    }
}

/// The handles of the metrics without labels that a step may record, made once: a chain of steps
/// commits once a step, and looking its two histograms up by key each time cost the step more
/// than recording into them.
struct Unlabelled {
    commit_duration: Histogram,
    commit_entries: Histogram,
    inbox_depth: Histogram,
}

/// The handles of [`Unlabelled`], made on first use once enabled (the recorder is installed by then).
fn unlabelled() -> &'static Unlabelled {
    static HANDLES: OnceLock<Unlabelled> = OnceLock::new();
    HANDLES.get_or_init(|| Unlabelled {
        commit_duration: histogram!(COMMIT_DURATION),
        commit_entries: histogram!(COMMIT_ENTRIES),
        inbox_depth: histogram!(INBOX_DEPTH),
    })
}

/// Records an append of `entries` entries that took `took` to be durable. Called only while
/// enabled: the caller reads the clock only then.
pub(crate) fn committed(entries: usize, took: Duration) {
    let handles = unlabelled();
    handles.commit_duration.record(took);
    handles.commit_entries.record(entries as f64);
}

/// Records a read of a run's inbox that found `deliveries`.
pub(crate) fn inbox_read(deliveries: usize) {
    if enabled() {
        unlabelled().inbox_depth.record(deliveries as f64);
    }
}

/// The gauges of runs: `eve_runs_active` from the runtime's table of active runs, and
/// `eve_runs_parked` from the unfinished runs of a store this process owns; see the module
/// documentation for why they are set from the runtime's state and not counted up and down.
#[derive(Debug)]
pub(crate) struct RunGauges {
    /// Whether this process alone changes the store, so that it knows its unfinished runs.
    owned: bool,
    /// The store's unfinished runs: counted at recovery, then following this process's runs.
    unfinished: AtomicI64,
    /// The size of the runtime's table of active runs, as last set.
    active: AtomicI64,
}

impl RunGauges {
    /// The gauges of a runtime whose store others change too (`shared`) or not.
    pub(crate) fn new(shared: bool) -> Self {
        RunGauges { owned: !shared, unfinished: AtomicI64::new(0), active: AtomicI64::new(0) }
    }

    /// The store counted `unfinished` runs at recovery.
    pub(crate) fn recovered(&self, unfinished: usize) {
        self.unfinished.store(unfinished as i64, Ordering::Relaxed);
        self.set();
    }

    /// This process created a run (`1`) or ended one (`-1`).
    pub(crate) fn created(&self, by: i64) {
        self.unfinished.fetch_add(by, Ordering::Relaxed);
        self.set();
    }

    /// The runtime's table of active runs holds `active` runs now.
    pub(crate) fn active(&self, active: usize) {
        self.active.store(active as i64, Ordering::Relaxed);
        self.set();
    }

    /// Sets the gauges from what is known now.
    fn set(&self) {
        if !enabled() {
            return;
        }
        let active = self.active.load(Ordering::Relaxed);
        gauge!(RUNS_ACTIVE).set(active as f64);
        if self.owned {
            let parked = self.unfinished.load(Ordering::Relaxed) - active;
            gauge!(RUNS_PARKED).set(parked.max(0) as f64);
        }
    }
}
