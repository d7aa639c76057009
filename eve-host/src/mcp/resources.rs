//! Runs as MCP resources: read from their journals, listed from the store a page at a time, and
//! watched as their journals grow.
//!
//! | URI | what it holds (`application/json`) |
//! | --- | --- |
//! | `eve://runs/{runId}` | the run: its tool, its status (the timeline's words: `running`, `parked`, `completed`, `failed`, `cancelled`; or `held`, with where its journal diverges, for a run this build holds), what it waits for, the cancellation asked for, and how it ended (`outcome`, as `GET /v1/runs/{run}` shows it) |
//! | `eve://runs/{runId}/timeline` | its timeline: every op the body asked for and where it stands ([`Timeline`]) |
//!
//! `resources/list` lists the store's runs newest first, [`PAGE`] at a time; its cursor is the
//! store's own ([`RunCursor`]), so a page costs one indexed query whatever the store holds. Both
//! URIs are also resource templates. A URI of an unknown run is a missing resource: `-32602` on
//! protocol 2026-07-28 (SEP-2164; rmcp maps the code), `-32002` before it, with the URI as
//! `data.uri`.
//!
//! # Subscriptions
//!
//! A subscription reads the run's journal once, then follows it from where that read ended
//! ([`Runtime::follow`], across processes on a shared store) in a task of its own, and sends
//! `notifications/resources/updated` for its URI each time it has caught up with entries that
//! changed the resource: any entry changes the timeline; the run changes when its status, what it
//! waits for, its cancellation or its outcome does. The task ends after the run's end, or when
//! the subscription does:
//!
//! - `resources/subscribe` (revisions before 2026-07-28) belongs to the session: a later
//!   `resources/unsubscribe` of the URI ends it, and so does the session's end, since the session's
//!   handler holds its [`Subscriptions`] and they abort their tasks when dropped.
//! - `subscriptions/listen` (2026-07-28) watches each `eve://` URI of its filter until the client
//!   cancels the stream.
//!
//! A watching task holds the runtime and the way to the client, never the handler, so nothing it
//! holds keeps a session alive. The gauge `eve_mcp_resource_watches` counts the watches whose
//! task has not ended, so an operator (and a test) sees that none is left behind.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam,
};
use rmcp::service::SubscriptionSink;
use rmcp::{ErrorData, Peer, RoleServer};
use serde::Serialize;
use serde_json::json;
use tokio::task::AbortHandle;

use crate::timeline::Timeline;
use eve_runtime::journal::{RunId, RunStatus};
use eve_runtime::store::{RunCursor, RunQuery, RunRecord, RunSummary};
use eve_runtime::testing::ReplayVerdict;
use eve_runtime::time::Timestamp;
use eve_runtime::view::RunView;
use eve_runtime::{Error, RefusedRun, RunOutcome, Runtime};

/// The scheme of every resource eve serves.
pub(crate) const SCHEME: &str = "eve://";

/// How many runs one page of `resources/list` holds.
pub(crate) const PAGE: usize = 50;

/// How long a client may keep the templates: they change only with the binary.
const TEMPLATES_TTL_MS: u64 = 60 * 60 * 1000;

/// How long a client may keep what it read of a run that ended: it no longer changes.
const ENDED_TTL_MS: u64 = 60 * 60 * 1000;

/// How long a watch whose following of its run failed (the store did) waits before it follows on.
const FOLLOW_AGAIN: Duration = Duration::from_secs(1);

const JSON: &str = "application/json";

/// The gauge of watches whose task has not ended.
pub(crate) const MCP_RESOURCE_WATCHES: &str = "eve_mcp_resource_watches";

inventory::submit! {
    eve_runtime::metrics::Metric::gauge(MCP_RESOURCE_WATCHES, "MCP resources watched for subscribers in this process now.")
}

/// Counts a watch in [`MCP_RESOURCE_WATCHES`] while it lives: the task's future holds it, so it
/// leaves the count when the task ends or is aborted.
struct Counted {
    /// Whether it was counted in: metrics may have been enabled since, and a watch that was not
    /// counted in must not be counted out.
    counted: bool,
}

