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
//! A client that cancels the call (`notifications/cancelled`) cancels the run: nobody else knows
//! its id. A client that never comes back for a second round leaves its run parked, with its
//! question open; it can still be answered over the run API or the CLI.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use rmcp::model::{
    CallToolResponse, ClientCapabilities, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::model::{RequestStateCodec, SealOptions};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Inner;
use super::questions::{Response, question_response, sign_in_key, sign_in_response};
use super::status::{Snapshot, call_result, still_open};
use super::tools::{Entry, failed};
use eve_runtime::ask::AnswerError;
use eve_runtime::events::RunEvent;
use eve_runtime::journal::Op;
use eve_runtime::journal::RunId;
use eve_runtime::secret::SecretKey;
use eve_runtime::{Error, Runtime, StartOptions};

/// How long a call waiting for its run goes without reading the journal when no event says the
/// run changed (events are best effort: a slow listener misses some).
const RECHECK: Duration = Duration::from_secs(1);

/// How long a call that read an end or a question in the journal waits for the run's next event,
/// to report the run's steps up to there before it answers.
const LAST_EVENTS: Duration = Duration::from_millis(500);

/// How long a multi round-trip state stays valid: rounds follow each other at once, but a person
/// may take their time to answer.
const STATE_TTL: Duration = Duration::from_secs(24 * 3600);

/// Seals and opens `requestState`s.
pub(crate) struct States(RequestStateCodec);

/// What a `requestState` holds.
#[derive(Serialize, Deserialize)]
struct State {
    run: RunId,
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

    fn seal(&self, run: &RunId, tool: &str) -> Result<String, ErrorData> {
        let options = SealOptions::new().associated_data(tool.as_bytes()).ttl(STATE_TTL);
        self.0
            .seal_json_with(&State { run: run.clone() }, &options)
            .map_err(|error| ErrorData::internal_error(format!("cannot seal the request state: {error}"), None))
    }

    fn open(&self, state: &str, tool: &str) -> Result<RunId, ErrorData> {
        let state: State = self.0.open_json_with(state, tool.as_bytes()).map_err(|error| {
            ErrorData::invalid_params(
                format!(
                    "`requestState` was not issued by this server for tool `{tool}`, or has expired ({error}); \
                     call the tool again without it"
                ),
                None,
            )
        })?;
        Ok(state.run)
    }
}

/// Starts a run of `entry` and follows it.
pub(crate) async fn start(
    inner: &Inner,
    entry: &Entry,
    arguments: serde_json::Value,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    // Subscribed before the start, so no step of the run goes unreported.
    let events = inner.runtime.events();
    let run = RunId::generate();
    let options = StartOptions::new().id(run.clone());
    if let Err(error) = inner.runtime.start_with(entry.descriptor.name, arguments, options).await {
        return start_refused(error);
    }
    follow(inner, entry, run, events, HashSet::new(), HashSet::new(), cx).await
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
    let run = inner.states.open(state, entry.descriptor.name)?;
    let events = inner.runtime.events();
    let snapshot = read(&inner.runtime, &run).await?;
    let empty = InputResponses::new();
    let taken = deliver(inner, &snapshot, responses.unwrap_or(&empty), "inputResponses").await?;
    // What was open when this round began was announced before `events` was subscribed to.
    let seen = snapshot.request_keys().collect();
    follow(inner, entry, run, events, taken, seen, cx).await
}

