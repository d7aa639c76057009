//! Log messages a tool sends while it runs: `ctx.log(LogLevel::Info, "…")` on a
//! [`WorkflowCtx`](crate::WorkflowCtx) (and so a `TaskCtx` or `ServeCtx`), a
//! [`ToolCtx`](crate::ToolCtx) or a [`StepCtx`](crate::StepCtx).
//!
//! A log message is not durable and is not a result: it is never journaled, takes no op number,
//! and changes nothing a replay checks. It goes, as it is made, to two places:
//!
//! - `tracing`, as an event at the nearest level (`notice` is `INFO`; `critical`, `alert` and
//!   `emergency` are `ERROR`) with the run or call and the tool as fields, so a host's own log
//!   shows it;
//! - whoever listens to the run or the plain tool call it belongs to ([`Runtime::logs`]): the MCP
//!   server listens for the calls a client asked logs of, and sends them as
//!   `notifications/message`.
//!
//! Listeners are keyed by the run's id or the plain call's id. A message nobody listens to costs
//! one atomic load besides its `tracing` event. Each listener has a bounded queue
//! ([`LISTENER_QUEUE`] messages); a listener that falls that far behind misses the messages that
//! do not fit, which are dropped, never waited for: logging never slows a body down.
//!
//! # Replay
//!
//! A workflow body runs again from the top when its run is rebuilt from its journal (after a
//! restart, or once evicted from the warm cache). The log calls it makes while the executor feeds
//! it the journal are the ones it made before, which were sent then, so they are dropped: a
//! message is sent at most once. A step's log messages are always sent: a step whose completion
//! is journaled never runs again, and each attempt that does run is new.
//!
//! [`Runtime::logs`]: crate::Runtime::logs

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// How many messages a listener's queue holds; past that, new messages are dropped for it.
pub const LISTENER_QUEUE: usize = 1024;

/// How severe a log message is: the syslog levels (RFC 5424) that MCP uses, least severe first,
/// so `level >= LogLevel::Warning` reads as "at least a warning". Written lowercase in JSON and
/// text (`"warning"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detail for whoever debugs the tool.
    Debug,
    /// What the tool is doing.
    Info,
    /// Normal but significant.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something went wrong.
    Error,
    /// A component failed.
    Critical,
    /// Someone must act at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The level's name, lowercase, as MCP writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for LogLevel {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        LogLevel::ALL.into_iter().find(|level| level.as_str() == text).ok_or_else(|| {
            let names: Vec<&str> = LogLevel::ALL.iter().map(|level| level.as_str()).collect();
            format!("unknown log level `{text}`; expected one of {}", names.join(", "))
        })
    }
}

/// One log message of a run or a plain tool call, as a listener receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogMessage {
    /// How severe it is.
    pub level: LogLevel,
    /// The model-facing name of the tool that sent it.
    pub tool: &'static str,
    /// The text.
    pub message: String,
}

/// The listeners of every run and call, by id. Held by the runtime's services; a context sends
/// through it.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    /// How many listeners there are, read before anything else so that a message nobody listens
    /// to costs one load.
    count: AtomicUsize,
    next_id: AtomicU64,
    by_source: Mutex<HashMap<String, Vec<Listener>>>,
}

/// One listener: its id (to forget it by) and its queue.
type Listener = (u64, mpsc::Sender<LogMessage>);

impl Listeners {
    /// Sends `message`, at `level`, from `tool`, to the listeners of `source` (a run's or a
    /// call's id), and to `tracing`.
    pub fn send(&self, source: &str, tool: &'static str, level: LogLevel, message: String) {
        trace(source, tool, level, &message);
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let by_source = self.by_source.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(listeners) = by_source.get(source) else { return };
        let message = LogMessage { level, tool, message };
        for (_, listener) in listeners {
            if listener.try_send(message.clone()).is_err() {
                tracing::debug!(source, "a log listener's queue is full: a log message is dropped for it");
            }
        }
    }

