//! Secrets never reach the journal, logs, traces, errors or output (RELIABILITY.md).
//!
//! The fake OAuth server puts a canary string in every code, access token and refresh token it
//! issues, and in the client secret. The canary is pushed through sign-ins (over the runtime's
//! HTTP server), a refused code, a failed attempt and its retry, a refresh, a refused refresh, a
//! token rejected right after sign-in and a cancellation, with everything logged at TRACE into a
//! buffer. Afterwards the canary must appear in none of the SQLite files (read as bytes), the
//! captured logs, the events, the errors, the journals or the CLI's rendering of them.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eve_tests::oauth_server::{FakeOAuth, Redirect, browser, no_redirects, open_sign_in_link};
use eve_tools::prelude::*;
use eve_tools::{ManualClock, Phase, RunEvent, RunHandle, RunId, RunOutcome, StartOptions, cli, http};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast;

const CANARY: &str = "CANARYq7Zp3x";
const FAKE: Provider = Provider::new("fake");

/// Where the fake server is.
#[derive(Deserialize, JsonSchema)]
pub struct Api {
    api: String,
}

/// Who `/api/me` says the token belongs to.
#[derive(Serialize, Deserialize)]
pub struct Me {
    user: String,
    serial: u64,
}

#[step(backoff = "1s")]
async fn read_me(ctx: &StepCtx, url: String) -> Result<Me, StepError> {
    let token = ctx.get_token(&FAKE).await?;
    let response = reqwest::Client::new().get(&url).bearer_auth(token.expose_secret()).send().await?;
    tracing::trace!(status = response.status().as_u16(), "the test step called /api/me");
    match response.status().as_u16() {
        200 => Ok(serde_json::from_slice(&response.bytes().await?)?),
        401 => Err(ctx.require_auth(&FAKE).await),
        status => Err(StepError::msg(format!("/api/me answered {status}"))),
    }
}

/// Asks the API who signed in.
#[workflow_tool]
pub async fn whoami_secure(input: Api, ctx: &WorkflowCtx) -> Result<Me, ToolError> {
    Ok(read_me(ctx, format!("{}/api/me", input.api)).await?)
}

static WEBHOOK_URL: Mutex<Option<String>> = Mutex::new(None);

/// Hands the webhook's URL to the test, as a step hands it to the system that will call back.
#[step]
async fn hand_over(_ctx: &StepCtx, url: String) -> Result<(), StepError> {
    *WEBHOOK_URL.lock().unwrap() = Some(url);
    Ok(())
}

/// Takes one request on a webhook and returns it as the body saw it.
#[workflow_tool]
pub async fn take_a_webhook(_input: Api, ctx: &WorkflowCtx) -> Result<WebhookRequest, ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    Ok(webhook.recv().await?)
}

