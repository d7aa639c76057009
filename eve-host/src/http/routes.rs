//! The route table, the layers every response passes through, and path segments as opaque strings.

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use tokio::time::Instant;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

use super::errors::{ApiError, fallback, method_not_allowed, panicked};
use super::path::HOOK_PATH;
use super::state::AppState;
use super::ui::{self, UI_PATH};
use super::{auth, events, health, metrics, origin, runs, sessions, webhook};
use eve_runtime::auth::AUTH_CALLBACK_PATH;
use eve_runtime::secret::TokenHash;
use eve_runtime::webhook::WEBHOOK_PATH;

/// `/` and `/ui/` lead to the inspector, which a person opening the server's address looks for.
async fn to_the_inspector() -> axum::response::Redirect {
    axum::response::Redirect::temporary(UI_PATH)
}

/// Every route, with the layers that log requests (by route template only) and harden responses.
pub(crate) fn router(state: AppState) -> Router {
    let run_api = Router::new()
        .route("/v1/tools", get(runs::tools))
        .route("/v1/tools/{tool}/runs", post(runs::start))
        .route("/v1/runs", get(runs::list))
        .route("/v1/runs/{run}", get(runs::status))
        .route("/v1/runs/{run}/timeline", get(runs::timeline))
        .route("/v1/runs/{run}/cancel", post(runs::cancel))
        .route("/v1/runs/{run}/fork", post(runs::fork))
        .route("/v1/runs/{run}/questions", get(runs::questions))
        .route("/v1/runs/{run}/questions/{request}", post(runs::answer))
        .route("/v1/events", get(events::stream))
        .route("/v1/sessions", post(sessions::start))
        .route("/v1/sessions/{session}/messages", post(sessions::message))
        .route("/v1/sessions/{session}/cancel", post(sessions::cancel))
        .route("/v1/sessions/{session}/close", post(sessions::close))
        .route("/v1/sessions/{session}/questions/{request}", post(sessions::answer))
        .route("/v1/sessions/{session}/events", get(sessions::events))
        // Metrics say what the binary runs and how busy it is: behind the same rules.
        .route("/metrics", get(metrics::render));
    // MCP: Streamable HTTP at `/mcp`, behind the same layers as the run API.
    #[cfg(feature = "mcp")]
    let run_api = run_api.nest_service("/mcp", mcp_service(&state));
    // Without MCP, a client that tries `/mcp` hears how to get it instead of the empty 404.
    #[cfg(not(feature = "mcp"))]
    let run_api = run_api.route("/mcp", any(super::errors::without_mcp));
    let run_api = run_api
        .route_layer(middleware::from_fn_with_state(state.clone(), require_api_key))
        // Outermost, so a page elsewhere is refused before its key is looked at.
        .route_layer(middleware::from_fn_with_state(state.clone(), only_own_origin));
    // The inspector checks its own sign-in, on the same `Host` and `Origin` terms as the run API.
    let inspector = Router::new()
        .route("/", get(to_the_inspector))
        .route(&format!("{UI_PATH}/"), get(to_the_inspector))
        .route(UI_PATH, get(ui::page))
        .route(&format!("{UI_PATH}/app.js"), get(ui::script))
        .route(&format!("{UI_PATH}/app.css"), get(ui::style))
        .route(&format!("{UI_PATH}/sign-in"), post(ui::sign_in))
        .route(&format!("{UI_PATH}/sign-out"), post(ui::sign_out))
        .route_layer(middleware::from_fn_with_state(state.clone(), only_own_origin));
    Router::new()
        // Probes carry no key and reveal nothing: outside the run API's rules.
        .route("/healthz", get(health::live))
        .route("/readyz", get(health::ready))
        .route(&format!("{WEBHOOK_PATH}{{token}}"), any(webhook::deliver))
        .route(&format!("{HOOK_PATH}{{token}}"), post(webhook::resume))
        .route(&format!("{AUTH_CALLBACK_PATH}{{provider}}/start"), get(auth::start))
        .route(&format!("{AUTH_CALLBACK_PATH}{{provider}}/callback"), get(auth::callback))
        .merge(run_api)
        .merge(inspector)
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        // Innermost first: a panic becomes a 500 that is still logged and still hardened.
        .layer(CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn(log))
        .layer(SetResponseHeaderLayer::if_not_present(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        // The inspector's pages set their own (`same-origin`: a browser sends `Origin: null` with
        // a form posted from a `no-referrer` page, which the origin rules then refuse).
        .layer(SetResponseHeaderLayer::if_not_present(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")))
        .layer(SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .with_state(state)
}

/// MCP: the `/mcp` service, told the rules the run API's layers apply so that its own checks agree.
#[cfg(feature = "mcp")]
fn mcp_service(state: &AppState) -> Router {
    let mounter = state
        .mcp
        .clone()
        .unwrap_or_else(|| crate::mcp::http::Mounter::new(crate::mcp::McpServer::new(state.runtime.clone())));
    let origins = state.origins.public.iter().chain(&state.origins.allowed).map(ToString::to_string).collect();
    let (keyed, stop) = (state.api_key.is_some(), state.stop.clone());
    let (body_limit, body_timeout) = (state.limits.body, state.limits.body_timeout);
    mounter.mount(crate::mcp::http::Mount { keyed, origins, body_limit, body_timeout, stop })
}

/// Lets a run API request through if the server has no key, or if it carries the key as
/// `Authorization: Bearer <key>`, or the cookie of an inspector sign-in (with `X-Eve-UI` unless it
/// only reads); otherwise answers `401` with `WWW-Authenticate: Bearer`.
async fn require_api_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(expected) = &state.api_key else { return next.run(request).await };
    let presented = request.headers().get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    if presented.is_none() && ui::signed_in(&state, request.headers()) {
        // A form on another site can send the cookie, never this header (it needs the server's
        // consent to CORS, which it does not give); event streams and reads cannot change a thing.
        let reads = matches!(*request.method(), Method::GET | Method::HEAD);
        if reads || request.headers().contains_key(INSPECTOR_HEADER) {
            return next.run(request).await;
        }
        let message = "a request signed in by the inspector's cookie must carry `X-Eve-UI: 1` to change anything";
        return ApiError::new(StatusCode::FORBIDDEN, message).into_response();
    }
    let bearer = presented
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key);
    let message = match bearer {
        Some(key) if TokenHash::of(key.trim()).matches(expected) => return next.run(request).await,
        Some(_) => "the API key is not valid; send the key the server was started with",
        None => "the run API needs a key: send `Authorization: Bearer <key>` with the server's key",
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The header the inspector's page sends with every request.
const INSPECTOR_HEADER: &str = "x-eve-ui";

/// Refuses a run API request that is addressed to a foreign name (without a key) or sent by a
/// page of a foreign origin, with `403` and what to do instead.
async fn only_own_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match origin::check(&state.origins, state.api_key.is_some(), &request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// Logs each request by its route template (`/.well-known/workflow/v1/webhook/{token}`), never by
/// its path or query, which may hold a token, a callback `state` or a `code`.
async fn log(route: Option<MatchedPath>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::debug!(
        %method,
        route = route.as_ref().map_or("(unrouted)", MatchedPath::as_str),
        status = response.status().as_u16(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "HTTP request"
    );
    response
}
