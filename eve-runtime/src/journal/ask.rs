//! The questions a run asks people, as the journal records them: the question ([`Ask`]), a
//! person's [`Answer`], and how it resolved ([`AskOutcome`]). The primitive that asks them is in
//! `crate::ask`.

use serde::{Deserialize, Serialize};

use super::Op;

/// How a channel should render a question.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Display {
    /// Buttons, typically approve / cancel.
    #[default]
    Confirmation,
    /// A menu of options.
    Select,
    /// A free-text reply.
    Text,
}

/// How an option should look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// The usual look.
    #[default]
    Default,
    /// The recommended choice.
    Primary,
    /// A destructive choice.
    Danger,
}

/// One choice a person can pick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskOption {
    /// The id the answer carries; choose one that reads well alone, such as `approve`.
    pub id: String,
    /// What the person sees.
    pub label: String,
    /// A longer explanation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How it looks.
    #[serde(default)]
    pub style: Style,
}

/// A question for a person.
///
/// ```
/// # use eve_tools::{Ask, Display};
/// let ask = Ask::confirmation("Deploy api?").option("approve", "Deploy").primary().option("cancel", "Cancel");
/// assert_eq!(ask.display, Display::Confirmation);
/// assert_eq!(ask.options.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// The question.
    pub prompt: String,
    /// How to render it.
    #[serde(default)]
    pub display: Display,
    /// The choices, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<AskOption>,
    /// Whether a typed reply is accepted (`allowFreeform` in JSON; journals written before read
    /// back with `allow_freeform`).
    #[serde(default, rename = "allowFreeform", alias = "allow_freeform")]
    pub allow_freeform: bool,
}

impl Ask {
    /// A yes/no style question; add its buttons with [`Ask::option`].
    pub fn confirmation(prompt: impl Into<String>) -> Self {
        Ask { prompt: prompt.into(), display: Display::Confirmation, options: Vec::new(), allow_freeform: false }
    }

    /// A pick-one question; add its choices with [`Ask::option`].
    pub fn select(prompt: impl Into<String>) -> Self {
        Ask { display: Display::Select, ..Ask::confirmation(prompt) }
    }

    /// A question answered in free text.
    pub fn text(prompt: impl Into<String>) -> Self {
        Ask { display: Display::Text, allow_freeform: true, ..Ask::confirmation(prompt) }
    }

    /// Adds a choice.
    pub fn option(mut self, id: impl Into<String>, label: impl Into<String>) -> Self {
        self.options.push(AskOption { id: id.into(), label: label.into(), description: None, style: Style::Default });
        self
    }

    /// Describes the last added choice.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        if let Some(option) = self.options.last_mut() {
            option.description = Some(description.into());
        }
        self
    }

    /// Marks the last added choice as the recommended one.
    pub fn primary(self) -> Self {
        self.styled(Style::Primary)
    }

    /// Marks the last added choice as destructive.
    pub fn danger(self) -> Self {
        self.styled(Style::Danger)
    }

    fn styled(mut self, style: Style) -> Self {
        if let Some(option) = self.options.last_mut() {
            option.style = style;
        }
        self
    }

    /// Also accepts a typed reply.
    pub fn allow_freeform(mut self) -> Self {
        self.allow_freeform = true;
        self
    }

    /// Whether a typed reply answers it: a text question, one that allows a free-form reply, and
    /// one without options (which could otherwise never be answered).
    pub fn takes_text(&self) -> bool {
        self.allow_freeform || self.display == Display::Text || self.options.is_empty()
    }

    /// Checks that `answer` answers this question, saying what is wrong if not.
    pub fn check(&self, answer: &Answer) -> Result<(), AnswerError> {
        if answer.option_id.is_none() && answer.text.is_none() {
            return Err(AnswerError::Empty);
        }
        if answer.option_id.is_some() && self.options.is_empty() {
            return Err(AnswerError::TextOnly);
        }
        if let Some(id) = &answer.option_id
            && !self.options.iter().any(|option| &option.id == id)
        {
            let allowed = self.options.iter().map(|option| option.id.clone()).collect();
            return Err(AnswerError::UnknownOption { given: id.clone(), allowed });
        }
        if answer.text.is_some() && !self.takes_text() {
            return Err(AnswerError::TextNotAllowed);
        }
        Ok(())
    }
}

/// A person's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The id of the option picked, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// The text typed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Answer {
    /// An answer picking the option `id`.
    pub fn option(id: impl Into<String>) -> Self {
        Answer { option_id: Some(id.into()), text: None }
    }

    /// A typed answer.
    pub fn text(text: impl Into<String>) -> Self {
        Answer { option_id: None, text: Some(text.into()) }
    }
}

/// How an ask resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AskOutcome {
    /// A person answered.
    Answered {
        /// The option picked, if any (`optionId`, as all public JSON is camelCase; journals
        /// written before read back through the alias).
        #[serde(default, rename = "optionId", alias = "option_id", skip_serializing_if = "Option::is_none")]
        option_id: Option<String>,
        /// The text typed, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The question was withdrawn (by the body, or because the run was cancelled).
    Cancelled,
    /// Nobody can answer: the run is not interactive.
    Unavailable,
}

impl AskOutcome {
    /// Whether a person picked the option `id`.
    pub fn chose(&self, id: &str) -> bool {
        matches!(self, AskOutcome::Answered { option_id: Some(chosen), .. } if chosen == id)
    }

    /// The text a person typed, if any.
    pub fn text(&self) -> Option<&str> {
        match self {
            AskOutcome::Answered { text, .. } => text.as_deref(),
            _ => None,
        }
    }

