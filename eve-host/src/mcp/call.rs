//! Durable runs for clients that wait for the result: the call follows its run until it ends,
//! sending its steps and the snapshots it reports as progress notifications, and asks the run's
//! questions on the way.
//!
//! - Protocol 2026-07-28 forbids requests from server to client, so a question ends the call
//!   with an `InputRequiredResult`: its input requests, and a sealed `requestState` naming the
//!   run. The client calls again with `inputResponses` and that state; the answers go to the run,
//!   and the call follows it on (multi round-trip). The state is sealed with an HMAC bound to the
//!   tool's name, so a client can neither forge one nor point one at another run.
//! - Older revisions get an `elicitation/create` request per question while the call waits.
//!
//! The run's log messages reach the call's client as `notifications/message` if it asked for
//! them (see `logging`).
//!
//! A client that cancels the call (`notifications/cancelled`) cancels the run: nobody else knows
//! its id. A client that never comes back for a second round leaves its run parked, with its
//! question open; it can still be answered over the run API or the CLI.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures::StreamExt;

use rmcp::model::{
    CallToolResponse, ClientCapabilities, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::model::{RequestStateCodec, SealOptions};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::{Deserialize, Serialize};

use super::Inner;
use super::logging::Forwarding;
use super::questions::{Response, question_response, sign_in_key, sign_in_response};
use super::status::{Snapshot, call_result};
use super::tools::{Entry, failed};
use eve_runtime::ask::AnswerError;
use eve_runtime::follow::Follow;
use eve_runtime::journal::{self, Op, Position, RunId};
use eve_runtime::secret::SecretKey;
use eve_runtime::view::{RunView, progress_line};
use eve_runtime::{Error, Runtime, StartOptions};

/// How long a call whose following of its run failed (the store did) waits before it follows on.
const FOLLOW_AGAIN: Duration = Duration::from_secs(1);

/// How long a multi round-trip state stays valid: rounds follow each other at once, but a person
/// may take their time to answer.
const STATE_TTL: Duration = Duration::from_secs(24 * 3600);

/// The purpose of the runtime key [`States`] are sealed with by default.
pub(crate) const STATE_KEY_PURPOSE: &str = "eve-host mcp request state";

/// Seals and opens `requestState`s.
pub(crate) struct States(RequestStateCodec);

/// What a `requestState` holds.
#[derive(Serialize, Deserialize)]
struct State {
    run: RunId,
    /// Where in the run's journal the round that issued it stopped reporting progress; the next
    /// round reports from there. Absent in states issued before positions were kept: those
    /// rounds report from where the run stands when they begin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<Position>,
}

impl States {
    /// States sealed with a key derived from `key` for this purpose only.
    pub fn new(key: &SecretKey) -> Self {
        let purpose: RunId = "mcp-request-state".parse().expect("a constant, valid run id");
        let material = key.derive_token(&purpose, Op(0), "mcp request state v1");
        let codec = RequestStateCodec::try_new(material.expose().as_bytes().to_vec())
            .expect("a derived token is longer than the codec's minimum key length");
        States(codec)
    }

    fn seal(&self, run: &RunId, at: Position, tool: &str) -> Result<String, ErrorData> {
        let options = SealOptions::new().associated_data(tool.as_bytes()).ttl(STATE_TTL);
        self.0
            .seal_json_with(&State { run: run.clone(), at: Some(at) }, &options)
            .map_err(|error| ErrorData::internal_error(format!("cannot seal the request state: {error}"), None))
    }

    fn open(&self, state: &str, tool: &str) -> Result<State, ErrorData> {
        let state: State = self.0.open_json_with(state, tool.as_bytes()).map_err(|error| {
            ErrorData::invalid_params(
                format!(
                    "`requestState` was not issued by this server for tool `{tool}`, or has expired ({error}); \
                     call the tool again without it"
                ),
                None,
            )
        })?;
        Ok(state)
    }
}

/// Starts a run of `entry` and follows it.
pub(crate) async fn start(
    inner: &Inner,
    entry: &Entry,
    arguments: serde_json::Value,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let run = RunId::generate();
    let options = traced(StartOptions::new().id(run.clone()), cx);
    // Listening before the run starts: its first messages come before anything is journaled.
    let logs = Forwarding::start(inner, run.as_str(), cx);
    if let Err(error) = inner.runtime.start_with(entry.descriptor.name, arguments, options).await {
        logs.finish().await;
        return start_refused(error);
    }
    let result = follow(inner, entry, run, Position::START, HashSet::new(), cx).await;
    logs.finish().await;
    result
}

/// `options` with the caller's trace context as the parent of the run's trace: the request's
/// `_meta.traceparent` (where MCP carries it, SEP-414), else its HTTP `traceparent` header.
pub(crate) fn traced(options: StartOptions, cx: &RequestContext<RoleServer>) -> StartOptions {
    let text = cx.meta.get_traceparent();
    #[cfg(feature = "http")]
    let text = text.or_else(|| {
        let parts = cx.extensions.get::<axum::http::request::Parts>()?;
        parts.headers.get("traceparent")?.to_str().ok()
    });
    match text.and_then(journal::TraceParent::parse) {
        Some(parent) => options.traceparent(parent),
        None => options,
    }
}

/// A start the runtime refused: input it does not take is the caller's to fix (an `isError`
/// result), anything else is the server's (a JSON-RPC error).
pub(crate) fn start_refused(error: Error) -> Result<CallToolResponse, ErrorData> {
    match error {
        Error::InvalidInput { .. } | Error::TooDeep(_) => Ok(failed(error.to_string()).into()),
        error => Err(ErrorData::internal_error(format!("cannot start the run: {error}"), None)),
    }
}

/// A later round of a multi round-trip call: answers the run `state` names, then follows it on.
pub(crate) async fn next_round(
    inner: &Inner,
    entry: &Entry,
    state: &str,
    responses: Option<&InputResponses>,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let State { run, at } = inner.states.open(state, entry.descriptor.name)?;
    let snapshot = read(&inner.runtime, &run).await?;
    let logs = Forwarding::start(inner, run.as_str(), cx);
    let empty = InputResponses::new();
    let result = match deliver(inner, &snapshot, responses.unwrap_or(&empty), "inputResponses").await {
        Ok(taken) => follow(inner, entry, run, at.unwrap_or(snapshot.next), taken, cx).await,
        Err(error) => Err(error),
    };
    logs.finish().await;
    result
}

/// The run's journal, as a snapshot; an unknown run is the caller's mistake (`-32602`).
pub(crate) async fn read(runtime: &Runtime, run: &RunId) -> Result<Snapshot, ErrorData> {
    match runtime.journal(run).await {
        Ok(record) => Ok(Snapshot::of(runtime, record)),
        Err(Error::RunNotFound(_)) => Err(ErrorData::invalid_params(
            format!("no task or run has the id `{run}`; use the id a call returned"),
            None,
        )),
        Err(error) => Err(ErrorData::internal_error(format!("cannot read run {run}: {error}"), None)),
    }
}

/// Delivers `responses` (keyed as the run's input requests; `field` is their JSON path) to the
/// run: answers its questions, notes the sign-ins the person went to, or cancels the run if the
/// person declined. Keys of questions no longer open are ignored. Every response is checked
/// before any is delivered, so a refused one (`-32602`, naming its field) delivers nothing.
/// Returns the keys delivered, once the run has taken the answers in (or a few seconds passed).
pub(crate) async fn deliver(
    inner: &Inner,
    snapshot: &Snapshot,
    responses: &InputResponses,
    field: &str,
) -> Result<HashSet<String>, ErrorData> {
    let mut answers = Vec::new();
    let mut taken = HashSet::new();
    let mut stop = None;
    for (key, value) in responses {
        let field = format!("{field}.{key}");
        let response = if let Some(question) = snapshot.questions.iter().find(|open| open.request_id == *key) {
            question_response(&question.request, value, &field)
        } else if snapshot.sign_ins.iter().any(|sign_in| sign_in_key(sign_in.op) == *key) {
            sign_in_response(value, &field)
        } else {
            continue;
        };
        match response.map_err(|message| ErrorData::invalid_params(message, None))? {
            Response::Answer(answer) => answers.push((key.clone(), answer)),
            Response::Acknowledged => {
                taken.insert(key.clone());
            }
            Response::Stop => {
                stop = Some(format!("the person declined `{key}`"));
                taken.insert(key.clone());
            }
        }
    }
    let runtime = &inner.runtime;
    let run = &snapshot.run;
    if let Some(reason) = stop {
        match runtime.cancel(run, &reason).await {
            Ok(()) | Err(Error::RunFinished { .. }) => {}
            Err(error) => return Err(internal(run, error)),
        }
        return Ok(taken);
    }
    let mut answered = BTreeSet::new();
    for (key, answer) in answers {
        match runtime.answer(run, &key, answer).await {
            Ok(()) => {
                answered.insert(key.clone());
                taken.insert(key);
            }
            // Withdrawn or answered meanwhile: nothing to deliver.
            Err(Error::Answer(AnswerError::NotOpen { .. })) => {}
            Err(Error::Answer(refused)) => {
                return Err(ErrorData::invalid_params(format!("`{field}.{key}`: {refused}"), None));
            }
            Err(error) => return Err(internal(run, error)),
        }
    }
    taken_in(runtime, snapshot, &answered).await;
    Ok(taken)
}

/// Waits until the run's journal no longer lists `answered` as open, for at most
/// [`TAKE_IN_ANSWERS`](super::TAKE_IN_ANSWERS), so the next read of the task shows them gone.
async fn taken_in(runtime: &Runtime, snapshot: &Snapshot, answered: &BTreeSet<String>) {
    if answered.is_empty() {
        return;
    }
    let mut open: BTreeSet<&String> = answered.iter().collect();
    // Each question is resolved by an entry after the snapshot's end.
    let mut follow = runtime.follow(&snapshot.run, snapshot.next);
    let wait = async {
        while let Some(Ok(followed)) = follow.next().await {
            match &followed.entry {
                journal::Entry::AskResolved { op, .. } => {
                    open.remove(&eve_runtime::ask::request_id(*op));
                }
                journal::Entry::RunStarted { .. } => return,
                entry if entry.is_terminal() => return,
                _ => {}
            }
            if open.is_empty() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(super::TAKE_IN_ANSWERS, wait).await;
}

/// Follows `run` until it ends or asks something, sending its steps as progress: those from
/// `from` on (an earlier round of the call reported those before). `skip` are the keys of input
/// requests this call delivered responses to, which the run may not have taken in yet.
async fn follow(
    inner: &Inner,
    entry: &Entry,
    run: RunId,
    from: Position,
    mut skip: HashSet<String>,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let mut following = Following::new(&inner.runtime, run.clone(), from, cx);
    let modern = cx.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    let mut announced = HashSet::new();
    loop {
        tokio::select! {
            biased;
            () = cx.ct.cancelled() => {
                if let Err(error) = inner.runtime.cancel(&run, "the MCP client cancelled the call").await {
                    tracing::warn!(%run, "cannot cancel the run of a cancelled call: {error}");
                }
                return Err(ErrorData::internal_error("the call was cancelled, and so was its run", None));
            }
            caught_up = following.catch_up() => caught_up?,
        }
        let snapshot = following.snapshot();
        if let Some(outcome) = &snapshot.outcome {
            return call_result(&run, outcome).map(Into::into);
        }
        let requests = snapshot.input_requests(&skip)?;
        let capabilities = cx.client_capabilities().unwrap_or_default();
        let (requests, links) = askable(requests, &capabilities, modern, cx);
        for link in links {
            if announced.insert(link.clone()) {
                following.progress.say(format!("sign in to continue: {link}")).await;
            }
        }
        if !requests.is_empty() {
            if modern {
                let state = inner.states.seal(&run, following.next, entry.descriptor.name)?;
                return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
            }
            let responses = elicit(cx, requests).await?;
            skip.extend(deliver(inner, &snapshot, &responses, "elicitation").await?);
            continue;
        }
        if !snapshot.questions.iter().all(|question| skip.contains(&question.request_id)) {
            return Ok(cannot_ask(entry, &snapshot).into());
        }
    }
}

/// A call's following of its run: the journal as it grows, what it says of the run so far, and
/// the progress reported from it.
struct Following<'a> {
    runtime: &'a Runtime,
    run: RunId,
    follow: Follow,
    view: RunView,
    /// The position of the next entry to read.
    next: Position,
    /// Entries before it were reported by an earlier round of the call.
    report_from: Position,
    progress: Progress<'a>,
}

impl<'a> Following<'a> {
    /// Follows `run` from the start of the history holding `from`: the view needs the whole
    /// history, the progress only what comes from `from` on.
    fn new(runtime: &'a Runtime, run: RunId, from: Position, cx: &'a RequestContext<RoleServer>) -> Self {
        let next = Position::new(from.history, 0);
        let progress = Progress { cx, token: cx.meta.get_progress_token(), sent: 0 };
        Following {
            follow: runtime.follow(&run, next),
            runtime,
            run,
            view: RunView::new(),
            next,
            report_from: from,
            progress,
        }
    }

    /// Reads the journal on, reporting each new entry, until the run has ended or this call has
    /// caught up with what the journal held when last read: what the run waits for then is what
    /// it waits for, not a state later entries already left.
    async fn catch_up(&mut self) -> Result<(), ErrorData> {
        loop {
            let followed = match self.follow.next().await {
                Some(Ok(followed)) => followed,
                // The stream ends after the run's end, which the view then holds.
                None if self.view.end.is_some() => return Ok(()),
                None => {
                    let message = format!("run {} ended, and its journal says no end", self.run);
                    return Err(ErrorData::internal_error(message, None));
                }
                Some(Err(Error::RunNotFound(_))) => {
                    let message = format!("run {} is gone from the store", self.run);
                    return Err(ErrorData::internal_error(message, None));
                }
                Some(Err(error)) => {
                    tracing::warn!(run = %self.run, "cannot follow the run of a call, trying again: {error}");
                    tokio::time::sleep(FOLLOW_AGAIN).await;
                    self.follow = self.runtime.follow(&self.run, self.next);
                    continue;
                }
            };
            self.view.apply(followed.position, &followed.entry);
            self.next = followed.position.next();
            if followed.position >= self.report_from {
                self.progress.report(&followed.entry).await;
            }
            if self.view.end.is_some() || self.follow.is_caught_up() {
                return Ok(());
            }
        }
    }

    /// What the entries read so far say of the run.
    fn snapshot(&self) -> Snapshot {
        let created_at = self.view.started_at.unwrap_or_else(|| self.runtime.clock().now());
        Snapshot::new(self.runtime, self.run.clone(), &self.view, created_at)
    }
}

/// The requests this client can be sent: questions need its elicitation capability (form
/// mode), sign-ins URL mode, requests for its model its sampling capability; the links of
/// sign-ins it cannot be sent come back separately.
fn askable(
    requests: InputRequests,
    capabilities: &ClientCapabilities,
    modern: bool,
    cx: &RequestContext<RoleServer>,
) -> (InputRequests, Vec<String>) {
    let sampling = can_sample(cx);
    let (form, url) = if modern {
        let elicitation = capabilities.elicitation.as_ref();
        (elicitation.is_some(), elicitation.is_some_and(|modes| modes.url.is_some()))
    } else {
        let modes = cx.peer.supported_elicitation_modes();
        (modes.contains(&rmcp::service::ElicitationMode::Form), modes.contains(&rmcp::service::ElicitationMode::Url))
    };
    let mut links = Vec::new();
    let mut askable = InputRequests::new();
    for (key, request) in requests {
        match &request {
            InputRequest::Elicitation(elicit) => match &elicit.params {
                ElicitRequestParams::UrlElicitationParams { url: link, .. } if !url => links.push(link.clone()),
                ElicitRequestParams::UrlElicitationParams { .. } => {
                    askable.insert(key, request);
                }
                _ if form => {
                    askable.insert(key, request);
                }
                _ => {}
            },
            InputRequest::CreateMessage(_) if !sampling => {}
            _ => {
                askable.insert(key, request);
            }
        }
    }
    (askable, links)
}

/// Whether the client declared the sampling capability: with each request (2026-07-28), or at
/// `initialize` (older revisions).
pub(crate) fn can_sample(cx: &RequestContext<RoleServer>) -> bool {
    if cx.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28) {
        cx.client_capabilities().is_some_and(|capabilities| capabilities.sampling.is_some())
    } else {
        cx.peer.peer_info().is_some_and(|info| info.capabilities.sampling.is_some())
    }
}

/// The result for a client that cannot be asked the run's question.
fn cannot_ask(entry: &Entry, snapshot: &Snapshot) -> rmcp::model::CallToolResult {
    if snapshot.questions.iter().any(|question| question.request.sampling.is_some()) {
        return failed(format!(
            "tool `{}` asks the client's model for a completion, and this client declared no sampling capability; \
             run {} waits with the request open: answer it over the run API or with `answer --json`, or call the \
             tool from a client with sampling",
            entry.descriptor.name, snapshot.run
        ));
    }
    let prompt = snapshot.questions.first().map_or("", |question| question.request.prompt.as_str());
    failed(format!(
        "tool `{}` asks a person {prompt:?}, and this client cannot show questions (it declared no elicitation \
         capability); run {} waits with the question open: answer it over the run API or with `answer`, or call the \
         tool from a client with elicitation or the tasks extension",
        entry.descriptor.name, snapshot.run
    ))
}

/// Asks each request with `elicitation/create` or `sampling/createMessage` (revisions before
/// 2026-07-28) and collects the responses by key. A client that answers a sampling request with
/// an error (its user rejected it, say) has answered it: the error is its response, which
/// declines the request (see `questions`). A request the client never answered (the connection
/// closed, or it timed out) fails the call and leaves the run waiting.
async fn elicit(cx: &RequestContext<RoleServer>, requests: InputRequests) -> Result<InputResponses, ErrorData> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let unanswered =
            |error| ErrorData::internal_error(format!("the client did not answer the request `{key}`: {error}"), None);
        let value = match request {
            InputRequest::Elicitation(elicit) => {
                serde_json::to_value(cx.peer.create_elicitation(elicit.params).await.map_err(unanswered)?)
            }
            #[allow(deprecated, reason = "sampling is deprecated by SEP-2577, and still what clients answer")]
            InputRequest::CreateMessage(sample) => match cx.peer.create_message(sample.params).await {
                Ok(result) => serde_json::to_value(result),
                Err(rmcp::service::ServiceError::McpError(refusal)) => {
                    tracing::debug!(key, "the client refused a sampling request: {}", refusal.message);
                    serde_json::to_value(refusal)
                }
                Err(error) => return Err(unanswered(error)),
            },
            _ => continue,
        };
        let value = value
            .map_err(|error| ErrorData::internal_error(format!("cannot read the answer to `{key}`: {error}"), None))?;
        responses.insert(key, value);
    }
    Ok(responses)
}

/// Progress notifications for a call, if the client asked for them.
struct Progress<'a> {
    cx: &'a RequestContext<RoleServer>,
    token: Option<ProgressToken>,
    sent: u32,
}

impl Progress<'_> {
    /// Sends what a journal entry says of the run's steps, if anything (see
    /// [`progress_line`]).
    async fn report(&mut self, entry: &journal::Entry) {
        if self.token.is_some()
            && let Some(line) = progress_line(entry)
        {
            self.say(line).await;
        }
    }

    async fn say(&mut self, message: String) {
        let Some(token) = &self.token else { return };
        self.sent += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.sent)).with_message(message);
        if let Err(error) = self.cx.peer.notify_progress(notification).await {
            tracing::debug!("cannot send a progress notification: {error}");
        }
    }
}

fn internal(run: &RunId, error: Error) -> ErrorData {
    ErrorData::internal_error(format!("cannot deliver to run {run}: {error}"), None)
}
