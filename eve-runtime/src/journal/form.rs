//! Forms: questions answered with a value of several fields, as MCP elicitation shows them.
//!
//! A form's schema is the part of JSON Schema that MCP's `requestedSchema` takes, and that any
//! channel can render as a plain form: an object of flat fields, each
//!
//! - a string (`minLength`, `maxLength`, `format` one of `email`, `uri`, `date`, `date-time`),
//! - a number or an integer (`minimum`, `maximum`),
//! - a boolean,
//! - a choice of one string: `enum`, or `oneOf` of `{const, title}` (titled, SEP-1330), or
//!   `enum` with `enumNames` (the older titled form),
//! - a choice of several: an `array` whose `items` are such a choice (`enum`, or `anyOf` of
//!   `{const, title}`), with `minItems` and `maxItems`,
//!
//! each with an optional `title`, `description` and `default` (SEP-1034), and a `required` list.
//!
//! [`schema`] brings a type's JSON Schema (as schemars writes it, subschemas inlined) to that
//! shape, refusing a field it cannot show and naming it; [`check`] checks a person's answer
//! against it, naming the field at fault. The schema is journaled with the question, so an answer
//! is checked against the question the run asked, in any process.

use serde_json::{Map, Value, json};

/// Why a type cannot be asked as a form: which field, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot ask for {what} as a form: {problem}")]
pub struct FormError {
    /// What was to be asked: the type's name, or `the schema`.
    pub what: String,
    /// What is wrong, naming the field.
    pub problem: String,
}

/// Why a value does not answer a form: the field at fault (by its name; `None` for the value as
/// a whole) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRefusal {
    /// The field at fault.
    pub field: Option<String>,
    /// What is wrong, naming the field.
    pub message: String,
}

/// The formats of a string field MCP elicitation knows.
const FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// `schema` (a JSON Schema of an object, subschemas inlined) as a form's schema; `what` names
/// the type in errors.
pub fn schema(what: &str, schema: &Value) -> Result<Value, FormError> {
    let refuse = |problem: String| FormError { what: what.to_owned(), problem };
    let object = schema.as_object().filter(|object| object.get("type") == Some(&json!("object")));
    let properties = object.and_then(|object| object.get("properties")?.as_object());
    let Some(properties) = properties else {
        return Err(refuse("a form is an object of named fields (a struct with named fields)".to_owned()));
    };
    let mut fields = Map::new();
    for (name, property) in properties {
        fields.insert(name.clone(), field(property).map_err(|problem| refuse(format!("field `{name}` {problem}")))?);
    }
    let required: Vec<Value> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|name| name.as_str().is_some_and(|name| fields.contains_key(name)))
        .cloned()
        .collect();
    Ok(json!({"type": "object", "properties": fields, "required": required}))
}

/// One field's schema in the form's shape, or what is wrong with it (after "field `name`").
fn field(property: &Value) -> Result<Value, String> {
    let property = nullable(property);
    let mut out = Map::new();
    for key in ["title", "description"] {
        if let Some(text) = property.get(key).filter(|value| value.is_string()) {
            out.insert(key.to_owned(), text.clone());
        }
    }
    if let Some(choice) = choice(&property) {
        out.insert("type".into(), json!("string"));
        out.extend(choice);
        copy_default(&property, &mut out, Value::is_string);
        return Ok(Value::Object(out));
    }
    let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
    let keys: &[&str] = match kind {
        "string" => &["minLength", "maxLength"],
        "integer" | "number" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["minItems", "maxItems"],
        "object" => return Err(THE_KINDS.replace("{}", "is an object")),
        "" => return Err(THE_KINDS.replace("{}", "has no single type")),
        other => return Err(THE_KINDS.replace("{}", &format!("is of type `{other}`"))),
    };
    out.insert("type".into(), json!(kind));
    for key in keys {
        if let Some(value) = property.get(*key).filter(|value| value.is_number()) {
            out.insert((*key).to_owned(), value.clone());
        }
    }
    match kind {
        "string" => {
            let format = property.get("format").and_then(Value::as_str).filter(|format| FORMATS.contains(format));
            if let Some(format) = format {
                out.insert("format".into(), json!(format));
            }
            copy_default(&property, &mut out, Value::is_string);
        }
        "integer" => {
            integer_bounds(&property, &mut out);
            copy_default(&property, &mut out, |value| value.is_i64() || value.is_u64());
        }
        "number" => copy_default(&property, &mut out, Value::is_number),
        "boolean" => copy_default(&property, &mut out, Value::is_boolean),
        _ => {
            let items = property.get("items").map(nullable).and_then(|items| choice(&items));
            let Some(items) = items else {
                return Err("is a list of something other than a choice of strings; a form's lists are \
                            multiple choices (a `Vec` of a unit-only enum)"
                    .to_owned());
            };
            let items = match items.get("oneOf") {
                Some(titled) => json!({"anyOf": titled}),
                None => json!({"type": "string", "enum": items["enum"]}),
            };
            out.insert("items".into(), items);
            copy_default(&property, &mut out, |value| {
                value.as_array().is_some_and(|values| values.iter().all(Value::is_string))
            });
        }
    }
    Ok(Value::Object(out))
}