impl Counted {
    fn new() -> Self {
        let counted = eve_runtime::metrics::enabled();
        if counted {
            ::metrics::gauge!(MCP_RESOURCE_WATCHES).increment(1.0);
        }
        Counted { counted }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.counted {
            ::metrics::gauge!(MCP_RESOURCE_WATCHES).decrement(1.0);
        }
    }
}

/// What an `eve://` URI names.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    /// `eve://runs/{runId}`: the run.
    Run(RunId),
    /// `eve://runs/{runId}/timeline`: its timeline.
    Timeline(RunId),
}

impl Target {
    /// What `uri` names, or the error for a URI that names nothing this server serves.
    fn parse(uri: &str) -> Result<Target, ErrorData> {
        let rest = uri.strip_prefix(SCHEME).and_then(|rest| rest.strip_prefix("runs/"));
        let (id, timeline) = match rest {
            Some(rest) => rest.strip_suffix("/timeline").map_or((rest, false), |id| (id, true)),
            None => return Err(not_found(uri, "eve serves `eve://runs/{runId}` and `eve://runs/{runId}/timeline`")),
        };
        let run = id.parse().map_err(|_| not_found(uri, "its run id is not one eve makes"))?;
        Ok(if timeline { Target::Timeline(run) } else { Target::Run(run) })
    }

    fn run(&self) -> &RunId {
        match self {
            Target::Run(run) | Target::Timeline(run) => run,
        }
    }
}

/// Whether `uri` is one of eve's (`eve://…`): a handler that serves resources of its own hands
/// these to [`McpServer`](super::McpServer).
pub(crate) fn is_eve_uri(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// The URI of `run`.
fn run_uri(run: &RunId) -> String {
    format!("{SCHEME}runs/{run}")
}

/// The error for a URI that names no resource: the one SEP-2164 specifies, naming the URI.
fn not_found(uri: &str, why: &str) -> ErrorData {
    let shown: String = uri.chars().take(200).collect();
    ErrorData::resource_not_found(format!("no resource at `{shown}`: {why}"), Some(json!({ "uri": uri })))
}

fn internal(run: &RunId, error: &Error) -> ErrorData {
    ErrorData::internal_error(format!("cannot read run {run}: {error}"), None)
}

/// A run as `eve://runs/{runId}` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct RunResource {
    run_id: RunId,
    tool: String,
    /// The timeline's word for where the run stands.
    status: &'static str,
    #[serde(serialize_with = "eve_runtime::time::iso")]
    created_at: Timestamp,
    /// What the run waits for, one sentence each.
    waiting_for: Vec<String>,
    /// The reason of a cancellation asked for, while its cleanup runs and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel: Option<String>,
    /// How the run ended, once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<RunOutcome>,
    /// Why this build holds the run, when it does (see [`Runtime::held`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<ReplayVerdict>,
}

impl RunResource {
    /// The run `view` shows, created at `created_at`.
    fn of(run: &RunId, created_at: Timestamp, view: &RunView) -> Self {
        let waiting_for = view.waiting_for();
        // The words of `Timeline`: an active run with open waits is parked.
        let status = match view.status() {
            RunStatus::Active if waiting_for.is_empty() => "running",
            RunStatus::Active => "parked",
            finished => finished.name(),
        };
        RunResource {
            run_id: run.clone(),
            tool: view.tool.clone(),
            status,
            created_at,
            waiting_for,
            cancel: view.cancel.clone(),
            outcome: view.end.as_ref().and_then(RunOutcome::from_terminal),
            held: None,
        }
    }

    /// The run as this build sees it: `held`, with where it diverges, when this build holds it.
    fn held(mut self, held: Option<RefusedRun>) -> Self {
        if let Some(held) = held {
            self.status = "held";
            self.held = Some(held.verdict);
        }
        self
    }
}

/// One page of the store's runs, newest first, from `request`'s cursor on.
pub(crate) async fn list(
    runtime: &Runtime,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let mut query = RunQuery::newest(PAGE);
    if let Some(cursor) = request.and_then(|request| request.cursor) {
        let cursor: RunCursor = cursor.parse().map_err(|_| {
            ErrorData::invalid_params(
                format!("`cursor` {cursor:?} is not one this server gave; list again without a cursor"),
                None,
            )
        })?;
        query = query.before(cursor);
    }
    let page = runtime
        .list_runs(&query)
        .await
        .map_err(|error| ErrorData::internal_error(format!("cannot list runs: {error}"), None))?;
    let mut resources = Vec::with_capacity(page.runs.len());
    for summary in &page.runs {
        let held = runtime.held(summary).await.map_err(|error| internal(&summary.id, &error))?;
        resources.push(listed(summary, held.is_some()));
    }
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = page.next.map(|cursor| cursor.to_string());
    Ok(result.with_ttl_ms(0).with_cache_scope(CacheScope::Private))
}

