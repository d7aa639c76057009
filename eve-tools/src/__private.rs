//! The only paths generated code names. Not public API: anything here may change in any release.
//!
//! `#[step]`, `#[tool]`, `#[workflow_tool]` and `#[task]` expand to code that reaches the runtime
//! through `::eve_tools::__private::…` (or `<crate>::__private::…` with `crate = "…"`) and names
//! std items by absolute path, so user code that redefines `Result`, `Box` or `core` cannot
//! change what the expansion means.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use eve_runtime::context::{Receive, ServeCtx, StepCtxSource, TaskCtx, ToolCtx, WorkflowCtx};
pub use eve_runtime::error::{StepError, ToolError};
pub use eve_runtime::progress::{Sink as ProgressSink, drive as drive_progress};
pub use eve_runtime::registry::{
    BodyFuture, EntryPoint, InputRefusal, Shape, StepRegistration, ToolDescriptor, ToolRegistration,
};
pub use eve_runtime::step::{Backoff, RetryPolicy, StepCall, StepCtx, StepDef};
pub use inventory;
pub use serde_json::Value;

/// Decodes a tool's JSON input into its input type.
pub fn decode_input<T: DeserializeOwned>(input: Value) -> ::core::result::Result<T, ToolError> {
    serde_json::from_value(input).map_err(|error| ToolError::new(format!("invalid tool input: {error}")))
}

/// Checks that a JSON value decodes into `T`, saying what is wrong if not.
pub fn validate_input<T: DeserializeOwned>(input: &Value) -> ::core::result::Result<(), InputRefusal> {
    eve_runtime::registry::check_decodes::<T>(input)
}

/// The JSON Schema of a tool's input type, closed: each object that lists its fields takes no
/// others (`"additionalProperties": false`), so a model is told, and the runtime checks, that a
/// field it made up is refused (see [`CloseObjects`]).
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::default().with_transform(CloseObjects).into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).expect("a JSON Schema always serializes to JSON")
}

/// The JSON Schema of a tool's input type as the type gives it: the schema of a tool written
/// with `allow_unknown_fields`, and of an output.
pub fn open_schema_for<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a JSON Schema always serializes to JSON")
}

/// Says `"additionalProperties": false` on each object schema that lists its `properties` and says
/// nothing itself of other fields, so what the type's own schema says (`deny_unknown_fields`, a
/// flattened map, `#[schemars(extend(…))]`) stands. An object merged with subschemas (a flattened
/// enum's `allOf` or `oneOf`) is left open, as are those subschemas: in JSON Schema each would
/// refuse the fields the others list.
#[derive(Clone, Copy)]
struct CloseObjects;

/// The keywords by which an object schema takes its fields from subschemas as well.
const COMPOSED: [&str; 5] = ["allOf", "anyOf", "oneOf", "if", "$ref"];

/// The keywords by which an object schema already says what it does with other fields.
const SAYS_OTHERS: [&str; 3] = ["additionalProperties", "unevaluatedProperties", "patternProperties"];

impl schemars::transform::Transform for CloseObjects {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        let Some(object) = schema.as_object_mut() else { return };
        let lists = object.contains_key("properties");
        let composed = COMPOSED.iter().any(|key| object.contains_key(*key));
        if lists && !composed && !SAYS_OTHERS.iter().any(|key| object.contains_key(*key)) {
            object.insert("additionalProperties".to_owned(), Value::Bool(false));
        }
        if !(lists && composed) {
            schemars::transform::transform_subschemas(self, schema);
            return;
        }
        // The subschemas are parts of this object, not objects of their own: only its fields'
        // schemas and the definitions are closed.
        for key in ["properties", "$defs"] {
            let Some(Value::Object(children)) = object.get_mut(key) else { continue };
            for child in children.values_mut() {
                if let Ok(child) = <&mut schemars::Schema>::try_from(child) {
                    self.transform(child);
                }
            }
        }
    }
}

