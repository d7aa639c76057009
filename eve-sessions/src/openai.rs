//! A [`Model`] for OpenAI-compatible chat-completions APIs (OpenAI, and the many servers that
//! speak its protocol: vLLM, Ollama, LM Studio, llama.cpp, OpenRouter, ...), streamed as
//! server-sent events.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use eve_tools::prelude::*;
//! use eve_tools::session::openai::OpenAiModel;
//! // OPENAI_BASE_URL (default https://api.openai.com/v1), OPENAI_API_KEY, EVE_MODEL.
//! let model = OpenAiModel::from_env()?;
//! let runtime = Runtime::builder().model(model).build()?;
//! # let _ = runtime; Ok(()) }
//! ```
//!
//! How answers fail, and what a session then does (the model call is a step):
//! - 429, 408 and 5xx, a refused connection, a timeout or a connection cut mid-answer are
//!   [`ModelError::Unavailable`]: the step is retried, after the provider's `Retry-After`
//!   (or `retry-after-ms`) when it sent one, as a durable backoff that survives a restart.
//! - Any other refusal (a wrong key, an unknown model, a request the provider rejects) is
//!   [`ModelError::Config`], and an answer that is not the protocol (a chunk that is not JSON,
//!   tool-call arguments that are not an object, a stream that ends before the model finished)
//!   is [`ModelError::Malformed`]: the turn fails with the error, and nothing of the answer is
//!   journaled as a result.

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sse_stream::{Sse, SseStream};

use super::model::{FinishReason, Message, Model, ModelDelta, ModelError, ModelRequest, ModelStream, ToolSpec};

/// The base URL used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How much of a provider's error body an error message quotes.
const QUOTED: usize = 500;

/// Where and how to reach an OpenAI-compatible API.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API's base URL, up to and without `/chat/completions` (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The model's name, as the API knows it.
    pub model: String,
    /// The API key, sent as a bearer token; never printed.
    pub api_key: SecretString,
    /// How long connecting may take. Default 10 s.
    pub connect_timeout: Duration,
    /// How long the answer may go silent (between two pieces of the stream). Default 60 s.
    pub idle_timeout: Duration,
    /// How long one whole answer may take. Default 10 min.
    pub total_timeout: Duration,
}

impl OpenAiConfig {
    /// A configuration with the default timeouts.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, api_key: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: SecretString::from(api_key.into()),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            total_timeout: Duration::from_secs(600),
        }
    }

    /// The configuration the environment gives: `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]), `OPENAI_API_KEY` and `EVE_MODEL`. A missing variable is a
    /// [`ModelError::Config`] that names it.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env), reading variables through `lookup`.
    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let base_url = set("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let api_key = set("OPENAI_API_KEY").ok_or_else(|| {
            ModelError::Config(
                "OPENAI_API_KEY is not set: set it to the API's key (any value for a local server that takes none)"
                    .into(),
            )
        })?;
        let model = set("EVE_MODEL").ok_or_else(|| {
            ModelError::Config("EVE_MODEL is not set: set it to the model's name, e.g. EVE_MODEL=gpt-4.1-mini".into())
        })?;
        Ok(OpenAiConfig::new(base_url, model, api_key))
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &"[redacted]")
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("total_timeout", &self.total_timeout)
            .finish()
    }
}

/// A model behind an OpenAI-compatible `/chat/completions` endpoint, answering by streaming.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl OpenAiModel {
    /// A model reached as `config` says.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let url = reqwest::Url::parse(&config.base_url).map_err(|error| {
            ModelError::Config(format!(
                "the base URL {:?} is not a URL ({error}); check OPENAI_BASE_URL",
                config.base_url
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ModelError::Config(format!(
                "the base URL {:?} is not http(s); check OPENAI_BASE_URL",
                config.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.idle_timeout)
            .timeout(config.total_timeout)
            .build()
            .map_err(|error| ModelError::Config(format!("cannot build the HTTP client: {error}")))?;
        let endpoint = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(OpenAiModel { config, endpoint, client })
    }

    /// The model the environment configures (see [`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, ModelError> {
        OpenAiModel::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request_body(&self.config.model, request);
        let response = self
            .client
            .post(&self.endpoint)
            .bearer_auth(self.config.api_key.expose_secret())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .map_err(|error| unavailable(format!("cannot reach {}: {}", self.endpoint, error_chain(&error)), None))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            return Err(refusal(status, retry_after, &provider_message(&text)));
        }
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !streamed {
            // A server that ignores `stream: true` answers with one JSON completion.
            let text = response.text().await.map_err(|error| unavailable(error_chain(&error), None))?;
            return Ok(stream::iter(whole_answer(&text, &self.config.model)).boxed());
        }
        Ok(deltas(SseStream::from_bytes_stream(bytes_of(response)).boxed(), &self.config.model))
    }
}

