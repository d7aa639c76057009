//! The buckets of eve's histograms, one table for the Prometheus recorder and the OTLP exporter,
//! so that both export a histogram with the same buckets. A histogram's name says which: its unit
//! (`_seconds`) or what it counts (`_entries`, `_depth`).

/// The buckets of every `_seconds` histogram, in seconds: a tenth of a millisecond to a minute.
const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The buckets of the histograms that count (entries in an append, deliveries in an inbox).
const COUNTS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1000.0];

/// Each suffix of a histogram's name, with the buckets of the histograms whose names end in it.
pub(crate) const BY_SUFFIX: &[(&str, &[f64])] = &[("_seconds", SECONDS), ("_entries", COUNTS), ("_depth", COUNTS)];

/// The buckets of the histogram named `name`, if its name ends in a suffix of [`BY_SUFFIX`].
#[cfg(feature = "otel")]
pub(crate) fn of(name: &str) -> Option<&'static [f64]> {
    BY_SUFFIX.iter().find(|(suffix, _)| name.ends_with(suffix)).map(|(_, buckets)| *buckets)
}