    /// A new listener of `source`, registered before this returns: it receives every message
    /// sent from then on.
    pub fn listen(self: &Arc<Self>, source: &str) -> Logs {
        let (sender, receiver) = mpsc::channel(LISTENER_QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut by_source = self.by_source.lock().unwrap_or_else(PoisonError::into_inner);
        by_source.entry(source.to_owned()).or_default().push((id, sender));
        self.count.fetch_add(1, Ordering::SeqCst);
        Logs { receiver, listeners: self.clone(), source: source.to_owned(), id }
    }

    fn forget(&self, source: &str, id: u64) {
        let mut by_source = self.by_source.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(listeners) = by_source.get_mut(source) {
            listeners.retain(|(listener, _)| *listener != id);
            if listeners.is_empty() {
                by_source.remove(source);
            }
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The `tracing` event of a log message, at the nearest of `tracing`'s levels.
pub(crate) fn trace(source: &str, tool: &'static str, level: LogLevel, message: &str) {
    let level_name = level.as_str();
    match level {
        LogLevel::Debug => tracing::debug!(source, tool, level = level_name, "{message}"),
        LogLevel::Info | LogLevel::Notice => tracing::info!(source, tool, level = level_name, "{message}"),
        LogLevel::Warning => tracing::warn!(source, tool, level = level_name, "{message}"),
        LogLevel::Error | LogLevel::Critical | LogLevel::Alert | LogLevel::Emergency => {
            tracing::error!(source, tool, level = level_name, "{message}")
        }
    }
}

/// The log messages of one run or plain tool call, from the moment [`Runtime::logs`] was called
/// on: a stream that ends only when the runtime is dropped. Dropping it stops listening.
///
/// [`Runtime::logs`]: crate::Runtime::logs
pub struct Logs {
    receiver: mpsc::Receiver<LogMessage>,
    listeners: Arc<Listeners>,
    source: String,
    id: u64,
}

impl Logs {
    /// Stops listening, and hands back the messages already received, in order: what a listener
    /// whose run has ended still has to pass on.
    pub fn close(mut self) -> Vec<LogMessage> {
        self.listeners.forget(&self.source, self.id);
        self.id = u64::MAX;
        self.receiver.close();
        let mut left = Vec::new();
        while let Ok(message) = self.receiver.try_recv() {
            left.push(message);
        }
        left
    }
}

impl Stream for Logs {
    type Item = LogMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LogMessage>> {
        self.receiver.poll_recv(cx)
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        if self.id != u64::MAX {
            self.listeners.forget(&self.source, self.id);
        }
    }
}

impl fmt::Debug for Logs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logs").field("source", &self.source).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_by_severity_and_read_back_from_their_names() {
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
        for level in LogLevel::ALL {
            assert_eq!(level.as_str().parse::<LogLevel>(), Ok(level));
            assert_eq!(serde_json::to_value(level).unwrap(), serde_json::json!(level.as_str()));
        }
        let refused = "verbose".parse::<LogLevel>().unwrap_err();
        assert!(refused.contains("`verbose`") && refused.contains("debug, info"), "{refused}");
    }

    #[test]
    fn a_listener_gets_what_its_source_sends_from_its_start_until_it_closes() {
        let listeners = Arc::new(Listeners::default());
        listeners.send("run-1", "tool", LogLevel::Info, "before anyone listens".into());
        let logs = listeners.listen("run-1");
        let other = listeners.listen("run-2");
        listeners.send("run-1", "tool", LogLevel::Warning, "first".into());
        listeners.send("run-2", "tool", LogLevel::Info, "elsewhere".into());
        listeners.send("run-1", "tool", LogLevel::Error, "second".into());
        let got: Vec<String> = logs.close().into_iter().map(|message| message.message).collect();
        assert_eq!(got, ["first", "second"]);
        assert_eq!(listeners.count.load(Ordering::SeqCst), 1, "closing stops listening");
        drop(other);
        assert_eq!(listeners.count.load(Ordering::SeqCst), 0, "dropping stops listening");
        assert!(listeners.by_source.lock().unwrap().is_empty());
    }

    #[test]
    fn a_full_queue_drops_messages_instead_of_waiting() {
        let listeners = Arc::new(Listeners::default());
        let logs = listeners.listen("run-1");
        for n in 0..LISTENER_QUEUE + 10 {
            listeners.send("run-1", "tool", LogLevel::Debug, n.to_string());
        }
        let got = logs.close();
        assert_eq!(got.len(), LISTENER_QUEUE);
        assert_eq!(got.last().map(|message| message.message.as_str()), Some("1023"));
    }
}
