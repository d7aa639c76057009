//! Request bodies: read within a size limit and a deadline, then decoded as JSON with the path of
//! the field at fault.
//!
//! A body over the limit is not read any further: the `413` goes out at once and the connection
//! is closed, gracefully (`serve.rs` discards what the client still sends, so the client reads
//! the response instead of a connection reset).

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::errors::{ApiError, shorten};
use super::state::Limits;

/// Reads the whole body, refusing it if it is over the limit or does not arrive in time.
pub(crate) async fn read(body: Body, headers: &HeaderMap, limits: &Limits) -> Result<Bytes, ApiError> {
    let deadline = Instant::now() + limits.body_timeout;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    let mut body = body.into_data_stream();
    if declared.is_some_and(|length| length > limits.body as u64) {
        return Err(too_large(limits));
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    loop {
        let frame = match tokio::time::timeout_at(deadline, futures::StreamExt::next(&mut body)).await {
            Err(_) => return Err(too_slow(limits)),
            Ok(None) => return Ok(Bytes::from(bytes)),
            Ok(Some(Err(_))) => return Err(unreadable()),
            Ok(Some(Ok(frame))) => frame,
        };
        if bytes.len() + frame.len() > limits.body {
            return Err(too_large(limits));
        }
        bytes.extend_from_slice(&frame);
    }
}

fn too_large(limits: &Limits) -> ApiError {
    let message = format!("the request body is over the {}-byte limit", limits.body);
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message).closing()
}

fn too_slow(limits: &Limits) -> ApiError {
    let within = humantime::format_duration(limits.body_timeout);
    let message = format!("the request body did not arrive within {within}; send it at once");
    ApiError::new(StatusCode::REQUEST_TIMEOUT, message).closing()
}

fn unreadable() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "the request body could not be read; the client may have hung up").closing()
}

/// Reads a JSON body holding any JSON value, such as a hook's payload.
pub(crate) async fn payload(body: Body, headers: &HeaderMap, limits: &Limits) -> Result<Value, ApiError> {
    let bytes = read(body, headers, limits).await?;
    require_json(headers)?;
    parse(&bytes)
}

/// Reads a JSON object body and decodes it as `T`.
pub(crate) async fn json<T: DeserializeOwned>(body: Body, headers: &HeaderMap, limits: &Limits) -> Result<T, ApiError> {
    shape(payload(body, headers, limits).await?)
}

/// Reads an optional JSON object body: an empty body without a content type is `None`.
pub(crate) async fn optional_json<T: DeserializeOwned>(
    body: Body,
    headers: &HeaderMap,
    limits: &Limits,
) -> Result<Option<T>, ApiError> {
    let bytes = read(body, headers, limits).await?;
    if bytes.is_empty() && !headers.contains_key(header::CONTENT_TYPE) {
        return Ok(None);
    }
    require_json(headers)?;
    shape(parse(&bytes)?).map(Some)
}

/// Refuses a body whose content type is not JSON (`application/json` or `application/*+json`).
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let expected = "expected `content-type: application/json`";
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        let message = format!("{expected}, but the request has no content type");
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message));
    };
    let text = value.to_str().unwrap_or("");
    let essence = text.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let is_json = essence == "application/json"
        || essence.strip_prefix("application/").is_some_and(|subtype| subtype.ends_with("+json"));
    if is_json {
        return Ok(());
    }
    let message = format!("{expected}, found `{}`", shorten(text, 64));
    Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message))
}

/// Parses a body as one JSON value; malformed JSON is `400`, naming the field it broke off in.
/// The whole body is judged well-formed or not before its shape is, whatever comes first in it.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize::<_, Value>(&mut *deserializer)
        // Nothing but whitespace may follow the value.
        .and_then(|value| deserializer.end().map(|()| value).map_err(path_error))
        .map_err(|error| refusal(StatusCode::BAD_REQUEST, error))
}

/// Decodes a JSON object as `T`; anything else, or a field of the wrong shape, is `422`.
pub(crate) fn shape<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    if !value.is_object() {
        let message =
            format!("the request body must be a JSON object, not {}", eve_runtime::registry::json_kind(&value));
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message));
    }
    serde_path_to_error::deserialize(value).map_err(|error| refusal(StatusCode::UNPROCESSABLE_ENTITY, error))
}

/// An error found after the value, at no field.
fn path_error(error: serde_json::Error) -> serde_path_to_error::Error<serde_json::Error> {
    serde_path_to_error::Error::new(serde_path_to_error::Track::new().path(), error)
}

/// A decoding error as a refusal that names the field at fault.
fn refusal(status: StatusCode, error: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    // Both may quote the body (an unknown key, a string of the wrong type): keep them readable.
    let path = shorten(&error.path().to_string(), 128);
    let inner = shorten(&error.into_inner().to_string(), 512);
    let field = field_at_fault(&path, &inner);
    let message = match (&field, status) {
        (Some(field), StatusCode::BAD_REQUEST) => format!("the request body is not valid JSON (in `{field}`): {inner}"),
        (None, StatusCode::BAD_REQUEST) => format!("the request body is not valid JSON: {inner}"),
        (Some(field), _) if !inner.contains(&format!("`{field}`")) => format!("`{field}`: {inner}"),
        _ => inner,
    };
    let error = ApiError::new(status, message);
    match field {
        Some(field) => error.field(field),
        None => error,
    }
}

/// The field a decoding error is about: the path where it happened, or, for a missing field, the
/// path of the object plus the field's name.
fn field_at_fault(path: &str, message: &str) -> Option<String> {
    let missing = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
    let unknown = message.strip_prefix("unknown field `").and_then(|rest| rest.split('`').next());
    // The decoder writes `?` for a place it could not name (inside a broken token, say): the
    // field is the part of the path before it, or none.
    let path = path.split('?').next().unwrap_or_default().trim_end_matches(['.', '[']);
    let at = (!path.is_empty() && path != ".").then_some(path);
    match (at, missing.or(unknown)) {
        (Some(at), Some(name)) if !at.ends_with(name) => Some(format!("{at}.{name}")),
        (None, Some(name)) => Some(name.to_owned()),
        (at, _) => at.map(str::to_owned),
    }
}

/// The `Idempotency-Key` header, if any: at most 256 visible ASCII characters.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    let visible = |text: &&str| (1..=256).contains(&text.len()) && text.bytes().all(|byte| byte.is_ascii_graphic());
    let text = value.to_str().ok().filter(visible);
    match text {
        Some(text) => Ok(Some(text.to_owned())),
        None => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the `Idempotency-Key` header must be 1 to 256 visible ASCII characters",
        )),
    }
}
