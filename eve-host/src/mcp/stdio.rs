//! Standard input and output for an MCP server: read and written as non-blocking pipes when they
//! are pipes (as a client that spawns its server makes them), so a message crosses no blocking
//! thread; tokio's `stdin()`/`stdout()` (a blocking thread per read and write) otherwise.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// This process's standard input, as [`stdio`] opens it.
#[derive(Debug)]
pub struct StdioReader(Reader);

/// This process's standard output, as [`stdio`] opens it.
#[derive(Debug)]
pub struct StdioWriter(Writer);

#[derive(Debug)]
enum Reader {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Receiver),
    Std(tokio::io::Stdin),
}

#[derive(Debug)]
enum Writer {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Sender),
    Std(tokio::io::Stdout),
}

/// Standard input and output for [`McpServer::serve_io`](super::McpServer::serve_io). Where
/// they are pipes, they become non-blocking pipes read and written on the runtime's own I/O
/// driver; anything else (a terminal, a file) is read through tokio's standard handles. Must be
/// called inside a Tokio runtime. Nothing else in the process may use standard output meanwhile:
/// it carries the protocol.
pub fn stdio() -> (StdioReader, StdioWriter) {
    (StdioReader(reader()), StdioWriter(writer()))
}

#[cfg(unix)]
fn reader() -> Reader {
    use std::os::fd::AsFd as _;
    let pipe = io::stdin().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    pipe.map_or_else(|_| Reader::Std(tokio::io::stdin()), Reader::Pipe)
}

#[cfg(not(unix))]
fn reader() -> Reader {
    Reader::Std(tokio::io::stdin())
}

#[cfg(unix)]
fn writer() -> Writer {
    use std::os::fd::AsFd as _;
    let pipe = io::stdout().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    pipe.map_or_else(|_| Writer::Std(tokio::io::stdout()), Writer::Pipe)
}

#[cfg(not(unix))]
fn writer() -> Writer {
    Writer::Std(tokio::io::stdout())
}

impl AsyncRead for StdioReader {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Reader::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Reader::Std(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for StdioWriter {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.0 {
            #[cfg(unix)]
            Writer::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            Writer::Std(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Writer::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Writer::Std(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Writer::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Writer::Std(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}

/// The filter of [`log_to_stderr`] when `RUST_LOG` is not set: warnings and errors, which
/// include every message the server refuses.
const DEFAULT_LOG_FILTER: &str = "warn";

/// Makes `tracing` write to standard error, filtered by `RUST_LOG` (`warn` when unset): the log
/// of `host mcp`, whose standard output carries the protocol. Does nothing if the process has a
/// subscriber already (the host's trace exporter, say).
pub(crate) fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let installed = tracing_subscriber::fmt().with_writer(io::stderr).with_env_filter(filter).try_init();
    if installed.is_err() {
        tracing::debug!("a tracing subscriber is installed already; `host mcp` leaves it as it is");
    }
}
