//! MCP logging: what a tool sends with `ctx.log` (see `eve_runtime::logs`) reaches the client
//! that called it as `notifications/message`, at or above the level the client asked for.
//!
//! - Protocol 2026-07-28 has no sessions: a request asks for logs with
//!   `_meta["io.modelcontextprotocol/logLevel"]`, and a request without it gets none.
//!   `logging/setLevel` is gone from that revision and answers `-32601`.
//! - Older revisions set a level per session with `logging/setLevel`; until a session sets one,
//!   its calls get no logs (the same rule: no level, no logs).
//!
//! A call listens to its own run's (or plain call's) messages from before the run starts until
//! its result is ready, and sends every message it received before it answers, so each one
//! precedes the result on the wire. A call that only creates a task (the tasks extension) returns
//! at once and forwards nothing: its run's messages go to the server's own log (`tracing`).
//!
//! rmcp keeps no state per session, so a session's level is keyed by its handshake: rmcp makes
//! one allocation of the `initialize` parameters per session (`Peer::peer_info`) and keeps it for
//! the session's life. A [`Weak`] to it both recognizes the session and keeps its address from
//! being reused by another; the entries of ended sessions are dropped when a level is next set.

// rmcp marks MCP logging deprecated (SEP-2577), while the revisions this server speaks have it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures::StreamExt;
use rmcp::model::{
    InitializeRequestParams, LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities, SetLevelRequestMethod,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer};
use tokio::sync::oneshot;

use super::Inner;
use eve_runtime::LogLevel;
use eve_runtime::logs::{LogMessage, Logs};

/// `capabilities` with the logging capability declared.
pub(crate) fn declare(mut capabilities: ServerCapabilities) -> ServerCapabilities {
    capabilities.logging = Some(Default::default());
    capabilities
}

/// The levels legacy sessions set with `logging/setLevel`, by session.
#[derive(Default)]
pub(crate) struct SessionLevels(Mutex<Vec<(Weak<InitializeRequestParams>, LogLevel)>>);

impl SessionLevels {
    /// `logging/setLevel`: sets the level of the request's session. A request of protocol
    /// 2026-07-28 or later has no session, so the method is not found (`-32601`).
    pub fn set(&self, cx: &RequestContext<RoleServer>, level: LoggingLevel) -> Result<(), ErrorData> {
        if cx.protocol_version().is_some_and(|version| !version.has_initialize()) {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        let Some(session) = cx.peer.peer_info() else {
            let message = "`logging/setLevel` sets the level of a session begun with `initialize`, and this connection \
                           has none; send `initialize` first, or put the level in each request's \
                           `_meta[\"io.modelcontextprotocol/logLevel\"]`";
            return Err(ErrorData::invalid_request(message, None));
        };
        let mut levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        levels.retain(|(known, _)| known.strong_count() > 0);
        match levels.iter_mut().find(|(known, _)| std::ptr::eq(known.as_ptr(), Arc::as_ptr(&session))) {
            Some((_, set)) => *set = from_mcp(level),
            None => levels.push((Arc::downgrade(&session), from_mcp(level))),
        }
        Ok(())
    }

    /// The level the request's session set, if it set one.
    fn of(&self, peer: &Peer<RoleServer>) -> Option<LogLevel> {
        let session = peer.peer_info()?;
        let levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        levels.iter().find(|(known, _)| std::ptr::eq(known.as_ptr(), Arc::as_ptr(&session))).map(|(_, level)| *level)
    }
}

/// The level the request asks for logs at: its own `_meta` level, else its session's; `None`
/// for no logs.
fn requested(inner: &Inner, cx: &RequestContext<RoleServer>) -> Option<LogLevel> {
    cx.meta.log_level().map(from_mcp).or_else(|| inner.levels.of(&cx.peer))
}

/// A call's forwarding of its run's or plain call's log messages to its client, if the client
/// asked for logs.
pub(crate) struct Forwarding(Option<Forwarder>);

struct Forwarder {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarding {
    /// Starts listening to `source` (a run's or a plain call's id) for the call `cx`, if it
    /// asked for logs. Start it before the run starts, so the first messages are not missed.
    pub fn start(inner: &Inner, source: &str, cx: &RequestContext<RoleServer>) -> Self {
        let Some(level) = requested(inner, cx) else { return Forwarding(None) };
        let (stop, stopped) = oneshot::channel();
        let logs = inner.runtime.logs(source);
        let task = tokio::spawn(forward(logs, cx.peer.clone(), level, stopped));
        Forwarding(Some(Forwarder { stop, task }))
    }

    /// Sends what is left, and stops: call it before answering the call.
    pub async fn finish(self) {
        let Some(Forwarder { stop, task }) = self.0 else { return };
        let _ = stop.send(());
        if let Err(error) = task.await {
            tracing::debug!("the forwarding of a call's log messages ended early: {error}");
        }
    }
}

/// Sends each message of `logs` at `level` or above to `peer` until told to stop, then the
/// messages already received.
async fn forward(mut logs: Logs, peer: Peer<RoleServer>, level: LogLevel, mut stop: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            biased;
            message = logs.next() => match message {
                Some(message) => send(&peer, level, message).await,
                None => return,
            },
            _ = &mut stop => break,
        }
    }
    for message in logs.close() {
        send(&peer, level, message).await;
    }
}

async fn send(peer: &Peer<RoleServer>, level: LogLevel, message: LogMessage) {
    if message.level < level {
        return;
    }
    let notification =
        LoggingMessageNotificationParam::new(to_mcp(message.level), message.message.into()).with_logger(message.tool);
    if let Err(error) = peer.notify_logging_message(notification).await {
        tracing::debug!("cannot send a log message to the MCP client: {error}");
    }
}

fn from_mcp(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

fn to_mcp(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}
