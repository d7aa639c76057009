//! What `serve` says when it starts: where it listens, what it serves there, and whether the run
//! API wants a key. A person who just typed `serve` learns from it what to `curl`.

/// The routes `serve` offers, grouped as a person looks for them: (method, path, what it does).
const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/ui", "the inspector: runs, their timelines and questions, in a browser (/ leads there)"),
    ("GET", "/v1/tools", "the tools, with their input schemas"),
    ("POST", "/v1/tools/{tool}/runs", "start a run: {\"input\": {...}, \"runId\"?}"),
    ("GET", "/v1/runs", "runs, newest first (?status=, ?tool=, ?before=)"),
    ("GET", "/v1/runs/{run}", "a run's status and outcome"),
    ("GET", "/v1/runs/{run}/timeline", "a run's timeline, op by op (?at= for an earlier entry)"),
    ("POST", "/v1/runs/{run}/cancel", "cancel a run"),
    ("GET", "/v1/runs/{run}/questions", "a run's open questions"),
    ("POST", "/v1/runs/{run}/questions/{request}", "answer one: {\"optionId\"?, \"text\"?, \"value\"?, \"action\"?}"),
    ("GET", "/v1/events", "every run's events, or one run's (?run=), as server-sent events"),
    ("POST", "/v1/sessions", "start an agent session (and /v1/sessions/{session}/...)"),
    ("POST", "/.well-known/workflow/v1/hook/{token}", "resume a hook with a JSON payload"),
    ("ANY", "/.well-known/workflow/v1/webhook/{token}", "deliver a request to a webhook"),
    ("GET", "/.well-known/workflow/v1/auth/{provider}/start", "sign-in links, and their callbacks"),
    ("GET", "/healthz", "200 while the process answers; /readyz, 200 while it can take work (no key)"),
];

/// The banner: the address, the routes, the key rule.
pub(super) fn text(address: &str, key_var: Option<&str>) -> String {
    let mut routes = ROUTES.to_vec();
    if cfg!(feature = "mcp") {
        routes.push(("POST", "/mcp", "the tools over the Model Context Protocol"));
    }
    if cfg!(feature = "metrics") {
        routes.push(("GET", "/metrics", "Prometheus metrics: runs, steps, the store (the run API's key)"));
    }
    let width = routes.iter().map(|(method, path, _)| method.len() + 1 + path.len()).max().unwrap_or(0);
    let mut lines = vec![format!("serving http://{address}")];
    lines.extend(routes.iter().map(|(method, path, what)| {
        let route = format!("{method} {path}");
        format!("  {route:<width$}  {what}")
    }));
    lines.push(match key_var {
        Some(var) => format!("the run API (/v1) requires `Authorization: Bearer <key>` with the key in {var}"),
        None => format!(
            "the run API (/v1) is open to this machine: no key is required; set {} to require one",
            super::API_KEY_VAR
        ),
    });
    lines.join("\n")
}
