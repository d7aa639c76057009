//! The questions a run asks people, as the journal records them: the question ([`Ask`]), a
//! person's [`Answer`], and how it resolved ([`AskOutcome`]). The primitive that asks them is in
//! `crate::ask`. A form ([`Ask::form`]) is a question answered with a JSON value checked
//! against its schema (`super::form`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Op;
pub use super::form::{FieldRefusal, FormError};
use super::sample::{Completion, Sampling};

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
    /// A form of several fields, described by the question's [`schema`](Ask::schema).
    Form,
    /// A request for the calling client's model, [`sampling`](Ask::sampling), answered with
    /// its completion.
    Sampling,
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
    /// A form's JSON Schema (the shape `super::form` describes): the answer is a `value` that
    /// fits it. `None` for other questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// A request for the client's model (`ctx.sample`): the answer is a `value` holding its
    /// [`Completion`]. `None` for questions to people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Box<Sampling>>,
}

impl Ask {
    /// A yes/no style question; add its buttons with [`Ask::option`].
    pub fn confirmation(prompt: impl Into<String>) -> Self {
        Ask {
            prompt: prompt.into(),
            display: Display::Confirmation,
            options: Vec::new(),
            allow_freeform: false,
            schema: None,
            sampling: None,
        }
    }

    /// A form whose fields are those of `T`: answered with a value of `T`, which
    /// [`WorkflowCtx::ask_form`](crate::context::WorkflowCtx::ask_form) hands the body typed.
    /// `T`'s fields must be strings, numbers, integers, booleans or choices of strings (unit-only
    /// enums, alone or in a `Vec`): what MCP elicitation, and so every channel, can show.
    ///
    /// ```
    /// # use eve_tools::{Ask, Display};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Release {
    ///     /// The version to release.
    ///     version: String,
    ///     /// How many replicas to run.
    ///     #[serde(default = "three")]
    ///     replicas: u8,
    /// }
    /// fn three() -> u8 { 3 }
    ///
    /// let ask = Ask::form::<Release>("Release which version?").unwrap();
    /// assert_eq!(ask.display, Display::Form);
    /// let schema = ask.schema.unwrap();
    /// assert_eq!(schema["required"], serde_json::json!(["version"]));
    /// assert_eq!(schema["properties"]["replicas"]["default"], 3);
    /// ```
    ///
    /// # Errors
    ///
    /// A field of `T` a form cannot show (a nested struct, a map), named.
    pub fn form<T: schemars::JsonSchema>(prompt: impl Into<String>) -> Result<Self, FormError> {
        let settings = schemars::generate::SchemaSettings::default().with(|settings| settings.inline_subschemas = true);
        let schema = settings.into_generator().into_root_schema_for::<T>();
        let schema = serde_json::to_value(schema).expect("a JSON Schema always serializes to JSON");
        Ask::form_with_schema(prompt, &T::schema_name(), &schema)
    }

    /// A request for a completion from the calling client's model: over MCP a
    /// `sampling/createMessage`, elsewhere listed with the questions and answered with a
    /// [`Completion`] as the `value`.
    pub fn sampling(request: Sampling) -> Self {
        let prompt = request.summary();
        Ask { display: Display::Sampling, sampling: Some(Box::new(request)), ..Ask::confirmation(prompt) }
    }

    /// A form described by a JSON Schema of an object (subschemas inlined) rather than a type:
    /// answered with a JSON value that fits it. `what` names the form in errors.
    ///
    /// # Errors
    ///
    /// The schema is not an object of fields a form can show; the error names the field.
    pub fn form_with_schema(prompt: impl Into<String>, what: &str, schema: &Value) -> Result<Self, FormError> {
        let schema = super::form::schema(what, schema)?;
        Ok(Ask { display: Display::Form, schema: Some(schema), ..Ask::confirmation(prompt) })
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
        self.schema.is_none()
            && self.sampling.is_none()
            && (self.allow_freeform || self.display == Display::Text || self.options.is_empty())
    }

