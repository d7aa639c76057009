//! Decoding a JSON value into a type, naming the field at fault when it does not fit.
//!
//! Tool input and hook payloads are decoded from a [`Value`] once for each type that takes them,
//! so what this costs is paid at compile time for every tool of a crate. It walks the value's
//! objects and arrays itself, keeping the path as it goes, and hands scalars to serde_json's
//! `&Value` deserializer: the code compiled for each type is the type's own `visit_map` and little
//! else. (`serde_path_to_error` wraps every visitor instead, which compiles its wrappers again
//! for each type, and serde_json's own deserializer also compiles a sequence form of each struct.)

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Error, Value};

/// Why a value did not decode, and where: `field` is the path of the innermost value at fault
/// (`lines[0].sku`), `None` for the value itself.
#[derive(Debug)]
pub struct Refusal {
    /// What serde said was wrong.
    pub error: Error,
    /// The path of the value at fault, or `None` at the top.
    pub field: Option<String>,
}

/// Decodes `value` into `T`. Structs decode from objects only (not from arrays, which serde_json
/// also takes), as a tool's input and a hook's payload are described to their callers.
pub fn decode<'de, T: serde::Deserialize<'de>>(value: &'de Value) -> Result<T, Refusal> {
    let fault = Fault::default();
    match T::deserialize(At { value, path: Path::Root, fault: &fault }) {
        Ok(decoded) => Ok(decoded),
        Err(error) => Err(fault.refusal(error)),
    }
}

/// The path of the innermost value at fault, once an error has passed it on its way up.
#[derive(Default)]
struct Fault(RefCell<Option<String>>);

impl Fault {
    fn refusal(self, error: Error) -> Refusal {
        Refusal { error, field: self.0.into_inner() }
    }
}

/// Where a value sits in the whole: a chain of keys and indices back to the top.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// A value at `path`. The first error on the way back up records the innermost path.
#[derive(Clone, Copy)]
struct At<'de, 'a> {
    value: &'de Value,
    path: Path<'a>,
    fault: &'a Fault,
}

impl At<'_, '_> {
    /// Records this value's path as the one at fault, unless one inside it already was.
    fn blame(&self, error: Error) -> Error {
        let mut fault = self.fault.0.borrow_mut();
        if fault.is_none() && !matches!(self.path, Path::Root) {
            *fault = Some(self.path.to_string());
        }
        error
    }
}

/// What a visitor returned, its error blamed on `at`. A `match` rather than `map_err`, which would
/// be compiled again for each visitor.
fn blamed<T>(at: At<'_, '_>, result: Result<T, Error>) -> Result<T, Error> {
    match result {
        Ok(value) => Ok(value),
        Err(error) => Err(at.blame(error)),
    }
}

/// Forwards to serde_json's `&Value` deserializer: scalars have no inside to track.
macro_rules! forward {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            blamed(self, self.value.$method(visitor))
        }
    )*};
}

impl<'de> Deserializer<'de> for At<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(_) => self.deserialize_struct("", &[], visitor),
            Value::Array(_) => self.deserialize_seq(visitor),
            _ => blamed(self, self.value.deserialize_any(visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let Value::Array(array) = self.value else {
            return Err(self.blame(de::Error::invalid_type(unexpected(self.value), &visitor)));
        };
        let mut items = array.iter().enumerate();
        match visitor.visit_seq(Items { items: &mut items, at: self }) {
            // As serde_json does: a value that takes fewer items than the array has is refused,
            // not decoded from the first ones.
            Ok(_) if items.len() > 0 => {
                Err(self.blame(de::Error::invalid_length(array.len(), &"fewer elements in array")))
            }
            Ok(value) => Ok(value),
            Err(error) => Err(self.blame(error)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_struct("", &[], visitor)
    }

    // What a struct's derived `Deserialize` calls, so the code here is compiled once for each
    // struct: it is kept to the visitor's call, and the rest is in `fields`.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let Value::Object(map) = self.value else {
            return Err(self.blame(de::Error::invalid_type(unexpected(self.value), &visitor)));
        };
        let mut entries = map.iter();
        match visitor.visit_map(Fields { entries: &mut entries, value: None, at: self }) {
            Ok(_) if entries.len() > 0 => {
                Err(self.blame(de::Error::invalid_length(map.len(), &"fewer elements in map")))
            }
            Ok(value) => Ok(value),
            Err(error) => Err(self.blame(error)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        blamed(self, self.value.deserialize_enum(name, variants, visitor))
    }

    forward! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128 deserialize_f32
        deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        blamed(self, self.value.deserialize_unit_struct(name, visitor))
    }
}

/// What `value` is, as serde's errors name it.
fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(bool) => de::Unexpected::Bool(*bool),
        Value::Number(number) => match (number.as_u64(), number.as_i64(), number.as_f64()) {
            (Some(unsigned), _, _) => de::Unexpected::Unsigned(unsigned),
            (None, Some(signed), _) => de::Unexpected::Signed(signed),
            (None, None, Some(float)) => de::Unexpected::Float(float),
            (None, None, None) => de::Unexpected::Other("number"),
        },
        Value::String(string) => de::Unexpected::Str(string),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// An object's fields, each value at its key's path.
struct Fields<'de, 'a> {
    entries: &'a mut serde_json::map::Iter<'de>,
    value: Option<(&'de str, &'de Value)>,
    at: At<'de, 'a>,
}

impl<'de> MapAccess<'de> for Fields<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(key) = self.next_key() else { return Ok(None) };
        match seed.deserialize(de::value::BorrowedStrDeserializer::new(key)) {
            Ok(key) => Ok(Some(key)),
            Err(error) => Err(error),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        let (key, value) = self.next_value()?;
        seed.deserialize(At { value, path: Path::Key(&self.at.path, key), fault: self.at.fault })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

impl<'de> Fields<'de, '_> {
    fn next_key(&mut self) -> Option<&'de str> {
        let (key, value) = self.entries.next()?;
        self.value = Some((key, value));
        Some(key)
    }

    fn next_value(&mut self) -> Result<(&'de str, &'de Value), Error> {
        self.value.take().ok_or_else(|| de::Error::custom("a value was asked for before its key"))
    }
}

