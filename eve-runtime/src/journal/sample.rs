//! Sampling: a question for the calling client's model rather than a person, as the journal
//! records it. The request ([`Sampling`]) has the shape of MCP's `sampling/createMessage`
//! (messages, system prompt, token limit, model preferences), and its answer ([`Completion`])
//! that of its result (role, content, model, stop reason), both in eve's own types and camelCase
//! JSON, so the journal names no protocol crate and a surface maps them with serde alone.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who says a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person (or the tool, speaking for them).
    User,
    /// The model.
    Assistant,
}

/// What a message holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// The bytes, base64-encoded.
        data: String,
        /// Its media type, such as `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// The bytes, base64-encoded.
        data: String,
        /// Its media type, such as `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

/// One message of the conversation sent to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// What it says.
    pub content: Content,
}

/// A model name (or family) the client should prefer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelHint {
    /// A name or part of one, such as `claude`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What the client should weigh when it picks a model: each priority from 0 to 1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Models to prefer, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<ModelHint>,
    /// How much a cheap model matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<f64>,
    /// How much a fast model matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<f64>,
    /// How much a capable model matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<f64>,
}

/// A request for a completion from the calling client's model (`ctx.sample`).
///
/// ```
/// # use eve_tools::sample::Sampling;
/// let request = Sampling::user("What is the capital of France?", 100).system("Answer in one word.");
/// assert_eq!(request.max_tokens, 100);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sampling {
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The system prompt, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The most tokens the completion may take.
    pub max_tokens: u32,
    /// What to weigh when choosing a model, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// The sampling temperature, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sequences that end the completion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
}

// Its numbers come from JSON, which has no NaN, so equality is total, as `Ask`'s must be.
impl Eq for Sampling {}

impl Sampling {
    /// A request of one user message, `text`, for at most `max_tokens` tokens.
    pub fn user(text: impl Into<String>, max_tokens: u32) -> Self {
        let message = Message { role: Role::User, content: Content::Text { text: text.into() } };
        Sampling {
            messages: vec![message],
            system_prompt: None,
            max_tokens,
            model_preferences: None,
            temperature: None,
            stop_sequences: Vec::new(),
        }
    }

    /// With the system prompt `prompt`.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// What people see of it where it is listed with questions: the last message's text.
    pub fn summary(&self) -> String {
        let text = self.messages.iter().rev().find_map(|message| match &message.content {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        });
        format!("A completion from the client's model for: {}", text.unwrap_or("(no text)"))
    }
}

/// The client's model's completion: what a sampling request resolves with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// Who says it: the model (`assistant`).
    pub role: Role,
    /// What it says.
    pub content: Content,
    /// The model that made it.
    pub model: String,
    /// Why it stopped (`endTurn`, `stopSequence`, `maxTokens`), if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

impl Completion {
    /// The completion's text, if it is text.
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            Content::Text { text } => Some(text),
            _ => None,
        }
    }

    /// Reads a completion from an answer's value, naming the field at fault.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        serde_path_to_error::deserialize(value).map_err(|error| {
            let at = error.path().to_string();
            let at = if at == "." { String::new() } else { format!(" at `{at}`") };
            format!(
                "not a completion{at}: {}; a completion is {{\"role\": \"assistant\", \"content\": {{\"type\": \"text\", \
                 \"text\": \"…\"}}, \"model\": \"…\"}}",
                error.inner()
            )
        })
    }
}
