//! `backoff = "…"`, parsed at compile time so that a typo is a compile error, not a surprise
//! after the first failed attempt.
//!
//! Forms: `"250ms"`, `"1s"`, `"2m"`, `"1h"` (the first delay, doubling after each failure),
//! `"exponential(1s)"` (the same, spelled out) and `"fixed(1s)"` (the same delay every time).

use std::fmt;

/// A step's backoff, as the runtime's `Backoff` constructors take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// Starts at `initial_millis` and doubles: `Backoff::exponential_millis`.
    Exponential { initial_millis: u64 },
    /// The same delay between every pair of attempts: `Backoff::fixed_millis`.
    Fixed { millis: u64 },
}

/// Why a backoff does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// No digits where the number should be.
    MissingNumber,
    /// A number without a unit, such as `"250"`.
    MissingUnit,
    /// A number with a fraction, such as `"1.5s"` (write `"1500ms"`).
    Fraction,
    /// A unit other than `ms`, `s`, `m` or `h`.
    UnknownUnit(String),
    /// More milliseconds than fit in a `u64`.
    TooLarge,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::MissingNumber => f.write_str("expected a number first"),
            DurationError::MissingUnit => f.write_str("the number has no unit"),
            DurationError::Fraction => f.write_str("fractions are not supported"),
            DurationError::UnknownUnit(unit) => write!(f, "unknown unit `{unit}`"),
            DurationError::TooLarge => f.write_str("the duration is too large"),
        }
    }
}

/// Parses `"250ms"`, `"exponential(1s)"` or `"fixed(1s)"`.
pub fn parse_backoff(text: &str) -> Result<Backoff, DurationError> {
    let text = text.trim();
    if let Some(inner) = call_argument(text, "fixed") {
        return parse_millis(inner).map(|millis| Backoff::Fixed { millis });
    }
    let inner = call_argument(text, "exponential").unwrap_or(text);
    parse_millis(inner).map(|initial_millis| Backoff::Exponential { initial_millis })
}

/// The `x` of `name(x)`, if `text` has that form.
fn call_argument<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.strip_prefix(name)?.trim_start().strip_prefix('(')?.strip_suffix(')')
}

/// Parses a duration such as `"250ms"`, `"1s"`, `"2m"` or `"1h"` into milliseconds.
pub fn parse_millis(text: &str) -> Result<u64, DurationError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(DurationError::MissingNumber);
    }
    let millis_per_unit = match unit.trim_start() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "" => return Err(DurationError::MissingUnit),
        unit if unit.starts_with('.') => return Err(DurationError::Fraction),
        unit => return Err(DurationError::UnknownUnit(unit.to_owned())),
    };
    let number: u64 = digits.parse().map_err(|_| DurationError::TooLarge)?;
    number.checked_mul(millis_per_unit).ok_or(DurationError::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::{Backoff, DurationError, parse_backoff, parse_millis};

    #[test]
    fn durations_parse_to_milliseconds() {
        let cases: &[(&str, Result<u64, DurationError>)] = &[
            ("250ms", Ok(250)),
            ("1s", Ok(1_000)),
            ("2m", Ok(120_000)),
            ("1h", Ok(3_600_000)),
            ("0ms", Ok(0)),
            (" 5 s ", Ok(5_000)),
            ("1500ms", Ok(1_500)),
            ("", Err(DurationError::MissingNumber)),
            ("s", Err(DurationError::MissingNumber)),
            ("-1s", Err(DurationError::MissingNumber)),
            ("250", Err(DurationError::MissingUnit)),
            ("1.5s", Err(DurationError::Fraction)),
            ("1sec", Err(DurationError::UnknownUnit("sec".into()))),
            ("3d", Err(DurationError::UnknownUnit("d".into()))),
            ("1S", Err(DurationError::UnknownUnit("S".into()))),
            ("99999999999999999999ms", Err(DurationError::TooLarge)),
            ("18446744073709551615h", Err(DurationError::TooLarge)),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse_millis(text), expected, "parsing {text:?}");
        }
    }

    #[test]
    fn backoffs_parse_with_their_kind() {
        let cases: &[(&str, Result<Backoff, DurationError>)] = &[
            ("250ms", Ok(Backoff::Exponential { initial_millis: 250 })),
            ("exponential(2s)", Ok(Backoff::Exponential { initial_millis: 2_000 })),
            ("fixed(1s)", Ok(Backoff::Fixed { millis: 1_000 })),
            ("fixed( 3m )", Ok(Backoff::Fixed { millis: 180_000 })),
            ("fixed(1s", Err(DurationError::MissingNumber)),
            ("fixed()", Err(DurationError::MissingNumber)),
            ("linear(1s)", Err(DurationError::MissingNumber)),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse_backoff(text), expected, "parsing {text:?}");
        }
    }

    #[test]
    fn errors_read_as_lowercase_advice() {
        for error in [DurationError::MissingUnit, DurationError::UnknownUnit("d".into()), DurationError::Fraction] {
            let message = error.to_string();
            assert!(message.starts_with(char::is_lowercase) && !message.ends_with('.'), "{message}");
        }
    }
}