/// The JSON body of a streamed chat-completions request.
fn request_body(model: &str, request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in request.messages.iter() {
        messages.push(match message {
            Message::User { content } => json!({ "role": "user", "content": content }),
            Message::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                json!({ "role": "assistant", "content": content })
            }
            Message::Assistant { content, tool_calls } => {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments.to_string() },
                        })
                    })
                    .collect();
                let content = if content.is_empty() { Value::Null } else { Value::from(content.as_str()) };
                json!({ "role": "assistant", "content": content, "tool_calls": calls })
            }
            Message::Tool { call_id, content } => {
                json!({ "role": "tool", "tool_call_id": call_id, "content": content })
            }
        });
    }
    // The last chunk then counts the tokens (`usage`), for `eve_model_tokens_total`.
    let options = json!({ "include_usage": true });
    let mut body = json!({ "model": model, "stream": true, "stream_options": options, "messages": messages });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(|tool| function(tool)).collect();
    }
    body
}

/// A tool as a `function` of the API, its schema in the form providers accept.
fn function(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters(&tool.input_schema),
        },
    })
}

/// A tool's input schema as providers accept it: an object schema at the root, without a
/// declared dialect (`$schema`), and without the keywords OpenAI refuses (`propertyNames`, which
/// schemars writes for maps with typed keys); the tool's own check still applies them.
pub fn parameters(schema: &Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(object) => {
                object.remove("propertyNames");
                object.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut schema = match schema {
        Value::Object(object) => Value::Object(object.clone()),
        _ => Value::Object(Map::new()),
    };
    strip(&mut schema);
    let object = schema.as_object_mut().expect("made an object above");
    object.remove("$schema");
    object.entry("type").or_insert_with(|| Value::from("object"));
    if object.get("type") == Some(&Value::from("object")) {
        object.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

/// The refusal an error status means.
fn refusal(status: reqwest::StatusCode, retry_after: Option<Duration>, said: &str) -> ModelError {
    let code = status.as_u16();
    match code {
        408 | 409 | 429 | 500..=599 => unavailable(format!("the API answered {status}: {said}"), retry_after),
        401 | 403 => ModelError::Config(format!("the API refused the key ({status}): {said}; check OPENAI_API_KEY")),
        404 => ModelError::Config(format!(
            "the API has no such endpoint or model ({status}): {said}; check OPENAI_BASE_URL and EVE_MODEL"
        )),
        _ => ModelError::Config(format!("the API refused the request ({status}): {said}")),
    }
}

fn unavailable(message: String, retry_after: Option<Duration>) -> ModelError {
    ModelError::Unavailable { message, retry_after }
}

/// The provider's error message (`{"error": {"message": …}}`), or its body, shortened.
fn provider_message(body: &str) -> String {
    let said = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| value.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned());
    let said = if said.is_empty() { "(no message)".to_owned() } else { said };
    match said.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &said[..at]),
        None => said,
    }
}

/// How long the provider asked to wait: `retry-after-ms`, else `Retry-After` in seconds or as an
/// HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(millis) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    let value = header(RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The error and its sources in one line (reqwest's own message omits the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The response body as a stream of byte chunks, ending after the first error.
fn bytes_of(response: reqwest::Response) -> BoxStream<'static, Result<bytes::Bytes, reqwest::Error>> {
    stream::unfold(Some(response), |response| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
            Ok(None) => None,
            Err(error) => Some((Err(error), None)),
        }
    })
    .boxed()
}

/// One chunk of a streamed completion (or a whole completion, whose `message` stands for the
/// `delta`).
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    error: Option<Value>,
    /// The tokens of the whole answer, in its last chunk when the request asked for them.
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default, alias = "message")]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Default, Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// What the stream has said so far about how the answer ends.
#[derive(Default)]
struct Progress {
    finish: Option<FinishReason>,
    called: bool,
    ended: bool,
    /// The model's name, for the tokens the last chunk counts.
    model: String,
}

impl Progress {
    /// Reading the answer of `model`.
    fn of(model: &str) -> Self {
        Progress { model: model.to_owned(), ..Progress::default() }
    }

    /// The deltas of one parsed chunk.
    fn chunk(&mut self, chunk: Chunk) -> Vec<Result<ModelDelta, ModelError>> {
        if let Some(usage) = &chunk.usage {
            crate::metrics::tokens_used(&self.model, usage.prompt_tokens, usage.completion_tokens);
        }
        if let Some(error) = chunk.error {
            self.ended = true;
            let said = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
            return vec![Err(unavailable(format!("the API reported an error mid-answer: {said}"), None))];
        }
        let mut deltas = Vec::new();
        // Only the first choice is read: a session asks for one.
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(text) = choice.delta.content.filter(|text| !text.is_empty()) {
                deltas.push(Ok(ModelDelta::Text(text)));
            }
            for (position, call) in choice.delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                self.called = true;
                let (name, arguments) =
                    call.function.map_or((None, None), |function| (function.name, function.arguments));
                deltas.push(Ok(ModelDelta::ToolCall {
                    index: call.index.unwrap_or(position),
                    id: call.id,
                    name,
                    arguments: arguments.unwrap_or_default(),
                }));
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(match reason.as_str() {
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    _ => FinishReason::Stop,
                });
            }
        }
        deltas
    }

    /// `Done`, with the reason the stream gave (or what its calls imply).
    fn done(&mut self) -> Result<ModelDelta, ModelError> {
        self.ended = true;
        let implied = if self.called { FinishReason::ToolCalls } else { FinishReason::Stop };
        Ok(ModelDelta::Done(self.finish.unwrap_or(implied)))
    }
}

