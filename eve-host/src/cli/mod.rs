//! The host CLI: what a user's binary gets from a few lines.
//!
//! ```no_run
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     // `eve_tools::tools!(my_tools)` when the tools are in the library `my_tools`.
//!     eve_tools::cli::Host::from_env().main(eve_tools::tools!()).await
//! }
//! ```
//!
//! Commands: `manifest`, `call`, `runs`, `inspect`, `questions`, `answer`, `cancel`, `resume-hook`,
//! `serve`, `worker`, `chat` and `mcp` (with the cargo feature `mcp`). Every error is one sentence
//! saying what went wrong and what to do next, and
//! the exit code is non-zero.
//!
//! With a Postgres database (`--database-url`, or `EVE_DATABASE_URL`) the store is shared: `worker`
//! processes (any number, on any machines) run the runs, and the other commands work beside them as
//! clients: `call` hands its run to the workers, `answer`, `cancel` and `resume-hook` deliver through
//! the store (which wakes a worker), and each follows the run through the store as the workers
//! advance it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures::StreamExt;
use serde_json::Value;

use eve_runtime::ask::{Answer, AnswerAction, AskOutcome};
use eve_runtime::events::RunEvent;
use eve_runtime::journal::{Entry, Op, Position, RunId, StepOutcome};
use eve_runtime::registry::{self, EntryPoint};
use eve_runtime::view::progress_line;
use eve_runtime::{Error, HookDelivery, Phase, RunOutcome, Runtime};

#[cfg(feature = "http")]
mod banner;
#[cfg(feature = "sqlite")]
mod beside;
#[cfg(feature = "otel")]
mod exporters;
mod inspect;
mod replay;
mod runs;
mod tools;
mod upgrade;

pub use tools::Tools;

mod chat;

