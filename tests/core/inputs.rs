//! A tool's input as the runtime takes it: a field the tool does not take is refused by name
//! before anything is journaled, and the published schema says so (`additionalProperties: false`),
//! unless the tool opts out or its input type says otherwise.

use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{Error, manifest};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Where an order goes.
#[derive(Deserialize, JsonSchema)]
pub struct Address {
    /// The city.
    #[allow(dead_code, reason = "a field of the schema inputs are checked against; the tool never reads it")]
    city: String,
}

/// An order to check out.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// The order.
    order_id: String,
    /// Cents to charge.
    amount: u32,
    /// Where it goes.
    #[allow(dead_code, reason = "a field of the schema inputs are checked against; the tool never reads it")]
    address: Address,
}

/// Checks an order out.
#[workflow_tool]
pub async fn place_order(order: Order, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(format!("{}: {}", order.order_id, order.amount))
}

/// Prices an order at once.
#[tool]
pub async fn price_order(order: Order) -> Result<u32, ToolError> {
    Ok(order.amount)
}

fn runtime() -> Runtime {
    Runtime::builder().store(MemoryStore::new()).build().unwrap()
}

fn order() -> Value {
    json!({ "order_id": "A-1", "amount": 500, "address": { "city": "Oslo" } })
}

/// `order()` with `value` set at `pointer`'s parent under `name`.
fn with(pointer: &str, name: &str, value: Value) -> Value {
    let mut input = order();
    input.pointer_mut(pointer).unwrap().as_object_mut().unwrap().insert(name.into(), value);
    input
}

#[tokio::test]
async fn a_field_the_tool_does_not_take_is_refused_by_name_and_starts_no_run() {
    let runtime = runtime();
    let takes = "(the tool takes `address`, `amount`, `order_id`)";
    // (input, the field at fault, the message)
    let refusals = [
        (
            with("", "extra", json!(true)),
            "extra",
            format!("the input has a field `extra` that the tool does not take; remove it {takes}"),
        ),
        (
            with("", "order", json!("A-1")),
            "order",
            format!("the input has a field `order` that the tool does not take; remove it {takes}"),
        ),
        (
            with("/address", "zip", json!("0150")),
            "address.zip",
            "field `address` has a field `zip` that the tool does not take; remove it".to_owned(),
        ),
    ];
    for (input, field, message) in &refusals {
        for error in [
            runtime.start("place_order", input.clone()).await.unwrap_err(),
            runtime.call_tool("price_order", input.clone()).await.unwrap_err(),
        ] {
            let Error::InvalidInput { field: found, message: said, .. } = &error else { panic!("{input}: {error:?}") };
            assert_eq!((found.as_deref(), said), (Some(*field), message), "{input}");
        }
    }
    assert!(runtime.runs(None, 10).await.unwrap().is_empty(), "no run started");
    let run = runtime.start("place_order", order()).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!("A-1: 500")));
}

#[test]
fn a_tools_published_schema_says_it_takes_no_other_fields() {
    let manifest = manifest();
    let checkout = manifest.tools.iter().find(|tool| tool.name == "place_order").unwrap();
    let schema = &checkout.input_schema;
    assert_eq!(schema["additionalProperties"], json!(false), "{schema:#}");
    assert_eq!(schema["$defs"]["Address"]["additionalProperties"], json!(false), "nested too: {schema:#}");
}

/// A note, with whatever else a caller sends.
#[derive(Deserialize, JsonSchema)]
pub struct Note {
    /// What to note.
    text: String,
}

/// Notes a text, taking fields it does not read.
#[workflow_tool(allow_unknown_fields)]
pub async fn note_loosely(note: Note, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(note.text)
}

/// Notes a text at once, taking fields it does not read.
#[tool(allow_unknown_fields)]
pub async fn note_now(note: Note) -> Result<String, ToolError> {
    Ok(note.text)
}

/// A label and the tags that come with it: the tags take whatever other fields there are.
#[derive(Deserialize, JsonSchema)]
pub struct Labelled {
    /// The label.
    label: String,
    /// Every other field, as a tag.
    #[serde(flatten)]
    tags: std::collections::BTreeMap<String, String>,
}

/// Counts a label's tags.
#[tool]
pub async fn count_tags(labelled: Labelled) -> Result<String, ToolError> {
    Ok(format!("{}: {}", labelled.label, labelled.tags.len()))
}

#[tokio::test]
async fn a_tool_that_allows_unknown_fields_takes_them_and_says_so() {
    let runtime = runtime();
    let input = json!({ "text": "call Ada", "extra": true });
    let run = runtime.start("note_loosely", input.clone()).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!("call Ada")));
    assert_eq!(runtime.call_tool("note_now", input).await.unwrap(), json!("call Ada"));
    let manifest = manifest();
    for name in ["note_loosely", "note_now"] {
        let schema = &manifest.tools.iter().find(|tool| tool.name == name).unwrap().input_schema;
        assert!(schema.get("additionalProperties").is_none(), "{name}: {schema:#}");
    }
}

#[tokio::test]
async fn what_an_input_type_says_of_other_fields_stands() {
    let runtime = runtime();
    let labelled = runtime.call_tool("count_tags", json!({ "label": "a", "color": "red", "size": "L" })).await;
    assert_eq!(labelled.unwrap(), json!("a: 2"));
    let manifest = manifest();
    let schema = &manifest.tools.iter().find(|tool| tool.name == "count_tags").unwrap().input_schema;
    assert_eq!(schema["additionalProperties"], json!({ "type": "string" }), "{schema:#}");
}
