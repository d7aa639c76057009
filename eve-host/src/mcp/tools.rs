//! The manifest as MCP tools, arguments checked against each tool's input schema, and outputs
//! as tool results.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use eve_runtime::registry::{self, EntryPoint, ToolDescriptor};

/// What a tool may return to send MCP content blocks (an image, audio, an embedded resource,
/// several blocks) instead of its JSON output: an output that serializes as exactly
/// `{"content": [blocks]}` is sent as those blocks.
///
/// ```
/// use eve_tools::mcp::{ToolContent, rmcp::model::ContentBlock};
/// let content = ToolContent::new(vec![ContentBlock::text("a chart:"), ContentBlock::image("iVBORw0KGgo=", "image/png")]);
/// assert_eq!(serde_json::to_value(&content).unwrap()["content"][1]["type"], "image");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolContent {
    /// The blocks, in order.
    pub content: Vec<ContentBlock>,
}

impl ToolContent {
    /// Content made of these blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        ToolContent { content }
    }
}

/// How a tool is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `#[tool]`: answered at once.
    Plain,
    /// A `#[workflow_tool]` or `#[task]`: a durable run.
    Durable,
}

/// One tool as MCP sees it.
pub(crate) struct Entry {
    pub descriptor: &'static ToolDescriptor,
    pub tool: Tool,
    pub kind: Kind,
}

/// Every tool the server offers, built once from the registry.
pub(crate) struct Catalog {
    tools: Vec<Tool>,
    by_name: HashMap<&'static str, Entry>,
}

impl Catalog {
    /// The tools compiled into this binary that a call can start: resumable tasks
    /// (`#[task(serve)]`) are driven by agent sessions, not by calls, so they are left out.
    pub fn from_registry() -> Self {
        let mut by_name = HashMap::new();
        let mut tools = Vec::new();
        for descriptor in registry::tools() {
            let kind = match descriptor.entry {
                EntryPoint::Plain(_) => Kind::Plain,
                EntryPoint::Workflow(_) | EntryPoint::Task(_) => Kind::Durable,
                EntryPoint::Serve(_) => continue,
            };
            let schema = (descriptor.input_schema)();
            let mut tool = Tool::new(descriptor.name, descriptor.description, Arc::new(input_schema(schema)));
            if let Some(Value::Object(output)) = (descriptor.output_schema)() {
                tool.output_schema = Some(Arc::new(output));
            }
            tools.push(tool.clone());
            by_name.insert(descriptor.name, Entry { descriptor, tool, kind });
        }
        Catalog { tools, by_name }
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }
}

/// The schema MCP clients get: the manifest's, without `$schema` (MCP defaults to 2020-12, which
/// schemars writes, and some clients refuse a declared dialect), and always an object schema.
fn input_schema(schema: Value) -> JsonObject {
    let mut schema = match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    schema.remove("$schema");
    schema.entry("type").or_insert_with(|| Value::from("object"));
    schema
}

impl Entry {
    /// Checks `arguments` against the tool's input schema, then against its input type; the
    /// refusal names the field by its JSON path.
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        let name = self.descriptor.name;
        registry::check_input(self.descriptor, arguments)
            .map_err(|refusal| format!("invalid arguments for tool `{name}`: {}", refusal.message))?;
        eve_runtime::journal::depth::check(arguments, || format!("the arguments of tool `{name}`"))
            .map_err(|error| error.to_string())
    }
}

/// The tool result for a run's or a plain tool's output: content blocks as they are when the
/// output is a [`ToolContent`]; otherwise the output as text (a string as itself, anything else
/// as JSON), and as structured content when it is an object.
pub(crate) fn completed(output: &Value) -> CallToolResult {
    if output.get("content").is_some()
        && let Ok(content) = ToolContent::deserialize(output)
    {
        return CallToolResult::success(content.content);
    }
    let text = match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if output.is_object() {
        result.structured_content = Some(output.clone());
    }
    result
}

/// The tool result for a tool that returned an error, or for arguments it refuses.
pub(crate) fn failed(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outputs_become_text_structured_content_or_content_blocks() {
        // (output, text of the first block, structured content?)
        let cases = [
            (json!("hello"), "hello", false),
            (json!(42), "42", false),
            (json!({"a": 1}), r#"{"a":1}"#, true),
            (json!({"content": "not blocks"}), r#"{"content":"not blocks"}"#, true),
        ];
        for (output, text, structured) in cases {
            let result = completed(&output);
            let value = serde_json::to_value(&result).unwrap();
            assert_eq!(value["content"][0]["text"], text, "{output}");
            assert_eq!(value.get("structuredContent").is_some(), structured, "{output}");
        }
        let blocks = json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]});
        let value = serde_json::to_value(completed(&blocks)).unwrap();
        assert_eq!(value["content"][0]["type"], "image");
        assert!(value.get("structuredContent").is_none());
    }

    #[test]
    fn input_schemas_lose_their_dialect_and_stay_objects() {
        let schema = input_schema(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "In"}));
        assert_eq!(Value::Object(schema), json!({"title": "In", "type": "object"}));
    }
}
