//! The accept loop: one task per connection up to a cap, HTTP/1.1 with keep-alive, a deadline on
//! headers, and a graceful shutdown that waits for every connection to close.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Limits;

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

/// Serves one connection until the client closes it or the server stops.
async fn connection(stream: TcpStream, router: Router, header_timeout: Duration, mut stop: watch::Receiver<bool>) {
    // Small responses should not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = stopped(&mut stop) => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        // Clients that hang up or send garbage are routine; the error names no path or token.
        tracing::debug!("HTTP connection ended: {error}");
    }
}

/// Resolves once the server is stopping.
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopping| *stopping).await;
}
