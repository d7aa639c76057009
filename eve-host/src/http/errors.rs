//! How the server refuses a request: the one empty 404, or a JSON error naming the field at fault.
//!
//! Every JSON error has the shape `{"error": {"message": "...", "field": "optionId" | null}}`.
//! Messages follow the runtime's style: lowercase, no trailing period, saying what was wrong and
//! what was expected. They never contain a token, a callback `state` or a `code`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use eve_runtime::Error;
use eve_runtime::ask::AnswerError;
use eve_runtime::error::ForkError;
use eve_runtime::store::StoreError;

/// A refused request.
#[derive(Debug)]
pub(crate) enum ApiError {
    /// The empty 404, identical for every token, callback or path that opens nothing.
    NotFound,
    /// A JSON error.
    Json {
        /// The status.
        status: StatusCode,
        /// What was wrong, for a person.
        message: String,
        /// The JSON path of the field at fault, such as `optionId` or `input.name`.
        field: Option<String>,
        /// Whether to close the connection (the rest of the body was not read).
        close: bool,
    },
}

impl ApiError {
    /// A JSON error.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError::Json { status, message: message.into(), field: None, close: false }
    }

    /// Names the field at fault.
    pub fn field(mut self, name: impl Into<String>) -> Self {
        if let ApiError::Json { field, .. } = &mut self {
            *field = Some(name.into());
        }
        self
    }

    /// Asks the client to close the connection after this response.
    pub fn closing(mut self) -> Self {
        if let ApiError::Json { close, .. } = &mut self {
            *close = true;
        }
        self
    }

    /// The status this refusal answers with.
    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::Json { status, .. } => *status,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::NotFound => not_found(),
            ApiError::Json { status, message, field, close } => {
                let mut response =
                    (status, Json(json!({ "error": { "message": message, "field": field } }))).into_response();
                if close {
                    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                if status == StatusCode::TOO_MANY_REQUESTS {
                    // A full inbox drains as the run takes its deliveries in: a second is a fair wait.
                    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                }
                response
            }
        }
    }
}

/// The one response for every token, callback and path that opens nothing: `404`, empty body.
pub(crate) fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

/// The fallback for unrouted paths: the same empty 404.
pub(crate) async fn fallback() -> Response {
    not_found()
}

/// `/mcp` in a binary built without the `mcp` feature: `404`, saying how to enable it.
#[cfg(not(feature = "mcp"))]
pub(crate) async fn without_mcp() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, crate::without::MCP)
}

/// The fallback for a routed path with a method it does not take.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "this route does not take this method")
}

/// What a panic in a handler becomes: a `500` that says nothing about the panic.
pub(crate) fn panicked(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("an HTTP handler panicked");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the server failed to handle this request; it has been logged")
        .closing()
        .into_response()
}

/// A runtime error refusing a delivery by token: unknown, used and finished tokens are the empty 404.
pub(crate) fn token_refusal(error: Error) -> ApiError {
    match error {
        Error::UnknownHook
        | Error::UnknownCallback
        | Error::RunNotFound(_)
        | Error::Store(StoreError::RunFinished(_) | StoreError::RunNotFound(_)) => ApiError::NotFound,
        error => from_runtime(error),
    }
}

/// A session's error as a JSON error.
pub(crate) fn from_session(error: eve_sessions::Error) -> ApiError {
    match error {
        eve_sessions::Error::NotASession(_) => ApiError::new(StatusCode::NOT_FOUND, error.to_string()),
        eve_sessions::Error::Ended(_) => ApiError::new(StatusCode::CONFLICT, error.to_string()),
        eve_sessions::Error::Runtime(error) => from_runtime(error),
        error => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// A runtime error as a JSON error.
pub(crate) fn from_runtime(error: Error) -> ApiError {
    match error {
        Error::UnknownHook | Error::UnknownCallback => ApiError::NotFound,
        Error::UnknownTool { .. } | Error::RunNotFound(_) => ApiError::new(StatusCode::NOT_FOUND, error.to_string()),
        Error::InvalidInput { ref field, .. } => {
            let field = field.as_ref().map_or_else(|| "input".to_owned(), |field| format!("input.{field}"));
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, shorten(&error.to_string(), 512)).field(field)
        }
        Error::InvalidPayload { ref field, .. } => {
            let message = shorten(&error.to_string(), 512);
            let error = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message);
            match field {
                Some(field) => error.field(field.clone()),
                None => error,
            }
        }
        Error::RunIdTaken { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()).field("runId"),
        Error::RunFinished { .. } | Error::Held { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()),
        Error::ToolFailed { .. } => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, shorten(&error.to_string(), 512)),
        Error::WrongKind { .. } | Error::TooDeep(_) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string())
        }
        Error::Answer(answer) => from_answer(answer),
        Error::Fork(fork) => from_fork(fork),
        // The callback route redacts and quotes a provider's error itself; nothing else should see one.
        Error::Auth(_) => ApiError::new(StatusCode::BAD_GATEWAY, "the sign-in provider failed"),
        Error::Store(store) => from_store(store),
        // A duplicate tool, a missing Tokio runtime, an unreadable key: the server's to fix.
        error => internal(&error),
    }
}