    /// Checks that `answer` answers this question, saying what is wrong if not. A person may
    /// decline or dismiss any question (an answer whose [`action`](Answer::action) is not
    /// `accept`), with nothing else in the answer.
    pub fn check(&self, answer: &Answer) -> Result<(), AnswerError> {
        let has_content = answer.option_id.is_some() || answer.text.is_some() || answer.value.is_some();
        if answer.action != AnswerAction::Accept {
            return if has_content { Err(AnswerError::ContentWithRefusal) } else { Ok(()) };
        }
        if let Some(schema) = &self.schema {
            return self.check_form(schema, answer);
        }
        if self.sampling.is_some() {
            let Some(value) = answer.value.as_ref().filter(|_| answer.option_id.is_none() && answer.text.is_none())
            else {
                return Err(AnswerError::CompletionNeeded);
            };
            return Completion::from_value(value).map(drop).map_err(AnswerError::NotACompletion);
        }
        if answer.value.is_some() {
            return Err(AnswerError::ValueNotAccepted);
        }
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

    /// Checks the answer to a form: a `value` that fits its schema, and nothing else.
    fn check_form(&self, schema: &Value, answer: &Answer) -> Result<(), AnswerError> {
        let Some(value) = &answer.value else { return Err(AnswerError::FormNeedsValue) };
        if answer.option_id.is_some() || answer.text.is_some() {
            return Err(AnswerError::FormNeedsValue);
        }
        super::form::check(schema, value)
            .map_err(|FieldRefusal { field, message }| AnswerError::InvalidValue { field, message })
    }
}

/// What a person did with a question: answered it, declined it, or dismissed it (MCP's
/// elicitation `action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerAction {
    /// Answered it, with the answer's option, text or value.
    #[default]
    Accept,
    /// Said no: the ask resolves [`AskOutcome::Declined`].
    Decline,
    /// Dismissed it without choosing: the ask resolves [`AskOutcome::Cancelled`].
    Cancel,
}

impl AnswerAction {
    fn is_accept(&self) -> bool {
        *self == AnswerAction::Accept
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
    /// The value filled in, for a form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Whether the person answered (the default), declined or dismissed the question.
    #[serde(default, skip_serializing_if = "AnswerAction::is_accept")]
    pub action: AnswerAction,
}

impl Answer {
    /// An answer picking the option `id`.
    pub fn option(id: impl Into<String>) -> Self {
        Answer { option_id: Some(id.into()), ..Answer::default() }
    }

    /// A typed answer.
    pub fn text(text: impl Into<String>) -> Self {
        Answer { text: Some(text.into()), ..Answer::default() }
    }

    /// A form filled in with `value`.
    pub fn value(value: Value) -> Self {
        Answer { value: Some(value), ..Answer::default() }
    }

    /// The person declined the question: it resolves [`AskOutcome::Declined`].
    pub fn declined() -> Self {
        Answer { action: AnswerAction::Decline, ..Answer::default() }
    }

    /// The person dismissed the question without choosing: it resolves
    /// [`AskOutcome::Cancelled`].
    pub fn dismissed() -> Self {
        Answer { action: AnswerAction::Cancel, ..Answer::default() }
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
        /// The value filled in, for a form.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
    },
    /// A person declined the question (MCP's `decline`).
    Declined,
    /// The question was withdrawn (by the body, or because the run was cancelled), or a person
    /// dismissed it without choosing (MCP's `cancel`).
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

    /// The value a person filled in, for a form.
    pub fn value(&self) -> Option<&Value> {
        match self {
            AskOutcome::Answered { value, .. } => value.as_ref(),
            _ => None,
        }
    }

    /// The status as the event stream names it: `answered`, `declined`, `cancelled` or
    /// `unavailable`.
    pub fn status(&self) -> &'static str {
        match self {
            AskOutcome::Answered { .. } => "answered",
            AskOutcome::Declined => "declined",
            AskOutcome::Cancelled => "cancelled",
            AskOutcome::Unavailable => "unavailable",
        }
    }
}

impl From<Answer> for AskOutcome {
    fn from(answer: Answer) -> Self {
        match answer.action {
            AnswerAction::Accept => {
                AskOutcome::Answered { option_id: answer.option_id, text: answer.text, value: answer.value }
            }
            AnswerAction::Decline => AskOutcome::Declined,
            AnswerAction::Cancel => AskOutcome::Cancelled,
        }
    }
}