/// A binary hosting the tools compiled into it.
#[derive(Debug, Parser)]
#[command(about = "Run and inspect the durable tools compiled into this binary", version)]
pub struct Host {
    /// Where the embedded store and secret key live.
    #[arg(long, env = "EVE_DATA_DIR", default_value = ".eve", global = true)]
    data_dir: PathBuf,
    /// The base URL people and systems reach the HTTP server at, for webhook and sign-in callback
    /// URLs (default: the `serve` address).
    #[arg(long, env = "EVE_PUBLIC_URL", global = true)]
    public_url: Option<String>,
    /// A Postgres database to share runs through (postgres://user:password@host:port/database),
    /// instead of the embedded SQLite store. Needs the `postgres` feature.
    #[arg(long, env = "EVE_DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// The Postgres schema holding eve's tables (default eve); one database may hold several.
    #[arg(long, env = "EVE_DATABASE_SCHEMA", global = true)]
    database_schema: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the manifest of every tool and step as JSON.
    Manifest,
    /// Call a tool: start a run of a workflow tool or task and follow it until it parks or ends,
    /// or run a plain tool.
    Call {
        /// The tool name.
        tool: String,
        /// The input, a JSON object.
        #[arg(default_value = "{}")]
        input: String,
        /// Use this run id (a run with this id is created once).
        #[arg(long)]
        id: Option<String>,
        /// How long to wait for a run that waits only on its own timers (a durable sleep, a
        /// step's next attempt) before leaving it parked; a run that waits on a person or a
        /// webhook is left parked at once.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "1m")]
        wait: Duration,
    },
    /// List runs, newest first; `runs upgrade` moves runs to this build, `runs fork` forks one.
    #[command(args_conflicts_with_subcommands = true)]
    Runs {
        /// What to do with the runs instead of listing them.
        #[command(subcommand)]
        action: Option<RunsCommand>,
        /// Only runs with this status: active (parked, running or held), parked, running,
        /// completed, failed, cancelled, or held (unfinished runs this build cannot replay).
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Print a run's timeline (each op with where it stands, and what the run waits for) and its
    /// journal.
    Inspect {
        /// The run id.
        run: String,
        /// Show the run as of this journal entry (time travel: which ops were done then, which
        /// waits were open).
        #[arg(long)]
        at: Option<u64>,
        /// Print the timeline and the journal as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write a run's journal as a versioned JSON file, for `replay` to check a later build against.
    Export {
        /// The run id.
        run: String,
        /// The file to write (default `<run>.journal.json`; `-` writes to standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Replay recorded journals against the tools in this binary, running nothing, and say for
    /// each whether it replays or where it diverges. Exits with a failure if any diverges, so CI
    /// can keep a folder of journals and refuse a build that would break runs in flight.
    Replay {
        /// Journal files written by `export`.
        #[arg(required_unless_present = "store")]
        files: Vec<PathBuf>,
        /// Replay every unfinished run in the store instead (read-only).
        #[arg(long, conflicts_with = "files")]
        store: bool,
        /// Print one JSON object per journal instead of a sentence.
        #[arg(long)]
        json: bool,
    },
    /// List the questions a run has open, with their options.
    Questions {
        /// The run id.
        run: String,
    },
    /// Answer a run's open question, then follow the run until it parks again or ends.
    Answer {
        /// The run id.
        run: String,
        /// The question's request id, as `questions` lists it (for example `ask-3`).
        request: String,
        /// The id of the option picked.
        #[arg(long = "option")]
        option_id: Option<String>,
        /// The text typed, for questions that accept it.
        #[arg(long)]
        text: Option<String>,
        /// A form's value, a JSON object of its fields; or, for a request for the client's model,
        /// its completion (`questions` shows which, and the shape).
        #[arg(long = "json", value_name = "OBJECT")]
        value: Option<String>,
        /// Decline the question instead of answering it: the run sees it declined.
        #[arg(long, conflicts_with_all = ["option_id", "text", "value", "dismiss"])]
        decline: bool,
        /// Dismiss the question without choosing: the run sees it cancelled.
        #[arg(long, conflicts_with_all = ["option_id", "text", "value"])]
        dismiss: bool,
    },
    /// Cancel a run: its waits resolve as cancelled and its cleanup runs.
    Cancel {
        /// The run id.
        run: String,
        /// Why, recorded in the journal.
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
    },
    /// Deliver a JSON payload to the hook holding a token, then follow the run until it parks
    /// again or ends.
    ResumeHook {
        /// The hook token.
        token: String,
        /// The payload, JSON.
        payload: String,
        /// Deliver at most once per key to this hook, as HTTP's `Idempotency-Key` header: the
        /// same command with the same key again changes nothing. Without it a key is made up, and
        /// printed if the delivery's outcome is unknown, so the retry can carry it.
        #[arg(long, value_name = "KEY", value_parser = idempotency_key)]
        idempotency_key: Option<String>,
    },
    /// Recover every unfinished run, serve HTTP (webhooks, hook resumes, answers, sign-in
    /// callbacks and the run API) and keep runs moving until interrupted.
    ///
    /// With EVE_API_KEY set, the /v1 run API requires `Authorization: Bearer <key>`. Without it the
    /// run API is open, so only a loopback address is accepted.
    Serve {
        /// The address the HTTP server listens on.
        #[cfg(feature = "http")]
        #[arg(long, env = "EVE_ADDR", default_value = "127.0.0.1:7700")]
        addr: String,
    },
    /// Serve every tool over the Model Context Protocol on stdin and stdout until the client
    /// closes stdin: plain tools answer at once, workflow tools and tasks run durably (as MCP tasks
    /// for clients with the tasks extension), and unfinished runs are recovered first. Logs go to
    /// stderr; stdout carries the protocol.
    ///
    /// Without the cargo feature `mcp` the command is hidden and says how to enable it.
    #[cfg_attr(not(feature = "mcp"), command(hide = true))]
    Mcp,
    /// Talk to this binary's tools through a model, in a session that outlives the process: the
    /// OpenAI-compatible endpoint when OPENAI_BASE_URL is set (with OPENAI_API_KEY and
    /// EVE_MODEL), else a demo model that calls a tool when you write its name and a JSON input.
    /// Each line is a message; a task's question is answered on the next line.
    Chat {
        /// The session to continue (default: the last one `chat` talked in, else a new one).
        #[arg(long)]
        session: Option<String>,
        /// Print every event of the feed as one JSON line.
        #[arg(long)]
        json: bool,
    },
    /// Run the runs of a shared Postgres store beside other workers, serving HTTP too (any
    /// worker accepts deliveries for any run), until interrupted (Ctrl-C or SIGTERM, after which
    /// the runs under way park and their claims are given back).
    ///
    /// Every worker needs the same secret key (`eve.key` in the data directory) and a name of its
    /// own (by default the host name, process id and a random suffix).
    Worker {
        /// The address the HTTP server listens on (port 0 picks a free one).
        #[cfg(feature = "http")]
        #[arg(long, env = "EVE_ADDR", default_value = "127.0.0.1:7700")]
        addr: String,
        /// This worker's name in the store's leases; unique among live workers.
        #[arg(long, env = "EVE_WORKER_ID")]
        worker_id: Option<String>,
        /// How long a claim lasts unless renewed: a dead worker's runs move on after this.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
        lease: Duration,
        /// How often the claims of the runs under way are renewed (at most half the lease).
        #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
        heartbeat: Duration,
        /// How often the store is polled for runs to take (10ms to 60s).
        #[arg(long, value_parser = humantime::parse_duration, default_value = "500ms")]
        poll: Duration,
    },
}

/// What `runs` does besides listing: upgrade the runs, or fork one.
#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Move every unfinished run whose journal replays on this build to it (after a deploy, once
    /// no worker of the old build is left), and list the runs it cannot move with the op where
    /// each diverges. Fails if any cannot move.
    Upgrade {
        /// Print what was done as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Fork a finished run (failed, say, on a bug since fixed): start a new run of its tool on
    /// this build that keeps the journaled results of the ops before `--from` and runs the rest
    /// live, then follow it until it parks or ends. Prints the new run's id first; the original
    /// stays as it is.
    Fork {
        /// The run to fork.
        run: String,
        /// The first op to run again (`inspect` numbers them); the ops before it are not executed
        /// again.
        #[arg(long)]
        from: u32,
        /// How long to wait for a fork that waits only on its own timers before leaving it parked.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "1m")]
        wait: Duration,
    },
}

impl Host {
    /// The host configured from the command line and environment.
    pub fn from_env() -> Self {
        Host::parse()
    }

    /// Runs the command and reports errors on stderr. `tools` names the library crates whose
    /// tools this binary serves, so that they are linked into it: see [`Tools`].
    pub async fn main(self, tools: Tools) -> ExitCode {
        tracing::debug!(crates = ?tools.crates(), "serving the tools of these crates and this binary");
        match self.run().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    }

    async fn run(self) -> Result<(), String> {
        if let Command::Manifest = self.command {
            let manifest = serde_json::to_string_pretty(&registry::manifest()).map_err(|error| error.to_string())?;
            println!("{manifest}");
            return Ok(());
        }
        if let Command::Replay { files, store: false, json } = &self.command {
            return replay::files(files, *json);
        }
        #[cfg(not(feature = "mcp"))]
        if let Command::Mcp = self.command {
            return Err(crate::without::MCP.to_owned());
        }
        let listener = Listener::bind(&self.command).await?;
        // Before the runtime, so that its first run is traced and counted.
        #[cfg(feature = "otel")]
        let exporters = exporters::Exporters::start(&self.command);
        let mut builder = Runtime::builder().data_dir(&self.data_dir);
        if let Some(url) = self.public_url.clone().or_else(|| listener.public_url()) {
            builder = builder.public_url(url);
        }
        builder = with_database(builder, self.database_url.as_deref(), self.database_schema.as_deref())?;
        if let Command::Worker { worker_id, lease, heartbeat, poll, .. } = &self.command {
            if let Some(id) = worker_id {
                builder = builder.worker_id(id);
            }
            builder = builder.lease(*lease).heartbeat(*heartbeat).poll_interval(*poll);
        }
        if let Command::Chat { .. } = &self.command {
            builder = chat::with_model(builder)?;
        }
        let runtime = match builder.build() {
            Ok(runtime) => runtime,
            // `serve` (or another command) holds the embedded store, or it cannot be written:
            // read it beside its owner, taking no lock and writing nothing.
            #[cfg(feature = "sqlite")]
            Err(Error::Store(
                eve_runtime::error::StoreError::InUse { .. } | eve_runtime::error::StoreError::ReadOnly { .. },
            )) if self.database_url.is_none()
                && matches!(
                    self.command,
                    Command::Runs { action: None, .. }
                        | Command::Inspect { .. }
                        | Command::Export { .. }
                        | Command::Replay { .. }
                ) =>
            {
                return beside::read(&self.data_dir.join("eve.db"), &self.command);
            }
            Err(error) => return Err(in_use(error, &self.command)),
        };
        let done = match self.command {
            Command::Manifest => unreachable!("handled without a runtime"),
            Command::Call { tool, input, id, wait } => call(&runtime, &tool, &input, id.as_deref(), wait).await,
            Command::Runs { action: Some(RunsCommand::Upgrade { json }), .. } => upgrade::run(&runtime, json).await,
            Command::Runs { action: Some(RunsCommand::Fork { run, from, wait }), .. } => {
                runs::fork(&runtime, &parse_run(&run)?, Op(from), wait).await
            }
            Command::Runs { status, limit, action: None } => runs(&runtime, status.as_deref(), limit).await,
            Command::Inspect { run, at, json } => inspect(&runtime, &run, at, json).await,
            Command::Export { run, out } => {
                let record = runtime.journal(&parse_run(&run)?).await.map_err(|error| error.to_string())?;
                replay::export(&record, out.as_deref())
            }
            Command::Replay { json, .. } => {
                let unfinished = runtime
                    .runs(Some(eve_runtime::journal::RunStatus::Active), i64::MAX as usize)
                    .await
                    .map_err(|error| error.to_string())?;
                let mut records = Vec::with_capacity(unfinished.len());
                for run in unfinished {
                    records.push(runtime.journal(&run.id).await.map_err(|error| error.to_string())?);
                }
                replay::records(&records, json)
            }
            Command::Questions { run } => questions(&runtime, &parse_run(&run)?).await,
            Command::Answer { run, request, option_id, text, value, decline, dismiss } => {
                let value = value.map(|value| parse_json(&value, "value (--json)")).transpose()?;
                let action = match (decline, dismiss) {
                    (true, _) => AnswerAction::Decline,
                    (_, true) => AnswerAction::Cancel,
                    _ => AnswerAction::Accept,
                };
                answer(&runtime, &parse_run(&run)?, &request, Answer { option_id, text, value, action }).await
            }
            Command::Cancel { run, reason } => cancel(&runtime, &parse_run(&run)?, &reason).await,
            Command::ResumeHook { token, payload, idempotency_key } => {
                resume_hook(&runtime, &token, &payload, idempotency_key).await
            }
            Command::Serve { .. } => serve(&runtime, listener).await,
            #[cfg(feature = "mcp")]
            Command::Mcp => mcp(runtime).await,
            #[cfg(not(feature = "mcp"))]
            Command::Mcp => unreachable!("refused before the runtime is built"),
            Command::Chat { session, json } => chat::chat(&runtime, &self.data_dir, session.as_deref(), json).await,
            Command::Worker { .. } => work(&runtime, listener).await,
        };
        #[cfg(feature = "otel")]
        exporters.shutdown();
        done
    }
}

/// The HTTP listener of `serve`, bound before the runtime is built so that the runtime's webhook
/// and callback URLs carry the real address. Empty for other commands and without the `http` feature.
struct Listener {
    #[cfg(feature = "http")]
    listener: Option<tokio::net::TcpListener>,
    /// The run API's key, from `EVE_API_KEY`.
    #[cfg(feature = "http")]
    api_key: Option<secrecy::SecretString>,
}

/// The environment variable holding the key the run API requires.
#[cfg(feature = "http")]
const API_KEY_VAR: &str = "EVE_API_KEY";

/// The HTTP server `serve` runs, if any.
struct Serving {
    #[cfg(feature = "http")]
    server: Option<crate::http::ServerHandle>,
}

#[cfg(feature = "http")]
impl Listener {
    async fn bind(command: &Command) -> Result<Self, String> {
        let (Command::Serve { addr } | Command::Worker { addr, .. }) = command else {
            return Ok(Listener { listener: None, api_key: None });
        };
        let api_key = std::env::var(API_KEY_VAR).ok().filter(|key| !key.trim().is_empty());
        let listener = tokio::net::TcpListener::bind(addr.as_str())
            .await
            .map_err(|error| format!("cannot listen on {addr} ({error}); pick another address with --addr"))?;
        let local = listener.local_addr().map_err(|error| error.to_string())?;
        if api_key.is_none() && !local.ip().is_loopback() {
            return Err(format!(
                "refusing to serve the run API on {local} without a key, since anyone who reaches it could start, \
                 answer and cancel runs; set {API_KEY_VAR}, or listen on a loopback address such as 127.0.0.1:7700"
            ));
        }
        Ok(Listener { listener: Some(listener), api_key: api_key.map(Into::into) })
    }

    fn public_url(&self) -> Option<String> {
        let addr = self.listener.as_ref()?.local_addr().ok()?;
        Some(format!("http://{addr}"))
    }

    fn start(self, runtime: &Runtime) -> Result<Serving, String> {
        let Some(listener) = self.listener else { return Ok(Serving { server: None }) };
        let mut server = crate::http::Server::new(runtime.clone());
        let key_var = self.api_key.is_some().then_some(API_KEY_VAR);
        if let Some(key) = self.api_key {
            server = server.api_key(key);
        }
        #[cfg(feature = "metrics")]
        {
            server = server.metrics(crate::metrics::install().map_err(|error| error.to_string())?);
        }
        let server = server.serve(listener).map_err(|error| error.to_string())?;
        println!("{}", banner::text(&server.local_addr().to_string(), key_var));
        Ok(Serving { server: Some(server) })
    }
}

#[cfg(feature = "http")]
impl Serving {
    async fn stop(self) {
        if let Some(server) = self.server {
            server.shutdown().await;
        }
    }
}

#[cfg(not(feature = "http"))]
impl Listener {
    async fn bind(_command: &Command) -> Result<Self, String> {
        Ok(Listener {})
    }

    fn public_url(&self) -> Option<String> {
        None
    }

    fn start(self, _runtime: &Runtime) -> Result<Serving, String> {
        Ok(Serving {})
    }
}

#[cfg(not(feature = "http"))]
impl Serving {
    async fn stop(self) {}
}

/// Uses the Postgres database at `url`, in `schema` if given, if a URL is given.
#[cfg(feature = "postgres")]
fn with_database(
    builder: eve_runtime::RuntimeBuilder,
    url: Option<&str>,
    schema: Option<&str>,
) -> Result<eve_runtime::RuntimeBuilder, String> {
    let Some(url) = url else {
        return match schema {
            Some(_) => Err("--database-schema (or EVE_DATABASE_SCHEMA) needs a database: give --database-url or set \
                            EVE_DATABASE_URL"
                .to_owned()),
            None => Ok(builder),
        };
    };
    use eve_postgres::PostgresBuilderExt as _;
    let mut options = eve_postgres::PostgresOptions::default();
    if let Some(schema) = schema {
        options.schema = schema.to_owned();
    }
    Ok(builder.postgres_with(url, options))
}

/// Uses the Postgres database at `url`, if one is given: not in a build without Postgres.
#[cfg(not(feature = "postgres"))]
fn with_database(
    builder: eve_runtime::RuntimeBuilder,
    url: Option<&str>,
    _schema: Option<&str>,
) -> Result<eve_runtime::RuntimeBuilder, String> {
    match url {
        Some(_) => Err("--database-url (or EVE_DATABASE_URL) names a Postgres database, but this binary was built \
                        without the `postgres` feature of eve-tools; enable it, or leave the URL out to use the \
                        embedded SQLite store"
            .to_owned()),
        None => Ok(builder),
    }
}

/// Who keeps runs moving after this command: `serve` on the embedded store, the workers on a
/// shared one.
fn mover(runtime: &Runtime) -> &'static str {
    if runtime.store().is_shared() { "a worker (`worker`)" } else { "`serve`" }
}

/// How long a command following a run on a shared store waits before saying it waits for a worker.
const WORKER_NOTE_AFTER: Duration = Duration::from_secs(2);

/// How often a command reads a run that the workers advance.
const FOLLOW_EVERY: Duration = Duration::from_millis(50);

fn parse_run(run: &str) -> Result<RunId, String> {
    run.parse().map_err(|error: eve_runtime::journal::InvalidRunId| error.to_string())
}

fn parse_json(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text)
        .map_err(|error| format!("the {what} is not valid JSON ({error}); quote it for your shell"))
}

async fn call(runtime: &Runtime, tool: &str, input: &str, id: Option<&str>, wait: Duration) -> Result<(), String> {
    let input = parse_json(input, "input")?;
    let plain = registry::tool(tool).is_some_and(|descriptor| matches!(descriptor.entry, EntryPoint::Plain(_)));
    if plain {
        let output = runtime.call_tool(tool, input).await.map_err(|error| error.to_string())?;
        println!("{output}");
        return Ok(());
    }
    // On a shared store this process is a client: the workers run the run.
    if !runtime.store().is_shared() {
        runtime.recover().await.map_err(|error| error.to_string())?;
        warn_held(runtime);
    }
    let id = id.map(parse_run).transpose()?.unwrap_or_else(RunId::generate);
    let handle = runtime.start_with_id(id, tool, input).await.map_err(|error| match error {
        Error::RunIdTaken { .. } => {
            let message = error.to_string();
            let refusal = message.split("; use another id").next().unwrap_or(&message);
            format!("{refusal}; give another --id, or none")
        }
        error => error.to_string(),
    })?;
    with_steps(runtime, handle.id(), Position::START, follow_run(runtime, &handle, wait)).await
}

/// How long a command waits for the last of a run's step lines once the run has parked or ended.
const LAST_LINES: Duration = Duration::from_millis(500);

/// Runs `until`, printing to stderr each step `run` takes from `from` on, as its journal records
/// them (see [`progress_line`]); then prints those the journal holds up to its end.
async fn with_steps<T>(runtime: &Runtime, run: &RunId, from: Position, until: impl Future<Output = T>) -> T {
    let mut follow = runtime.follow(run, from);
    let print = |entry: &Entry| {
        if let Some(line) = progress_line(entry) {
            eprintln!("  {line}");
        }
    };
    let output = {
        let steps = async {
            while let Some(Ok(followed)) = follow.next().await {
                print(&followed.entry);
            }
            std::future::pending().await
        };
        tokio::select! {
            output = until => output,
            never = steps => never,
        }
    };
    while let Ok(Some(Ok(followed))) = tokio::time::timeout(LAST_LINES, follow.next()).await {
        print(&followed.entry);
        if follow.is_caught_up() {
            break;
        }
    }
    output
}

/// Where `run`'s journal ends now.
async fn journal_end(runtime: &Runtime, run: &RunId) -> Result<Position, String> {
    let record = runtime.journal(run).await.map_err(|error| error.to_string())?;
    Ok(eve_runtime::view::RunView::of(&record.entries).next)
}

/// Waits until the run ends, or parks on more than its own timers due within `wait`, and prints
/// its output or what it waits for.
async fn follow_run(runtime: &Runtime, handle: &eve_runtime::RunHandle, wait: Duration) -> Result<(), String> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let phase = parked_or_finished(runtime, handle).await?;
        if let Phase::Finished(outcome) = phase {
            return print_outcome(handle.id(), &outcome);
        }
        // On a shared store the workers keep the run moving; this process only reports it.
        let due = if runtime.store().is_shared() { None } else { own_timers_due(runtime, handle.id()).await? };
        let Some(due) = due.filter(|due| *due <= until) else { return report_parked(runtime, handle.id()).await };
        // The run's timer fires in this process; a moment after it, the run is moving or parked again.
        tokio::select! {
            outcome = handle.outcome() => return print_outcome(handle.id(), &outcome.map_err(|error| error.to_string())?),
            () = tokio::time::sleep_until(due + TIMER_SLACK) => {}
        }
    }
}

