//! Questions and sign-ins as MCP input requests, and the client's responses as answers.
//!
//! A form (`ctx.ask_form`) becomes a form elicitation whose `requestedSchema` is the form's own
//! schema, journaled with it (defaults, SEP-1034; titled and multiple choices, SEP-1330); an
//! `accept`'s `content` is its value, checked against the schema before the run gets it.
//!
//! Any other question becomes a form elicitation too: its prompt is the message; its options a
//! single-select `choice` (titled with their labels, the default being the primary option, else
//! the first); a question that takes typed text a `text` field. An `accept` maps back: with
//! `choice` and/or `text`, that answer; with neither, the only string field of the content as the
//! text, for a question that takes text (a client may name the field after what it asks,
//! `{"name": "Ada"}`), else the default option (a client that shows the default preselected may
//! omit it).
//!
//! For every question, `decline` ("no") resolves it as declined and `cancel` ("not now") as
//! cancelled: outcomes the body sees and acts on. One exception keeps the older mapping: a
//! declined two-option confirmation picks the option that is not the default (`cancel` of
//! approve/cancel), which is what a person declining "Deploy?" means. (Before forms, a decline
//! of any other question and every `cancel` cancelled the whole run.)
//!
//! A request for the client's model (`ctx.sample`) becomes a `sampling/createMessage` input
//! request, its parameters those the run journaled; the client's result is the completion,
//! checked before the run gets it. A client that answers the request with a JSON-RPC error
//! (`{"code": …, "message": …}`; its user rejected it, say) declines it: the body sees
//! `SampleOutcome::Declined`.
//!
//! A sign-in becomes a URL elicitation carrying the sign-in link. Its response only says whether
//! the person went there: the sign-in itself completes through the provider's callback; a
//! `decline` or `cancel` cancels the run.

use rmcp::ErrorData;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
};
use serde_json::{Value, json};

use eve_runtime::ask::{Answer, AnswerError, Ask, Display, Style};

/// The field a question's options are chosen with.
const CHOICE: &str = "choice";
/// The field a question's typed answer goes in.
const TEXT: &str = "text";

/// The input request key of the sign-in a step at `op` waits for.
pub(crate) fn sign_in_key(op: u32) -> String {
    format!("sign-in-{op}")
}

/// What a response to an input request asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Response {
    /// Answer the question so (or decline or dismiss it).
    Answer(Answer),
    /// The person went to the sign-in link; nothing to deliver.
    Acknowledged,
    /// Cancel the run.
    Stop,
}

/// The input request `ask` becomes: a sampling request for the client's model, else a form
/// elicitation.
pub(crate) fn question_input(ask: &Ask) -> Result<InputRequest, ErrorData> {
    let Some(sampling) = &ask.sampling else { return Ok(input_request(question_request(ask)?)) };
    let params = serde_json::to_value(sampling).and_then(serde_json::from_value).map_err(|error| {
        ErrorData::internal_error(format!("cannot express the sampling request as MCP's: {error}"), None)
    })?;
    #[allow(deprecated, reason = "sampling is deprecated by SEP-2577, and still what clients answer")]
    Ok(InputRequest::CreateMessage(rmcp::model::CreateMessageRequest::new(params)))
}

/// The elicitation `ask` becomes.
pub(crate) fn question_request(ask: &Ask) -> Result<ElicitRequestParams, ErrorData> {
    let schema = match &ask.schema {
        Some(schema) => schema.clone(),
        None => choice_schema(ask),
    };
    let requested_schema: ElicitationSchema = serde_json::from_value(schema).map_err(|error| {
        ErrorData::internal_error(
            format!("cannot express the question {:?} as an elicitation: {error}", ask.prompt),
            None,
        )
    })?;
    Ok(ElicitRequestParams::FormElicitationParams { meta: None, message: ask.prompt.clone(), requested_schema })
}

/// The schema of a question that is not a form: a `choice` of its options, a `text` field.
fn choice_schema(ask: &Ask) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    if !ask.options.is_empty() {
        let one_of: Vec<Value> =
            ask.options.iter().map(|option| json!({"const": option.id, "title": option.label})).collect();
        let mut choice = json!({"type": "string", "title": "Choice", "oneOf": one_of});
        if let Some(default) = default_option(ask) {
            choice["default"] = Value::from(default);
        }
        properties.insert(CHOICE.to_owned(), choice);
        if !takes_text(ask) {
            required.push(CHOICE);
        }
    }
    if takes_text(ask) {
        properties.insert(TEXT.to_owned(), json!({"type": "string", "title": "Answer"}));
        if ask.options.is_empty() {
            required.push(TEXT);
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// The URL elicitation of a sign-in with `provider` at `url`. `id` names it on revisions that
/// have elicitation ids; 2026-07-28 removed them (rmcp writes an empty one).
pub(crate) fn sign_in_request(provider: &str, url: &str, id: String) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!("Sign in with {provider} so the tool can go on; it continues once you have signed in."),
        url: url.to_owned(),
        elicitation_id: id,
    }
}