/// A run as `resources/list` lists it; `held` says whether this build holds it.
fn listed(summary: &RunSummary, held: bool) -> Resource {
    let uri = run_uri(&summary.id);
    let state = if held { "held" } else { summary.state() };
    let description = format!(
        "a run of `{}`, {state}, created at {}; its timeline is at {uri}/timeline",
        summary.tool, summary.created_at
    );
    Resource::new(uri, summary.id.to_string())
        .with_title(format!("{} run {}", summary.tool, summary.id))
        .with_description(description)
        .with_mime_type(JSON)
}

/// The templates of a run's URIs.
pub(crate) fn templates() -> ListResourceTemplatesResult {
    let templates = vec![
        ResourceTemplate::new(format!("{SCHEME}runs/{{runId}}"), "run")
            .with_title("A run")
            .with_description("A run of a tool: its status, what it waits for, and how it ended")
            .with_mime_type(JSON),
        ResourceTemplate::new(format!("{SCHEME}runs/{{runId}}/timeline"), "run-timeline")
            .with_title("A run's timeline")
            .with_description(
                "Every operation the run's body asked for (steps, sleeps, hooks, questions) and where it stands",
            )
            .with_mime_type(JSON),
    ];
    ListResourceTemplatesResult::with_all_items(templates)
        .with_ttl_ms(TEMPLATES_TTL_MS)
        .with_cache_scope(CacheScope::Public)
}

/// Reads the resource at `uri`.
pub(crate) async fn read(runtime: &Runtime, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let target = Target::parse(uri)?;
    let record = load(runtime, uri, target.run()).await?;
    let view = RunView::of(&record.entries);
    let text = match &target {
        Target::Run(run) => {
            let held = runtime.held(&record.summary).await.map_err(|error| internal(run, &error))?;
            serde_json::to_string(&RunResource::of(run, record.summary.created_at, &view).held(held))
        }
        Target::Timeline(_) => serde_json::to_string(&Timeline::of(&record.entries, None)),
    };
    let text = text.map_err(|error| ErrorData::internal_error(format!("cannot write {uri} as JSON: {error}"), None))?;
    let ttl = if view.end.is_some() { ENDED_TTL_MS } else { 0 };
    let contents = ResourceContents::text(text, uri).with_mime_type(JSON);
    Ok(ReadResourceResult::new(vec![contents]).with_ttl_ms(ttl).with_cache_scope(CacheScope::Private))
}

/// The run's journal; an unknown run is a missing resource.
async fn load(runtime: &Runtime, uri: &str, run: &RunId) -> Result<RunRecord, ErrorData> {
    match runtime.journal(run).await {
        Ok(record) => Ok(record),
        Err(Error::RunNotFound(_)) => Err(not_found(uri, "no run has this id")),
        Err(error) => Err(internal(run, &error)),
    }
}

/// Where a watch sends its notifications.
#[derive(Clone)]
pub(crate) enum Notify {
    /// To the session that subscribed (`resources/subscribe`).
    Session(Peer<RoleServer>),
    /// On a `subscriptions/listen` stream.
    Stream(SubscriptionSink),
}

impl Notify {
    /// Tells the client that `uri` changed; false once it can no longer be told.
    async fn updated(&self, uri: &str) -> bool {
        let sent = match self {
            Notify::Session(peer) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .map_err(|e| e.to_string()),
            Notify::Stream(sink) => sink.notify_resource_updated(uri).await.map_err(|e| e.to_string()),
        };
        match sent {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(uri, "a resource watch ends: cannot notify the client: {error}");
                false
            }
        }
    }
}