/// How long after a timer's deadline `call` looks at its run again.
const TIMER_SLACK: Duration = Duration::from_millis(50);

/// When the next of the run's timers is due, if the run waits on its own timers only (a durable
/// sleep, a step's next attempt), not on a person, a webhook or a sign-in.
async fn own_timers_due(runtime: &Runtime, run: &RunId) -> Result<Option<tokio::time::Instant>, String> {
    let journal = runtime.journal(run).await.map_err(|error| error.to_string())?;
    let view = eve_runtime::view::RunView::of(&journal.entries);
    let mut next: Option<eve_runtime::time::Timestamp> = None;
    for op in view.ops.values().filter(|op| op.waits_for().is_some()) {
        match (op.kind, op.state, op.deadline) {
            ("sleep", "open", Some(deadline)) | ("step", "retrying", Some(deadline)) => {
                next = Some(next.map_or(deadline, |next| next.min(deadline)));
            }
            _ => return Ok(None),
        }
    }
    let Some(next) = next else { return Ok(None) };
    let now = runtime.clock().now();
    let ahead = Duration::from_millis(next.as_millis().saturating_sub(now.as_millis()));
    Ok(Some(tokio::time::Instant::now() + ahead))
}

/// Prints that the run is parked, with what moves it and the questions it asks.
async fn report_parked(runtime: &Runtime, run: &RunId) -> Result<(), String> {
    println!("run {run} is parked on a durable wait; {} keeps it moving", mover(runtime));
    let open = runtime.open_questions(run).await.map_err(|error| error.to_string())?;
    if !open.is_empty() {
        println!();
        print_questions(run, &open);
    }
    Ok(())
}