/// A refused fork: a run or build that cannot be forked now is a conflict; an op it cannot be
/// forked from names the body's `from`.
fn from_fork(error: ForkError) -> ApiError {
    match error {
        ForkError::Active { .. } | ForkError::UnknownTool { .. } | ForkError::Diverges { .. } => {
            ApiError::new(StatusCode::CONFLICT, shorten(&error.to_string(), 1024))
        }
        error => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()).field("from"),
    }
}

/// A refused answer, with the body's field names.
fn from_answer(error: AnswerError) -> ApiError {
    let unprocessable = |message: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message);
    match error {
        AnswerError::Empty => unprocessable("the answer is empty: give `optionId`, `text`, or both".into()),
        AnswerError::UnknownOption { given, allowed } => unprocessable(format!(
            "`optionId` {:?} is not one of the question's options ({})",
            shorten(&given, 64),
            allowed.join(", ")
        ))
        .field("optionId"),
        AnswerError::TextNotAllowed => {
            unprocessable("`text` is not accepted: this question only takes one of its options".into()).field("text")
        }
        AnswerError::TextOnly => {
            unprocessable("`optionId` is not accepted: this question takes text; answer with `text`".into())
                .field("optionId")
        }
        AnswerError::InvalidValue { field, message } => {
            let at = field.map_or_else(|| "value".to_owned(), |field| format!("value.{field}"));
            unprocessable(format!("`value` does not fit the form: {message}")).field(at)
        }
        error @ AnswerError::CompletionNeeded => unprocessable(error.to_string()).field("value"),
        AnswerError::NotACompletion(message) => unprocessable(format!("`value` is {message}")).field("value"),
        error @ AnswerError::NotOpen { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()),
        error => unprocessable(error.to_string()),
    }
}

/// A store error: limits and closed journals are the client's to fix; anything else is ours.
fn from_store(error: StoreError) -> ApiError {
    match error {
        StoreError::TooLarge { .. } => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, error.to_string()),
        StoreError::TooDeep { .. } => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()),
        // Without the run id: webhook and hook routes are opened by a token alone.
        StoreError::InboxFull { hook, .. } => {
            let waiting = if hook.is_some() { "this hook" } else { "this run" };
            let message = format!("too many deliveries are waiting for {waiting}; try again later");
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
        StoreError::RunNotFound(_) => ApiError::new(StatusCode::NOT_FOUND, error.to_string()),
        StoreError::RunFinished(_) => ApiError::new(StatusCode::CONFLICT, error.to_string()),
        // The client is told to retry, and the store is likely back by then (a database
        // restarting): a warning. Anything else will not pass by itself: an error.
        error if error.is_transient() => {
            tracing::warn!(
                "an HTTP request found the store unavailable; answering 503 for the client to retry: {error}"
            );
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; try again shortly")
        }
        error => {
            tracing::error!("an HTTP request failed in the store: {error}");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; try again shortly")
        }
    }
}

fn internal(error: &Error) -> ApiError {
    tracing::error!("an HTTP request failed: {error}");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the server failed to handle this request; it has been logged")
}

/// Replaces every occurrence of each non-empty secret in `message` with `[redacted]`.
pub(crate) fn redact(message: &str, secrets: &[&str]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(message.to_owned(), |message, secret| message.replace(secret, "[redacted]"))
}

/// A client-supplied value cut to at most `max` characters, to quote in a message.
pub(crate) fn shorten(value: &str, max: usize) -> String {
    match value.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}
