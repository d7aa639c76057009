//! [`Payload`]: a JSON value in the journal, held as a tree or as the text it serializes to.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON value a journal entry carries: a [`Value`] tree, or the JSON text of a value the body
/// serialized straight from its own types.
///
/// A value written once and read rarely (a session's feed event, which the body never reads back)
/// is cheaper as text: one allocation, where a tree of `Value`s costs one for every map, key and
/// string in it, and as many again to free. Both forms serialize to the same JSON, so a store
/// writes the same text for either. A payload read back from a store is a tree.
///
/// ```
/// use eve_runtime::journal::Payload;
/// use serde_json::json;
///
/// let text = Payload::text(&json!({ "type": "turn.started" })).unwrap();
/// let tree = Payload::from(json!({ "type": "turn.started" }));
/// assert_eq!(text, tree);
/// assert_eq!(text.to_value()["type"], "turn.started");
/// ```
#[derive(Clone)]
pub struct Payload(Repr);

#[derive(Clone)]
enum Repr {
    Tree(Value),
    Text(Box<RawValue>),
}

/// A string's size at most as JSON: its quotes, and each byte escaped as `\u00XX` at worst.
pub(crate) fn string_bound(text: &str) -> usize {
    2 + 6 * text.len()
}

impl Payload {
    /// `value` serialized to JSON text.
    pub fn text<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Payload> {
        serde_json::value::to_raw_value(value).map(|text| Payload(Repr::Text(text)))
    }

    /// The value as a tree: borrowed when it is one, parsed when it is text.
    #[inline]
    pub fn to_value(&self) -> Cow<'_, Value> {
        match &self.0 {
            Repr::Tree(value) => Cow::Borrowed(value),
            // The text was written by `serde_json` from a value, so it parses (read as a store reads
            // it, so a value nested as deep as the journal keeps does too).
            Repr::Text(text) => Cow::Owned(super::depth::from_str(text.get()).unwrap_or(Value::Null)),
        }
    }

    /// The value as a tree, taken.
    #[inline]
    pub fn into_value(self) -> Value {
        match self.0 {
            Repr::Tree(value) => value,
            Repr::Text(_) => self.to_value().into_owned(),
        }
    }

    /// The value decoded as a `T`.
    #[inline]
    pub fn decode<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        match &self.0 {
            Repr::Tree(value) => T::deserialize(value),
            Repr::Text(text) => super::depth::from_str(text.get()),
        }
    }

    /// The size at most of the value as JSON, known without serializing it: the text's length, or
    /// a bound for a scalar or a string; `None` for an array or an object, which must be measured.
    pub(crate) fn json_size_bound(&self) -> Option<usize> {
        match &self.0 {
            Repr::Text(text) => Some(text.get().len()),
            // `false`, an integer, or the shortest form of a float: 24 characters at most.
            Repr::Tree(Value::Null | Value::Bool(_) | Value::Number(_)) => Some(32),
            Repr::Tree(Value::String(text)) => Some(string_bound(text)),
            Repr::Tree(Value::Array(_) | Value::Object(_)) => None,
        }
    }

    /// Refuses the value if it nests deeper than the journal keeps (see [`super::depth`]).
    #[inline]
    pub fn check_depth(&self, what: impl FnOnce() -> String) -> Result<(), super::depth::TooDeep> {
        match &self.0 {
            Repr::Tree(value) => super::depth::check(value, what),
            Repr::Text(text) => super::depth::check_text(text.get(), what),
        }
    }
}

impl From<Value> for Payload {
    #[inline]
    fn from(value: Value) -> Self {
        Payload(Repr::Tree(value))
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Tree(a), Repr::Tree(b)) => a == b,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl PartialEq<Value> for Payload {
    fn eq(&self, other: &Value) -> bool {
        *self.to_value() == *other
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Tree(value) => fmt::Debug::fmt(value, f),
            Repr::Text(text) => f.write_str(text.get()),
        }
    }
}

/// The value's JSON text, as [`Value`]'s `Display` writes it.
impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Tree(value) => fmt::Display::fmt(value, f),
            Repr::Text(text) => f.write_str(text.get()),
        }
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Tree(value) => value.serialize(serializer),
            Repr::Text(text) => text.serialize(serializer),
        }
    }
}

/// Always a tree: any deserializer can give one (a [`RawValue`] needs JSON text underneath), and a
/// payload read back is read, not kept.
impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Payload::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_and_tree_serialize_alike_and_compare_equal() {
        let value = json!({ "sequence": 3, "type": "turn.started", "data": { "turnId": "turn-1" } });
        let (text, tree) = (Payload::text(&value).unwrap(), Payload::from(value.clone()));
        assert_eq!(serde_json::to_string(&text).unwrap(), serde_json::to_string(&tree).unwrap());
        assert_eq!(serde_json::to_value(&text).unwrap(), value, "a value serializer parses the text");
        assert_eq!(text, tree);
        assert_eq!(text, value);
        assert_ne!(text, Payload::from(json!({ "sequence": 4 })));
        assert_eq!(text.to_string(), tree.to_string());
        assert_eq!(text.clone().into_value(), value);
        assert_eq!(text.decode::<Value>().unwrap(), value);
        assert_eq!(tree.decode::<Value>().unwrap(), value);
    }

    #[test]
    fn text_is_refused_as_deep_as_a_tree_and_the_deepest_kept_reads_back() {
        let deepest = (1..super::super::depth::MAX_DEPTH).fold(json!([]), |inner, _| json!([inner]));
        let deeper = json!([deepest.clone()]);
        for value in [&deepest, &deeper] {
            let (tree, text) = (Payload::from(value.clone()), Payload::text(value).unwrap());
            let what = || "the value".to_owned();
            assert_eq!(text.check_depth(what), tree.check_depth(what));
        }
        assert!(Payload::text(&deeper).unwrap().check_depth(|| "the value".to_owned()).is_err());
        let text = Payload::text(&deepest).unwrap();
        assert_eq!(text.to_value().into_owned(), deepest, "read past serde_json's own limit");
        assert_eq!(text.decode::<Value>().unwrap(), deepest);
    }

    #[test]
    fn a_payload_is_no_larger_than_a_value() {
        // Entries are moved about whole: holding text beside the tree must not grow them.
        assert_eq!(size_of::<Payload>(), size_of::<Value>());
    }

    #[test]
    fn a_payload_reads_back_as_a_tree_from_text_and_from_a_value() {
        let from_text: Payload = serde_json::from_str(r#"{"a":[1,2]}"#).unwrap();
        let from_value: Payload = serde_json::from_value(json!({ "a": [1, 2] })).unwrap();
        assert!(matches!(from_text.0, Repr::Tree(_)));
        assert!(matches!(from_value.0, Repr::Tree(_)));
        assert_eq!(from_text, from_value);
    }
}
