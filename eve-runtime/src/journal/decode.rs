//! Reading a journal entry back from the JSON text a store keeps.
//!
//! A replay reads every entry of its journal, and a long journal is mostly
//! [`Entry::StepCompleted`]: a run of 10,000 steps holds 10,000 of them and two other entries.
//! serde's derived decoder spends most of such an entry on its eleven strings (the tags and the
//! field names), each scanned for escapes and matched against the names it may be: about 4,300
//! instructions an entry, the largest stage of a restart (`benches/RESULTS.md`, runs AD and AG).
//!
//! The text a store reads back is almost always the text [`Entry`]'s `Serialize` wrote: fields in
//! the order they are declared, no spaces. So [`entry`] first reads a completed step in exactly
//! that form, comparing its fixed parts byte for byte and parsing only what varies: the numbers,
//! the name, the hash and the step's value (with serde_json). Any other text (another kind of
//! entry, a failed step, a name with an escape, a missing or reordered field, a space) goes to
//! the derived decoder, which also words every error. The two agree on every text the first
//! accepts, which the tests check on generated entries and on each way the form can be broken.

use std::borrow::Cow;
use std::sync::OnceLock;

use foldhash::HashSet;

use serde_json::Value;

use super::{Entry, InputHash, Op, StepOutcome};

/// Decodes one journal entry from JSON text a store wrote (see [`super::depth::from_str`]). An
/// entry of a step compiled into this binary borrows the step's name rather than copying it.
pub fn entry(text: &str) -> serde_json::Result<Entry> {
    entry_with(text, step_name)
}

/// [`entry`], with the names `step_name` knows borrowed.
fn entry_with(text: &str, step_name: impl Fn(&str) -> Option<&'static str>) -> serde_json::Result<Entry> {
    match step_completed(text, step_name) {
        Some(entry) => Ok(entry),
        None => super::depth::from_str(text),
    }
}

/// The names of the steps compiled into this binary, which a decoded entry and replay borrow.
static STEP_NAMES: OnceLock<HashSet<&'static str>> = OnceLock::new();

/// Learns the names of the steps compiled into this binary, once (the runtime tells them from its
/// registry when it is built): until then, [`entry`] copies every name.
pub(crate) fn learn_step_names(names: impl FnOnce() -> HashSet<&'static str>) {
    STEP_NAMES.get_or_init(names);
}

/// The name of a step compiled into this binary, as the step's own static string, or `None` for a
/// name no step here has (or before the names are learned). The set hashes with foldhash: every
/// step entry a store reads is looked up here.
pub(crate) fn step_name(name: &str) -> Option<&'static str> {
    STEP_NAMES.get()?.get(name).copied()
}