/// `params` as an input request.
pub(crate) fn input_request(params: ElicitRequestParams) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(params))
}

/// What the response `value`, under the key of a question `ask`, asks for; the error names the
/// field at fault below `field` (the response's JSON path).
pub(crate) fn question_response(ask: &Ask, value: &Value, field: &str) -> Result<Response, String> {
    if ask.sampling.is_some() {
        if is_error_response(value) {
            return Ok(Response::Answer(Answer::declined()));
        }
        let answer = Answer::value(value.clone());
        return match ask.check(&answer) {
            Ok(()) => Ok(Response::Answer(answer)),
            Err(error) => Err(format!("`{field}`: {error}")),
        };
    }
    let result = elicit_result(value, field)?;
    match result.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return Ok(Response::Answer(declined(ask))),
        _ => return Ok(Response::Answer(Answer::dismissed())),
    }
    let content = result.content.unwrap_or(Value::Null);
    if ask.schema.is_some() {
        let answer = Answer::value(if content.is_null() { json!({}) } else { content });
        return match ask.check(&answer) {
            Ok(()) => Ok(Response::Answer(answer)),
            Err(AnswerError::InvalidValue { field: Some(name), message }) => {
                Err(format!("`{field}.content.{name}`: {message}"))
            }
            Err(error) => Err(format!("`{field}.content`: {error}")),
        };
    }
    let string = |name: &str| match content.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => {
            Err(format!("`{field}.content.{name}` must be a string, not {}", eve_runtime::registry::json_kind(other)))
        }
    };
    let mut answer = Answer { option_id: string(CHOICE)?, text: string(TEXT)?, ..Answer::default() };
    if answer.option_id.is_none() && answer.text.is_none() {
        answer.text = only_string(&content).filter(|_| takes_text(ask));
    }
    if answer.option_id.is_none() && answer.text.is_none() {
        answer.option_id = default_option(ask).map(str::to_owned);
    }
    ask.check(&answer).map_err(|error| {
        let at = if answer.option_id.is_some() { CHOICE } else { TEXT };
        format!("`{field}.content.{at}`: {error}")
    })?;
    Ok(Response::Answer(answer))
}

/// Whether `value` is a JSON-RPC error object, a client's refusal of a request: an integer
/// `code` and a string `message` (a completion has neither).
fn is_error_response(value: &Value) -> bool {
    value.get("code").is_some_and(Value::is_i64) && value.get("message").is_some_and(Value::is_string)
}

/// What the response `value` to a sign-in's URL elicitation asks for.
pub(crate) fn sign_in_response(value: &Value, field: &str) -> Result<Response, String> {
    Ok(match elicit_result(value, field)?.action {
        ElicitationAction::Accept => Response::Acknowledged,
        _ => Response::Stop,
    })
}

fn elicit_result(value: &Value, field: &str) -> Result<ElicitResult, String> {
    serde_json::from_value(value.clone()).map_err(|error| {
        format!("`{field}` is not an elicitation result (`{{\"action\": \"accept\", \"content\": {{…}}}}`): {error}")
    })
}

/// A declined question: the other option of a two-option confirmation, else declined.
fn declined(ask: &Ask) -> Answer {
    let default = default_option(ask);
    match (&ask.display, ask.options.as_slice()) {
        (Display::Confirmation, [first, second]) => {
            let other = if Some(first.id.as_str()) == default { second } else { first };
            Answer::option(other.id.clone())
        }
        _ => Answer::declined(),
    }
}

/// The one string in an object of other fields (`{"name": "Ada"}`), if it has exactly one.
fn only_string(content: &Value) -> Option<String> {
    let mut strings = content.as_object()?.values().filter_map(Value::as_str);
    let only = strings.next()?;
    strings.next().is_none().then(|| only.to_owned())
}

/// The option chosen when none is named: the primary one, else the first.
fn default_option(ask: &Ask) -> Option<&str> {
    let primary = ask.options.iter().find(|option| option.style == Style::Primary);
    primary.or(ask.options.first()).map(|option| option.id.as_str())
}

