//! The model seam: what a session shows a model and what the model answers.
//!
//! A [`Model`] streams its answer to a [`ModelRequest`] (the system prompt, the conversation and
//! the tools it may call) as [`ModelDelta`]s; [`collect`] assembles them into a [`ModelResponse`]:
//! the text and the tool calls, with their streamed arguments joined and parsed. A session calls
//! the model inside a step, so the response is journaled and replay never calls it again.
//!
//! [`ScriptedModel`] answers from a function the test or example writes: deterministic, and able
//! to react to what it is shown ("call `task_wait` until a `<task_result>` arrives").

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation, as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// What a person said, or what the harness tells the model (task results, the `[Tasks]` note).
    User {
        /// The text.
        content: String,
    },
    /// What the model said and the tools it called.
    Assistant {
        /// The text.
        content: String,
        /// The tools it called, in order.
        #[serde(default, rename = "toolCalls", skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call it answers.
        #[serde(rename = "callId")]
        call_id: String,
        /// The result as text (JSON for structured results).
        content: String,
    },
}

impl Message {
    /// A message from the person (or the harness).
    pub fn user(content: impl Into<String>) -> Self {
        Message::User { content: content.into() }
    }

    /// The text of the message.
    pub fn content(&self) -> &str {
        match self {
            Message::User { content } | Message::Assistant { content, .. } | Message::Tool { content, .. } => content,
        }
    }
}

/// A call of a tool the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, unique within the session.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}

/// A tool the model may call: its name, description and input JSON Schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: Value,
}

/// What a session shows the model for one step.
///
/// The conversation and the tool specs are shared with the session (`Arc`): a step costs no copy
/// of either, however long the conversation grows. A model that needs its own copy clones it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Arc<Vec<Message>>,
    /// The tools the model may call.
    pub tools: Vec<Arc<ToolSpec>>,
}

impl ModelRequest {
    /// The last message, if any.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// The last message a person (or the harness) wrote.
    pub fn last_user(&self) -> Option<&str> {
        self.messages.iter().rev().find_map(|message| match message {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
    }

    /// The results of the tool calls of the last assistant message, by call id.
    pub fn tool_results(&self) -> BTreeMap<&str, &str> {
        let from = self.messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }));
        let results = self.messages[from.map_or(0, |at| at + 1)..].iter().filter_map(|message| match message {
            Message::Tool { call_id, content } => Some((call_id.as_str(), content.as_str())),
            _ => None,
        });
        results.collect()
    }

    /// Whether any message contains `text`.
    pub fn mentions(&self, text: &str) -> bool {
        self.messages.iter().any(|message| message.content().contains(text))
    }
}

/// Why a model's step ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    #[default]
    Stop,
    /// The model called tools.
    ToolCalls,
    /// The model ran out of tokens.
    Length,
}

/// The model's answer for one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// The text.
    pub text: String,
    /// The tools called, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Why the step ended.
    #[serde(default)]
    pub finish_reason: FinishReason,
}

impl ModelResponse {
    /// An answer that only says `text`.
    pub fn text(text: impl Into<String>) -> Self {
        ModelResponse { text: text.into(), tool_calls: Vec::new(), finish_reason: FinishReason::Stop }
    }

    /// An answer that calls `name` with `arguments` (and says nothing).
    pub fn call(name: impl Into<String>, arguments: Value) -> Self {
        ModelResponse::default().and_call(name, arguments)
    }

    /// Also calls `name` with `arguments`; the call's id is filled in by the session.
    pub fn and_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(ToolCall { id: String::new(), name: name.into(), arguments });
        self.finish_reason = FinishReason::ToolCalls;
        self
    }

    /// Also says `text`.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }
}

/// One piece of a streamed answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelDelta {
    /// More text.
    Text(String),
    /// A piece of a tool call: the call at `index` in the answer; its id and name come with its
    /// first piece, its arguments as JSON text split across pieces.
    ToolCall {
        /// The call's position in the answer.
        index: usize,
        /// Its id, on the first piece.
        id: Option<String>,
        /// The tool's name, on the first piece.
        name: Option<String>,
        /// More of the arguments' JSON text.
        arguments: String,
    },
    /// The answer is complete.
    Done(FinishReason),
}

/// Why a model could not answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The model is not reachable now, or refused for now (rate limits, a server error); a
    /// later attempt may succeed, after `retry_after` if the provider said.
    #[error("the model is unavailable: {message}")]
    Unavailable {
        /// What went wrong.
        message: String,
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
    },
    /// The answer was malformed or cut off: nothing of it is kept.
    #[error("the model's answer was malformed: {0}")]
    Malformed(String),
    /// The model is not configured correctly (a missing key, an unknown model name).
    #[error("the model is not configured: {0}")]
    Config(String),
}

