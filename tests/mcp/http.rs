//! `/mcp` on the HTTP server, reached as a client on the network reaches it: behind the run
//! API's key and its `Origin`/`Host` rules, and answering malformed JSON-RPC with the spec's
//! error codes without starting anything.

use eve_tools::http::{Server, ServerHandle};
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// What to echo.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Echo {
    /// The text.
    text: String,
}

/// Echo the text back.
#[tool]
pub async fn echo(input: Echo) -> Result<String, ToolError> {
    Ok(input.text)
}

const KEY: &str = "a-long-random-key-for-the-mcp-tests";

async fn server(key: Option<&str>) -> (Runtime, ServerHandle, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let runtime = Runtime::builder().store(MemoryStore::new()).public_url(&url).build().unwrap();
    let mut server = Server::new(runtime.clone()).body_limit(64 * 1024);
    if let Some(key) = key {
        server = server.api_key(key.to_owned());
    }
    (runtime, server.serve(listener).unwrap(), url)
}

/// A stateless (2026-07-28) JSON-RPC request with the standard headers and `_meta`.
fn request(method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "eve-http-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// Posts `body` to `/mcp` and returns the status and the JSON-RPC response (from JSON or SSE).
async fn post(url: &str, method: &str, body: String, headers: &[(&str, &str)]) -> (StatusCode, Option<Value>) {
    let mut builder = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .body(body);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
    });
    (status, json)
}

fn bearer() -> String {
    format!("Bearer {KEY}")
}

#[tokio::test]
async fn mcp_requires_the_api_key() {
    let (_runtime, server, url) = server(Some(KEY)).await;
    let list = request("tools/list", json!({})).to_string();
    let (status, _) = post(&url, "tools/list", list.clone(), &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = post(&url, "tools/list", list.clone(), &[("Authorization", "Bearer wrong")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = post(&url, "tools/list", list, &[("Authorization", &bearer())]).await;
    assert_eq!(status, StatusCode::OK);
    let body = body.unwrap();
    let names: Vec<_> = body["result"]["tools"].as_array().unwrap().iter().map(|tool| tool["name"].clone()).collect();
    assert!(names.contains(&json!("echo")), "{body}");
    server.shutdown().await;
}

#[tokio::test]
async fn mcp_refuses_foreign_origins_and_hosts() {
    let (_runtime, server, url) = server(Some(KEY)).await;
    let list = request("tools/list", json!({})).to_string();
    let foreign = [("Authorization", bearer()), ("Origin", "https://evil.example".to_owned())];
    let foreign: Vec<(&str, &str)> = foreign.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let (status, _) = post(&url, "tools/list", list.clone(), &foreign).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a page elsewhere");
    let own = [("Authorization", bearer()), ("Origin", url.clone())];
    let own: Vec<(&str, &str)> = own.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let (status, _) = post(&url, "tools/list", list.clone(), &own).await;
    assert_eq!(status, StatusCode::OK, "the server's own origin");
    server.shutdown().await;

    // Without a key, only requests addressed to a loopback name (DNS rebinding).
    let (_runtime, server, url) = server_keyless().await;
    let (status, _) = post(&url, "tools/list", list.clone(), &[("Host", "evil.example")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = post(&url, "tools/list", list, &[]).await;
    assert_eq!(status, StatusCode::OK);
    server.shutdown().await;
}

async fn server_keyless() -> (Runtime, ServerHandle, String) {
    server(None).await
}

#[tokio::test]
async fn bad_json_rpc_gets_the_spec_error_codes_and_starts_nothing() {
    let (runtime, server, url) = server(Some(KEY)).await;
    let auth = [("Authorization", bearer())];
    let auth: Vec<(&str, &str)> = auth.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let code = |body: &Option<Value>| body.as_ref().and_then(|body| body["error"]["code"].as_i64());

    let (status, body) = post(&url, "tools/call", "{not json".to_owned(), &auth).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some(-32700)), "parse error: {body:?}");

    let (status, body) = post(&url, "tools/call", r#"{"hello": "world"}"#.to_owned(), &auth).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some(-32600)), "not JSON-RPC: {body:?}");

    let old = json!({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}).to_string();
    let (status, body) = post(&url, "tools/list", old, &auth).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some(-32600)), "JSON-RPC 1.0: {body:?}");
    assert_eq!(body.as_ref().unwrap()["id"], 7, "its id is echoed: {body:?}");

    let no_name = request("tools/call", json!({"arguments": {}})).to_string();
    let (status, body) = post(&url, "tools/call", no_name, &auth).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, Some(-32602)), "params of the wrong shape: {body:?}");
    assert_eq!(body.as_ref().unwrap()["id"], 1, "the request's id is echoed");

    let (_, body) = post(&url, "nope/nope", request("nope/nope", json!({})).to_string(), &auth).await;
    assert_eq!(code(&body), Some(-32601), "unknown method: {body:?}");

    let unknown_tool = request("tools/call", json!({"name": "nope", "arguments": {}})).to_string();
    let (_, body) = post(&url, "tools/call", unknown_tool, &[auth[0], ("Mcp-Name", "nope")]).await;
    assert_eq!(code(&body), Some(-32602), "unknown tool: {body:?}");

    let bad_arguments = request("tools/call", json!({"name": "ask_question", "arguments": {"prompt": 3}})).to_string();
    let (_, body) = post(&url, "tools/call", bad_arguments, &[auth[0], ("Mcp-Name", "ask_question")]).await;
    let result = &body.as_ref().unwrap()["result"];
    assert_eq!(result["isError"], true, "{body:?}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("field `prompt`"), "{body:?}");

    let unknown_task = request("tasks/get", json!({"taskId": "run_nope"})).to_string();
    let mut with_tasks: Value = serde_json::from_str(&unknown_task).unwrap();
    with_tasks["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let (_, body) = post(&url, "tasks/get", with_tasks.to_string(), &[auth[0], ("Mcp-Name", "run_nope")]).await;
    assert_eq!(code(&body), Some(-32602), "unknown task: {body:?}");

    let huge =
        request("tools/call", json!({"name": "echo", "arguments": {"text": "x".repeat(100 * 1024)}})).to_string();
    let (status, _) = post(&url, "tools/call", huge, &[auth[0], ("Mcp-Name", "echo")]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    assert!(runtime.runs(None, 10).await.unwrap().is_empty(), "nothing was started");
    server.shutdown().await;
}

/// Ending a session (`DELETE` with its `MCP-Session-Id`) answers 2xx once; a `DELETE` of a session
/// this server does not know, or has ended, answers `404` (it answered `202`, as if it had ended
/// one), and so does a request on an ended session.
#[tokio::test]
async fn a_delete_of_an_unknown_or_ended_session_is_not_found() {
    let (_runtime, server, url) = server(Some(KEY)).await;
    let client = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "eve-http-test", "version": "0"}}});
    let response = client
        .post(format!("{url}/mcp"))
        .header("Authorization", bearer())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let delete = |id: String| {
        client
            .delete(format!("{url}/mcp"))
            .header("Authorization", bearer())
            .header("MCP-Protocol-Version", "2025-11-25")
            .header("MCP-Session-Id", id)
            .send()
    };
    assert_eq!(delete("no-such-session".into()).await.unwrap().status(), StatusCode::NOT_FOUND, "unknown");
    assert!(delete(session.clone()).await.unwrap().status().is_success(), "the session ends");
    assert_eq!(delete(session).await.unwrap().status(), StatusCode::NOT_FOUND, "already ended");
    server.shutdown().await;
}
