//! A clean wire: every message a client sends is checked here before rmcp sees it, and one that
//! is not a message rmcp can take gets the JSON-RPC error the specifications name, whatever the
//! transport:
//!
//! | what arrived | error | `id` |
//! | --- | --- | --- |
//! | not JSON: a syntax error, nesting past serde_json's depth limit (128), over the size limit, or not UTF-8 | `-32700` | null |
//! | JSON that is not a JSON-RPC 2.0 message (`"jsonrpc": "1.0"`, no `method`, a batch) | `-32600` | its `id`, if it has a string or number one; else null |
//! | a request for one of the protocol's methods whose `params` do not have the method's shape | `-32602` | its `id` |
//!
//! Over stdio ([`LineTransport`]) the error is written as a line and the next line is read: a bad
//! line never ends the session. (rmcp's own transport ignores lines that are not JSON or too
//! long, and answers an invalid request with no `id` at all.) Over HTTP, `http.rs` answers with
//! the error and status `400`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The protocol's request methods that take parameters. Methods protocol 2026-07-28 removed
/// (`initialize`, `logging/setLevel`, `resources/subscribe`, ...) are left to rmcp, which
/// answers them `-32601` as that revision asks.
const METHODS: [&str; 10] = [
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "prompts/get",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
    "skills/get",
    "resources/directory/read",
];

/// Why a message was refused: the JSON-RPC error to answer it with.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The request's id, or null when it has none that can be read.
    pub id: Value,
    pub code: i32,
    pub message: String,
}

impl Refusal {
    fn parse_error(message: String) -> Self {
        Refusal { id: Value::Null, code: -32700, message }
    }

    /// The error response, as JSON.
    pub fn to_json(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
    }
}

/// Reads one message: what rmcp gets, or the error to answer it with.
pub(crate) fn check(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Refusal> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Err(error) = std::str::from_utf8(bytes) {
        return Err(Refusal::parse_error(format!("the message is not UTF-8 ({error}); send JSON in UTF-8")));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| Refusal::parse_error(format!("the message is not JSON: {error}")))?;
    let method = value.get("method").and_then(Value::as_str).unwrap_or_default();
    // rmcp takes a request it cannot decode as a custom one (then `-32601`); for the protocol's
    // own methods, that means parameters of the wrong shape.
    let refused = match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(ClientJsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::CustomRequest(_)) && METHODS.contains(&method) =>
        {
            true
        }
        Ok(message) => return Ok(message),
        Err(_) => false,
    };
    let id = value.get("id").filter(|id| id.is_string() || id.is_number()).cloned();
    let is_request = value.get("jsonrpc") == Some(&json!("2.0")) && !method.is_empty();
    Err(match (refused && is_request, id) {
        (true, Some(id)) => Refusal {
            id,
            code: -32602,
            message: format!("the params of `{method}` do not have the shape the method takes"),
        },
        (_, id) => Refusal {
            id: id.unwrap_or(Value::Null),
            code: -32600,
            message: "the message is not a JSON-RPC 2.0 message: send an object with \"jsonrpc\": \"2.0\", \"method\" \
                      and \"id\""
                .to_owned(),
        },
    })
}

/// Newline-delimited JSON-RPC over a byte stream pair (stdio, a socket), for rmcp: each line is
/// checked ([`check`]) and a bad one answered in place; a line over `limit` bytes is skipped to
/// its end without being held in memory.
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    limit: usize,
    /// Set once a line went over the limit, until its end is read.
    discarding: bool,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    /// The error being written for a bad line: kept here, so a `receive` that rmcp drops (it
    /// polls it in a `select!`) leaves it to the next one instead of cutting a line short.
    answering: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send>>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W, limit: usize) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            limit,
            discarding: false,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            answering: None,
        }
    }

    /// Writes `line` and a newline, whole, under the writer's lock.
    fn write_line(&self, mut line: Vec<u8>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let write = self.write.clone();
        line.push(b'\n');
        async move {
            let mut write = write.lock().await;
            let write =
                write.as_mut().ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "the transport is closed"))?;
            write.write_all(&line).await?;
            write.flush().await
        }
    }

    /// Reads the next line into `self.line` (without its newline). `Ok(false)` at the end of the
    /// stream; `Err` with the refusal for a line over the limit. Safe to cancel: a partial line
    /// stays in `self.line` for the next call.
    async fn read_line(&mut self) -> io::Result<Result<bool, Refusal>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Ok(false));
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let content = &available[..newline.unwrap_or(available.len())];
            let over = !self.discarding && self.line.len() + content.len() > self.limit;
            if !self.discarding && !over {
                self.line.extend_from_slice(content);
            }
            self.read.consume(take);
            match (newline.is_some(), over || self.discarding) {
                (true, false) => return Ok(Ok(true)),
                (true, true) => {
                    let refused = std::mem::take(&mut self.discarding) || over;
                    self.line.clear();
                    if refused {
                        return Ok(Err(self.too_long()));
                    }
                }
                (false, true) => {
                    self.line.clear();
                    self.discarding = true;
                }
                (false, false) => {}
            }
        }
    }

    fn too_long(&self) -> Refusal {
        Refusal::parse_error(format!(
            "the message is over the limit of {} bytes; send a smaller one (a large input belongs in a file or a URL \
             the tool reads)",
            self.limit
        ))
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let line = serde_json::to_vec::<ServerJsonRpcMessage>(&item).map_err(io::Error::from);
        let written = line.map(|line| self.write_line(line));
        async move { written?.await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(answering) = self.answering.as_mut() {
                let written = answering.as_mut().await;
                self.answering = None;
                if let Err(error) = written {
                    tracing::warn!("cannot answer a malformed MCP message: {error}");
                    return None;
                }
            }
            let refusal = match self.read_line().await {
                Ok(Ok(false)) => return None,
                Err(error) => {
                    tracing::warn!("cannot read the MCP client's messages: {error}");
                    return None;
                }
                Ok(Err(refusal)) => refusal,
                Ok(Ok(true)) => {
                    let line = std::mem::take(&mut self.line);
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match check(line) {
                        Ok(message) => return Some(message),
                        Err(refusal) => refusal,
                    }
                }
            };
            tracing::warn!(code = refusal.code, "refused an MCP message: {}", refusal.message);
            let line = refusal.to_json().to_string().into_bytes();
            self.answering = Some(Box::pin(self.write_line(line)));
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        let mut write = self.write.lock().await;
        if let Some(mut write) = write.take() {
            write.shutdown().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_bad_message_gets_its_code_and_id() {
        let cases: &[(&[u8], i32, Value)] = &[
            (b"{not json", -32700, Value::Null),
            (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", -32700, Value::Null),
            (br#"{"jsonrpc":"1.0","id":7,"method":"tools/list"}"#, -32600, json!(7)),
            (br#"{"jsonrpc":"1.0","id":"seven","method":"tools/list"}"#, -32600, json!("seven")),
            (br#"{"jsonrpc":"1.0","id":{"no":1},"method":"tools/list"}"#, -32600, Value::Null),
            (br#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#, -32600, Value::Null),
            (br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}"#, -32602, json!(2)),
        ];
        for (bytes, code, id) in cases {
            let refusal = check(bytes).expect_err(&String::from_utf8_lossy(bytes));
            assert_eq!((refusal.code, &refusal.id), (*code, id), "{}", String::from_utf8_lossy(bytes));
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(check(deep.as_bytes()).unwrap_err().code, -32700);
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_ok());
        assert!(check(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}").is_ok());
    }
}