/// Waits until the run parks or ends; on a shared store, says after a moment that the workers
/// run it.
async fn parked_or_finished(runtime: &Runtime, handle: &eve_runtime::RunHandle) -> Result<Phase, String> {
    let parked = handle.parked();
    let phase = if runtime.store().is_shared() {
        tokio::pin!(parked);
        match tokio::time::timeout(WORKER_NOTE_AFTER, &mut parked).await {
            Ok(phase) => phase,
            Err(_) => {
                note_waiting(handle.id());
                parked.await
            }
        }
    } else {
        parked.await
    };
    phase.map_err(|error| error.to_string())
}

async fn questions(runtime: &Runtime, run: &RunId) -> Result<(), String> {
    let open = runtime.open_questions(run).await.map_err(|error| error.to_string())?;
    if open.is_empty() {
        println!("run {run} has no open questions");
    } else {
        print_questions(run, &open);
    }
    Ok(())
}

fn print_questions(run: &RunId, open: &[eve_runtime::OpenQuestion]) {
    for question in open {
        let request = &question.request;
        println!("{}  {}", question.request_id, request.prompt);
        for option in &request.options {
            let description = option.description.as_deref().map(|text| format!(" ({text})")).unwrap_or_default();
            println!("    --option {:<12} {}{description}", option.id, option.label);
        }
        if let Some(sampling) = &request.sampling {
            print_sampling(sampling);
        } else if let Some(schema) = &request.schema {
            print_form(schema);
        } else if request.takes_text() {
            println!("    --text '...'");
        }
    }
    let first = &open[0];
    let how = match (&first.request.sampling, &first.request.schema) {
        (Some(_), _) => format!("--json '{COMPLETION_SHAPE}' (or --decline)"),
        (None, Some(_)) => "--json '{...}' (or --decline)".to_owned(),
        (None, None) => "--option <id> (or --text '...')".to_owned(),
    };
    println!("answer with: answer {run} {} {how}", first.request_id);
}

