//! Serving a runtime on loopback for the HTTP tests, handing webhook URLs to "the outside world",
//! and reading responses the way the tests compare them.

use std::sync::Mutex;

use eve_tools::http::{Server, ServerHandle};
use eve_tools::prelude::*;
use eve_tools::{RunId, RuntimeBuilder};
use serde_json::Value;

use crate::World;

/// A runtime served over loopback HTTP, with a client for it.
pub struct Served {
    /// The world (store and manual clock) the runtime runs in.
    pub world: World,
    /// The runtime behind the server.
    pub runtime: Runtime,
    /// The running server.
    pub server: ServerHandle,
    /// `http://127.0.0.1:{port}`.
    pub base: String,
    /// A client that never goes through a proxy and keeps cookies, as a browser does.
    pub client: reqwest::Client,
}

impl Served {
    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// Serves a fresh runtime with the server's default limits.
pub async fn serve() -> Served {
    serve_with(|runtime| runtime, |server| server).await
}

/// Serves a fresh runtime, configured by `runtime` and `server`. The port is bound first so the
/// runtime's webhook and callback URLs point at it.
pub async fn serve_with(
    runtime: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    server: impl FnOnce(Server) -> Server,
) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port is free");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let world = World::in_memory();
    let built = runtime(world.builder(16).public_url(&base)).build().expect("the runtime builds");
    let handle = server(Server::new(built.clone())).serve(listener).expect("the server starts");
    let client = reqwest::Client::builder().no_proxy().cookie_store(true).build().expect("a client builds");
    Served { world, runtime: built, server: handle, base, client }
}

/// URLs that runs handed to the outside world, by run id.
static HANDED_OVER: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Hands a webhook URL to the system that will call it, as a step hands a callback URL to a
/// render farm. Here the "system" is the test, which reads it with [`handed_over`].
#[step]
pub async fn hand_over(ctx: &StepCtx, url: String) -> Result<(), StepError> {
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    HANDED_OVER.lock().unwrap().push((run, url));
    Ok(())
}

/// The URL `run` handed over; waits until the run has parked, so it has.
pub async fn handed_over(runtime: &Runtime, run: &RunId) -> String {
    runtime.handle(run.clone()).parked().await.unwrap();
    let urls = HANDED_OVER.lock().unwrap();
    let found = urls.iter().rev().find(|(handed, _)| handed == run.as_str()).map(|(_, url)| url.clone());
    found.unwrap_or_else(|| panic!("run {run} handed over no URL"))
}

/// A response as the tests compare them: its status, its headers except `date`, and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The status code.
    pub status: u16,
    /// Every header but `date`, sorted.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Seen {
    /// Reads the whole response.
    pub async fn of(response: reqwest::Response) -> Seen {
        let status = response.status().as_u16();
        let mut headers: Vec<_> = response
            .headers()
            .iter()
            .filter(|(name, _)| name.as_str() != "date")
            .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        headers.sort();
        let body = response.bytes().await.expect("the body arrives").to_vec();
        Seen { status, headers, body }
    }

    /// The value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("the body is not JSON ({error}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `error` object of a JSON error, after checking its shape.
    pub fn error(&self) -> (String, Value) {
        let json = self.json();
        let error = json.get("error").unwrap_or_else(|| panic!("no `error` in {json}"));
        let message = error["message"].as_str().unwrap_or_else(|| panic!("no `error.message` in {json}"));
        assert!(!message.is_empty(), "an empty message in {json}");
        assert!(error.as_object().unwrap().contains_key("field"), "no `error.field` in {json}");
        (message.to_owned(), error["field"].clone())
    }
}