/// Asks whether a tool's output type `T` has a JSON Schema, by autoref specialization: written
/// `(&&OutputProbe::<T>::new()).output_schema()` with [`OutputSchema`] and [`NoOutputSchema`] in
/// scope, the call finds `OutputSchema`'s method when `T: JsonSchema` and falls back to
/// `NoOutputSchema`'s (which answers `None`) otherwise, so tools whose output type has no schema
/// still compile. `T` must be a concrete type, as it is at a tool's definition.
pub struct OutputProbe<T: ?Sized>(::core::marker::PhantomData<T>);

impl<T: ?Sized> OutputProbe<T> {
    /// The probe.
    pub const fn new() -> Self {
        OutputProbe(::core::marker::PhantomData)
    }
}

impl<T: ?Sized> Default for OutputProbe<T> {
    fn default() -> Self {
        OutputProbe::new()
    }
}

/// The probe's answer when the output type has a schema: the schema, if it describes an object.
pub trait OutputSchema {
    /// The output's schema, if it is an object's.
    fn output_schema(&self) -> Option<Value>;
}

impl<T: schemars::JsonSchema> OutputSchema for &OutputProbe<T> {
    fn output_schema(&self) -> Option<Value> {
        object_schema(open_schema_for::<T>())
    }
}

/// The probe's answer when the output type has no schema: none.
pub trait NoOutputSchema {
    /// Always `None`.
    fn output_schema(&self) -> Option<Value>;
}

impl<T: ?Sized> NoOutputSchema for OutputProbe<T> {
    fn output_schema(&self) -> Option<Value> {
        None
    }
}

/// `schema` without its `$schema` when it describes an object, else `None`: an output schema must
/// be an object's (MCP's `outputSchema` rule), and a string or `Value` output has nothing to add.
fn object_schema(schema: Value) -> Option<Value> {
    let Value::Object(mut schema) = schema else { return None };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    schema.remove("$schema");
    Some(Value::Object(schema))
}

/// `output_schema!(T)`: a `fn() -> Option<Value>` giving `T`'s schema if `T` has one (see
/// [`OutputProbe`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __output_schema {
    ($output:ty) => {
        || {
            #[allow(unused_imports)]
            use $crate::__private::{NoOutputSchema as _, OutputSchema as _};
            (&&$crate::__private::OutputProbe::<$output>::new()).output_schema()
        }
    };
}

pub use crate::__output_schema as output_schema;

/// Turns what a tool body returns into the run's output.
pub fn encode_output<O: ToolOutput>(output: O) -> ::core::result::Result<Value, ToolError> {
    output.into_output()
}

/// What a tool body may return: `Result<T, E>` with a serializable `T` and an error that converts
/// into [`ToolError`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from an eve tool",
    label = "return `Result<T, E>` here",
    note = "a tool returns `Result<T, E>` where `T: Serialize` and `E: Into<eve_tools::ToolError>`"
)]
pub trait ToolOutput {
    /// Serializes the output or passes the error on.
    fn into_output(self) -> ::core::result::Result<Value, ToolError>;
}

impl<T: Serialize, E: Into<ToolError>> ToolOutput for ::core::result::Result<T, E> {
    fn into_output(self) -> ::core::result::Result<Value, ToolError> {
        let output = self.map_err(Into::into)?;
        serde_json::to_value(output)
            .map_err(|error| ToolError::new(format!("the tool's output cannot be serialized: {error}")))
    }
}

/// A type that can be a tool's input: it deserializes from JSON and describes itself with a schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an eve tool input",
    label = "must implement `Deserialize` and `JsonSchema`",
    note = "add `#[derive(Deserialize, JsonSchema)]` to `{Self}`; the input must be a struct the model fills in as a JSON object"
)]
pub trait ToolInput: DeserializeOwned + schemars::JsonSchema {}

impl<T: DeserializeOwned + schemars::JsonSchema> ToolInput for T {}

/// A type that can be a tool's output.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an eve tool output",
    label = "must implement `Serialize`",
    note = "add `#[derive(Serialize)]` to `{Self}`; the output is sent to the model as JSON"
)]
pub trait ToolOutputValue: Serialize {}

impl<T: Serialize> ToolOutputValue for T {}

/// A type that can be a step argument.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[step]` argument",
    label = "must implement `Serialize` and `DeserializeOwned`",
    note = "step arguments are hashed into the journal and deserialized again for retries: derive `Serialize` and `Deserialize` for `{Self}`, and pass owned values, not references"
)]
pub trait StepArg: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> StepArg for T {}