/// A streamed answer.
pub type ModelStream = BoxStream<'static, Result<ModelDelta, ModelError>>;

/// A language model a session talks to.
#[async_trait]
pub trait Model: Send + Sync + 'static {
    /// Starts answering `request`; the answer arrives as deltas ending with [`ModelDelta::Done`].
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError>;

    /// The whole answer to `request`, for a step whose text nobody follows as it streams. It must
    /// be what [`collect`] assembles from [`stream`](Model::stream), which is what it does unless
    /// a model can answer whole more cheaply (as [`ScriptedModel`] does).
    async fn answer(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        collect(self.stream(request).await?, |_| {}).await
    }

    /// The model's name in metrics (the `model` label of `eve_model_calls_total` and its kin):
    /// the provider's name for it, such as `gpt-4.1-mini`, or by default `model`. One name per
    /// configured model, so that the metrics' labels stay few.
    fn name(&self) -> &str {
        "model"
    }
}

/// The model a runtime's sessions talk to, kept in the runtime's state
/// (see [`RuntimeBuilder::model`](crate::RuntimeBuilder::model)).
#[derive(Clone)]
pub(crate) struct SessionModel(pub Arc<dyn Model>);

/// Assembles a streamed answer, calling `on_text` with each piece of text as it arrives. A stream
/// that ends without [`ModelDelta::Done`], or tool-call arguments that are not a JSON object, is
/// [`ModelError::Malformed`].
pub async fn collect(mut stream: ModelStream, mut on_text: impl FnMut(&str)) -> Result<ModelResponse, ModelError> {
    let mut response = ModelResponse::default();
    let mut calls: BTreeMap<usize, (Option<String>, Option<String>, String)> = BTreeMap::new();
    let mut done = None;
    while let Some(delta) = stream.next().await {
        match delta? {
            ModelDelta::Text(text) => {
                on_text(&text);
                response.text.push_str(&text);
            }
            ModelDelta::ToolCall { index, id, name, arguments } => {
                let call = calls.entry(index).or_default();
                call.0 = call.0.take().or(id);
                call.1 = call.1.take().or(name);
                call.2.push_str(&arguments);
            }
            ModelDelta::Done(reason) => {
                done = Some(reason);
                break;
            }
        }
    }
    let reason = done.ok_or_else(|| ModelError::Malformed("the stream ended before the answer was complete".into()))?;
    for (index, (id, name, arguments)) in calls {
        let name = name.ok_or_else(|| ModelError::Malformed(format!("tool call {index} has no name")))?;
        let arguments: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&arguments).map_err(|error| {
                ModelError::Malformed(format!("the arguments of tool call {index} (`{name}`) are not JSON: {error}"))
            })?
        };
        check_arguments(index, &name, &arguments)?;
        response.tool_calls.push(ToolCall { id: id.unwrap_or_default(), name, arguments });
    }
    response.finish_reason = reason;
    Ok(response)
}

/// Refuses the arguments of tool call `index` (`name`) unless they are a JSON object.
fn check_arguments(index: usize, name: &str, arguments: &Value) -> Result<(), ModelError> {
    if arguments.is_object() {
        return Ok(());
    }
    Err(ModelError::Malformed(format!("the arguments of tool call {index} (`{name}`) are not an object")))
}

/// The deltas of a whole answer: its text in word-sized pieces, then its calls, then `Done`.
pub fn stream_of(response: ModelResponse) -> ModelStream {
    let mut deltas: Vec<Result<ModelDelta, ModelError>> = Vec::new();
    let mut rest = response.text.as_str();
    while !rest.is_empty() {
        let end = rest.char_indices().skip(1).find(|(_, c)| c.is_whitespace()).map_or(rest.len(), |(at, _)| at);
        deltas.push(Ok(ModelDelta::Text(rest[..end].to_owned())));
        rest = &rest[end..];
    }
    for (index, call) in response.tool_calls.into_iter().enumerate() {
        let id = (!call.id.is_empty()).then_some(call.id);
        let arguments = call.arguments.to_string();
        deltas.push(Ok(ModelDelta::ToolCall { index, id, name: Some(call.name), arguments }));
    }
    deltas.push(Ok(ModelDelta::Done(response.finish_reason)));
    futures::stream::iter(deltas).boxed()
}

