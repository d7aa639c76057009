//! Deliveries by token: webhook requests (any method, any body) and hook resumes (JSON).
//!
//! Both read and check the body first and look the token up last, so every refusal that is not
//! the empty 404 happens whatever the token. The token itself is handed to the runtime and to
//! nothing else: it is not logged, not echoed, and not part of any error.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::errors::{ApiError, token_refusal};
use super::path::segment;
use super::state::AppState;
use super::{body, serve};
use eve_runtime::webhook::{WebhookRequest, WebhookResponse};
use eve_runtime::{PendingResponse, WebhookReply};

/// The index of the token among the path's segments (`/.well-known/workflow/v1/webhook/{token}`).
const TOKEN_SEGMENT: usize = 4;

/// `ANY /.well-known/workflow/v1/webhook/{token}`: one request, delivered in order to the webhook.
pub(crate) async fn deliver(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let key = body::idempotency_key(&headers)?;
    let bytes = body::read(body, &headers, &state.limits).await?;
    let token = segment(&uri, TOKEN_SEGMENT).ok_or(ApiError::NotFound)?;
    let request = webhook_request(&method, &uri, &headers, &bytes);
    match state.runtime.deliver_webhook(&token, key.as_deref(), request).await.map_err(token_refusal)? {
        WebhookReply::Now(response) => Ok(into_response(response)),
        WebhookReply::Later(waiting) => Ok(wait_for_step(&state, waiting).await),
        WebhookReply::Unanswered => Err(ApiError::new(
            StatusCode::CONFLICT,
            "a request with this `Idempotency-Key` was delivered and its response is not ready yet; retry \
             later with the same key to get it",
        )),
    }
}

/// `POST /.well-known/workflow/v1/hook/{token}`: a JSON payload for the hook holding `token`.
pub(crate) async fn resume(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let key = body::idempotency_key(&headers)?;
    let payload = body::payload(body, &headers, &state.limits).await?;
    let token = segment(&uri, TOKEN_SEGMENT).ok_or(ApiError::NotFound)?;
    let runtime = &state.runtime;
    let delivered = match &key {
        Some(key) => runtime.resume_hook_once(&token, key, payload).await,
        None => runtime.resume_hook(&token, payload).await,
    };
    delivered.map(|_| StatusCode::ACCEPTED).map_err(token_refusal)
}

/// The request as the body receives it. Each HTTP request gets a fresh `delivery` id, also when
/// it repeats an `Idempotency-Key`: the key deduplicates the delivery, while the `delivery` id
/// routes a step's response to the one HTTP request waiting for it, so a client cannot take over
/// another request's response by reusing its key.
fn webhook_request(method: &Method, uri: &Uri, headers: &HeaderMap, bytes: &[u8]) -> WebhookRequest {
    let mut request = WebhookRequest::new(method.as_str(), bytes);
    request.query = uri.query().unwrap_or_default().to_owned();
    request.headers = headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    request
}

/// Waits for the response a step writes with `StepCtx::respond`, up to the response timeout.
async fn wait_for_step(state: &AppState, waiting: PendingResponse) -> Response {
    let mut stop = state.stop.clone();
    tokio::select! {
        response = tokio::time::timeout(state.limits.response_timeout, waiting) => match response {
            Ok(Some(response)) => into_response(response),
            // No step responded in time, or the run ended without responding. Dropping the wait
            // tells the runtime to stop expecting a response.
            Ok(None) | Err(_) => StatusCode::GATEWAY_TIMEOUT.into_response(),
        },
        _ = serve::stopped(&mut stop) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// Headers a webhook's response may not set: the server frames the response itself.
const FRAMING: [&str; 6] = ["connection", "content-length", "keep-alive", "te", "trailer", "transfer-encoding"];

/// A webhook's response as HTTP. A status outside 100..=599 is the step's bug and becomes `502`;
/// headers that are invalid or would break framing are left out.
pub(crate) fn into_response(response: WebhookResponse) -> Response {
    let Ok(status) = StatusCode::from_u16(response.status) else {
        tracing::warn!(status = response.status, "a webhook response has an invalid status; answering 502");
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &response.headers {
        match (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
            (Ok(name), Ok(value)) if !FRAMING.contains(&name.as_str()) => {
                headers.append(name, value);
            }
            _ => tracing::warn!("a webhook response header is invalid or sets framing; leaving it out"),
        }
    }
    // A `Body`, not a `String`, so no content type is added that the webhook did not set.
    (status, headers, Body::from(response.body)).into_response()
}