/// Why an answer was refused. Nothing changes when an answer is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The answer has neither an option nor text.
    #[error("the answer is empty: give `option_id`, `text`, or both")]
    Empty,
    /// The question is a form: it is answered with a `value` alone.
    #[error("this question is a form: answer with `value`, a JSON object of its fields (see its `schema`)")]
    FormNeedsValue,
    /// The value does not fit the form's schema.
    #[error("the value does not fit the form: {message}")]
    InvalidValue {
        /// The field at fault, if one is (`None`: the value as a whole).
        field: Option<String>,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The request is for the client's model: it is answered with a completion as `value`.
    #[error(
        "this request is for the client's model: answer with `value`, its completion \
         ({{\"role\": \"assistant\", \"content\": {{\"type\": \"text\", \"text\": \"…\"}}, \"model\": \"…\"}})"
    )]
    CompletionNeeded,
    /// The value is not a completion.
    #[error("the value is {0}")]
    NotACompletion(String),
    /// A value was given to a question that is not a form.
    #[error("`value` is not accepted: this question is not a form; answer with `option_id` or `text`")]
    ValueNotAccepted,
    /// A declined or dismissed answer carried an option, text or value.
    #[error("a declined or dismissed answer carries no `option_id`, `text` or `value`; give the action alone")]
    ContentWithRefusal,
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
        // Fields added later are left out when absent, so the asks journaled before hash as
        // they did.
        #[serde(skip_serializing_if = "Option::is_none")]
        schema: Option<&'a Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        sampling: Option<&'a Sampling>,
    }
    let hashed = Hashed {
        prompt: &request.prompt,
        display: request.display,
        options: &request.options,
        allow_freeform: request.allow_freeform,
        schema: request.schema.as_ref(),
        sampling: request.sampling.as_deref(),
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

    /// A form takes a value that fits its schema and nothing else; any question may be declined
    /// or dismissed, with nothing else in the answer.
    #[test]
    fn forms_take_a_value_and_any_question_a_refusal() {
        let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let form = Ask::form_with_schema("How many?", "the schema", &schema).unwrap();
        assert_eq!(form.check(&Answer::value(serde_json::json!({"n": 3}))), Ok(()));
        let error = form.check(&Answer::value(serde_json::json!({}))).unwrap_err();
        assert_eq!(error.to_string(), "the value does not fit the form: field `n` is required");
        assert_eq!(form.check(&Answer::text("3")), Err(AnswerError::FormNeedsValue));
        assert_eq!(Ask::text("Why?").check(&Answer::value(serde_json::json!({}))), Err(AnswerError::ValueNotAccepted));
        for ask in [form, Ask::text("Why?"), Ask::confirmation("Go?").option("yes", "Yes")] {
            assert_eq!(ask.check(&Answer::declined()), Ok(()));
            assert_eq!(ask.check(&Answer::dismissed()), Ok(()));
            let mixed = Answer { text: Some("no".into()), ..Answer::declined() };
            assert_eq!(ask.check(&mixed), Err(AnswerError::ContentWithRefusal));
        }
        assert_eq!(AskOutcome::from(Answer::declined()), AskOutcome::Declined);
        assert_eq!(AskOutcome::from(Answer::dismissed()), AskOutcome::Cancelled);
        let filled = AskOutcome::from(Answer::value(serde_json::json!({"n": 3})));
        assert_eq!(
            serde_json::to_value(&filled).unwrap(),
            serde_json::json!({"status": "answered", "value": {"n": 3}})
        );
        assert_eq!(serde_json::to_value(AskOutcome::Declined).unwrap(), serde_json::json!({"status": "declined"}));
    }

    /// A person's answer as the inbox keeps it: the fields forms added are left out when unused,
    /// so answers stored before read back, and read the same.
    #[test]
    fn answers_stored_before_forms_read_back() {
        let old: Answer = serde_json::from_str(r#"{"option_id":"approve"}"#).unwrap();
        assert_eq!(old, Answer::option("approve"));
        assert_eq!(serde_json::to_string(&old).unwrap(), r#"{"option_id":"approve"}"#);
        let declined = serde_json::to_value(Answer::declined()).unwrap();
        assert_eq!(declined, serde_json::json!({"action": "decline"}));
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
