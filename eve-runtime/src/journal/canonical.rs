//! The canonical JSON encoding that operation input hashes are taken over.
//!
//! A step's arguments are hashed so that replay can tell whether the body asks for the same call
//! as the journal recorded. The hash must not depend on anything but the arguments' contents, yet
//! `serde_json::to_vec` writes a `HashMap` or `HashSet` in the order of its per-instance random
//! hasher, so the same map hashes differently in every process. This encoding is compact JSON,
//! byte for byte what `serde_json::to_vec` writes, except that the entries of every map are sorted
//! by their encoded keys. Values without maps (structs, sequences, scalars) encode exactly as
//! before, so hashes journaled before this encoding existed still match.
//!
//! The bytes are also what a retried step deserializes its arguments from, so they must stay
//! valid JSON that reads back into the same type: sorting map entries keeps that true.
//!
//! A `HashSet` serializes as a sequence, which cannot be told from a `Vec` whose order matters,
//! so it is not sorted: a sequence's order is part of the call. Step arguments use a `BTreeSet`
//! (the `#[step]` macro refuses a `HashSet` argument and says so).

use std::cell::RefCell;

use serde::ser::{self, Serialize, SerializeMap as _};
use serde_json::Error;

/// `value` as canonical JSON: compact, with the entries of every map sorted by key.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(64);
    value.serialize(Canonical { out: &mut out })?;
    Ok(out)
}

/// The largest buffer [`with_encoded`] keeps: one huge argument should not stay allocated for good.
const KEPT: usize = 16 * 1024;

thread_local! {
    /// The buffer [`with_encoded`] encodes into on this thread.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Encodes `value` as [`to_vec`] does, into a buffer this thread keeps, and hands the bytes to
/// `use_`: a step call hashes its arguments, and copies them only if it will run (for its
/// retries, inline when they are small), so encoding them need not allocate.
pub(crate) fn with_encoded<T, R>(value: &T, use_: impl FnOnce(&[u8]) -> R) -> Result<R, Error>
where
    T: Serialize + ?Sized,
{
    BUFFER.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            value.serialize(Canonical { out: &mut out })?;
            let used = use_(&out);
            if out.capacity() > KEPT {
                *out = Vec::new();
            }
            Ok(used)
        }
        // Encoding or using the bytes started another encoding on this thread (a `Serialize` of
        // the user's that calls a step, say): that one gets a buffer of its own.
        Err(_) => to_vec(value).map(|bytes| use_(&bytes)),
    })
}

/// Writes one value. Scalars are handed to serde_json, so numbers and strings are written exactly
/// as it writes them; compound values are framed here so their elements are written canonically.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
}

impl Canonical<'_> {
    fn json(&mut self) -> serde_json::Serializer<&mut Vec<u8>> {
        serde_json::Serializer::new(&mut *self.out)
    }

    fn str(&mut self, text: &str) -> Result<(), Error> {
        ser::Serializer::serialize_str(&mut self.json(), text)
    }

    /// Opens `{"variant":` for the externally tagged enum variants.
    fn open_variant(&mut self, variant: &str) -> Result<(), Error> {
        self.out.push(b'{');
        self.str(variant)?;
        self.out.push(b':');
        Ok(())
    }
}

/// Forwards a scalar to serde_json's own serializer.
macro_rules! scalar {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method(mut self, value: $ty) -> Result<(), Error> {
            ser::Serializer::$method(&mut self.json(), value)
        }
    )*};
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Struct<'a>;

    scalar!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }

    fn serialize_unit_variant(mut self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant)?;
        value.serialize(Canonical { out: &mut *self.out })?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, Error> {
        self.out.push(b'[');
        Ok(Seq { out: self.out, first: true, close: b"]" })
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, Error> {
        self.open_variant(variant)?;
        self.out.push(b'[');
        Ok(Seq { out: self.out, first: true, close: b"]}" })
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Map<'a>, Error> {
        Ok(Map { out: self.out, entries: Vec::new(), key: None })
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Struct<'a>, Error> {
        self.out.push(b'{');
        Ok(Struct { out: self.out, first: true, close: b"}" })
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Struct<'a>, Error> {
        self.open_variant(variant)?;
        self.out.push(b'{');
        Ok(Struct { out: self.out, first: true, close: b"}}" })
    }
}

/// The elements of a sequence, tuple or tuple variant, in their order.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    close: &'static [u8],
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        value.serialize(Canonical { out: &mut *self.out })
    }

    fn close(self) -> Result<(), Error> {
        self.out.extend_from_slice(self.close);
        Ok(())
    }
}

macro_rules! seq_impl {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

seq_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// The fields of a struct or struct variant, in declaration order (a struct's order is fixed by
/// its type, so it needs no sorting, and keeping it keeps older hashes valid).
struct Struct<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    close: &'static [u8],
}

impl Struct<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        Canonical { out: &mut *self.out }.str(key)?;
        self.out.push(b':');
        value.serialize(Canonical { out: &mut *self.out })
    }
}

macro_rules! struct_impl {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Struct<'_> {
            type Ok = ();
            type Error = Error;

            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), Error> {
                self.out.extend_from_slice(self.close);
                Ok(())
            }
        }
    )*};
}

struct_impl!(SerializeStruct, SerializeStructVariant);