/// A model whose answers a function writes: deterministic, for tests and examples.
///
/// ```
/// use eve_tools::session::{ModelResponse, ScriptedModel};
/// // Starts a deploy, waits for it, then reports.
/// let model = ScriptedModel::new(|request| {
///     if request.mentions("<task_result") {
///         ModelResponse::text("The deploy finished.")
///     } else if request.last_user() == Some("Deploy api") {
///         ModelResponse::call("deploy", serde_json::json!({ "service": "api" }))
///     } else {
///         ModelResponse::call("task_wait", serde_json::json!({}))
///     }
/// });
/// # let _ = model;
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    script: Arc<dyn Fn(&ModelRequest) -> ModelResponse + Send + Sync>,
}

impl ScriptedModel {
    /// A model that answers each request with `script(request)`.
    pub fn new(script: impl Fn(&ModelRequest) -> ModelResponse + Send + Sync + 'static) -> Self {
        ScriptedModel { script: Arc::new(script) }
    }
}

/// Whether `value` (at nesting `level`) is the same once printed as JSON text and parsed back:
/// it holds no float, and nests well within serde_json's parsing limit.
fn survives_text(value: &Value, level: usize) -> bool {
    match value {
        Value::Number(number) => !number.is_f64(),
        Value::Array(items) => level < 64 && items.iter().all(|item| survives_text(item, level + 1)),
        Value::Object(fields) => level < 64 && fields.values().all(|field| survives_text(field, level + 1)),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel").finish_non_exhaustive()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        Ok(stream_of((self.script)(request)))
    }

    fn name(&self) -> &str {
        "scripted"
    }

    /// The script's answer as it is, without cutting its text into words and joining them again,
    /// or printing its calls' arguments and parsing them back. Arguments that this could change (a
    /// float, which serde_json parses back only to a near value, or nesting near its depth limit)
    /// still go through the stream.
    async fn answer(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = (self.script)(request);
        if !response.tool_calls.iter().all(|call| survives_text(&call.arguments, 0)) {
            return collect(stream_of(response), |_| {}).await;
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            check_arguments(index, &call.name, &call.arguments)?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_streamed_answer_is_assembled_with_its_calls_arguments_joined() {
        let deltas = vec![
            Ok(ModelDelta::Text("Deploying ".into())),
            Ok(ModelDelta::ToolCall {
                index: 0,
                id: Some("c1".into()),
                name: Some("deploy".into()),
                arguments: "{\"serv".into(),
            }),
            Ok(ModelDelta::Text("now.".into())),
            Ok(ModelDelta::ToolCall { index: 0, id: None, name: None, arguments: "ice\":\"api\"}".into() }),
            Ok(ModelDelta::Done(FinishReason::ToolCalls)),
        ];
        let mut seen = String::new();
        let response = collect(futures::stream::iter(deltas).boxed(), |text| seen.push_str(text)).await.unwrap();
        assert_eq!(seen, "Deploying now.");
        assert_eq!(
            response.tool_calls,
            [ToolCall { id: "c1".into(), name: "deploy".into(), arguments: json!({"service": "api"}) }]
        );
        let cut = vec![Ok(ModelDelta::Text("half".into()))];
        assert!(matches!(collect(futures::stream::iter(cut).boxed(), |_| {}).await, Err(ModelError::Malformed(_))));
        let response = ModelResponse::text("one two three").and_call("x", json!({"a": 1}));
        let round = collect(stream_of(response.clone()), |_| {}).await.unwrap();
        assert_eq!(round, response);
    }

    #[tokio::test]
    async fn a_scripted_answer_taken_whole_is_the_one_its_stream_assembles() {
        let own_id = ToolCall { id: "own".into(), name: "y".into(), arguments: json!({}) };
        let answers = [
            ModelResponse::text(" one  two\nthree "),
            ModelResponse::call("x", json!({"a": [1, {"b": null}], "c": "d", "n": -3})).and_text("Calling."),
            ModelResponse::call("x", json!({"ratio": 0.1})),
            ModelResponse::call("x", json!([1])),
            ModelResponse { tool_calls: vec![own_id], ..ModelResponse::default() },
        ];
        let request = ModelRequest { system: String::new(), messages: Arc::new(Vec::new()), tools: Vec::new() };
        for answer in answers {
            let model = ScriptedModel::new(move |_| answer.clone());
            let streamed = collect(model.stream(&request).await.unwrap(), |_| {}).await;
            assert_eq!(model.answer(&request).await, streamed);
        }
    }
}
