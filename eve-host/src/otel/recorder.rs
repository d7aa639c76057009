//! The `metrics` recorder that records into an OpenTelemetry meter: each counter, gauge and
//! histogram the facade registers is an instrument of the same name, its labels the attributes of
//! its measurements.
//!
//! Not `metrics-exporter-opentelemetry` (0.2.2), which does the same in as many lines but hands a
//! metric's help text to its first registration only: the SDK tells instruments apart by their
//! description too, so every later registration (a counter of another tool, or the same one made
//! again) made a second instrument of the same name, and the export carried the metric twice with
//! its count split between them.
//!
//! The invariant: a name makes one instrument, whichever registration comes first, so that the
//! SDK aggregates every registration of a name together, as Prometheus does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use ::metrics::{Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry_sdk::metrics::SdkMeterProvider;

/// Records the facade's metrics into a meter; see the [module](self).
pub(super) struct OtlpRecorder {
    meter: Meter,
    /// The meter's provider, kept so that the exporter goes on while the recorder is installed,
    /// whatever becomes of the [`Metrics`](super::Metrics) it came from: the last provider to go
    /// shuts the exporter down.
    _provider: SdkMeterProvider,
    /// Each metric's help text, by name, as the facade described it; kept, never taken, so every
    /// registration of a name builds the same instrument.
    help: RwLock<HashMap<KeyName, SharedString>>,
}

impl OtlpRecorder {
    /// A recorder into a meter of `provider`'s, in the instrumentation scope `scope`.
    pub(super) fn new(provider: &SdkMeterProvider, scope: &'static str) -> Self {
        let meter = provider.meter(scope);
        OtlpRecorder { meter, _provider: provider.clone(), help: RwLock::new(HashMap::new()) }
    }

    fn describe(&self, name: KeyName, help: SharedString) {
        self.help.write().unwrap_or_else(PoisonError::into_inner).insert(name, help);
    }

    /// The help text of `key`'s metric, empty if it was not described.
    fn help(&self, key: &Key) -> String {
        let help = self.help.read().unwrap_or_else(PoisonError::into_inner);
        help.get(key.name()).map(|help| help.to_string()).unwrap_or_default()
    }
}

/// The labels of `key` as the attributes of a measurement.
fn attributes(key: &Key) -> Vec<KeyValue> {
    key.labels().map(|label| KeyValue::new(label.key().to_owned(), label.value().to_owned())).collect()
}

impl ::metrics::Recorder for OtlpRecorder {
    fn describe_counter(&self, name: KeyName, _unit: Option<::metrics::Unit>, help: SharedString) {
        self.describe(name, help);
    }

    fn describe_gauge(&self, name: KeyName, _unit: Option<::metrics::Unit>, help: SharedString) {
        self.describe(name, help);
    }

    fn describe_histogram(&self, name: KeyName, _unit: Option<::metrics::Unit>, help: SharedString) {
        self.describe(name, help);
    }

    /// A counter's series is exported from its registration on, at 0 until it counts, as
    /// Prometheus renders it.
    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        let counter = self.meter.u64_counter(key.name().to_owned()).with_description(self.help(key)).build();
        let attributes = attributes(key);
        counter.add(0, &attributes);
        Counter::from_arc(Arc::new(OtlpCounter { counter, attributes, total: AtomicU64::new(0) }))
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        let gauge = self.meter.f64_gauge(key.name().to_owned()).with_description(self.help(key)).build();
        Gauge::from_arc(Arc::new(OtlpGauge { gauge, attributes: attributes(key), value: AtomicU64::new(0) }))
    }

    /// A histogram has the buckets Prometheus's has (see [`crate::buckets`]), or the SDK's.
    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        let mut histogram = self.meter.f64_histogram(key.name().to_owned()).with_description(self.help(key));
        if let Some(buckets) = crate::buckets::of(key.name()) {
            histogram = histogram.with_boundaries(buckets.to_vec());
        }
        Histogram::from_arc(Arc::new(OtlpHistogram { histogram: histogram.build(), attributes: attributes(key) }))
    }
}

/// A counter of one series.
struct OtlpCounter {
    counter: opentelemetry::metrics::Counter<u64>,
    attributes: Vec<KeyValue>,
    /// What it has counted, so that [`CounterFn::absolute`] can add the difference: an OTLP sum
    /// is only ever added to.
    total: AtomicU64,
}

impl CounterFn for OtlpCounter {
    fn increment(&self, value: u64) {
        self.total.fetch_add(value, Ordering::Relaxed);
        self.counter.add(value, &self.attributes);
    }

    fn absolute(&self, value: u64) {
        let before = self.total.fetch_max(value, Ordering::Relaxed);
        self.counter.add(value.saturating_sub(before), &self.attributes);
    }
}

/// A gauge of one series.
struct OtlpGauge {
    gauge: opentelemetry::metrics::Gauge<f64>,
    attributes: Vec<KeyValue>,
    /// Its value's bits, so that [`GaugeFn::increment`] has something to add to: an OTLP gauge
    /// is only ever set.
    value: AtomicU64,
}

impl OtlpGauge {
    /// Sets the value `change` makes of the current one.
    fn change(&self, change: impl Fn(f64) -> f64) {
        let mut set = 0.0;
        let _ = self.value.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            set = change(f64::from_bits(bits));
            Some(set.to_bits())
        });
        self.gauge.record(set, &self.attributes);
    }
}

impl GaugeFn for OtlpGauge {
    fn increment(&self, value: f64) {
        self.change(|current| current + value);
    }

    fn decrement(&self, value: f64) {
        self.change(|current| current - value);
    }

    fn set(&self, value: f64) {
        self.change(|_| value);
    }
}

/// A histogram of one series.
struct OtlpHistogram {
    histogram: opentelemetry::metrics::Histogram<f64>,
    attributes: Vec<KeyValue>,
}

impl HistogramFn for OtlpHistogram {
    fn record(&self, value: f64) {
        self.histogram.record(value, &self.attributes);
    }
}