    /// The status as the event stream names it: `answered`, `cancelled` or `unavailable`.
    pub fn status(&self) -> &'static str {
        match self {
            AskOutcome::Answered { .. } => "answered",
            AskOutcome::Cancelled => "cancelled",
            AskOutcome::Unavailable => "unavailable",
        }
    }
}

impl From<Answer> for AskOutcome {
    fn from(answer: Answer) -> Self {
        AskOutcome::Answered { option_id: answer.option_id, text: answer.text }
    }
}

/// Why an answer was refused. Nothing changes when an answer is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The answer has neither an option nor text.
    #[error("the answer is empty: give `option_id`, `text`, or both")]
    Empty,
    /// The option is not one of the question's.
    #[error("`option_id` {given:?} is not one of the question's options ({})", .allowed.join(", "))]
    UnknownOption {
        /// The id given.
        given: String,
        /// The ids the question offers.
        allowed: Vec<String>,
    },
    /// The question does not accept typed text.
    #[error("`text` is not accepted: this question only takes one of its options")]
    TextNotAllowed,
    /// The question offers no options: it takes typed text.
    #[error("`option_id` is not accepted: this question takes text; answer with `text`")]
    TextOnly,
    /// The run has no open question with this id.
    #[error("run {run} has no open question {request}; it may have been answered or withdrawn already")]
    NotOpen {
        /// The run.
        run: super::RunId,
        /// The request id given.
        request: String,
    },
}

/// The input hash of an ask, for the divergence check: a changed question is a different op.
/// Hashed over the encoding asks had when they were first journaled (`allow_freeform`), so a
/// recorded ask still matches its call after the public name changed.
pub(crate) fn hash(request: &Ask) -> super::InputHash {
    #[derive(Serialize)]
    struct Hashed<'a> {
        prompt: &'a str,
        display: Display,
        #[serde(skip_serializing_if = "<[AskOption]>::is_empty")]
        options: &'a [AskOption],
        allow_freeform: bool,
    }
    let hashed = Hashed {
        prompt: &request.prompt,
        display: request.display,
        options: &request.options,
        allow_freeform: request.allow_freeform,
    };
    let bytes = serde_json::to_vec(&hashed).expect("an ask always serializes");
    super::InputHash::of(&bytes)
}

/// The id of the request an ask at `op` publishes, unique within its run.
pub fn request_id(op: Op) -> String {
    format!("ask-{}", op.0)
}

/// The op of the ask a request id names, if it names one.
pub(crate) fn request_op(request_id: &str) -> Option<Op> {
    request_id.strip_prefix("ask-")?.parse().ok().map(Op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_against_the_question() {
        let ask = Ask::confirmation("Deploy?").option("approve", "Deploy").option("cancel", "Cancel");
        assert_eq!(ask.check(&Answer::option("approve")), Ok(()));
        assert_eq!(ask.check(&Answer::default()), Err(AnswerError::Empty));
        assert_eq!(ask.check(&Answer::text("sure")), Err(AnswerError::TextNotAllowed));
        let error = ask.check(&Answer::option("yes")).unwrap_err();
        assert_eq!(error.to_string(), "`option_id` \"yes\" is not one of the question's options (approve, cancel)");
        assert_eq!(Ask::text("Why?").check(&Answer::text("because")), Ok(()));
        assert_eq!(Ask::text("Why?").check(&Answer::option("yes")), Err(AnswerError::TextOnly), "not \"one of ()\"");
    }

    /// Asks are public JSON (`input.requested`, the question lists) in camelCase, and read back
    /// from journals written with the old name; the divergence hash stays what it was, so
    /// recorded asks still replay.
    #[test]
    fn asks_speak_camel_case_and_keep_their_hash() {
        let ask = Ask::confirmation("Deploy?").option("yes", "Yes").allow_freeform();
        let public = serde_json::to_value(&ask).unwrap();
        assert_eq!(public["allowFreeform"], true, "{public}");
        assert!(public.get("allow_freeform").is_none());
        let old = r#"{"prompt":"Deploy?","display":"confirmation","options":[{"id":"yes","label":"Yes","style":"default"}],"allow_freeform":true}"#;
        assert_eq!(serde_json::from_str::<Ask>(old).unwrap(), ask, "journals written before read back");
        assert_eq!(hash(&ask), super::super::InputHash::of(old.as_bytes()), "the hash of recorded asks is unchanged");
        let plain = Ask::text("Why?");
        let old = r#"{"prompt":"Why?","display":"text","allow_freeform":true}"#;
        assert_eq!(hash(&plain), super::super::InputHash::of(old.as_bytes()));
    }

    /// A question with no options would refuse every answer and wait forever: it takes text.
    #[test]
    fn a_question_without_options_takes_text() {
        assert!(!Ask::confirmation("Go on?").option("yes", "Yes").takes_text());
        for ask in [Ask::confirmation("Go on?"), Ask::select("Which one?")] {
            assert_eq!(ask.check(&Answer::text("yes, go on")), Ok(()), "{ask:?}");
            assert!(ask.takes_text());
        }
    }

    #[test]
    fn outcomes_serialize_as_the_seed_names_them() {
        let answered = AskOutcome::from(Answer::option("approve"));
        assert_eq!(
            serde_json::to_value(&answered).unwrap(),
            serde_json::json!({"status": "answered", "optionId": "approve"})
        );
        let journaled_before: AskOutcome =
            serde_json::from_value(serde_json::json!({"status": "answered", "option_id": "approve"})).unwrap();
        assert_eq!(journaled_before, answered, "outcomes journaled with the old name still read");
        assert!(answered.chose("approve") && !answered.chose("cancel"));
        assert_eq!(serde_json::to_value(AskOutcome::Cancelled).unwrap(), serde_json::json!({"status": "cancelled"}));
    }
}