/// Everything the process printed or logged, as one buffer.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Output {
    /// Captures every `tracing` event, span (with all its fields) and `log` record of the process
    /// at TRACE.
    fn capture_logs() -> Output {
        let output = Output::default();
        let writer = output.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            // Every span's fields too, as it opens and closes, not only the events within it.
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
            .with_writer(move || writer.clone())
            .try_init()
            .expect("this test binary installs the only subscriber");
        output
    }

    fn print(&self, text: impl AsRef<str>) {
        let mut buffer = self.0.lock().unwrap();
        buffer.extend_from_slice(text.as_ref().as_bytes());
        buffer.push(b'\n');
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A runtime over SQLite in a directory, with the fake registered as `fake`, served over HTTP.
struct Process {
    runtime: Runtime,
    server: http::ServerHandle,
    events: broadcast::Receiver<RunEvent>,
    clock: ManualClock,
    fake: FakeOAuth,
    /// The person's browser, which keeps the cookies sign-in links set.
    browser: reqwest::Client,
    output: Output,
}

impl Process {
    async fn start(dir: &Path, output: Output) -> Process {
        let clock = ManualClock::new(eve_tests::START);
        let fake = FakeOAuth::start(CANARY).await;
        fake.expiring_tokens(3600);
        let provider = fake.provider("fake", clock.clone()).build().unwrap();
        output.print(format!("{provider:?}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let public_url = format!("http://{}", listener.local_addr().unwrap());
        let builder = Runtime::builder().data_dir(dir).clock(clock.clone()).public_url(public_url);
        let runtime = builder.auth_provider("fake", provider).build().unwrap();
        let server = http::Server::new(runtime.clone()).serve(listener).unwrap();
        let events = runtime.events();
        Process { runtime, server, events, clock, fake, browser: browser(), output }
    }

    async fn start_run(&self, principal: &str) -> RunHandle {
        let input = json!({ "api": self.fake.base() });
        let options = StartOptions::new().principal(principal);
        self.runtime.start_with("whoami_secure", input, options).await.unwrap()
    }

    /// Waits until the run parks and returns the sign-in URL it published.
    async fn sign_in_url(&mut self, run: &RunHandle) -> String {
        assert_eq!(run.parked().await.unwrap(), Phase::Parked);
        let mut urls = self.drain_events().into_iter().filter_map(|event| match event {
            RunEvent::AuthorizationRequired { run: of, url, .. } if of == *run.id() => Some(url),
            _ => None,
        });
        urls.next().expect("the run published a sign-in URL")
    }

    /// Prints every event so far, as `Debug` and as JSON, and returns them.
    fn drain_events(&mut self) -> Vec<RunEvent> {
        let events: Vec<_> = std::iter::from_fn(|| self.events.try_recv().ok()).collect();
        for event in &events {
            self.output.print(format!("{event:?} {}", serde_json::to_string(event).unwrap()));
        }
        events
    }

    /// Opens a sign-in link in the person's browser and signs in at the provider as `login`.
    async fn follow(&self, link: &str, login: &str) -> Redirect {
        self.fake.follow(&open_sign_in_link(&self.browser, link).await, login).await
    }

    /// Opens the callback URL in the person's browser, printing the response.
    async fn callback(&self, location: &str) -> u16 {
        let response = self.browser.get(location).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = format!("{:?}", response.headers());
        let body = response.text().await.unwrap();
        self.output.print(format!("callback answered {status} {headers} {body}"));
        status
    }

    async fn outcome(&self, run: &RunHandle) -> RunOutcome {
        let outcome = run.outcome().await.unwrap();
        self.output.print(format!("{outcome:?} {}", serde_json::to_string(&outcome).unwrap()));
        outcome
    }

    /// Prints the run's journal as JSON and as `inspect` renders it.
    async fn print_journal(&self, run: &RunId) {
        let record = self.runtime.journal(run).await.unwrap();
        for entry in &record.entries {
            self.output.print(format!("{} {}", cli::describe(entry), serde_json::to_string(entry).unwrap()));
        }
    }
}

/// The bytes of every file in `dir`, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let entries = std::fs::read_dir(dir).unwrap();
    let mut files: Vec<_> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap()))
        .collect();
    files.sort();
    files
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn a_canary_pushed_through_every_auth_path_appears_nowhere() {
    let output = Output::capture_logs();
    let dir = tempfile::tempdir().unwrap();
    let mut process = Process::start(dir.path(), output.clone()).await;

    // A sign-in whose first callback carries a code the server refuses, then a failing attempt
    // and its retry.
    let run = process.start_run("PROBEuser").await;
    let url = process.sign_in_url(&run).await;
    let redirect = process.follow(&url, "PROBEuser").await;
    let refused = redirect.location.replace(&redirect.code, &format!("code-{CANARY}-refused"));
    assert_eq!(process.callback(&refused).await, 502, "the server refused the code");
    let error = process.runtime.complete_authorization("fake", &redirect.state, &format!("{CANARY}-bad")).await;
    output.print(format!("{error:?} {}", error.as_ref().unwrap_err()));
    process.fake.fail_api_calls(1);
    assert_eq!(process.callback(&redirect.location).await, 200);
    assert_eq!(process.callback(&redirect.location).await, 404, "a used callback");
    process.runtime.settle().await;
    process.clock.advance(Duration::from_secs(1));
    let outcome = process.outcome(&run).await;
    assert_eq!(outcome, RunOutcome::Completed(json!({ "user": "PROBEuser", "serial": 1 })));
    let probe_run = run.id().clone();

    // A refresh, then a refused refresh, which asks for a sign-in that is cancelled.
    process.clock.advance(Duration::from_secs(3600));
    let refreshed = process.start_run("PROBEuser").await;
    assert_eq!(process.outcome(&refreshed).await, RunOutcome::Completed(json!({ "user": "PROBEuser", "serial": 2 })));
    process.fake.refuse_refresh();
    process.clock.advance(Duration::from_secs(3600));
    let abandoned = process.start_run("PROBEuser").await;
    process.sign_in_url(&abandoned).await;
    process.runtime.cancel(abandoned.id(), "nobody signed in").await.unwrap();
    assert_eq!(process.outcome(&abandoned).await, RunOutcome::Cancelled);

    // A token rejected right after sign-in.
    process.fake.reject_tokens(true);
    let rejected = process.start_run("grace").await;
    let url = process.sign_in_url(&rejected).await;
    let redirect: Redirect = process.follow(&url, "grace").await;
    assert_eq!(process.callback(&redirect.location).await, 200);
    assert!(matches!(process.outcome(&rejected).await, RunOutcome::Failed(_)));

    // A webhook request with credentials in its headers and signed values in its query string.
    let hooked = process.runtime.start("take_a_webhook", json!({ "api": "" })).await.unwrap();
    hooked.parked().await.unwrap();
    let url = WEBHOOK_URL.lock().unwrap().clone().expect("the run handed over its webhook");
    let query = format!("token={CANARY}-t&sig={CANARY}-s&access_token={CANARY}-a&code={CANARY}-c&page=PROBEpage");
    let sent = no_redirects()
        .post(format!("{url}?{query}"))
        .header("authorization", format!("Bearer {CANARY}-bearer"))
        .header("proxy-authorization", format!("Basic {CANARY}-proxy"))
        .header("cookie", format!("session={CANARY}-cookie"))
        .header("x-probe", "PROBEheader")
        .body("PROBEbody");
    assert_eq!(sent.send().await.unwrap().status(), 202);
    let outcome = process.outcome(&hooked).await;
    let seen: WebhookRequest = serde_json::from_value(outcome.output().cloned().unwrap()).unwrap();
    assert_eq!((seen.header("x-probe"), seen.text()), (Some("PROBEheader"), Some("PROBEbody")));

    for run in [&probe_run, refreshed.id(), abandoned.id(), rejected.id(), hooked.id()] {
        process.print_journal(run).await;
    }
    process.drain_events();
    assert_eq!((process.fake.exchanges(), process.fake.refreshes()), (2, 1), "every path was taken");
    let Process { runtime, server, .. } = process;
    server.shutdown().await;
    drop(runtime);

    let files = files(dir.path());
    let names: Vec<_> = files.iter().map(|(name, _)| name.as_str()).collect();
    assert!(names.contains(&"eve.db"), "{names:?}");
    let everything: Vec<u8> = files.iter().flat_map(|(_, bytes)| bytes.iter().copied()).collect();
    assert!(contains(&everything, "PROBEuser"), "the files are searched where the journal is");
    assert!(contains(&everything, "PROBEheader") && contains(&everything, "PROBEpage"), "and the webhook's request");
    for (name, bytes) in &files {
        assert!(!contains(bytes, CANARY), "{name} holds a secret");
    }
    let text = output.text();
    assert!(text.contains("stored the token of a sign-in") && text.contains("PROBEuser"), "logs were captured");
    assert!(text.contains("TRACE"), "at TRACE");
    let leaks: Vec<_> = text.lines().filter(|line| line.contains(CANARY)).collect();
    assert!(leaks.is_empty(), "secrets in the output:\n{}", leaks.join("\n"));
}