/// What a field that cannot be shown is told, with `{}` saying what it is.
const THE_KINDS: &str = "{}; a form's fields are strings, numbers, integers, booleans and choices of strings \
                         (what MCP elicitation can show): use one of those, or ask for it in another question";

/// `property` without the `null` an `Option` adds: `{"type": ["string", "null"]}` is a string,
/// `{"anyOf": [{…}, {"type": "null"}]}` is the `{…}`, with the outer title, description and
/// default kept.
fn nullable(property: &Value) -> Value {
    let mut property = property.clone();
    let Some(object) = property.as_object_mut() else { return property };
    if let Some(Value::Array(types)) = object.get("type") {
        let kinds: Vec<&Value> = types.iter().filter(|kind| kind.as_str() != Some("null")).collect();
        if let [kind] = kinds.as_slice() {
            let kind = (*kind).clone();
            object.insert("type".into(), kind);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = object.get(key) else { continue };
        let others: Vec<&Value> = options.iter().filter(|option| option.get("type") != Some(&json!("null"))).collect();
        if others.len() + 1 == options.len()
            && let [inner] = others.as_slice()
        {
            let mut inner = nullable(inner);
            object.remove(key);
            if let Some(inner) = inner.as_object_mut() {
                for (name, value) in std::mem::take(object) {
                    inner.insert(name, value);
                }
            }
            return inner;
        }
    }
    property
}

/// The choice `property` offers, as the form's keys (`enum`, with `enumNames` if it has them;
/// or a titled `oneOf`), if it is a choice of strings.
fn choice(property: &Value) -> Option<Map<String, Value>> {
    let strings = |values: &Vec<Value>| values.iter().all(Value::is_string);
    if let Some(values) = property.get("enum").and_then(Value::as_array).filter(|values| strings(values)) {
        let mut out = Map::new();
        out.insert("enum".into(), Value::Array(values.clone()));
        let names = property.get("enumNames").and_then(Value::as_array);
        if let Some(names) = names.filter(|names| names.len() == values.len() && strings(names)) {
            out.insert("enumNames".into(), Value::Array(names.clone()));
        }
        return Some(out);
    }
    if let Some(only) = property.get("const").filter(|value| value.is_string()) {
        return Some(Map::from_iter([("enum".to_owned(), json!([only]))]));
    }
    let options = ["oneOf", "anyOf"].iter().find_map(|key| property.get(*key)?.as_array())?;
    let titled: Option<Vec<Value>> = options
        .iter()
        .map(|option| {
            let value = option.get("const").filter(|value| value.is_string()).or_else(|| {
                // schemars writes a one-value `enum` for a variant it cannot give `const`.
                option.get("enum")?.as_array().filter(|values| values.len() == 1)?.first()
            })?;
            let title = ["title", "description"].iter().find_map(|key| option.get(*key)?.as_str());
            Some(json!({"const": value, "title": title.map_or_else(|| value.clone(), |title| json!(title))}))
        })
        .collect();
    Some(Map::from_iter([("oneOf".to_owned(), Value::Array(titled?))]))
}

fn copy_default(property: &Value, out: &mut Map<String, Value>, fits: impl Fn(&Value) -> bool) {
    if let Some(default) = property.get("default").filter(|value| fits(value)) {
        out.insert("default".into(), default.clone());
    }
}

/// The bounds schemars writes as a `format` (`uint8`, `int16`, …) for Rust's integer types,
/// made explicit, so an answer out of the type's range is refused before it reaches the run.
fn integer_bounds(property: &Value, out: &mut Map<String, Value>) {
    let bounds: Option<(i64, i64)> = match property.get("format").and_then(Value::as_str) {
        Some("int8") => Some((i8::MIN.into(), i8::MAX.into())),
        Some("int16") => Some((i16::MIN.into(), i16::MAX.into())),
        Some("int32") => Some((i32::MIN.into(), i32::MAX.into())),
        Some("uint8") => Some((0, u8::MAX.into())),
        Some("uint16") => Some((0, u16::MAX.into())),
        Some("uint32") => Some((0, u32::MAX.into())),
        Some("uint" | "uint64") => Some((0, i64::MAX)),
        _ => None,
    };
    let Some((low, high)) = bounds else { return };
    let tighter = |key: &str, bound: i64, keep: fn(i64, i64) -> i64| {
        let given = out.get(key).and_then(Value::as_i64);
        json!(given.map_or(bound, |given| keep(given, bound)))
    };
    let minimum = tighter("minimum", low, i64::max);
    let maximum = tighter("maximum", high, i64::min);
    out.insert("minimum".into(), minimum);
    out.insert("maximum".into(), maximum);
}

/// Checks that `value` answers the form whose schema is `schema` (as [`schema`] made it).
pub fn check(schema: &Value, value: &Value) -> Result<(), FieldRefusal> {
    let Some(given) = value.as_object() else {
        let message = format!("the answer to a form is a JSON object of its fields, not {}", crate::json::kind(value));
        return Err(FieldRefusal { field: None, message });
    };
    let empty = Map::new();
    let fields = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if let Some(unknown) = given.keys().find(|name| !fields.contains_key(*name)) {
        let known: Vec<String> = fields.keys().map(|name| format!("`{name}`")).collect();
        let message = format!("the form has no field `{unknown}`; its fields are {}", known.join(", "));
        return Err(FieldRefusal { field: Some(unknown.clone()), message });
    }
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten();
    for name in required.filter_map(Value::as_str) {
        if given.get(name).is_none_or(Value::is_null) {
            let message = format!("field `{name}` is required");
            return Err(FieldRefusal { field: Some(name.to_owned()), message });
        }
    }
    for (name, value) in given.iter().filter(|(_, value)| !value.is_null()) {
        if let Err(problem) = check_field(&fields[name], value) {
            let message = format!("field `{name}` {problem}");
            return Err(FieldRefusal { field: Some(name.clone()), message });
        }
    }
    Ok(())
}

/// Checks one field's value, saying what is wrong (after "field `name`").
fn check_field(field: &Value, value: &Value) -> Result<(), String> {
    let number = |key: &str| field.get(key).and_then(Value::as_f64);
    if let Some(allowed) = choices(field) {
        return one_of(&allowed, value);
    }
    match field.get("type").and_then(Value::as_str).unwrap_or("") {
        "string" => {
            let Some(text) = value.as_str() else { return Err(expected("a string", value)) };
            let length = text.chars().count() as f64;
            if number("minLength").is_some_and(|least| length < least) {
                return Err(format!("must be at least {} characters long", number("minLength").unwrap_or(0.0)));
            }
            if number("maxLength").is_some_and(|most| length > most) {
                return Err(format!("must be at most {} characters long", number("maxLength").unwrap_or(0.0)));
            }
            check_format(field.get("format").and_then(Value::as_str), text)
        }
        "integer" | "number" => {
            let integer = field["type"] == "integer";
            let fits = if integer { value.is_i64() || value.is_u64() } else { value.is_number() };
            if !fits {
                return Err(expected(if integer { "an integer" } else { "a number" }, value));
            }
            let given = value.as_f64().unwrap_or(0.0);
            if let Some(least) = number("minimum").filter(|least| given < *least) {
                return Err(format!("must be at least {least}, not {value}"));
            }
            if let Some(most) = number("maximum").filter(|most| given > *most) {
                return Err(format!("must be at most {most}, not {value}"));
            }
            Ok(())
        }
        "boolean" if value.is_boolean() => Ok(()),
        "boolean" => Err(expected("true or false", value)),
        "array" => {
            let Some(values) = value.as_array() else { return Err(expected("a list of choices", value)) };
            let allowed = field.get("items").and_then(choices).unwrap_or_default();
            for (index, item) in values.iter().enumerate() {
                one_of(&allowed, item).map_err(|problem| format!("item {index} {problem}"))?;
            }
            let count = values.len() as f64;
            if let Some(least) = number("minItems").filter(|least| count < *least) {
                return Err(format!("must have at least {least} choices, not {count}"));
            }
            if let Some(most) = number("maxItems").filter(|most| count > *most) {
                return Err(format!("must have at most {most} choices, not {count}"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The values a choice field (or a multiple choice's items) allows, if it is one.
fn choices(field: &Value) -> Option<Vec<String>> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        return Some(values.iter().filter_map(Value::as_str).map(str::to_owned).collect());
    }
    let options = ["oneOf", "anyOf"].iter().find_map(|key| field.get(*key)?.as_array())?;
    Some(options.iter().filter_map(|option| option.get("const")?.as_str()).map(str::to_owned).collect())
}

fn one_of(allowed: &[String], value: &Value) -> Result<(), String> {
    match value.as_str() {
        Some(given) if allowed.iter().any(|choice| choice == given) => Ok(()),
        _ => Err(format!("must be one of {}, not {value}", allowed.join(", "))),
    }
}

/// Checks a string against the formats MCP elicitation names, as far as a person's typing goes:
/// the shape, not whether the address or day exists.
fn check_format(format: Option<&str>, text: &str) -> Result<(), String> {
    let date = |text: &str| {
        let parts: Vec<&str> = text.split('-').collect();
        parts.len() == 3
            && [4, 2, 2].iter().zip(&parts).all(|(len, part)| part.len() == *len)
            && parts.iter().all(|part| part.bytes().all(|byte| byte.is_ascii_digit()))
    };
    let fits = match format {
        Some("email") => text.split_once('@').is_some_and(|(name, host)| !name.is_empty() && host.contains('.')),
        Some("uri") => text.split_once(':').is_some_and(|(scheme, rest)| !scheme.is_empty() && !rest.is_empty()),
        Some("date") => date(text),
        Some("date-time") => text.split_once(['T', 't']).is_some_and(|(day, time)| date(day) && time.len() >= 5),
        _ => true,
    };
    match fits {
        true => Ok(()),
        false => Err(format!("must be {} (a `{}`), not {text:?}", format_example(format), format.unwrap_or(""))),
    }
}

fn format_example(format: Option<&str>) -> &'static str {
    match format {
        Some("email") => "an email address such as ada@example.com",
        Some("uri") => "a URI such as https://example.com",
        Some("date") => "a date such as 2026-07-28",
        _ => "a date and time such as 2026-07-28T09:30:00Z",
    }
}

fn expected(what: &str, value: &Value) -> String {
    format!("must be {what}, not {}", crate::json::kind(value))
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::journal::ask::Ask;

    fn form_of<T: JsonSchema>() -> Value {
        Ask::form::<T>("?").unwrap().schema.unwrap()
    }

    #[derive(Deserialize, Serialize, JsonSchema, Default)]
    #[serde(rename_all = "lowercase")]
    enum Status {
        #[default]
        Active,
        Inactive,
        Pending,
    }

    /// A profile (SEP-1034's defaults).
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(default)]
    struct Profile {
        /// User name
        name: String,
        /// User age
        age: u32,
        /// User score
        score: f64,
        /// User status
        status: Status,
        /// Verification status
        verified: bool,
    }

    impl Default for Profile {
        fn default() -> Self {
            Profile { name: "John Doe".into(), age: 30, score: 95.5, status: Status::Active, verified: true }
        }
    }

    #[derive(Deserialize, JsonSchema)]
    enum Titled {
        /// First Option
        #[serde(rename = "value1")]
        First,
        #[schemars(title = "Second Option")]
        #[serde(rename = "value2")]
        Second,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Choices {
        titled: Titled,
        maybe: Option<Titled>,
        many: Vec<Titled>,
        status: Option<Status>,
        statuses: Vec<Status>,
        note: Option<String>,
        #[schemars(email)]
        email: String,
        small: u8,
    }

    #[test]
    fn a_type_becomes_a_flat_form_with_its_defaults() {
        let schema = form_of::<Profile>();
        let fields = &schema["properties"];
        assert_eq!(fields["name"], json!({"type": "string", "description": "User name", "default": "John Doe"}));
        assert_eq!(fields["age"]["type"], "integer");
        assert_eq!(fields["age"]["default"], 30);
        assert_eq!((fields["age"]["minimum"].clone(), fields["age"]["maximum"].clone()), (json!(0), json!(u32::MAX)));
        assert_eq!(fields["score"], json!({"type": "number", "description": "User score", "default": 95.5}));
        assert_eq!(
            fields["status"],
            json!({"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"})
        );
        assert_eq!(
            fields["verified"],
            json!({"type": "boolean", "description": "Verification status", "default": true})
        );
        assert_eq!(schema["required"], json!([]));
    }

    #[test]
    fn choices_keep_their_titles_and_options_lose_their_null() {
        let schema = form_of::<Choices>();
        let fields = &schema["properties"];
        let titled =
            json!([{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}]);
        assert_eq!(fields["titled"], json!({"type": "string", "oneOf": titled}));
        assert_eq!(fields["maybe"], json!({"type": "string", "oneOf": titled}));
        assert_eq!(fields["many"], json!({"type": "array", "items": {"anyOf": titled}}));
        assert_eq!(fields["status"], json!({"type": "string", "enum": ["active", "inactive", "pending"]}));
        assert_eq!(fields["statuses"]["items"], json!({"type": "string", "enum": ["active", "inactive", "pending"]}));
        assert_eq!(fields["note"], json!({"type": "string"}));
        assert_eq!(fields["email"], json!({"type": "string", "format": "email"}));
        assert_eq!(fields["small"], json!({"type": "integer", "minimum": 0, "maximum": 255}));
        let required = json!(["titled", "many", "statuses", "email", "small"]);
        assert_eq!(schema["required"], required);
    }

    #[test]
    fn a_field_a_form_cannot_show_is_named() {
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Nested {
            name: String,
            address: Profile,
        }
        let error = Ask::form::<Nested>("?").unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot ask for Nested as a form: field `address` is an object; a form's fields are strings, numbers, \
             integers, booleans and choices of strings (what MCP elicitation can show): use one of those, or ask for \
             it in another question"
        );
        assert!(Ask::form::<String>("?").is_err(), "a form is an object of fields");
    }

    #[test]
    fn answers_are_checked_field_by_field() {
        let schema = form_of::<Choices>();
        let good = json!({
            "titled": "value1", "many": ["value2"], "statuses": [], "email": "ada@example.com", "small": 7,
            "maybe": null,
        });
        assert_eq!(check(&schema, &good), Ok(()));
        // (a change to the good answer, the field named, the start of the message)
        let cases = [
            (json!({"titled": "value3"}), "titled", "field `titled` must be one of value1, value2, not \"value3\""),
            (json!({"small": 256}), "small", "field `small` must be at most 255, not 256"),
            (json!({"small": 1.5}), "small", "field `small` must be an integer, not a number"),
            (json!({"email": "ada"}), "email", "field `email` must be an email address"),
            (json!({"many": ["value1", "x"]}), "many", "field `many` item 1 must be one of value1, value2"),
            (json!({"titled": null}), "titled", "field `titled` is required"),
            (json!({"extra": 1}), "extra", "the form has no field `extra`; its fields are"),
        ];
        for (change, field, message) in cases {
            let mut answer = good.clone();
            answer.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
            let refusal = check(&schema, &answer).unwrap_err();
            assert_eq!(refusal.field.as_deref(), Some(field), "{change}");
            assert!(refusal.message.starts_with(message), "{change}: {}", refusal.message);
        }
        let refusal = check(&schema, &json!("value1")).unwrap_err();
        assert_eq!(refusal.message, "the answer to a form is a JSON object of its fields, not a string");
    }
}
