//! A request that carries a W3C `traceparent` (the run API's header, MCP's `_meta.traceparent`)
//! makes the caller's span the parent of the trace of the run it starts.

use eve_tests::otlp::{Collector, ReceivedSpan};
use eve_tools::http::Server;
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::runs::export_to;

/// The caller's trace and span, as its `traceparent` names them.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn caller() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

/// What to label.
#[derive(Deserialize, JsonSchema)]
pub struct Label {
    /// The parcel.
    parcel: String,
}

#[step]
async fn print_label(parcel: String) -> Result<String, StepError> {
    Ok(format!("label for {parcel}"))
}

/// Prints a parcel's label in a step.
#[workflow_tool]
pub async fn label_parcel(input: Label) -> Result<String, ToolError> {
    Ok(print_label(input.parcel).await?)
}

/// A runtime served on loopback, with no API key.
async fn serve() -> (Runtime, eve_tools::http::ServerHandle, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let runtime = Runtime::builder().store(MemoryStore::new()).public_url(&url).build().unwrap();
    let server = Server::new(runtime.clone()).serve(listener).unwrap();
    (runtime, server, url)
}

/// The run's `start` span is the caller's child, and its activations and steps are in the
/// caller's trace.
fn assert_under_the_caller(spans: &[ReceivedSpan]) {
    let start = spans
        .iter()
        .find(|span| span.name == "start" && span.attribute("gen_ai.tool.name") == Some("label_parcel"))
        .unwrap_or_else(|| panic!("the run's start span arrived: {spans:#?}"));
    assert_eq!((start.trace_id.as_str(), start.parent_span_id.as_str()), (CALLER_TRACE, CALLER_SPAN));
    let run = spans.iter().find(|span| span.name == "run" && span.parent_span_id == start.span_id).expect("a run span");
    let step =
        spans.iter().find(|span| span.name == "step" && span.parent_span_id == run.span_id).expect("a step span");
    assert_eq!((run.trace_id.as_str(), step.trace_id.as_str()), (CALLER_TRACE, CALLER_TRACE));
}

/// `POST /v1/tools/{tool}/runs` with a `traceparent` header.
#[tokio::test]
async fn the_run_apis_traceparent_is_the_runs_parent() {
    let collector = Collector::start();
    let (traces, _default) = export_to(&collector);
    let (runtime, server, url) = serve().await;
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/tools/label_parcel/runs"))
        .header("traceparent", caller())
        .json(&json!({ "input": { "parcel": "p-1" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let run: Value = response.json().await.unwrap();
    let run = runtime.handle(run["runId"].as_str().unwrap().parse().unwrap());
    assert_eq!(run.outcome().await.unwrap().output(), Some(&json!("label for p-1")));
    server.shutdown().await;
    runtime.shutdown().await;
    traces.flush().unwrap();
    assert_under_the_caller(&collector.spans());
}

/// An MCP `tools/call` of a workflow tool with `_meta.traceparent` (SEP-414).
#[tokio::test]
async fn an_mcp_calls_traceparent_is_the_runs_parent() {
    let collector = Collector::start();
    let (traces, _default) = export_to(&collector);
    let (runtime, server, url) = serve().await;
    let call = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "label_parcel",
            "arguments": { "parcel": "p-2" },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": { "name": "eve-otel-test", "version": "0" },
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": caller(),
            },
        },
    });
    let response = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "label_parcel")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert!(text.contains("label for p-2"), "the call answers with the run's output: {text}");
    server.shutdown().await;
    runtime.shutdown().await;
    traces.flush().unwrap();
    assert_under_the_caller(&collector.spans());
}
