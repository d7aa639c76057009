//! The HTTP server under attack: guessed tokens cannot be told from finished ones, bad bodies on
//! every JSON route get a 4xx with a useful message (never a panic or a 5xx), slow clients are cut
//! off at the body timeout, connections beyond the cap wait for a free slot, a canary token
//! reaches no log line, and a keyed run API refuses requests without its key.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eve_tests::http::{Seen, Served, hand_over, handed_over, serve, serve_with};
use eve_tools::http::{AUTH_CALLBACK_PATH, HOOK_PATH, WEBHOOK_PATH};
use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Takes one request on a webhook and one payload on the hook `hook-{run id}`.
#[workflow_tool]
pub async fn take_one_each(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let mut webhook = create_webhook();
    let mut hook = create_hook_with_token::<Value>(format!("hook-{}", ctx.run_id()));
    hand_over(ctx, webhook.url()).await?;
    webhook.recv().await?;
    hook.recv().await?;
    Ok(())
}

/// Waits on a hook and asks a question, so that every JSON route has something live behind it.
#[workflow_tool]
pub async fn stay_open(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    let mut hook = create_hook_with_token::<Value>(format!("open-{}", ctx.run_id()));
    let answer = ctx.ask(Ask::confirmation("Go?").option("go", "Go"));
    let (payload, answer) = futures::join!(hook.recv(), answer);
    payload?;
    Ok(answer)
}

/// A run whose webhook and hook have both been used and closed; returns their URLs.
async fn finished_tokens(served: &Served) -> (String, String) {
    let run = served.runtime.start("take_one_each", json!({})).await.unwrap();
    let webhook = handed_over(&served.runtime, run.id()).await;
    let hook = served.url(&format!("{HOOK_PATH}hook-{}", run.id()));
    assert_eq!(served.client.post(&webhook).send().await.unwrap().status(), 202, "the webhook was live");
    assert_eq!(served.client.post(&hook).json(&json!(1)).send().await.unwrap().status(), 202, "and the hook");
    run.outcome().await.unwrap();
    (webhook, hook)
}