/// A type that can be a step's output.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[step]` output",
    label = "must implement `Serialize` and `DeserializeOwned`",
    note = "step outputs are recorded in the journal and read back on replay: derive `Serialize` and `Deserialize` for `{Self}`; secrets such as tokens must never be returned from a step"
)]
pub trait StepOutput: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> StepOutput for T {}

/// A type that can be a step's error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[step]` error",
    label = "must convert into `StepError`",
    note = "return `StepError`, `FatalError`, `RetryableError` or any `std::error::Error + Send + Sync + 'static`"
)]
pub trait StepErrorType: Into<StepError> {}

impl<E: Into<StepError>> StepErrorType for E {}

/// Fails to compile unless `T` can be a tool input; `#[tool]` and friends emit a call spanned on the type.
pub const fn assert_tool_input<T: ToolInput>() {}

/// Fails to compile unless `T` can be a tool output.
pub const fn assert_tool_output<T: ToolOutputValue>() {}

/// Fails to compile unless `T` can be a step argument.
pub const fn assert_step_arg<T: StepArg>() {}

/// Fails to compile unless `T` can be a step output.
pub const fn assert_step_output<T: StepOutput>() {}

/// Fails to compile unless `E` can be a step error.
pub const fn assert_step_error<E: StepErrorType>() {}

/// Fails to compile unless `R` can be returned from a tool body.
pub const fn assert_tool_return<R: ToolOutput>() {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Has no schema: the probe must fall back, not fail to compile.
    #[allow(dead_code)]
    struct Opaque(u8);

    /// An object with a schema.
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Receipt {
        id: String,
    }

    /// A payment method, flattened into [`Payment`].
    #[derive(schemars::JsonSchema)]
    #[serde(tag = "method")]
    #[allow(dead_code)]
    enum Method {
        Card { last4: String },
        Invoice { days: u32 },
    }

    /// A payment: its own fields, a flattened enum's and a nested object's.
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Payment {
        amount: u32,
        #[serde(flatten)]
        method: Method,
        receipt: Option<Receipt>,
    }

    /// What a type already says of other fields.
    #[derive(schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        id: String,
        #[schemars(extend("additionalProperties" = true))]
        open: Receipt,
    }

    #[test]
    fn an_input_schema_closes_objects_that_stand_alone() {
        let method = super::schema_for::<Method>();
        for variant in method["oneOf"].as_array().unwrap() {
            assert_eq!(variant["additionalProperties"], json!(false), "a variant stands alone: {method:#}");
        }
        let payment = super::schema_for::<Payment>();
        assert!(payment.get("additionalProperties").is_none(), "merged with the enum's variants: {payment:#}");
        for variant in payment["oneOf"].as_array().unwrap() {
            assert!(variant.get("additionalProperties").is_none(), "a part of the payment: {payment:#}");
        }
        assert_eq!(payment["$defs"]["Receipt"]["additionalProperties"], json!(false), "{payment:#}");
        let strict = super::schema_for::<Strict>();
        assert_eq!(strict["additionalProperties"], json!(false), "{strict:#}");
        assert_eq!(strict["properties"]["open"]["additionalProperties"], json!(true), "{strict:#}");
        let open = super::open_schema_for::<Payment>();
        assert!(open["$defs"]["Receipt"].get("additionalProperties").is_none(), "{open:#}");
    }

    #[test]
    fn only_object_outputs_with_a_schema_have_an_output_schema() {
        let receipt: fn() -> Option<super::Value> = crate::__private::output_schema!(Receipt);
        let schema = receipt().expect("an object with a schema");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["id"]));
        assert!(schema.get("$schema").is_none(), "no dialect: MCP defaults to 2020-12");
        let none: [fn() -> Option<super::Value>; 4] = [
            crate::__private::output_schema!(Opaque),
            crate::__private::output_schema!(String),
            crate::__private::output_schema!(()),
            crate::__private::output_schema!(super::Value),
        ];
        assert!(none.iter().all(|schema| schema().is_none()));
    }
}