/// What a completion looks like, for the hints of a request for the client's model.
const COMPLETION_SHAPE: &str = r#"{"role": "assistant", "content": {"type": "text", "text": "..."}, "model": "..."}"#;

/// A request for the client's model: what it sends the model, one message a line, and the
/// completion that answers it.
fn print_sampling(sampling: &eve_runtime::ask::Sampling) {
    use eve_runtime::journal::sample::{Content, Role};
    if let Some(system) = &sampling.system_prompt {
        println!("    system: {system}");
    }
    for message in &sampling.messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let said = match &message.content {
            Content::Text { text } => text.clone(),
            Content::Image { mime_type, .. } => format!("[an image, {mime_type}]"),
            Content::Audio { mime_type, .. } => format!("[audio, {mime_type}]"),
        };
        println!("    {role}: {said}");
    }
    println!("    at most {} tokens", sampling.max_tokens);
    println!("    --json with the completion: {COMPLETION_SHAPE}");
}

/// A form's fields, one a line: name, type or choices, whether required, default.
fn print_form(schema: &Value) {
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(fields) = schema["properties"].as_object() else { return };
    println!("    --json with the fields:");
    for (name, field) in fields {
        let choices = field.get("enum").or_else(|| field.pointer("/items/enum")).cloned().or_else(|| {
            let titled = field.get("oneOf").or_else(|| field.pointer("/items/anyOf"))?.as_array()?;
            Some(titled.iter().filter_map(|option| option.get("const").cloned()).collect())
        });
        let kind = match (choices, field["type"].as_str()) {
            (Some(choices), Some("array")) => format!("some of {choices}"),
            (Some(choices), _) => format!("one of {choices}"),
            (None, kind) => kind.unwrap_or("any").to_owned(),
        };
        let required = if required.contains(&name.as_str()) { ", required" } else { "" };
        let default = field.get("default").map(|default| format!(", default {default}")).unwrap_or_default();
        let about =
            field.get("description").and_then(Value::as_str).map(|text| format!("  {text}")).unwrap_or_default();
        println!("      {name:<12} {kind}{required}{default}{about}");
    }
}

fn note_waiting(run: &RunId) {
    eprintln!(
        "waiting for a worker to carry run {run} on (start one with `worker`); Ctrl-C stops waiting, not the run"
    );
}

async fn answer(runtime: &Runtime, run: &RunId, request: &str, answer: Answer) -> Result<(), String> {
    let empty = answer.option_id.is_none() && answer.text.is_none() && answer.value.is_none();
    if empty && answer.action == AnswerAction::Accept {
        return Err(
            "the answer is empty: give --option <id>, --text '...', --json '{...}' for a form or a completion, or --decline".to_owned()
        );
    }
    let before = journal_length(runtime, run).await?;
    let end = journal_end(runtime, run).await?;
    runtime.answer(run, request, answer).await.map_err(|error| match error {
        Error::Answer(refusal) => answer_refusal(refusal),
        // No key is needed to retry an answer: the store takes one answer per question.
        error if error.is_transient() => format!(
            "{error}. The answer may or may not have been written; a question takes one answer, so answering again \
             is safe: `questions {run}` says whether {request} is still open"
        ),
        error => error.to_string(),
    })?;
    let carried_on = async {
        carried_on(runtime, run, before).await?;
        follow_run(runtime, &runtime.handle(run.clone()), Duration::ZERO).await
    };
    with_steps(runtime, run, end, carried_on).await
}

