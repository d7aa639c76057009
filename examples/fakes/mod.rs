//! Fake external systems on loopback, for the examples and the tests: a render farm that calls a
//! webhook back, and a Devbox service that posts task state changes to one.
//!
//! Each fake serves HTTP/1.1 on a free loopback port from a thread and an async runtime of its
//! own, for as long as the process runs. That way one fake outlives the runtime of any one
//! `#[tokio::test]` and parallel tests can share it, as they share the setting that points a tool
//! at it. Tests keep each other apart by the ids they use (project ids, task titles).
//!
//! A fake works in one of two modes: **manual**, where the test decides when each callback is
//! sent and reads back what the service saw (deterministic, no sleeps), or **autopilot**, where it
//! behaves like the real service on its own, with short pauses, and narrates what it does (for
//! the runnable examples).

#[cfg(feature = "devbox")]
pub mod devbox;
pub mod render_farm;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;

/// How a fake behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Callbacks are sent only when the caller says so.
    Manual,
    /// The fake sends its callbacks itself, pausing this long before each, and prints them.
    Autopilot(Duration),
}

/// Serves `router` on a free loopback port from a thread of its own; returns `http://127.0.0.1:port`.
fn serve_detached(name: &str, router: Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port is free");
    listener.set_nonblocking(true).expect("a listener can be made non-blocking");
    let addr: SocketAddr = listener.local_addr().expect("a bound listener has an address");
    let serve = move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let runtime = runtime.expect("a fake's runtime builds");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("the listener moves to the runtime");
            axum::serve(listener, router).await.expect("a fake serves until the process exits");
        });
    };
    std::thread::Builder::new().name(name.to_owned()).spawn(serve).expect("a fake's thread starts");
    format!("http://{addr}")
}

/// A client for the fakes' own calls (callbacks to the runtime on loopback): never via a proxy.
fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().expect("a plain HTTP client builds")
}
