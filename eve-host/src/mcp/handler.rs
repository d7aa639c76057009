//! The MCP methods: `tools/list`, `tools/call`, `logging/setLevel`, the tasks extension's
//! `tasks/get`, `tasks/update` and `tasks/cancel`, and runs as resources (`resources/list`,
//! `resources/templates/list`, `resources/read`, `resources/subscribe`, `resources/unsubscribe`
//! and `subscriptions/listen`; see `resources.rs`).

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, CreateTaskResult,
    GetTaskParams, GetTaskResult, Implementation, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Task, TaskStatus, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::logging::{self, Forwarding};
use super::status::{Snapshot, detailed};
use super::tools::{Entry, Kind, completed, failed};
use super::{Inner, McpServer, call, resources};
use eve_runtime::journal::RunId;
use eve_runtime::{Error, StartOptions};

/// How long clients may cache the tool list: it changes only with the binary.
const TOOLS_TTL_MS: u64 = 60 * 60 * 1000;

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tasks();
        let capabilities = logging::declare(capabilities.enable_resources().enable_resources_subscribe().build());
        ServerConfig::new(capabilities).with_server_info(Implementation::new("eve", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        counted(
            "tools/list",
            async {
                let tools = self.inner.catalog.tools().to_vec();
                Ok(ListToolsResult::with_all_items(tools)
                    .with_ttl_ms(TOOLS_TTL_MS)
                    .with_cache_scope(CacheScope::Public))
            }
            .await,
        )
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.catalog.get(name).map(|entry| entry.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        counted(
            "tools/call",
            async {
                let inner = &*self.inner;
                let entry = inner.catalog.get(&request.name).ok_or_else(|| unknown_tool(inner, &request.name))?;
                if let Some(state) = &request.request_state {
                    return call::next_round(inner, entry, state, request.input_responses.as_ref(), &cx).await;
                }
                if inner.sampling_only.iter().any(|name| name == entry.descriptor.name) && !call::can_sample(&cx) {
                    #[allow(deprecated, reason = "sampling is deprecated by SEP-2577, and still what clients answer")]
                    let required = ClientCapabilities::builder().enable_sampling().build();
                    return Err(ErrorData::missing_required_client_capability(required));
                }
                let arguments = Value::Object(request.arguments.unwrap_or_default());
                if let Err(message) = entry.check(&arguments) {
                    return Ok(failed(message).into());
                }
                match entry.kind {
                    Kind::Plain => call_plain(inner, entry, arguments, &cx).await,
                    Kind::Durable
                        if cx.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks()) =>
                    {
                        create_task(inner, entry, arguments, &cx).await
                    }
                    Kind::Durable if inner.task_only.iter().any(|name| name == entry.descriptor.name) => {
                        let required = ClientCapabilities::builder().enable_tasks().build();
                        Err(ErrorData::missing_required_client_capability(required))
                    }
                    Kind::Durable => call::start(inner, entry, arguments, &cx).await,
                }
            }
            .await,
        )
    }

    #[allow(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577); revisions before 2026-07-28 have it")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        counted("logging/setLevel", self.inner.levels.set(&cx, request.level))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        counted(
            "tasks/get",
            async {
                let inner = &*self.inner;
                let snapshot = call::read(&inner.runtime, &task_run(&request.task_id)?).await?;
                Ok(GetTaskResult::new(describe(inner, &snapshot)?))
            }
            .await,
        )
    }

    async fn update_task(&self, request: UpdateTaskParams, _cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        counted(
            "tasks/update",
            async {
                let inner = &*self.inner;
                let snapshot = call::read(&inner.runtime, &task_run(&request.task_id)?).await?;
                if snapshot.outcome.is_none() {
                    call::deliver(inner, &snapshot, &request.input_responses, "inputResponses").await?;
                }
                Ok(())
            }
            .await,
        )
    }

    async fn cancel_task(&self, request: CancelTaskParams, _cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        counted(
            "tasks/cancel",
            async {
                let run = task_run(&request.task_id)?;
                match self.inner.runtime.cancel(&run, "cancelled by the MCP client (tasks/cancel)").await {
                    Ok(()) | Err(Error::RunFinished { .. }) => Ok(()),
                    Err(Error::RunNotFound(_)) => Err(unknown_task(&request.task_id)),
                    Err(error) => Err(ErrorData::internal_error(format!("cannot cancel run {run}: {error}"), None)),
                }
            }
            .await,
        )
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        counted("resources/list", resources::list(&self.inner.runtime, request).await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        counted("resources/templates/list", Ok(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        counted("resources/read", resources::read(&self.inner.runtime, &request.uri).await.map(Into::into))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subscribed = self.subscriptions.subscribe(&self.inner.runtime, request.uri, cx.peer).await;
        counted("resources/subscribe", subscribed)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri);
        counted("resources/unsubscribe", Ok(()))
    }

    /// Accepts the `eve://` URIs of a `subscriptions/listen` filter; other categories and URIs
    /// are not eve's to send.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let uris = requested.resource_subscriptions.iter().flatten().filter(|uri| self.serves_uri(uri));
        Some(SubscriptionFilter::builder().resource_subscriptions(uris.cloned()).build())
    }

    /// Watches each `eve://` URI the stream accepted until the client cancels it. A URI of a run
    /// that does not exist is left unwatched (the stream is acknowledged before this runs).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut watching = Vec::new();
        for uri in context.accepted().resource_subscriptions.iter().flatten().filter(|uri| self.serves_uri(uri)) {
            let notify = resources::Notify::Stream(context.sink().clone());
            match resources::watch(&self.inner.runtime, uri, notify).await {
                Ok(handle) => watching.push(resources::Watching::from(handle)),
                Err(error) => tracing::debug!(uri, "subscriptions/listen leaves a URI unwatched: {}", error.message),
            }
        }
        context.cancelled().await;
        drop(watching);
        Ok(())
    }
}

