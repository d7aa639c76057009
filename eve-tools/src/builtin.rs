//! The tools eve provides to every agent: `ask_question` and `sleep`.
//!
//! Both are workflow tools built on the same primitives user tools use. A new message in the
//! conversation cancels the turn's run, which withdraws the question or ends the sleep early, as
//! the seed's provided tools do.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{Ask, AskOutcome, ToolError, WorkflowCtx, workflow_tool};

/// The input of `ask_question`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskQuestionInput {
    /// The question to show the person.
    pub prompt: String,
    /// How to render it: `confirmation`, `select` or `text`.
    #[serde(default)]
    pub display: Option<DisplayInput>,
    /// The choices, if any.
    #[serde(default)]
    pub options: Vec<OptionInput>,
    /// Whether a typed reply is accepted.
    #[serde(default, rename = "allowFreeform")]
    pub allow_freeform: bool,
}

/// How to render a question.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DisplayInput {
    /// Buttons.
    Confirmation,
    /// A menu.
    Select,
    /// A free-text reply.
    Text,
}

/// One choice offered to the person.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionInput {
    /// The id the answer carries.
    pub id: String,
    /// What the person sees.
    pub label: String,
    /// A longer explanation.
    #[serde(default)]
    pub description: Option<String>,
}

/// Ask the user a question and wait for their answer. Use it when you cannot continue without a
/// decision or a detail only the user has.
#[workflow_tool(crate = "crate")]
pub async fn ask_question(input: AskQuestionInput, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    let mut ask = match input.display {
        Some(DisplayInput::Select) => Ask::select(input.prompt),
        Some(DisplayInput::Text) => Ask::text(input.prompt),
        Some(DisplayInput::Confirmation) | None => Ask::confirmation(input.prompt),
    };
    for option in input.options {
        ask = ask.option(option.id, option.label);
        if let Some(description) = option.description {
            ask = ask.description(description);
        }
    }
    if input.allow_freeform {
        ask = ask.allow_freeform();
    }
    Ok(ctx.ask(ask).await)
}

/// The input of `sleep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SleepInput {
    /// How long to wait, in whole seconds (at least 1).
    #[schemars(range(min = 1))]
    pub seconds: u64,
}

/// What `sleep` answers when a new message ends it early (a model-facing string, pinned verbatim).
pub const SLEEP_INTERRUPTED: &str = "Stopped early because a new message arrived.";

/// What `sleep` answers when its time ran out.
fn slept(seconds: u64) -> String {
    let unit = if seconds == 1 { "second" } else { "seconds" };
    format!("Slept {seconds} {unit}.")
}

/// Wait for a number of seconds without holding compute, then continue. A new message ends the
/// wait early.
#[workflow_tool(crate = "crate", name = "sleep")]
pub async fn sleep_tool(input: SleepInput, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    if input.seconds == 0 {
        return Err(ToolError::new("`seconds` must be at least 1"));
    }
    Ok(match crate::sleep(Duration::from_secs(input.seconds)).await {
        Ok(()) => slept(input.seconds),
        Err(crate::Cancelled) => SLEEP_INTERRUPTED.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_sleep_answers_is_pinned_verbatim() {
        assert_eq!(SLEEP_INTERRUPTED, "Stopped early because a new message arrived.");
        assert_eq!((slept(1), slept(30)), ("Slept 1 second.".to_owned(), "Slept 30 seconds.".to_owned()));
    }
}