/// The run's journal, as a snapshot; an unknown run is the caller's mistake (`-32602`).
pub(crate) async fn read(runtime: &Runtime, run: &RunId) -> Result<Snapshot, ErrorData> {
    match runtime.journal(run).await {
        Ok(record) => Ok(Snapshot::of(record)),
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
        } else if snapshot.sign_ins.iter().any(|(op, _)| sign_in_key(*op) == *key) {
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
    let events = runtime.events();
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
    taken_in(runtime, run, &answered, events).await;
    Ok(taken)
}

/// Waits until the run's journal no longer lists `answered` as open, for at most
/// [`TAKE_IN_ANSWERS`](super::TAKE_IN_ANSWERS), so the next read of the task shows them gone.
async fn taken_in(
    runtime: &Runtime,
    run: &RunId,
    answered: &BTreeSet<String>,
    mut events: broadcast::Receiver<RunEvent>,
) {
    if answered.is_empty() {
        return;
    }
    let wait = async {
        loop {
            match read(runtime, run).await {
                Ok(snapshot) if snapshot.outcome.is_none() && still_open(&snapshot, answered) => {}
                _ => return,
            }
            let resolved = async {
                loop {
                    match events.recv().await {
                        Ok(RunEvent::InputResolved { run: of, .. } | RunEvent::Finished { run: of, .. })
                            if of == *run =>
                        {
                            return;
                        }
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => return,
                        Err(RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_millis(100), resolved).await;
        }
    };
    let _ = tokio::time::timeout(super::TAKE_IN_ANSWERS, wait).await;
}

/// Follows `run` until it ends or asks something, sending its steps as progress. `events` was
/// subscribed to before anything the call waits for happened; `seen` are the keys of the input
/// requests whose events came before it.
async fn follow(
    inner: &Inner,
    entry: &Entry,
    run: RunId,
    mut events: broadcast::Receiver<RunEvent>,
    mut skip: HashSet<String>,
    seen: HashSet<String>,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let mut progress = Progress { token: cx.meta.get_progress_token(), sent: 0, seen };
    let modern = cx.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    let mut announced = HashSet::new();
    loop {
        let snapshot = read(&inner.runtime, &run).await?;
        if let Some(outcome) = &snapshot.outcome {
            let end = |event: &RunEvent| matches!(event, RunEvent::Finished { .. });
            report_until(&mut events, &run, &mut progress, cx, end).await;
            return call_result(&run, outcome).map(Into::into);
        }
        let requests = snapshot.input_requests(&inner.sign_ins, &skip)?;
        // The journal can show a question before this call has reported the steps the run took
        // on its way to it: report them first, up to the question's own event.
        let unseen: HashSet<&String> = requests.keys().filter(|key| !progress.seen.contains(*key)).collect();
        if !unseen.is_empty() {
            let end = |event: &RunEvent| announces(event).is_some_and(|key| unseen.contains(&key));
            report_until(&mut events, &run, &mut progress, cx, end).await;
        }
        let capabilities = cx.client_capabilities().unwrap_or_default();
        let (requests, links) = askable(requests, &capabilities, modern, cx);
        for link in links {
            if announced.insert(link.clone()) {
                progress.say(cx, format!("sign in to continue: {link}")).await;
            }
        }
        if !requests.is_empty() {
            if modern {
                let state = inner.states.seal(&run, entry.descriptor.name)?;
                return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
            }
            let responses = elicit(cx, requests).await?;
            skip.extend(deliver(inner, &snapshot, &responses, "elicitation").await?);
            continue;
        }
        if !snapshot.questions.iter().all(|question| skip.contains(&question.request_id)) {
            return Ok(cannot_ask(entry, &snapshot).into());
        }
        tokio::select! {
            biased;
            () = cx.ct.cancelled() => {
                if let Err(error) = inner.runtime.cancel(&run, "the MCP client cancelled the call").await {
                    tracing::warn!(%run, "cannot cancel the run of a cancelled call: {error}");
                }
                return Err(ErrorData::internal_error("the call was cancelled, and so was its run", None));
            }
            () = changed(&mut events, &run, &mut progress, cx) => {}
        }
    }
}

/// The requests this client can be sent: questions need its elicitation capability (form
/// mode), sign-ins URL mode; the links of sign-ins it cannot be sent come back separately.
fn askable(
    requests: InputRequests,
    capabilities: &ClientCapabilities,
    modern: bool,
    cx: &RequestContext<RoleServer>,
) -> (InputRequests, Vec<String>) {
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
            _ => {
                askable.insert(key, request);
            }
        }
    }
    (askable, links)
}

/// The result for a client that cannot be asked the run's question.
fn cannot_ask(entry: &Entry, snapshot: &Snapshot) -> rmcp::model::CallToolResult {
    let prompt = snapshot.questions.first().map_or("", |question| question.request.prompt.as_str());
    failed(format!(
        "tool `{}` asks a person {prompt:?}, and this client cannot show questions (it declared no elicitation \
         capability); run {} waits with the question open: answer it over the run API or with `answer`, or call the \
         tool from a client with elicitation or the tasks extension",
        entry.descriptor.name, snapshot.run
    ))
}

/// Asks each request with `elicitation/create` (revisions before 2026-07-28) and collects the
/// responses by key.
async fn elicit(cx: &RequestContext<RoleServer>, requests: InputRequests) -> Result<InputResponses, ErrorData> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(elicit) = request else { continue };
        let result = cx.peer.create_elicitation(elicit.params).await.map_err(|error| {
            ErrorData::internal_error(format!("the client did not answer the question `{key}`: {error}"), None)
        })?;
        let value = serde_json::to_value(result)
            .map_err(|error| ErrorData::internal_error(format!("cannot read the answer to `{key}`: {error}"), None))?;
        responses.insert(key, value);
    }
    Ok(responses)
}