/// `text` as a completed step's entry if it is one in the form `Serialize` writes, with an `ok`
/// outcome; `None` for any other text, which the derived decoder then reads.
fn step_completed(text: &str, step_name: impl Fn(&str) -> Option<&'static str>) -> Option<Entry> {
    let mut text = Cursor(text);
    text.literal(r#"{"step_completed":{"op":"#)?;
    let op = text.number().and_then(|op| u32::try_from(op).ok())?;
    text.literal(r#","name":""#)?;
    let name = text.plain_string()?;
    text.literal(r#","input_hash":""#)?;
    let input_hash = text.hash()?;
    text.literal(r#"","attempt":"#)?;
    let attempt = text.number().and_then(|attempt| u32::try_from(attempt).ok())?;
    text.literal(r#","outcome":{"ok":{"value":"#)?;
    let value = text.value()?;
    text.literal("}}")?;
    let took_ms = match text.literal(r#","took_ms":"#) {
        Some(()) => Some(text.number()?),
        None => None,
    };
    text.literal("}}")?;
    if !text.0.is_empty() {
        return None;
    }
    let name = match step_name(name) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(name.to_owned()),
    };
    let outcome = StepOutcome::Ok { value: value.into() };
    Some(Entry::StepCompleted { op: Op(op), name, input_hash, attempt, outcome, took_ms })
}

/// The text not read yet.
struct Cursor<'a>(&'a str);

impl<'a> Cursor<'a> {
    /// Reads `expected` if the text starts with it.
    fn literal(&mut self, expected: &str) -> Option<()> {
        self.0 = self.0.strip_prefix(expected)?;
        Some(())
    }

    /// Reads an unsigned integer as serde_json writes one: digits, no leading zero.
    fn number(&mut self) -> Option<u64> {
        let digits = self.0.bytes().take_while(u8::is_ascii_digit).count();
        let (number, rest) = self.0.split_at(digits);
        if digits == 0 || (digits > 1 && number.starts_with('0')) {
            return None;
        }
        self.0 = rest;
        // Digits only, so this refuses nothing but a number past `u64::MAX`.
        number.parse().ok()
    }

    /// Reads the rest of a string and its closing quote, if it holds no escape or control
    /// character (which serde_json would decode or refuse).
    fn plain_string(&mut self) -> Option<&'a str> {
        let end = self.0.bytes().position(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)?;
        let (string, rest) = self.0.split_at(end);
        self.0 = rest.strip_prefix('"')?;
        Some(string)
    }

    /// Reads an input hash's 16 hex digits.
    fn hash(&mut self) -> Option<InputHash> {
        let hash = self.0.get(..16).and_then(super::hex16)?;
        self.0 = &self.0[16..];
        Some(InputHash(hash))
    }

    /// Reads one JSON value with serde_json, up to the character after it.
    fn value(&mut self) -> Option<Value> {
        let mut values = serde_json::Deserializer::from_str(self.0).into_iter::<Value>();
        let value = values.next()?.ok()?;
        self.0 = &self.0[values.byte_offset()..];
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// What a failure says when `StepCompleted`'s serialized form no longer matches the fast path.
    const FORM_CHANGED: &str = "the fast path no longer reads a completed step as `Serialize` writes it (a field of \
                                `Entry::StepCompleted` or `StepOutcome::Ok` changed?); update `step_completed` to match";

    fn known(name: &str) -> Option<&'static str> {
        (name == "billing::charge").then_some("billing::charge")
    }

    fn completed(name: &str, value: Value, took_ms: Option<u64>) -> Entry {
        let name = Cow::Owned(name.to_owned());
        let outcome = StepOutcome::Ok { value: value.into() };
        Entry::StepCompleted {
            op: Op(7),
            name,
            input_hash: InputHash(0x0123_4567_89ab_cdef),
            attempt: 2,
            outcome,
            took_ms,
        }
    }

    /// What the derived decoder makes of `text`.
    fn derived(text: &str) -> serde_json::Result<Entry> {
        super::super::depth::from_str(text)
    }

    #[test]
    fn a_completed_step_as_serialize_writes_it_is_read_without_the_derived_decoder() {
        for written in [
            completed("billing::charge", json!({"id": "ch_1", "amount": 1200, "tags": ["a", null, 1.5]}), Some(31)),
            completed("unknown::step", json!("text with \"quotes\" and \\ and ünïcode"), None),
            completed("x", json!(0), Some(u64::MAX)),
        ] {
            let text = serde_json::to_string(&written).unwrap();
            let fast = step_completed(&text, known).unwrap_or_else(|| panic!("{FORM_CHANGED}: {text}"));
            assert_eq!(fast, written);
            assert_eq!(entry_with(&text, known).unwrap(), written);
        }
    }

    #[test]
    fn a_known_step_borrows_its_name_and_another_copies_it() {
        let name = |entry: Entry| match entry {
            Entry::StepCompleted { name, .. } => name,
            other => panic!("decoded {other:?}"),
        };
        let text = serde_json::to_string(&completed("billing::charge", json!(1), None)).unwrap();
        assert!(matches!(name(entry_with(&text, known).unwrap()), Cow::Borrowed("billing::charge")));
        let text = serde_json::to_string(&completed("other::step", json!(1), None)).unwrap();
        assert!(matches!(name(entry_with(&text, known).unwrap()), Cow::Owned(name) if name == "other::step"));
    }

    #[test]
    fn any_other_form_goes_to_the_derived_decoder_which_agrees_or_refuses() {
        let good = r#"{"step_completed":{"op":7,"name":"a::b","input_hash":"0123456789abcdef","attempt":2,"outcome":{"ok":{"value":[1,{"k":"v"}]}},"took_ms":31}}"#;
        assert!(step_completed(good, known).is_some());
        let broken = [
            // Read as the derived decoder reads them, or refused by it.
            good.replace(r#""op":7"#, r#""op": 7"#),
            good.replace(r#""op":7"#, r#""op":07"#),
            good.replace(r#""op":7"#, r#""op":4294967296"#),
            good.replace(r#""op":7"#, r#""op":-7"#),
            good.replace(r#""op":7"#, r#""op":7.0"#),
            good.replace(r#""name":"a::b""#, r#""name":"a::\u0062""#),
            good.replace(r#""name":"a::b""#, "\"name\":\"a::\tb\""),
            good.replace("0123456789abcdef", "0123456789ABCDEF"),
            good.replace("0123456789abcdef", "0123456789abcde"),
            good.replace("0123456789abcdef", "0123456789abcdeg"),
            good.replace(r#""attempt":2"#, r#""attempt":99999999999"#),
            good.replace(r#","took_ms":31"#, ""),
            good.replace(r#","took_ms":31"#, r#","took_ms":null"#),
            good.replace(r#","took_ms":31"#, r#","took_ms":31,"extra":1"#),
            good.replace(r#""took_ms":31"#, r#""took_ms":18446744073709551616"#),
            good.replace(r#"{"ok":{"value":[1,{"k":"v"}]}}"#, r#"{"err":{"fatal":true,"message":"no"}}"#),
            good.replace(r#"[1,{"k":"v"}]"#, "[1,"),
            good.replace(r#"[1,{"k":"v"}]"#, "1x"),
            good.replace(r#"[1,{"k":"v"}]"#, "1 "),
            format!("{good} "),
            format!("{good}}}"),
            good[..good.len() - 1].to_owned(),
            good.replacen("step_completed", "step_retrying", 1),
        ];
        for text in &broken {
            match step_completed(text, known) {
                Some(fast) => assert_eq!(derived(text).ok(), Some(fast), "{text}"),
                None => {
                    // The derived decoder words the error, or reads what the fast path declined.
                    let _ = entry_with(text, known);
                }
            }
        }
        // Spot checks of what each side makes of a few.
        assert!(step_completed(&broken[0], known).is_none() && derived(&broken[0]).is_ok());
        assert!(entry_with(&broken[1], known).is_err(), "a leading zero is refused");
        assert!(entry_with(&broken[2], known).is_err(), "an op past u32 is refused");
        assert!(step_completed(&broken[11], known).is_some(), "took_ms may be absent");
        assert!(entry_with(&broken[16], known).is_err(), "a broken value is refused");
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            // Floats whose decimal form reads back exactly.
            (-1_000_000i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
            "\\PC{0,12}".prop_map(Value::from),
            "[\"\\\\\u{0}-\u{1f}a-z]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    fn step_entry() -> impl Strategy<Value = Entry> {
        let outcome = prop_oneof![
            4 => json_value().prop_map(|value| StepOutcome::Ok { value: value.into() }),
            1 => (any::<bool>(), "\\PC{0,10}").prop_map(|(fatal, message)| StepOutcome::Err { fatal, message }),
        ];
        let name = prop_oneof!["[a-z_:]{1,24}", "\\PC{0,12}", Just("billing::charge".to_owned())];
        (any::<u32>(), name, any::<u64>(), any::<u32>(), outcome, any::<Option<u64>>()).prop_map(
            |(op, name, hash, attempt, outcome, took_ms)| Entry::StepCompleted {
                op: Op(op),
                name: name.into(),
                input_hash: InputHash(hash),
                attempt,
                outcome,
                took_ms,
            },
        )
    }

    proptest! {
        #[test]
        fn every_completed_step_reads_back_as_written(entry_written in step_entry()) {
            let text = serde_json::to_string(&entry_written).unwrap();
            prop_assert_eq!(entry_with(&text, known).unwrap(), entry_written.clone());
            if let Entry::StepCompleted { name, outcome: StepOutcome::Ok { .. }, .. } = &entry_written
                && !name.chars().any(|c| c == '"' || c == '\\' || c < ' ')
            {
                prop_assert!(step_completed(&text, known).is_some(), "{}: {}", FORM_CHANGED, text);
            }
        }

        #[test]
        fn the_fast_path_never_reads_a_text_otherwise_than_the_derived_decoder(
            entry_written in step_entry(),
            at in any::<prop::sample::Index>(),
            byte in prop_oneof![Just(b' '), Just(b'0'), Just(b'"'), Just(b'\\'), Just(b'}'), Just(b','), any::<u8>()],
            cut in any::<bool>(),
        ) {
            let text = serde_json::to_string(&entry_written).unwrap();
            let mut bytes = text.into_bytes();
            let at = at.index(bytes.len());
            if cut { bytes.remove(at); } else { bytes.insert(at, byte); }
            if let Ok(text) = String::from_utf8(bytes)
                && let Some(fast) = step_completed(&text, known)
            {
                prop_assert_eq!(derived(&text).ok(), Some(fast), "{}", text);
            }
        }
    }
}