/// A refused answer in the words of the command line's flags.
fn answer_refusal(refusal: eve_runtime::ask::AnswerError) -> String {
    use eve_runtime::ask::AnswerError;
    match refusal {
        AnswerError::UnknownOption { given, allowed } => {
            format!("--option {given:?} is not one of the question's options: {}", allowed.join(", "))
        }
        AnswerError::TextNotAllowed => "--text is not accepted: this question takes one of its options".to_owned(),
        AnswerError::TextOnly => "--option is not accepted: this question takes text; answer with --text".to_owned(),
        AnswerError::FormNeedsValue => {
            "this question is a form: answer with --json '{...}', an object of its fields (`questions` lists them)"
                .to_owned()
        }
        AnswerError::InvalidValue { message, .. } => format!("--json does not fit the form: {message}"),
        AnswerError::ValueNotAccepted => {
            "--json is not accepted: this question is not a form; answer with --option or --text".to_owned()
        }
        AnswerError::CompletionNeeded => {
            format!("this request is for the client's model: answer with --json '{COMPLETION_SHAPE}', its completion")
        }
        AnswerError::NotACompletion(message) => format!("--json is {message}"),
        other => other.to_string(),
    }
}

/// Delivers a payload to a hook once per idempotency key (`key`, or one made up), then follows
/// the run it woke as `answer` does.
async fn resume_hook(runtime: &Runtime, token: &str, payload: &str, key: Option<String>) -> Result<(), String> {
    let payload = parse_json(payload, "payload")?;
    let key = key.unwrap_or_else(made_up_key);
    // Where the run the delivery wakes stands before it, to print its steps from there.
    let hook = eve_runtime::secret::TokenHash::of(token);
    let end = match runtime.store().find_hook(&hook).await.map_err(|error| error.to_string())? {
        Some(hook) if !runtime.store().is_shared() => Some(journal_end(runtime, &hook.run).await?),
        _ => None,
    };
    let delivered = runtime.resume_hook_once(token, &key, payload).await.map_err(|error| match error {
        error if error.is_transient() => in_doubt(&error, &key),
        error => error.to_string(),
    })?;
    match delivered {
        // On a shared store a worker takes the delivery in; this process does not follow it.
        HookDelivery::Accepted(run) if runtime.store().is_shared() => {
            println!("delivered to run {run}; {} carries it on", mover(runtime));
            Ok(())
        }
        HookDelivery::Accepted(run) => {
            // The delivery woke the run in this process; let it go as far as it can.
            let carried_on = async {
                runtime.settle().await;
                follow_run(runtime, &runtime.handle(run.clone()), Duration::ZERO).await
            };
            with_steps(runtime, &run, end.unwrap_or(Position::START), carried_on).await
        }
        HookDelivery::Duplicate(run) => {
            println!("run {run} had this delivery already; nothing changed");
            Ok(())
        }
    }
}

/// Checks an `--idempotency-key` as HTTP checks the `Idempotency-Key` header, so that a key works
/// on both: 1 to 256 visible ASCII characters.
fn idempotency_key(key: &str) -> Result<String, String> {
    let visible = |byte: &u8| (0x21..=0x7e).contains(byte);
    match (1..=256).contains(&key.len()) && key.bytes().all(|byte| visible(&byte)) {
        true => Ok(key.to_owned()),
        false => Err("a key is 1 to 256 visible ASCII characters (no spaces)".to_owned()),
    }
}

/// A key for a delivery the user gave none for: unique, so the delivery is new, and kept only to
/// be printed if the delivery's outcome is unknown.
fn made_up_key() -> String {
    let id = RunId::generate();
    format!("cli-{}", id.as_str().trim_start_matches("run_"))
}

/// The error of a delivery that failed in the store in a way that may have written it (a
/// connection lost while committing says "it may or may not have been written"), with the command
/// that retries it safely: the same one with its key, which the store delivers at most once.
fn in_doubt(error: &Error, key: &str) -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|arg| arg == "--idempotency-key" || arg.starts_with("--idempotency-key=")) {
        args.extend(["--idempotency-key".to_owned(), key.to_owned()]);
    }
    let command = args.iter().map(|arg| shell_quoted(arg)).collect::<Vec<_>>().join(" ");
    format!(
        "{error}. The delivery may or may not have been written; to try again safely, run it again with its \
         idempotency key, which delivers it at most once:\n  {command}"
    )
}

