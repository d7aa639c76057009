//! The accept loop: one task per connection up to a cap, HTTP/1.1 with keep-alive, a deadline on
//! headers, and a graceful shutdown that waits for every connection to close.
//!
//! A connection the server ends closes gracefully. When a request is refused before its body
//! was read (a body over the limit gets `413` without being read), the client may still be
//! sending it; closing the socket with unread bytes makes the kernel answer with a reset, which
//! can reach the client before it has read the response ("broken pipe" instead of `413`). So
//! once hyper is done with a connection, the server shuts down its write side (the client reads
//! the response to its end) and then reads and discards whatever still arrives, until the client
//! closes or [`LINGER`] passes.

use std::future::poll_fn;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long a connection the server ends keeps discarding what the client still sends.
const LINGER: Duration = Duration::from_secs(2);

use super::state::Limits;

/// Accepts connections until `stop` turns `true` (or its sender is dropped), then waits for the
/// open connections to finish. With `max_connections` open, it accepts no more until one closes:
/// further clients wait in the listen backlog instead of exhausting memory or file descriptors.
pub(crate) async fn accept(listener: TcpListener, router: Router, limits: Limits, mut stop: watch::Receiver<bool>) {
    let header_timeout = limits.body_timeout;
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept(), if connections.len() < limits.connections => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, router.clone(), header_timeout, stop.clone()));
                }
                Err(error) => {
                    // Out of file descriptors, say: back off instead of spinning.
                    tracing::warn!("cannot accept an HTTP connection: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until the client closes it or the server stops, then closes it
/// gracefully.
async fn connection(stream: TcpStream, router: Router, header_timeout: Duration, mut stop: watch::Receiver<bool>) {
    // Small responses should not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    // Each request's future is boxed so the connection is `Unpin` and can hand its socket back.
    let service = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |request| Box::pin(hyper::service::Service::call(&service, request)));
    let mut connection = builder.serve_connection(TokioIo::new(stream), service);
    let result = tokio::select! {
        result = poll_fn(|cx| connection.poll_without_shutdown(cx)) => result,
        _ = stopped(&mut stop) => {
            std::pin::Pin::new(&mut connection).graceful_shutdown();
            poll_fn(|cx| connection.poll_without_shutdown(cx)).await
        }
    };
    if let Err(error) = &result {
        // Clients that hang up or send garbage are routine; the error names no path or token.
        tracing::debug!("HTTP connection ended: {error}");
    }
    linger(connection.into_parts().io.into_inner()).await;
}

/// Closes a connection so that the client reads the last response: shuts down the write side,
/// then discards what the client still sends until it closes or [`LINGER`] passes.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut discarded = [0; 16 * 1024];
    let drain = async { while let Ok(1..) = stream.read(&mut discarded).await {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Resolves once the server is stopping.
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopping| *stopping).await;
}