/// The counter of MCP requests, by method and result (`ok`, or `error` for a JSON-RPC error; a
/// tool that ran and failed is `ok`, as the protocol sees it).
pub(crate) const MCP_REQUESTS: &str = "eve_mcp_requests_total";

inventory::submit! { eve_runtime::metrics::Metric::counter(MCP_REQUESTS, "MCP requests, by method and result.") }

/// Counts an MCP request of `method` by how it ended, and hands its result on.
fn counted<T>(method: &'static str, result: Result<T, ErrorData>) -> Result<T, ErrorData> {
    if eve_runtime::metrics::enabled() {
        let ended = if result.is_ok() { "ok" } else { "error" };
        ::metrics::counter!(MCP_REQUESTS, "method" => method, "result" => ended).increment(1);
    }
    result
}

/// Calls a plain tool, forwarding its log messages if the client asked for them. Its arguments
/// were checked, so an error from it is the tool's own.
async fn call_plain(
    inner: &Inner,
    entry: &Entry,
    arguments: Value,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let call_id = RunId::generate().to_string();
    let logs = Forwarding::start(inner, &call_id, cx);
    let output = inner.runtime.call_tool_as(entry.descriptor.name, arguments, &call_id).await;
    logs.finish().await;
    match output {
        Ok(output) => Ok(completed(&output).into()),
        Err(Error::ToolFailed { error, .. }) => Ok(failed(error.to_string()).into()),
        Err(error) => Ok(failed(error.to_string()).into()),
    }
}

/// Starts a run of `entry` and answers with its task; the run is in the store before the reply.
async fn create_task(
    inner: &Inner,
    entry: &Entry,
    arguments: Value,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let run = RunId::generate();
    let options = call::traced(StartOptions::new().id(run.clone()), cx);
    if let Err(error) = inner.runtime.start_with(entry.descriptor.name, arguments, options).await {
        return call::start_refused(error);
    }
    let created = match inner.runtime.journal(&run).await {
        Ok(record) => record.summary.created_at,
        Err(_) => inner.runtime.clock().now(),
    };
    let created = created.to_string();
    let task =
        Task::new(run.to_string(), TaskStatus::Working, created.clone(), created).with_poll_interval_ms(poll_ms(inner));
    Ok(CreateTaskResult::new(task).into())
}

fn describe(inner: &Inner, snapshot: &Snapshot) -> Result<rmcp::model::DetailedTask, ErrorData> {
    let updated = inner.seen.of(snapshot, inner.runtime.clock().now());
    detailed(snapshot, updated, poll_ms(inner))
}

fn poll_ms(inner: &Inner) -> u64 {
    u64::try_from(inner.poll_interval.as_millis()).unwrap_or(u64::MAX)
}

/// The run a task id names: task ids are run ids.
fn task_run(task_id: &str) -> Result<RunId, ErrorData> {
    task_id.parse().map_err(|_| unknown_task(task_id))
}

fn unknown_task(task_id: &str) -> ErrorData {
    let shown: String = task_id.chars().take(64).collect();
    ErrorData::invalid_params(format!("no task has the id `{shown}`; use the id a call returned"), None)
}

fn unknown_tool(inner: &Inner, name: &str) -> ErrorData {
    let shown: String = name.chars().take(64).collect();
    let known: Vec<&str> = inner.catalog.tools().iter().map(|tool| tool.name.as_ref()).collect();
    ErrorData::invalid_params(format!("unknown tool `{shown}`; this server has: {}", known.join(", ")), None)
}
