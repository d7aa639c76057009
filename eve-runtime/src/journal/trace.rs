//! The trace a run belongs to, as its first entry journals it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A W3C trace context's `traceparent` (`00-<trace id>-<parent id>-<flags>`): the span every
/// activation of a run is a child of, so that a run is one trace however often it parks, and
/// whichever process replays it.
///
/// Journaled with [`Entry::RunStarted`](super::Entry::RunStarted) when traces are exported (see
/// [`crate::trace`]); the core keeps it as text and never reads its ids. A journal keeps whatever
/// text was written, so decoding does not check it (an unreadable one only starts a new trace);
/// [`TraceParent::parse`] checks what comes from outside, such as an HTTP request's header.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TraceParent(Box<str>);

impl TraceParent {
    /// The `traceparent` in `text`, if it has version `00`'s shape: 2, 32, 16 and 2 lowercase hex
    /// digits joined by `-`, with ids that are not all zeros.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let parts: Vec<&str> = text.split('-').collect();
        let hex =
            |part: &str, len: usize| part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let nonzero = |part: &str| part.bytes().any(|b| b != b'0');
        let valid = matches!(parts.as_slice(), ["00", trace, parent, flags]
            if hex(trace, 32) && hex(parent, 16) && hex(flags, 2) && nonzero(trace) && nonzero(parent));
        valid.then(|| TraceParent(text.into()))
    }

    /// The header's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_version_00_header_with_real_ids_parses() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(good).map(|parent| parent.to_string()), Some(good.to_owned()));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }
}