/// Tokens an attacker might try: odd shapes first, then random 256-bit ones like real tokens.
fn guesses(real: &str, count: usize) -> Vec<String> {
    let mut guesses: Vec<String> = [
        "",
        " ",
        "a",
        "%00",
        "%FF%FE",
        "..",
        "../",
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e",
        "null",
        "undefined",
        "ключ",
        "🔑🔑",
        "token?x=1",
        "token#frag",
        "a/b",
        "%2F",
        "\\",
        "' OR 1=1 --",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    guesses.push("x".repeat(256));
    guesses.push("x".repeat(257));
    guesses.push("y".repeat(8192));
    guesses.push(real.to_uppercase());
    guesses.push(format!("{real}="));
    guesses.push(format!("{real}/"));
    guesses.push(real[1..].to_owned());
    guesses.push(format!("{}{}", &real[..real.len() - 1], if real.ends_with('A') { 'B' } else { 'A' }));
    while guesses.len() < count {
        guesses.push(eve_tools::secret::nonce());
    }
    guesses
}

/// Posts each guess to `prefix{guess}` over a few keep-alive connections and returns each
/// response that differs from `expected`, with its guess.
async fn differing(served: &Served, prefix: &str, guesses: &[String], expected: &Seen) -> Vec<(String, Seen)> {
    const CONNECTIONS: usize = 4;
    let differing = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for part in guesses.chunks(guesses.len().div_ceil(CONNECTIONS)) {
        let (part, client, differing, expected) =
            (part.to_vec(), served.client.clone(), differing.clone(), expected.clone());
        let base = served.url(prefix);
        tasks.spawn(async move {
            for guess in part {
                let response = client.post(format!("{base}{guess}")).json(&json!({ "guess": true })).send().await;
                let seen = Seen::of(response.unwrap()).await;
                if seen != expected {
                    differing.lock().unwrap().push((guess, seen));
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    Arc::try_unwrap(differing).unwrap().into_inner().unwrap()
}

#[tokio::test]
async fn a_keyed_run_api_refuses_requests_without_the_key_and_tokens_still_open_their_routes() {
    let served = serve_with(|runtime| runtime, |server| server.api_key("correct horse battery staple")).await;
    let run = served.runtime.start("stay_open", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let client = &served.client;
    let status = served.url(&format!("/v1/runs/{}", run.id()));
    let routes = [
        client.get(&status),
        client.get(served.url(&format!("/v1/runs/{}/questions", run.id()))),
        client.post(served.url(&format!("/v1/runs/{}/questions/ask-1", run.id()))).json(&json!({ "optionId": "go" })),
        client.post(served.url(&format!("/v1/runs/{}/cancel", run.id()))),
        client.post(served.url("/v1/tools/stay_open/runs")).json(&json!({ "input": {} })),
        client.get(served.url("/v1/events")),
    ];
    for request in routes {
        for key in [None, Some("Bearer wrong"), Some("Basic Y29ycmVjdA=="), Some("Bearer ")] {
            let request = request.try_clone().unwrap();
            let request = match key {
                Some(key) => request.header("authorization", key),
                None => request,
            };
            let seen = Seen::of(request.send().await.unwrap()).await;
            assert_eq!(seen.status, 401, "{key:?}: {:?}", seen.error());
            assert_eq!(seen.header("www-authenticate"), Some("Bearer"));
            let (message, _) = seen.error();
            assert!(message.contains("key"), "the refusal says a key is missing or wrong: {message}");
        }
    }
    assert_eq!(served.runtime.open_questions(run.id()).await.unwrap().len(), 1, "the refusals changed nothing");
    let journal = served.runtime.journal(run.id()).await.unwrap();
    let cancelled = journal.entries.iter().any(|entry| matches!(entry, eve_tools::Entry::CancelRequested { .. }));
    assert!(!cancelled, "and cancelled nothing");
    assert_eq!(served.runtime.runs(None, 10).await.unwrap().len(), 1, "nor started a run");

    for scheme in ["Bearer", "bearer"] {
        let keyed = client.get(&status).header("authorization", format!("{scheme} correct horse battery staple"));
        assert_eq!(keyed.send().await.unwrap().status(), 200, "{scheme}: the key opens the run API");
    }
    let hook = served.url(&format!("{HOOK_PATH}open-{}", run.id()));
    let resumed = client.post(hook).json(&json!("no key needed")).send().await.unwrap();
    assert_eq!(resumed.status(), 202, "a hook's own token opens its route without the API key");
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let served = serve_with(|runtime| runtime, |server| server.max_connections(2)).await;
    let addr = served.base.trim_start_matches("http://").to_owned();
    let first = TcpStream::connect(&addr).await.unwrap();
    let second = TcpStream::connect(&addr).await.unwrap();
    let status = served.url("/v1/runs/run_nobody");
    // Each request on its own connection, so the pool cannot reuse a slot.
    let fresh = || reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();

    let waiting = fresh().get(&status).timeout(Duration::from_millis(300)).send().await;
    assert!(waiting.is_err_and(|error| error.is_timeout()), "with both slots taken, a third client is not served");

    drop(first);
    let answered = fresh().get(&status).timeout(Duration::from_secs(30)).send().await.unwrap();
    assert_eq!(answered.status(), 404, "once a connection closes, the next client is served");
    drop(second);
}

#[tokio::test]
async fn ten_thousand_guessed_tokens_get_the_same_404_as_a_finished_token() {
    let served = serve().await;
    let (webhook, hook) = finished_tokens(&served).await;
    let finished_webhook =
        Seen::of(served.client.post(&webhook).json(&json!({ "guess": true })).send().await.unwrap()).await;
    let finished_hook = Seen::of(served.client.post(&hook).json(&json!({ "guess": true })).send().await.unwrap()).await;
    assert_eq!((finished_webhook.status, finished_webhook.body.len()), (404, 0));
    assert_eq!(finished_webhook, finished_hook, "webhooks and hooks refuse alike");

    let real = webhook.rsplit('/').next().unwrap();
    let guesses = guesses(real, 10_000);
    let started = Instant::now();
    let on_webhooks = differing(&served, WEBHOOK_PATH, &guesses[..5_000], &finished_webhook).await;
    let on_hooks = differing(&served, HOOK_PATH, &guesses[5_000..], &finished_hook).await;
    let edges_on_hooks = differing(&served, HOOK_PATH, &guesses[..40], &finished_hook).await;
    assert!(on_webhooks.is_empty(), "{} webhook guesses differ, such as {:?}", on_webhooks.len(), on_webhooks.first());
    assert!(on_hooks.is_empty(), "{} hook guesses differ, such as {:?}", on_hooks.len(), on_hooks.first());
    assert!(edges_on_hooks.is_empty(), "edge cases differ on hooks: {:?}", edges_on_hooks.first());
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(60), "10,000 requests took {elapsed:?}");

    // The same refusal for every method and for paths near the token routes.
    for path in [WEBHOOK_PATH, "/.well-known/workflow/v1/webhook", "/.well-known/workflow/v1/hook/a/b", "/nope"] {
        let seen =
            Seen::of(served.client.post(served.url(path)).json(&json!({ "guess": true })).send().await.unwrap()).await;
        assert_eq!(seen, finished_webhook, "{path}");
    }
    let get = Seen::of(served.client.get(&webhook).send().await.unwrap()).await;
    assert_eq!(get, finished_webhook, "a webhook takes any method, and refuses any method alike");
    let callback = served.url(&format!("{AUTH_CALLBACK_PATH}github/callback?code=c&state={real}"));
    assert_eq!(Seen::of(served.client.get(callback).send().await.unwrap()).await, finished_webhook, "callbacks too");
}

/// Every JSON route, with something live behind it so that only the body can be at fault.
async fn json_routes(served: &Served) -> Vec<String> {
    let run = served.runtime.start("stay_open", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let id = run.id();
    vec![
        served.url(&format!("{HOOK_PATH}open-{id}")),
        served.url(&format!("/v1/runs/{id}/questions/ask-1")),
        served.url("/v1/tools/stay_open/runs"),
        served.url(&format!("/v1/runs/{id}/cancel")),
    ]
}

#[tokio::test]
async fn bad_bodies_on_every_json_route_get_a_4xx_that_says_what_is_wrong() {
    let limit = 64 * 1024;
    let served = serve_with(|runtime| runtime, |server| server.body_limit(limit)).await;
    let routes = json_routes(&served).await;
    let over = format!("{{\"input\": \"{}\"}}", "x".repeat(limit));
    let nested = "[".repeat(10_000);
    // (content type, body, expected status, words the message must contain)
    let cases: Vec<(Option<&str>, Vec<u8>, u16, &str)> = vec![
        (Some("application/json"), b"{\"optionId\": tru}".to_vec(), 400, "not valid JSON"),
        (Some("application/json"), b"{".to_vec(), 400, "not valid JSON"),
        (Some("application/json"), b"{\"a\":1}{".to_vec(), 400, "not valid JSON"),
        (Some("application/json"), nested.clone().into_bytes(), 400, "recursion limit"),
        (Some("application/json"), vec![b'"', 0xff, 0xfe, b'"'], 400, "not valid JSON"),
        (Some("application/json"), over.clone().into_bytes(), 413, "the request body is over the 65536-byte limit"),
        (Some("text/plain"), b"{}".to_vec(), 415, "expected `content-type: application/json`, found `text/plain`"),
        (Some("application/jsonx"), b"{}".to_vec(), 415, "expected `content-type: application/json`"),
        (None, b"{}".to_vec(), 415, "the request has no content type"),
    ];
    for route in &routes {
        for (content_type, body, status, words) in &cases {
            let mut request = served.client.post(route).body(body.clone());
            if let Some(content_type) = content_type {
                request = request.header("content-type", *content_type);
            }
            let seen = Seen::of(request.send().await.unwrap()).await;
            assert!(!seen.body.is_empty(), "{route} {content_type:?} {}: {seen:?}", body.len());
            let (message, _) = seen.error();
            assert_eq!(seen.status, *status, "{route} {content_type:?} {}: {message}", body.len());
            assert!(message.contains(words), "{route}: {message}");
        }
    }
    // Wrong shapes are the routes' own: each names the field at fault.
    let shapes: [(&str, Value, &str); 6] = [
        (&routes[1], json!([]), "the request body must be a JSON object, not an array"),
        (&routes[1], json!({ "text": ["a"] }), "`text`: invalid type: sequence, expected a string"),
        (&routes[2], json!({ "input": {}, "principal": 7 }), "`principal`: invalid type: integer `7`"),
        (&routes[2], json!({ "input": {}, "runId": false }), "`runId`: invalid type: boolean `false`"),
        (&routes[2], json!({}), "missing field `input`"),
        (&routes[3], json!({ "reason": { "why": 1 } }), "`reason`: invalid type: map"),
    ];
    for (route, body, words) in shapes {
        let seen = Seen::of(served.client.post(route).json(&body).send().await.unwrap()).await;
        let (message, field) = seen.error();
        assert_eq!(seen.status, 422, "{route} {body}: {message}");
        assert!(message.contains(words), "{route} {body}: {message}");
        assert!(field.is_string() || body.is_array(), "{route} {body}: the field is named: {field}");
    }
    // The server is unharmed and the runs behind the routes are still waiting.
    assert_eq!(served.client.post(&routes[0]).json(&json!("ok")).send().await.unwrap().status(), 202);
    let answer = served.client.post(&routes[1]).json(&json!({ "optionId": "go" })).send().await.unwrap();
    assert_eq!(answer.status(), 204);
}

/// Sends `head` and then stalls; returns what came back before the connection closed, and when.
async fn stall(served: &Served, head: String) -> (String, Duration) {
    let mut stream = TcpStream::connect(served.server.local_addr()).await.unwrap();
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut received)).await;
    assert!(
        read.is_ok(),
        "the server hung up on a stalled request; it answered {:?}",
        String::from_utf8_lossy(&received)
    );
    (String::from_utf8_lossy(&received).into_owned(), started.elapsed())
}

#[tokio::test]
async fn a_body_that_stalls_or_trickles_is_cut_off_at_the_body_timeout() {
    let timeout = Duration::from_millis(500);
    let served = serve_with(|runtime| runtime, |server| server.body_timeout(timeout)).await;
    let mut routes = json_routes(&served).await;
    routes.push(served.url(&format!("{WEBHOOK_PATH}{}", eve_tools::secret::nonce())));
    let host = served.server.local_addr();
    for route in &routes {
        let path = route.strip_prefix(&served.base).unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{{\"inp\r\n"
        );
        let (answer, after) = stall(&served, head).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(answer.contains("did not arrive within 500ms"), "{path}: {answer}");
        assert!(after >= timeout && after < timeout * 6, "{path}: cut off after {after:?}");
    }
    // Headers that never end are cut off too.
    let (answer, after) = stall(&served, format!("POST /v1/tools/stay_open/runs HTTP/1.1\r\nhost: {host}\r\n")).await;
    assert!(!answer.starts_with("HTTP/1.1 2"), "{answer}");
    assert!(after < timeout * 6, "cut off after {after:?}");

    // A body that trickles a byte at a time never finishes within the timeout, however steady.
    let mut stream = TcpStream::connect(host).await.unwrap();
    let head = format!(
        "POST /v1/tools/stay_open/runs HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0; 4096];
    for _ in 0..100 {
        if stream.write_all(b" ").await.is_err() {
            break;
        }
        assert!(started.elapsed() < timeout * 4, "still accepting bytes after {:?}", started.elapsed());
        match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
            Err(_) => {}
        }
    }
    // The server answers 408 and hangs up; the bytes still trickling in may turn the hang-up into a
    // reset that discards the answer, so only what did arrive is checked.
    let answer = String::from_utf8_lossy(&received);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() < timeout * 4, "cut off after {:?}", started.elapsed());
}

/// Collects everything logged, at every level, as text.
struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
    next_span: std::sync::atomic::AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _metadata: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut line = format!("span {}", span.metadata().name());
        span.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
        tracing::span::Id::from_u64(self.next_span.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
    }

    fn record(&self, _span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut line = "record".to_owned();
        values.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
    }

    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = format!("{} {}", event.metadata().level(), event.metadata().target());
        event.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
    }

    fn enter(&self, _span: &tracing::span::Id) {}

    fn exit(&self, _span: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_canary_token_reaches_no_log_line_and_no_response() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let capture = Capture { lines: lines.clone(), next_span: Default::default() };
    tracing::subscriber::set_global_default(capture).expect("no other test sets a subscriber");
    let served = serve_with(|runtime| runtime, |server| server.body_timeout(Duration::from_millis(300))).await;
    let (webhook, _) = finished_tokens(&served).await;
    let canary = format!("canary{}", eve_tools::secret::nonce());
    let client = &served.client;
    let requests = [
        client.post(served.url(&format!("{WEBHOOK_PATH}{canary}"))).body("x"),
        client.get(served.url(&format!("{WEBHOOK_PATH}{canary}?state={canary}"))),
        client.post(served.url(&format!("{HOOK_PATH}{canary}"))).json(&json!(1)),
        client.post(served.url(&format!("{HOOK_PATH}{canary}"))).body("not json"),
        client.post(served.url(&format!("{HOOK_PATH}{canary}"))).header("content-type", "application/json").body("{"),
        client.post(&webhook).header("idempotency-key", canary.as_str()).body("x"),
        client.post(served.url(&format!("{WEBHOOK_PATH}{canary}"))).header("idempotency-key", "bad key").body("x"),
        client.get(served.url(&format!("{AUTH_CALLBACK_PATH}github/callback?code={canary}&state={canary}"))),
        client.get(served.url(&format!("{AUTH_CALLBACK_PATH}{canary}/callback?code={canary}&state={canary}"))),
        client.get(served.url(&format!("{AUTH_CALLBACK_PATH}github/callback?code={canary}&code={canary}"))),
        client.put(served.url(&format!("{HOOK_PATH}{canary}"))).json(&json!(1)),
        client.get(served.url(&format!("/{canary}/{canary}"))),
    ];
    for request in requests {
        let seen = Seen::of(request.send().await.unwrap()).await;
        assert!(seen.status >= 400 && seen.status < 500, "{seen:?}");
        let text = format!("{seen:?}{}", String::from_utf8_lossy(&seen.body));
        assert!(!text.contains(&canary), "a response echoes the canary: {text}");
    }
    let lines = lines.lock().unwrap();
    assert!(lines.iter().any(|line| line.contains("HTTP request")), "requests are logged: {lines:?}");
    let leaked: Vec<_> = lines.iter().filter(|line| line.contains(&canary)).collect();
    assert!(leaked.is_empty(), "the canary was logged: {leaked:?}");
}

/// Sends `request` with these `Host` and `Origin` headers (`None` leaves the header out).
async fn from_page(request: reqwest::RequestBuilder, host: Option<&str>, origin: Option<&str>) -> Seen {
    let mut request = request;
    if let Some(host) = host {
        request = request.header("host", host);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    Seen::of(request.send().await.unwrap()).await
}

#[tokio::test]
async fn a_keyless_run_api_answers_only_loopback_hosts_and_its_own_origin() {
    let inspector = "http://inspector.example:8080";
    let served = serve_with(|runtime| runtime, |server| server.allow_origin(inspector)).await;
    let port = served.server.local_addr().port();
    let start = || served.client.post(served.url("/v1/tools/stay_open/runs")).json(&json!({ "input": {} }));
    let own = served.base.clone();
    // (Host, Origin, status, words the refusal must contain)
    let cases: Vec<(String, Option<String>, u16, &str)> = vec![
        // DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1.
        ("evil.example".into(), Some("http://evil.example".into()), 403, "`Host`"),
        (format!("evil.example:{port}"), None, 403, "loopback"),
        (format!("localhost.evil.example:{port}"), None, 403, "loopback"),
        (format!("127.0.0.1.evil.example:{port}"), None, 403, "loopback"),
        // A cross-site request from a page elsewhere, sent to the real address.
        (format!("127.0.0.1:{port}"), Some("http://evil.example".into()), 403, "`Origin`"),
        (format!("127.0.0.1:{port}"), Some("null".into()), 403, "`Origin`"),
        (format!("127.0.0.1:{port}"), Some(format!("http://127.0.0.1:{}", port.wrapping_add(1))), 403, "`Origin`"),
        (format!("127.0.0.1:{port}"), Some(format!("https://127.0.0.1:{port}")), 403, "`Origin`"),
        // The server's own pages, tools on this machine, and an origin the server was told to allow.
        (format!("127.0.0.1:{port}"), None, 201, ""),
        (format!("127.0.0.1:{port}"), Some(own.clone()), 201, ""),
        (format!("LOCALHOST:{port}"), Some(format!("http://localhost:{port}")), 201, ""),
        ("localhost".into(), Some("http://localhost".into()), 201, ""),
        ("localhost:9".into(), None, 201, ""),
        (format!("[::1]:{port}"), Some(format!("http://[::1]:{port}")), 201, ""),
        (format!("127.0.0.1:{port}"), Some(inspector.into()), 201, ""),
    ];
    let mut started = 0;
    for (host, origin, status, words) in &cases {
        let seen = from_page(start(), Some(host), origin.as_deref()).await;
        assert_eq!(seen.status, *status, "Host {host}, Origin {origin:?}: {:?}", String::from_utf8_lossy(&seen.body));
        if *status == 403 {
            let (message, field) = seen.error();
            assert!(message.contains(words), "Host {host}, Origin {origin:?}: {message}");
            assert!(message.contains("to "), "the refusal says what to do: {message}");
            assert_eq!(field, Value::Null);
        } else {
            started += 1;
        }
    }
    assert_eq!(served.runtime.runs(None, 100).await.unwrap().len(), started, "no refused request started a run");

    // Every run API route refuses alike: reading events, statuses and questions, answering, cancelling.
    let run = served.runtime.start("stay_open", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let client = &served.client;
    let id = run.id();
    let routes = [
        client.get(served.url("/v1/events")),
        client.get(served.url(&format!("/v1/runs/{id}"))),
        client.get(served.url(&format!("/v1/runs/{id}/questions"))),
        client.post(served.url(&format!("/v1/runs/{id}/questions/ask-1"))).json(&json!({ "optionId": "go" })),
        client.post(served.url(&format!("/v1/runs/{id}/cancel"))),
        // A CORS "simple request": a form post, which a browser sends without asking first.
        client.post(served.url(&format!("/v1/runs/{id}/cancel"))).header("content-type", "text/plain").body("x"),
    ];
    for request in routes {
        for (host, origin) in [("evil.example", None), ("127.0.0.1", Some("http://evil.example"))] {
            let seen = from_page(request.try_clone().unwrap(), Some(host), origin).await;
            assert_eq!(seen.status, 403, "Host {host}, Origin {origin:?}: {:?}", seen.error());
        }
    }
    assert_eq!(served.runtime.open_questions(id).await.unwrap().len(), 1, "the refusals answered nothing");
    let journal = served.runtime.journal(id).await.unwrap();
    let cancelled = journal.entries.iter().any(|entry| matches!(entry, eve_tools::Entry::CancelRequested { .. }));
    assert!(!cancelled, "and cancelled nothing");

    // The routes opened by their own tokens are for the outside world, whatever the page.
    let hook = served.url(&format!("{HOOK_PATH}open-{id}"));
    let resumed = from_page(client.post(hook).json(&json!("hi")), Some("evil.example"), Some("http://evil.example"));
    assert_eq!(resumed.await.status, 202, "a hook resume needs no particular Host or Origin");
}

#[tokio::test]
async fn a_keyed_run_api_answers_any_host_but_still_refuses_foreign_origins() {
    let public = "https://agent.example";
    let served = serve_with(|runtime| runtime.public_url(public), |server| server.api_key("sesame")).await;
    let start = || {
        let request = served.client.post(served.url("/v1/tools/stay_open/runs")).json(&json!({ "input": {} }));
        request.bearer_auth("sesame")
    };
    // (Host, Origin, status)
    let cases: [(&str, Option<&str>, u16); 6] = [
        ("agent.example", None, 201),
        ("agent.example", Some(public), 201),
        ("10.1.2.3:7700", None, 201),
        ("agent.example", Some("https://evil.example"), 403),
        ("agent.example", Some("http://agent.example"), 403),
        ("127.0.0.1", Some("null"), 403),
    ];
    for (host, origin, status) in cases {
        let seen = from_page(start(), Some(host), origin).await;
        assert_eq!(seen.status, status, "Host {host}, Origin {origin:?}: {:?}", String::from_utf8_lossy(&seen.body));
        if status == 403 {
            let (message, _) = seen.error();
            assert!(message.contains("`Origin`") && message.contains("allow_origin"), "{message}");
        }
    }
    assert_eq!(served.runtime.runs(None, 100).await.unwrap().len(), 3);
}

/// Sends a request with a `length`-byte body as a simple client does (the whole request, then
/// reading the answer) and returns what came back, or how the connection failed.
async fn send_whole(served: &Served, path: &str, length: usize) -> Result<String, std::io::Error> {
    let mut stream = TcpStream::connect(served.server.local_addr()).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n",
        served.server.local_addr()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&vec![b' '; length]).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

// Two threads, so the server answers while the client still writes, as in a real host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_far_over_the_limit_gets_its_413_every_time() {
    let served = serve().await;
    for send in 1..=20 {
        let answer = send_whole(&served, "/v1/tools/stay_open/runs", 10 * 1024 * 1024).await;
        let answer = answer.unwrap_or_else(|error| panic!("send {send} of 20 got no answer: {error}"));
        assert!(answer.starts_with("HTTP/1.1 413"), "send {send} of 20: {answer}");
        assert!(answer.contains("over the 1048576-byte limit"), "send {send} of 20: {answer}");
    }
    assert!(served.runtime.runs(None, 10).await.unwrap().is_empty(), "no body over the limit started a run");
}

/// An orchestrator's probes carry no key: `/healthz` answers while the process does, `/readyz`
/// while the store answers, and neither says more than that (a store's error names its server).
#[tokio::test]
async fn the_probes_answer_without_the_key_and_readiness_follows_the_store() {
    let faulty = eve_tests::faulty::Faulty::new(Arc::new(eve_tools::store::MemoryStore::new()));
    let store: Arc<dyn eve_tools::store::Store> = faulty.clone();
    let served = serve_with(|runtime| runtime.shared_store(store), |server| server.api_key("correct horse")).await;
    let client = &served.client;

    let live = Seen::of(client.get(served.url("/healthz")).send().await.unwrap()).await;
    assert_eq!((live.status, live.body.as_slice()), (200, &b"ok\n"[..]));
    let ready = Seen::of(client.get(served.url("/readyz")).send().await.unwrap()).await;
    assert_eq!((ready.status, ready.json()), (200, json!({ "ready": true })));

    faulty.set_unavailable(true);
    let down = Seen::of(client.get(served.url("/readyz")).send().await.unwrap()).await;
    assert_eq!(down.status, 503, "a store that does not answer makes the server not ready");
    let (message, _) = down.error();
    assert!(message.contains("store does not answer"), "{message}");
    assert!(!message.contains("connection refused"), "the store's own error stays in the log: {message}");
    let live = Seen::of(client.get(served.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(live.status, 200, "the process still answers");

    faulty.set_unavailable(false);
    let back = Seen::of(client.get(served.url("/readyz")).send().await.unwrap()).await;
    assert_eq!(back.status, 200, "ready again once the store answers");
}