fn takes_text(ask: &Ask) -> bool {
    ask.takes_text()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy() -> Ask {
        Ask::confirmation("Deploy api?").option("approve", "Deploy").primary().option("cancel", "Cancel")
    }

    #[test]
    fn questions_become_form_elicitations() {
        let params = serde_json::to_value(question_request(&deploy()).unwrap()).unwrap();
        assert_eq!(params["mode"], "form");
        assert_eq!(params["message"], "Deploy api?");
        let schema = &params["requestedSchema"];
        assert_eq!(schema["required"], json!(["choice"]));
        assert_eq!(schema["properties"]["choice"]["oneOf"][1], json!({"const": "cancel", "title": "Cancel"}));
        assert_eq!(schema["properties"]["choice"]["default"], "approve");

        let text = serde_json::to_value(question_request(&Ask::text("Why?")).unwrap()).unwrap();
        assert_eq!(text["requestedSchema"]["required"], json!(["text"]));
        assert!(text["requestedSchema"]["properties"].get("choice").is_none());

        // A question without options is answered in words, not left without a field.
        let bare = serde_json::to_value(question_request(&Ask::confirmation("Go on?")).unwrap()).unwrap();
        assert_eq!(bare["requestedSchema"]["required"], json!(["text"]));
    }

    #[test]
    fn responses_become_answers_or_stops() {
        let answer = |ask: &Ask, value: Value| question_response(ask, &value, "inputResponses.ask-0");
        let option = |id: &str| Ok(Response::Answer(Answer::option(id)));
        // (question, response, what it asks for)
        let cases = [
            (deploy(), json!({"action": "accept", "content": {"choice": "cancel"}}), option("cancel")),
            (deploy(), json!({"action": "accept", "content": {"confirm": true}}), option("approve")),
            (deploy(), json!({"action": "accept"}), option("approve")),
            (deploy(), json!({"action": "decline"}), option("cancel")),
            (deploy(), json!({"action": "cancel"}), Ok(Response::Answer(Answer::dismissed()))),
            (
                Ask::text("Why?"),
                json!({"action": "accept", "content": {"text": "because"}}),
                Ok(Response::Answer(Answer::text("because"))),
            ),
            (Ask::text("Why?"), json!({"action": "decline"}), Ok(Response::Answer(Answer::declined()))),
            (
                Ask::text("Name?"),
                json!({"action": "accept", "content": {"name": "Ada"}}),
                Ok(Response::Answer(Answer::text("Ada"))),
            ),
        ];
        for (ask, value, expected) in cases {
            assert_eq!(answer(&ask, value.clone()), expected, "{value}");
        }
        let refused = answer(&deploy(), json!({"action": "accept", "content": {"choice": "yes"}})).unwrap_err();
        assert!(refused.starts_with("`inputResponses.ask-0.content.choice`: `option_id` \"yes\""), "{refused}");
        let refused = answer(&Ask::text("Why?"), json!({"action": "accept", "content": {"text": 3}})).unwrap_err();
        assert_eq!(refused, "`inputResponses.ask-0.content.text` must be a string, not a number");
        assert!(answer(&deploy(), json!({"nope": 1})).is_err());
    }

    /// A sampling request's response is the completion, or a client's error, which declines it;
    /// anything else is refused, naming what a completion is.
    #[test]
    fn sampling_responses_are_completions_or_refusals() {
        let ask = Ask::sampling(eve_runtime::ask::Sampling::user("Say hi.", 10));
        let answer = |value: Value| question_response(&ask, &value, "elicitation.ask-0");
        let completion = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
        assert_eq!(answer(completion.clone()), Ok(Response::Answer(Answer::value(completion))));
        let rejected = json!({"code": -1, "message": "the user rejected the request"});
        assert_eq!(answer(rejected), Ok(Response::Answer(Answer::declined())));
        let refused = answer(json!({"role": "assistant", "content": {"type": "text"}, "model": "m"})).unwrap_err();
        assert!(refused.starts_with("`elicitation.ask-0`: the value is not a completion at `content`"), "{refused}");
    }

    /// A form is sent with its own schema, and its `content` is its value, checked against it.
    #[test]
    fn forms_are_elicited_with_their_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "env": {"type": "string", "oneOf": [{"const": "prod", "title": "Production"}], "default": "prod"},
                "replicas": {"type": "integer", "minimum": 1},
            },
            "required": ["replicas"],
        });
        let form = Ask::form_with_schema("Deploy how?", "the schema", &schema).unwrap();
        let params = serde_json::to_value(question_request(&form).unwrap()).unwrap();
        assert_eq!(params["requestedSchema"], schema, "sent as journaled");
        let answer = |value: Value| question_response(&form, &value, "elicitation.ask-0");
        let accepted = answer(json!({"action": "accept", "content": {"env": "prod", "replicas": 2}}));
        assert_eq!(accepted, Ok(Response::Answer(Answer::value(json!({"env": "prod", "replicas": 2})))));
        assert_eq!(answer(json!({"action": "decline"})), Ok(Response::Answer(Answer::declined())));
        assert_eq!(answer(json!({"action": "cancel"})), Ok(Response::Answer(Answer::dismissed())));
        let refused = answer(json!({"action": "accept", "content": {"replicas": 0}})).unwrap_err();
        assert_eq!(refused, "`elicitation.ask-0.content.replicas`: field `replicas` must be at least 1, not 0");
        let refused = answer(json!({"action": "accept"})).unwrap_err();
        assert_eq!(refused, "`elicitation.ask-0.content.replicas`: field `replicas` is required");
    }
}