/// `arg` as a POSIX shell reads it back: bare if it holds only characters no shell treats
/// specially, else in single quotes.
fn shell_quoted(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        return arg.to_owned();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The error of a command that could not open the store, saying what to do when a `serve`
/// holds it.
fn in_use(error: Error, command: &Command) -> String {
    let message = error.to_string();
    // Only a store another process holds: any other failure to open has its own remedy.
    if !matches!(error, Error::Store(eve_runtime::error::StoreError::InUse { .. }))
        || matches!(command, Command::Serve { .. })
    {
        return message;
    }
    format!(
        "{message}. If `serve` is running on this data directory, do this through its HTTP API (it prints its \
         routes), or stop it first; `runs`, `inspect` and `manifest` work meanwhile"
    )
}

/// How many entries the run's journal has.
async fn journal_length(runtime: &Runtime, run: &RunId) -> Result<u64, String> {
    let tail = runtime.store().tail(run).await.map_err(|error| error.to_string())?;
    tail.map(|(summary, _)| summary.entries).ok_or_else(|| eve_runtime::Error::RunNotFound(run.clone()).to_string())
}

/// Waits until the run has taken in what was just delivered to it and can go no further for now:
/// here, by letting this process run it; on a shared store, by reading the run until a worker has
/// journaled past `before` entries and the run has parked or ended.
async fn carried_on(runtime: &Runtime, run: &RunId, before: u64) -> Result<(), String> {
    if !runtime.store().is_shared() {
        // The delivery woke the run in this process; let it go as far as it can.
        runtime.settle().await;
        return Ok(());
    }
    let started = tokio::time::Instant::now();
    let mut noted = false;
    loop {
        let tail = runtime.store().tail(run).await.map_err(|error| error.to_string())?;
        let Some((summary, _)) = tail else { return Err(eve_runtime::Error::RunNotFound(run.clone()).to_string()) };
        if summary.status.is_finished() || (summary.entries > before && summary.parked) {
            return Ok(());
        }
        if !noted && started.elapsed() >= WORKER_NOTE_AFTER {
            note_waiting(run);
            noted = true;
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

fn print_outcome(run: &RunId, outcome: &RunOutcome) -> Result<(), String> {
    match outcome {
        RunOutcome::Completed(output) => {
            println!("{output}");
            Ok(())
        }
        RunOutcome::Failed(failure) => Err(format!("run {run} failed: {failure}")),
        RunOutcome::Cancelled => Err(format!("run {run} was cancelled")),
    }
}

async fn runs(runtime: &Runtime, status: Option<&str>, limit: usize) -> Result<(), String> {
    let (listed, held) = runs::list(runtime, status, limit).await?;
    runs::print(&listed, &held, status);
    Ok(())
}

async fn inspect(runtime: &Runtime, run: &str, at: Option<u64>, json: bool) -> Result<(), String> {
    let run = parse_run(run)?;
    let record = runtime.journal(&run).await.map_err(|error| error.to_string())?;
    let pending = runtime.store().inbox(&run).await.map_err(|error| error.to_string())?;
    let held = runtime.held(&record.summary).await.map_err(|error| error.to_string())?;
    inspect::print(&record, &pending, held, at, json)
}

/// Says, on stderr, which runs this build holds (one warning each, naming where its journal
/// diverges) and what to do: what `serve`, `mcp`, `chat` and `call` print once they recovered.
pub(super) fn warn_held(runtime: &Runtime) {
    let held = runtime.held_runs();
    if held.is_empty() {
        return;
    }
    for run in &held {
        eprintln!("warning: held (not failed), as this build cannot replay its journal: {run}");
    }
    eprintln!("{}", crate::timeline::held_advice(held.len()));
}

/// `count` and the noun, singular or plural: "1 run", "2 runs".
fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// One journal entry in words.
pub fn describe(entry: &Entry) -> String {
    let mut text = String::new();
    let _ = match entry {
        Entry::RunStarted { tool, input, at, .. } => write!(text, "started {tool} with {input} at {at}"),
        Entry::RunUpgraded { build, at, .. } => {
            write!(text, "upgraded to build {} (body {}) at {at}", build.version, build.fingerprint)
        }
        Entry::Recorded { op, kind, value } => write!(text, "{op}: recorded {kind:?} = {value}"),
        Entry::TimerScheduled { op, deadline } => write!(text, "{op}: sleep until {deadline}"),
        Entry::HookCreated { op, conflict, .. } => match conflict {
            true => write!(text, "{op}: hook not created, its token is held by another run"),
            false => write!(text, "{op}: hook created"),
        },
        Entry::HookTokenTaken { op } => write!(text, "{op}: told the body the hook's token is taken"),
        Entry::StepRetrying { op, name, attempt, error, next_attempt_at, .. } => {
            write!(text, "{op}: step {name} attempt {attempt} failed ({error}); next attempt at {next_attempt_at}")
        }
        Entry::StepCompleted { op, name, attempt, outcome, .. } => match outcome {
            StepOutcome::Ok { value } => write!(text, "{op}: step {name} returned {value} (attempt {attempt})"),
            StepOutcome::Err { message, .. } => write!(text, "{op}: step {name} failed: {message} (attempt {attempt})"),
        },
        Entry::TimerFired { op } => write!(text, "{op}: timer fired"),
        Entry::HookReceived { op, payload } => write!(text, "{op}: hook received {payload}"),
        Entry::AskCreated { op, request_id, request } => {
            write!(text, "{op}: asked {:?} ({request_id})", request.prompt)
        }
        Entry::AskResolved { op, outcome } => write!(text, "{op}: question {}", describe_outcome(outcome)),
        Entry::AuthRequired { op, provider, attempt, .. } => {
            write!(text, "{op}: attempt {attempt} waits for a sign-in with {provider}")
        }
        Entry::AuthCompleted { op } => write!(text, "{op}: sign-in completed; the step runs again"),
        Entry::CancelRequested { reason, grace_until, .. } => match grace_until {
            Some(deadline) => write!(text, "cancel requested: {reason}; cleanup may run until {deadline}"),
            None => write!(text, "cancel requested: {reason}"),
        },
        Entry::RunCompleted { output } => write!(text, "completed with {output}"),
        Entry::RunFailed { failure } => write!(text, "failed: {failure}"),
        Entry::RunCancelled {} => write!(text, "cancelled"),
    };
    text
}

fn describe_outcome(outcome: &AskOutcome) -> String {
    match outcome {
        AskOutcome::Answered { option_id, text, value } => {
            let chosen = option_id.as_deref().map(|id| format!(" `{id}`")).unwrap_or_default();
            let typed = text.as_deref().map(|text| format!(" {text:?}")).unwrap_or_default();
            let filled = value.as_ref().map(|value| format!(" {value}")).unwrap_or_default();
            format!("answered{chosen}{typed}{filled}")
        }
        other => other.status().to_owned(),
    }
}

async fn cancel(runtime: &Runtime, run: &RunId, reason: &str) -> Result<(), String> {
    let was = runtime.journal(run).await.map_err(|error| error.to_string())?.summary.status;
    if was.is_finished() {
        println!("run {run} had already {was}; nothing changed");
        return Ok(());
    }
    let before = journal_length(runtime, run).await?;
    match runtime.cancel(run, reason).await {
        Ok(()) => {}
        // It ended between the look and the cancel.
        Err(Error::RunFinished { status, .. }) => {
            println!("run {run} had already {status}; nothing changed");
            return Ok(());
        }
        Err(error) => return Err(error.to_string()),
    }
    // Let the cleanup go as far as it can.
    carried_on(runtime, run, before).await?;
    match runtime.handle(run.clone()).parked().await.map_err(|error| error.to_string())? {
        Phase::Finished(RunOutcome::Cancelled) => println!("run {run} cancelled; its cleanup ran"),
        Phase::Finished(outcome) => print_outcome(run, &outcome)?,
        _ => println!("cancellation of {run} recorded; its cleanup is waiting, and {} lets it finish", mover(runtime)),
    }
    Ok(())
}

async fn serve(runtime: &Runtime, listener: Listener) -> Result<(), String> {
    let stop = stop_signal();
    let mut events = runtime.events();
    let recovered = runtime.recover().await.map_err(|error| error.to_string())?;
    warn_held(runtime);
    println!(
        "recovered {}; they carry on as their waits resolve",
        plural(recovered, "unfinished run", "unfinished runs")
    );
    let serving = listener.start(runtime)?;
    println!("press Ctrl-C to stop");
    let result = follow(runtime, &mut events, stop).await;
    serving.stop().await;
    drain(runtime).await;
    result
}

/// How long `serve` and `worker`, told to stop, wait for the runs under way to park.
const DRAIN: Duration = Duration::from_secs(30);

/// Stops the runtime once the server has stopped taking requests: each run under way parks at its
/// next durable point (on a shared store, giving its claim back), waiting at most [`DRAIN`]; says
/// how it went in one line. A run still in a step after that carries on from its journal at the
/// next start (or, on Postgres, on another worker once its lease expires), its step run again.
async fn drain(runtime: &Runtime) {
    match tokio::time::timeout(DRAIN, runtime.clone().shutdown()).await {
        Ok(()) => println!("stopped: every run under way parked; goodbye"),
        Err(_) => println!(
            "stopped after {}: runs still in a step carry on from their journals at the next start; goodbye",
            humantime::format_duration(DRAIN)
        ),
    }
}

/// Runs a worker of a shared store until interrupted, then lets its runs under way park (giving
/// their claims back) before it exits.
async fn work(runtime: &Runtime, listener: Listener) -> Result<(), String> {
    if !runtime.store().is_shared() {
        return Err("`worker` shares runs through Postgres: give --database-url or set EVE_DATABASE_URL (to run one \
                    process on the embedded SQLite store, use `serve`)"
            .to_owned());
    }
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut events = runtime.events();
    let unfinished = tokio::select! {
        unfinished = recover_patiently(runtime) => unfinished?,
        () = &mut stop => {
            runtime.clone().shutdown().await;
            return Ok(());
        }
    };
    let serving = listener.start(runtime)?;
    println!(
        "worker {} sharing {unfinished} unfinished runs; press Ctrl-C to stop (runs under way park and are given back)",
        runtime.worker_id()
    );
    let result = follow(runtime, &mut events, stop).await;
    serving.stop().await;
    drain(runtime).await;
    result
}

/// How long a worker waits for its database at start-up before it gives up.
const START_PATIENCE: Duration = Duration::from_secs(120);

/// Recovers, waiting out a database that cannot be reached yet (still starting, restarting, or
/// not up yet beside the worker) with a growing pause, and saying what it waits for; gives up
/// after [`START_PATIENCE`], or at once on an error waiting will not cure.
async fn recover_patiently(runtime: &Runtime) -> Result<usize, String> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(200);
    loop {
        match runtime.recover().await {
            Ok(unfinished) => return Ok(unfinished),
            Err(error) if error.is_transient() && started.elapsed() + pause < START_PATIENCE => {
                let next = humantime::format_duration(pause);
                eprintln!("waiting for the database: {error}; trying again in {next}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(error) => return Err(error.to_string()),
        }
    }
}

/// Prints each run that finishes until `stop` resolves (Ctrl-C or SIGTERM), with its outcome in
/// one line. The events cover every run this process advances, but say only how a run ended; its
/// result or failure is read from the store, where the finishing entry is the journal's last.
async fn follow(
    runtime: &Runtime,
    events: &mut tokio::sync::broadcast::Receiver<RunEvent>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(RunEvent::Finished { run, status }) => {
                    let last = runtime.store().tail(&run).await.ok().flatten().map(|(_, entry)| entry);
                    println!("{}", finished_line(&run, status, last.as_ref()));
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => eprintln!("missed {missed} events"),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            },
            () = &mut stop => return Ok(()),
        }
    }
}

/// The most characters of a result `serve` prints; a longer one is cut short with an ellipsis,
/// so that one run stays one line a person can read (`inspect` shows it whole).
const RESULT_SHOWN: usize = 200;

/// A finished run in one line: `run r completed: {"ok":true}`, `run r failed: the warehouse is
/// closed`, `run r cancelled`. `last` is the journal's last entry, which says how the run ended;
/// without it (the store could not be read) the line says only the status.
fn finished_line(run: &RunId, status: eve_runtime::journal::RunStatus, last: Option<&Entry>) -> String {
    match last {
        Some(Entry::RunCompleted { output }) => format!("run {run} completed: {}", shortened(&output.to_string())),
        Some(Entry::RunFailed { failure }) => {
            // A failure's message may span lines; the line stays one.
            let message = failure.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
            format!("run {run} failed: {}", shortened(&message))
        }
        _ => format!("run {run} {status}"),
    }
}

/// `text` cut to [`RESULT_SHOWN`] characters, ending in `…` when something was cut.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(RESULT_SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// MCP: serves the tools over stdio. Multi round-trip states are sealed with a key derived from
/// the runtime's, the data directory's secret key, so a round goes on after the server restarts.
#[cfg(feature = "mcp")]
async fn mcp(runtime: Runtime) -> Result<(), String> {
    crate::mcp::log_to_stderr();
    let server = crate::mcp::McpServer::new(runtime.clone());
    runtime.recover().await.map_err(|error| error.to_string())?;
    let (read, write) = crate::mcp::stdio();
    let served = server.serve_io(read, write).await;
    runtime.shutdown().await;
    served.map_err(|error| error.to_string())
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM (as service managers stop a process). The listeners are
/// registered when this is called, not when the future is first polled, so a signal that arrives
/// while the banner prints, or between two events, is not lost (a lost one left the process
/// running, since a registered listener replaces the default action).
fn stop_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry command of a delivery in doubt reads back in a shell as the words it was made of.
    #[test]
    fn a_retry_command_is_quoted_for_the_shell() {
        assert_eq!(shell_quoted("votes-run-v"), "votes-run-v");
        assert_eq!(shell_quoted(r#"{"vote":"yes"}"#), r#"'{"vote":"yes"}'"#);
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
        assert_eq!(shell_quoted(""), "''");
        let message = in_doubt(&Error::Store(eve_runtime::error::StoreError::Backend("lost".into())), "k-1");
        assert!(message.contains("may or may not have been written"), "{message}");
        assert!(message.ends_with(" --idempotency-key k-1"), "{message}");
    }

    /// Keys are checked as HTTP checks its header, so one key works on both.
    #[test]
    fn an_idempotency_key_is_visible_ascii() {
        assert_eq!(idempotency_key("evt_1").as_deref(), Ok("evt_1"));
        for refused in ["", "two words", "ü", &"k".repeat(257)] {
            assert!(idempotency_key(refused).is_err(), "{refused:?}");
        }
    }

    /// A result over the limit is cut on a character boundary, whatever its script.
    #[test]
    fn a_long_result_is_cut_short_on_a_character() {
        let run: RunId = "r".parse().unwrap();
        let output = Value::String("ü".repeat(300));
        let line =
            finished_line(&run, eve_runtime::journal::RunStatus::Completed, Some(&Entry::RunCompleted { output }));
        assert!(line.starts_with("run r completed: \"üü") && line.ends_with('…'), "{line}");
        assert_eq!(line.chars().count(), "run r completed: ".len() + RESULT_SHOWN + 1);
        assert_eq!(shortened("short"), "short");
    }
}