/// Starts watching the resource at `uri`: reads it now, so that the watch misses no change after
/// this returns, and follows it in a task of its own.
pub(crate) async fn watch(runtime: &Runtime, uri: &str, notify: Notify) -> Result<AbortHandle, ErrorData> {
    let target = Target::parse(uri)?;
    let record = load(runtime, uri, target.run()).await?;
    let watch = Watch {
        runtime: runtime.clone(),
        uri: uri.to_owned(),
        created_at: record.summary.created_at,
        view: RunView::of(&record.entries),
        target,
        notify,
    };
    let counted = Counted::new();
    let task = async move {
        let _counted = counted;
        watch.run().await;
    };
    Ok(tokio::spawn(task).abort_handle())
}

/// A watch of one resource: the run's view as of what it has read.
struct Watch {
    runtime: Runtime,
    uri: String,
    target: Target,
    created_at: Timestamp,
    view: RunView,
    notify: Notify,
}

impl Watch {
    /// Follows the run until it ends or the client can no longer be told.
    async fn run(mut self) {
        let run = self.target.run().clone();
        let mut shown = RunResource::of(&run, self.created_at, &self.view);
        let mut follow = self.runtime.follow(&run, self.view.next);
        loop {
            // Reads on until caught up, so a burst of entries is one notification.
            loop {
                match follow.next().await {
                    Some(Ok(followed)) => {
                        self.view.apply(followed.position, &followed.entry);
                        if follow.is_caught_up() || self.view.end.is_some() {
                            break;
                        }
                    }
                    // The run had ended before the watch began, or is gone from the store.
                    None | Some(Err(Error::RunNotFound(_))) => return,
                    Some(Err(error)) => {
                        tracing::warn!(%run, "cannot follow the run of a watched resource, trying again: {error}");
                        tokio::time::sleep(FOLLOW_AGAIN).await;
                        follow = self.runtime.follow(&run, self.view.next);
                    }
                }
            }
            // Entries were read: every one of them changes the timeline.
            let changed = match self.target {
                Target::Timeline(_) => true,
                Target::Run(_) => {
                    let now = RunResource::of(&run, self.created_at, &self.view);
                    let changed = now != shown;
                    shown = now;
                    changed
                }
            };
            if changed && !self.notify.updated(&self.uri).await {
                return;
            }
            if self.view.end.is_some() {
                return;
            }
        }
    }
}

/// A watching task that is aborted when this is dropped.
pub(crate) struct Watching(AbortHandle);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl From<AbortHandle> for Watching {
    fn from(handle: AbortHandle) -> Self {
        Watching(handle)
    }
}

/// The resources one session subscribed to, by URI. Dropped with the session's handler, it
/// ends their watches.
#[derive(Default)]
pub(crate) struct Subscriptions(Mutex<HashMap<String, Watching>>);

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watching>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes the session of `peer` to `uri`; subscribing again to a URI watched changes
    /// nothing.
    pub async fn subscribe(&self, runtime: &Runtime, uri: String, peer: Peer<RoleServer>) -> Result<(), ErrorData> {
        if self.lock().get(&uri).is_some_and(|watching| !watching.0.is_finished()) {
            return Ok(());
        }
        let watching = Watching(watch(runtime, &uri, Notify::Session(peer)).await?);
        let mut subscribed = self.lock();
        // The watches of runs that ended are done: forget them.
        subscribed.retain(|_, watching| !watching.0.is_finished());
        subscribed.insert(uri, watching);
        Ok(())
    }

    /// Ends the subscription to `uri`, if there is one.
    pub fn unsubscribe(&self, uri: &str) {
        self.lock().remove(uri);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_run_or_its_timeline_and_nothing_else() {
        let run: RunId = "run_abc".parse().unwrap();
        assert_eq!(Target::parse("eve://runs/run_abc").unwrap(), Target::Run(run.clone()));
        assert_eq!(Target::parse("eve://runs/run_abc/timeline").unwrap(), Target::Timeline(run));
        for wrong in ["eve://runs/", "eve://run/run_abc", "eve://runs/a b", "test://runs/run_abc", "eve://runs/x/y"] {
            let error = Target::parse(wrong).unwrap_err();
            assert_eq!(error.data, Some(json!({ "uri": wrong })), "{wrong}");
            assert!(error.message.contains(wrong), "{wrong}: {}", error.message);
        }
    }
}