/// Progress notifications for a call, if the client asked for them.
struct Progress {
    token: Option<ProgressToken>,
    sent: u32,
    /// The keys of the input requests whose events this call has seen.
    seen: HashSet<String>,
}

impl Progress {
    /// Sends what `event` says of the run's steps, if anything; returns whether the event may
    /// have changed what the run waits for.
    async fn report(&mut self, cx: &RequestContext<RoleServer>, event: RunEvent) -> bool {
        if let Some(key) = announces(&event) {
            self.seen.insert(key);
        }
        match event {
            RunEvent::StepStarted { step, attempt, .. } => {
                self.say(cx, format!("step {step}: attempt {attempt} started")).await
            }
            RunEvent::StepSucceeded { step, .. } => self.say(cx, format!("step {step}: done")).await,
            RunEvent::StepFailed { step, error, .. } => self.say(cx, format!("step {step}: failed: {error}")).await,
            // A workflow tool's `progress.report(snapshot)`: the snapshot, as JSON text.
            RunEvent::Published { value, .. } if value.get("partial").is_some() => {
                self.say(cx, value["partial"].to_string()).await
            }
            RunEvent::InputRequested { .. }
            | RunEvent::InputResolved { .. }
            | RunEvent::AuthorizationRequired { .. }
            | RunEvent::AuthorizationCompleted { .. }
            | RunEvent::Parked { .. }
            | RunEvent::Finished { .. } => return true,
            _ => {}
        }
        false
    }

    async fn say(&mut self, cx: &RequestContext<RoleServer>, message: String) {
        let Some(token) = &self.token else { return };
        self.sent += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.sent)).with_message(message);
        if let Err(error) = cx.peer.notify_progress(notification).await {
            tracing::debug!("cannot send a progress notification: {error}");
        }
    }
}

/// Resolves when an event says `run` may have changed what it waits for (or after [`RECHECK`]),
/// reporting its steps as progress meanwhile.
async fn changed(
    events: &mut broadcast::Receiver<RunEvent>,
    run: &RunId,
    progress: &mut Progress,
    cx: &RequestContext<RoleServer>,
) {
    let deadline = tokio::time::sleep(RECHECK);
    tokio::pin!(deadline);
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = &mut deadline => return,
        };
        let event = match event {
            Ok(event) if event.run() == run => event,
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => return deadline.await,
        };
        if progress.report(cx, event).await {
            return;
        }
    }
}

/// The key of the input request `event` announces: a question asked, or a sign-in required.
fn announces(event: &RunEvent) -> Option<String> {
    match event {
        RunEvent::InputRequested { request_id, .. } => Some(request_id.clone()),
        RunEvent::AuthorizationRequired { op, .. } => Some(sign_in_key(op.0)),
        _ => None,
    }
}

/// Reports the run's events up to the one `last` picks, once a read of the journal found what
/// that event announces: the journal runs ahead of the events, so a call that answered from its
/// read alone would drop the progress of the steps its events have not reported yet (all of
/// them, when the run got there before the call's first read). Gives up when the run sends no
/// event for [`LAST_EVENTS`]: a call that subscribed after the event, or whose run moves on
/// another worker, never sees it.
async fn report_until(
    events: &mut broadcast::Receiver<RunEvent>,
    run: &RunId,
    progress: &mut Progress,
    cx: &RequestContext<RoleServer>,
    last: impl Fn(&RunEvent) -> bool,
) {
    if progress.token.is_none() {
        return;
    }
    let mut quiet_until = tokio::time::Instant::now() + LAST_EVENTS;
    loop {
        let event = match tokio::time::timeout_at(quiet_until, events.recv()).await {
            Ok(Ok(event)) if event.run() == run => event,
            Ok(Ok(_)) => continue,
            Ok(Err(RecvError::Lagged(_) | RecvError::Closed)) | Err(_) => return,
        };
        let done = last(&event);
        progress.report(cx, event).await;
        if done {
            return;
        }
        quiet_until = tokio::time::Instant::now() + LAST_EVENTS;
    }
}

fn internal(run: &RunId, error: Error) -> ErrorData {
    ErrorData::internal_error(format!("cannot deliver to run {run}: {error}"), None)
}
