//! How deeply the JSON values a run journals may nest, and reading them back at that depth.
//!
//! serde_json (and so the HTTP server) parses documents nested up to 128 arrays and objects deep
//! and refuses deeper ones to protect its stack. A value the runtime accepts is journaled inside
//! a few more levels of wrapping (`{"hook_received":{"op":3,"payload":…}}`), so reading the
//! journal back with the same limit would fail for a payload the server had just accepted. So:
//!
//! - every value a run takes in (a tool input, a hook payload, a step result, an output) may nest
//!   at most [`MAX_DEPTH`] levels, and one nested deeper is refused with a clear error where it
//!   enters ([`check`]);
//! - stores read entries with [`from_str`], which lifts serde_json's limit for text nested at most
//!   [`MAX_DEPTH`] plus the journal's own wrapping, and keeps it for anything deeper (a damaged
//!   file), so no input can exhaust the stack.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The deepest nesting of arrays and objects a journaled value may have: as deep as serde_json
/// parses by default, so any JSON document a standard parser accepts can be delivered.
pub const MAX_DEPTH: usize = 128;

/// The most levels the journal's own structures add around a value (an entry's tag, its fields,
/// a step outcome's tag and field), with room to spare.
const WRAPPING: usize = 8;

/// A value nested deeper than [`MAX_DEPTH`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} is nested {depth} levels deep, deeper than the {MAX_DEPTH} levels the journal keeps; flatten it \
     (or keep it elsewhere and pass a reference)"
)]
pub struct TooDeep {
    /// What was too deep, such as "the hook payload".
    pub what: String,
    /// How deep it is, counted up to [`MAX_DEPTH`] + 1.
    pub depth: usize,
}

/// How deeply `value` nests arrays and objects (a scalar is 0), counting no further than `limit + 1`.
/// Recursive, but never more than `limit + 1` calls deep: the walk stops as soon as it passes the
/// limit, so a value of any depth is measured on a bounded stack, and without allocating (every
/// step result is measured, and a heap stack was two allocations of each).
pub fn depth(value: &Value, limit: usize) -> usize {
    match value {
        Value::Array(items) => deepest(items.iter(), 1, limit),
        Value::Object(fields) => deepest(fields.values(), 1, limit),
        _ => 0,
    }
}

/// How deeply the `children` of a container at nesting `level` reach (the container's own level
/// when none nests further), counting no further than `limit + 1`.
fn deepest<'a>(children: impl Iterator<Item = &'a Value>, level: usize, limit: usize) -> usize {
    let mut found = level;
    for child in children {
        if found > limit {
            break;
        }
        // A scalar adds no level: only arrays and objects are walked into.
        let reached = match child {
            Value::Array(items) => deepest(items.iter(), level + 1, limit),
            Value::Object(fields) => deepest(fields.values(), level + 1, limit),
            _ => continue,
        };
        found = found.max(reached);
    }
    found
}

/// Refuses `value` if it nests deeper than [`MAX_DEPTH`]; `what` names it in the error.
pub fn check(value: &Value, what: impl FnOnce() -> String) -> Result<(), TooDeep> {
    match depth(value, MAX_DEPTH) {
        depth if depth > MAX_DEPTH => Err(TooDeep { what: what(), depth }),
        _ => Ok(()),
    }
}

/// Refuses JSON `text` if it nests deeper than [`MAX_DEPTH`], as [`check`] refuses a value.
pub fn check_text(text: &str, what: impl FnOnce() -> String) -> Result<(), TooDeep> {
    match text_depth(text) {
        depth if depth > MAX_DEPTH => Err(TooDeep { what: what(), depth: depth.min(MAX_DEPTH + 1) }),
        _ => Ok(()),
    }
}

/// Decodes JSON text the runtime wrote: with serde_json's usual depth limit first (the fast path),
/// and, for text that hits it but nests no deeper than a journaled value can, without it.
pub fn from_str<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    match serde_json::from_str(text) {
        Err(error) if is_recursion_limit(&error) && fits(text) => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            deserializer.disable_recursion_limit();
            let value = T::deserialize(&mut deserializer)?;
            deserializer.end()?;
            Ok(value)
        }
        result => result,
    }
}

/// [`from_str`] for bytes the runtime wrote as UTF-8 JSON.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => from_str(text),
        // Not UTF-8, so not JSON: let serde_json say where it breaks.
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// Whether JSON text nests no deeper than a journaled value in the journal's wrapping can, so
/// [`from_str`] reads it back: stores refuse to write anything deeper.
pub fn fits(text: &str) -> bool {
    text_depth(text) <= MAX_DEPTH + WRAPPING
}

fn is_recursion_limit(error: &serde_json::Error) -> bool {
    error.to_string().starts_with("recursion limit exceeded")
}

/// The deepest nesting of `[` and `{` in JSON text, skipping string contents.
fn text_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(depth: usize) -> Value {
        (1..depth).fold(json!([]), |inner, _| json!({ "k": [inner] }))
    }

    #[test]
    fn depth_counts_arrays_and_objects_and_stops_past_the_limit() {
        assert_eq!(depth(&json!(1), 10), 0);
        assert_eq!(depth(&json!([1, {"a": []}]), 10), 3);
        assert_eq!(depth(&nested(50), 10), 11, "stops counting past the limit");
        assert!(check(&nested(64), || "x".into()).is_ok());
        let error = check(&nested(100), || "the payload".into()).unwrap_err();
        assert!(error.to_string().starts_with("the payload is nested 129 levels deep"), "{error}");
    }

    #[test]
    fn text_nested_as_deep_as_a_journaled_value_reads_back() {
        let wrapped =
            json!({ "hook_received": { "op": 1, "payload": (1..MAX_DEPTH).fold(json!([]), |v, _| json!([v])) } });
        let text = serde_json::to_string(&wrapped).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_err(), "serde_json alone refuses it");
        assert_eq!(from_str::<Value>(&text).unwrap(), wrapped);
        let hostile = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(from_str::<Value>(&hostile).is_err(), "deeper text keeps the limit");
        assert_eq!(text_depth(r#"{"a":"[[[\"{{"}"#), 1, "brackets in strings do not count");
    }
}