/// An array's items, each at its index's path.
struct Items<'de, 'a> {
    items: &'a mut std::iter::Enumerate<std::slice::Iter<'de, Value>>,
    at: At<'de, 'a>,
}

impl<'de> SeqAccess<'de> for Items<'de, '_> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Error> {
        let Some((index, value)) = self.items.next() else { return Ok(None) };
        match seed.deserialize(At { value, path: Path::Index(&self.at.path, index), fault: self.at.fault }) {
            Ok(item) => Ok(Some(item)),
            Err(error) => Err(error),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// What kind of JSON value `value` is, as error messages name it: `"an array"`, `"null"`, ...
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::decode;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Order {
        id: u32,
        lines: Vec<Line>,
        note: Option<String>,
        #[serde(default)]
        tags: BTreeMap<String, u8>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Line {
        sku: String,
        quantity: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Shape {
        Circle { radius: f64 },
        Square { side: f64 },
    }

    #[test]
    fn a_value_that_fits_decodes_as_serde_json_decodes_it() {
        let value = json!({"id": 7, "lines": [{"sku": "a", "quantity": 2}], "note": null, "tags": {"x": 1}});
        let order: Order = decode(&value).unwrap();
        assert_eq!(order, serde_json::from_value(value).unwrap());
        let shape: Shape = decode(&json!({"kind": "square", "side": 2.0})).unwrap();
        assert_eq!(shape, Shape::Square { side: 2.0 });
        let any: serde_json::Value = decode(&json!({"a": [1, {"b": null}]})).unwrap();
        assert_eq!(any, json!({"a": [1, {"b": null}]}));
    }

    #[test]
    fn a_value_that_does_not_fit_names_the_innermost_field_at_fault() {
        let cases = [
            (json!({"id": 7, "lines": [{"sku": "a", "quantity": 2}, {"sku": 3, "quantity": 1}]}), Some("lines[1].sku")),
            (json!({"id": "seven", "lines": []}), Some("id")),
            (json!({"id": 7, "lines": [{"sku": "a"}]}), Some("lines[0]")),
            (json!({"id": 7, "lines": [], "tags": {"x": 300}}), Some("tags.x")),
            (json!({"lines": []}), None),
            (json!([7, []]), None),
        ];
        for (value, field) in cases {
            let refusal = decode::<Order>(&value).unwrap_err();
            assert_eq!(refusal.field.as_deref(), field, "{value}: {}", refusal.error);
        }
        let refusal = decode::<Order>(&json!({"id": 7, "lines": "none"})).unwrap_err();
        assert_eq!(refusal.error.to_string(), "invalid type: string \"none\", expected a sequence");
        // Nothing is dropped: a value that takes fewer items than it is given is refused, as
        // serde_json refuses it.
        let refusal = decode::<(u8, u8)>(&json!([1, 2, 3])).unwrap_err();
        assert_eq!(
            refusal.error.to_string(),
            serde_json::from_value::<(u8, u8)>(json!([1, 2, 3])).unwrap_err().to_string()
        );
        let pair: (u8, u8) = decode(&json!([1, 2])).unwrap();
        assert_eq!(pair, (1, 2));
    }
}