/// A map's entries, each encoded on its own, written sorted by encoded key when the map ends.
struct Map<'a> {
    out: &'a mut Vec<u8>,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    key: Option<Vec<u8>>,
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(map_key(key)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self.key.take().ok_or_else(|| ser::Error::custom("a map value was given before its key"))?;
        self.entries.push((key, to_vec(value)?));
        Ok(())
    }

    fn end(mut self) -> Result<(), Error> {
        // A stable sort: a type that writes a key twice keeps its entries in their order.
        self.entries.sort_by(|(left, _), (right, _)| left.cmp(right));
        self.out.push(b'{');
        for (index, (key, value)) in self.entries.iter().enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(key);
            self.out.push(b':');
            self.out.extend_from_slice(value);
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// A map key exactly as serde_json writes it (a string; numbers and booleans quoted), taken from
/// serde_json itself: the key of a one-entry map, without the map's opening brace.
fn map_key<T: Serialize + ?Sized>(key: &T) -> Result<Vec<u8>, Error> {
    let mut buffer = Vec::with_capacity(16);
    let mut serializer = serde_json::Serializer::new(&mut buffer);
    // The map is never ended, so no closing brace is written after the key.
    ser::Serializer::serialize_map(&mut serializer, Some(1))?.serialize_key(key)?;
    buffer.remove(0);
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::json;

    use super::{BUFFER, KEPT, to_vec, with_encoded};

    #[derive(Serialize)]
    struct Order {
        zone: &'static str,
        amount: u64,
        tags: Vec<&'static str>,
        note: Option<String>,
        kind: Kind,
    }

    #[derive(Serialize)]
    enum Kind {
        Unit,
        Tuple(u8, i64),
        Newtype(f64),
        Struct { b: bool, a: char },
    }

    /// Values without maps encode exactly as serde_json writes them, so older hashes stay valid.
    #[test]
    fn map_free_values_encode_as_serde_json_does() {
        let kinds = [Kind::Unit, Kind::Tuple(7, -3), Kind::Newtype(1.5), Kind::Struct { b: true, a: 'é' }];
        for kind in kinds {
            let order = Order { zone: "eu \"west\"\n", amount: u64::MAX, tags: vec!["a", "ü"], note: None, kind };
            assert_eq!(to_vec(&order).unwrap(), serde_json::to_vec(&order).unwrap());
        }
        let values = [json!(null), json!([1, 2.5, -0.0, "x", [true, false], []]), json!(f64::NAN), json!(i64::MIN)];
        for value in values {
            assert_eq!(to_vec(&value).unwrap(), serde_json::to_vec(&value).unwrap());
        }
        assert_eq!(to_vec(&(1u8, "two", ())).unwrap(), serde_json::to_vec(&(1u8, "two", ())).unwrap());
        assert_eq!(to_vec(&b"bytes"[..]).unwrap(), serde_json::to_vec(&b"bytes"[..]).unwrap());
    }

    /// Maps encode with sorted keys whatever their iteration order, as a `BTreeMap` does.
    #[test]
    fn maps_and_sets_encode_in_one_order() {
        let map: HashMap<String, u32> = (0..64).map(|n| (format!("key-{n}"), n)).collect();
        let sorted: BTreeMap<String, u32> = map.clone().into_iter().collect();
        assert_eq!(to_vec(&map).unwrap(), serde_json::to_vec(&sorted).unwrap());
        let numbers: HashMap<u32, Vec<HashMap<String, bool>>> =
            (0..16).map(|n| (n, vec![[("b".to_owned(), true), ("a".to_owned(), false)].into()])).collect();
        let text = String::from_utf8(to_vec(&numbers).unwrap()).unwrap();
        assert!(text.starts_with(r#"{"0":[{"a":false,"b":true}],"1":"#), "{text}");
        let back: HashMap<u32, Vec<HashMap<String, bool>>> =
            serde_json::from_slice(&to_vec(&numbers).unwrap()).unwrap();
        assert_eq!(back, numbers, "the canonical bytes read back into the same value");
    }

    /// A value that encodes another while it is being encoded, as a `Serialize` that calls a
    /// step would.
    struct Nested(u64);

    impl Serialize for Nested {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let inner = with_encoded(&json!({ "b": 1, "a": self.0 }), <[u8]>::to_vec).unwrap();
            serializer.serialize_str(std::str::from_utf8(&inner).unwrap())
        }
    }

    #[test]
    fn the_reused_buffer_encodes_as_to_vec_and_keeps_no_large_one() {
        let map: HashMap<&str, u64> = (0..50).map(|i| (["a", "b", "c", "d", "e"][i % 5], i as u64)).collect();
        assert_eq!(with_encoded(&map, <[u8]>::to_vec).unwrap(), to_vec(&map).unwrap());
        assert_eq!(with_encoded(&json!([1, "two"]), <[u8]>::to_vec).unwrap(), br#"[1,"two"]"#);
        assert_eq!(with_encoded(&Nested(7), <[u8]>::to_vec).unwrap(), to_vec(&Nested(7)).unwrap());
        assert_eq!(to_vec(&Nested(7)).unwrap(), br#""{\"a\":7,\"b\":1}""#);
        let huge = "x".repeat(KEPT * 2);
        assert_eq!(with_encoded(&huge, <[u8]>::len).unwrap(), huge.len() + 2);
        assert!(BUFFER.with(|buffer| buffer.borrow().capacity()) <= KEPT, "a large buffer is let go");
    }
}