/// The deltas of a server-sent event stream of chunks: `[DONE]` (or the end of the stream after a
/// `finish_reason`) completes the answer; a stream that ends before either is cut off.
fn deltas(events: BoxStream<'static, Result<Sse, sse_stream::Error>>, model: &str) -> ModelStream {
    stream::unfold((events, Progress::of(model)), |(mut events, mut progress)| async move {
        if progress.ended {
            return None;
        }
        let batch = match events.next().await {
            None if progress.finish.is_some() => vec![progress.done()],
            None => {
                progress.ended = true;
                vec![Err(ModelError::Malformed(
                    "the answer was cut off: the stream ended before the model finished (no finish_reason, no [DONE])"
                        .into(),
                ))]
            }
            Some(Err(error)) => {
                progress.ended = true;
                vec![Err(unavailable(format!("the answer's stream broke: {}", error_chain(&error)), None))]
            }
            Some(Ok(event)) => match event.data.as_deref().map(str::trim) {
                None | Some("") => Vec::new(),
                Some("[DONE]") => vec![progress.done()],
                Some(data) => match serde_json::from_str::<Chunk>(data) {
                    Ok(chunk) => progress.chunk(chunk),
                    Err(error) => {
                        progress.ended = true;
                        vec![Err(ModelError::Malformed(format!("a streamed chunk is not a completion chunk: {error}")))]
                    }
                },
            },
        };
        Some((stream::iter(batch), (events, progress)))
    })
    .flatten()
    .boxed()
}

/// The deltas of one whole (not streamed) completion.
fn whole_answer(body: &str, model: &str) -> Vec<Result<ModelDelta, ModelError>> {
    let chunk = match serde_json::from_str::<Chunk>(body) {
        Ok(chunk) if chunk.error.is_some() || !chunk.choices.is_empty() => chunk,
        Ok(_) => return vec![Err(ModelError::Malformed("the completion has no choices".into()))],
        Err(error) => return vec![Err(ModelError::Malformed(format!("the completion is not JSON: {error}")))],
    };
    let mut progress = Progress::of(model);
    let mut deltas = progress.chunk(chunk);
    if !progress.ended {
        deltas.push(progress.done());
    }
    deltas
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
    }

    #[test]
    fn a_missing_variable_is_named() {
        let error = OpenAiConfig::from_lookup(lookup(&[("EVE_MODEL", "m")])).unwrap_err();
        assert!(matches!(&error, ModelError::Config(message) if message.starts_with("OPENAI_API_KEY is not set")));
        let error = OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", "k"), ("EVE_MODEL", " ")])).unwrap_err();
        assert!(error.to_string().contains("EVE_MODEL is not set"), "{error}");
        let config = OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", "sk-1"), ("EVE_MODEL", "m")])).unwrap();
        assert_eq!((config.base_url.as_str(), config.model.as_str()), (DEFAULT_BASE_URL, "m"));
        assert!(!format!("{config:?}").contains("sk-1"), "the key is never printed");
        let bad = OpenAiModel::new(OpenAiConfig::new("ftp://x", "m", "k")).unwrap_err();
        assert!(bad.to_string().contains("check OPENAI_BASE_URL"), "{bad}");
    }

    #[test]
    fn schemas_lose_what_providers_refuse() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "labels": { "type": "object", "propertyNames": { "pattern": "^[a-z]+$" } } },
        });
        let sent = parameters(&schema);
        assert!(sent.get("$schema").is_none());
        assert!(!sent.to_string().contains("propertyNames"));
        assert_eq!(parameters(&json!(true)), json!({ "type": "object", "properties": {} }));
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        let mut headers = HeaderMap::new();
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        headers.insert(RETRY_AFTER, later.parse().unwrap());
        let wait = retry_after(&headers).unwrap();
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120), "{wait:?}");
        headers.insert(RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn a_whole_completion_is_read_as_one_answer() {
        let body = r#"{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"c1","type":"function",
            "function":{"name":"deploy","arguments":"{\"service\":\"api\"}"}}]},"finish_reason":"tool_calls"}]}"#;
        let deltas: Vec<_> = whole_answer(body, "m").into_iter().map(Result::unwrap).collect();
        assert_eq!(deltas.len(), 3);
        assert_eq!(deltas[0], ModelDelta::Text("hi".into()));
        assert_eq!(deltas[2], ModelDelta::Done(FinishReason::ToolCalls));
        assert!(matches!(&whole_answer("{}", "m")[0], Err(ModelError::Malformed(_))));
    }
}
