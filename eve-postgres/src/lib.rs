//! The shared Postgres store of eve-tools (its feature `postgres`): many worker processes, on many
//! machines, keep their runs in one database.
//!
//! Linked in, it is the store `Runtime::builder()` opens when `EVE_DATABASE_URL` is set (its
//! tables in the schema `EVE_DATABASE_SCHEMA` names, `eve` by default), and
//! [`PostgresBuilderExt::postgres`] names a database in code.
//!
//! # Connections
//!
//! [`PostgresStore::connect`] takes a URL (`postgres://user:password@host:port/database`), opens a
//! pool of connections ([`PostgresOptions::pool_size`]) and prepares the schema
//! (`schema`: created or migrated in one transaction under an advisory lock; a newer schema is
//! refused untouched). Each request takes a connection from the pool for one transaction. A request
//! whose connection turns out to be dead before anything was committed (the server restarted, the
//! connection was cut) runs again on a fresh one, a few times, and the broken connection leaves
//! the pool. A commit whose connection is lost midway is *in doubt*; an append (guarded by its
//! first sequence number, so never written twice) is then run again, and settled by reading the
//! journal back if the retry is refused or cannot be made, so a caller is told "ok" exactly when
//! its entries are there.
//!
//! # Claims, leases and fences
//!
//! Unlike the single-process stores, claims live in the `runs` table and outlive the process:
//! `epoch` rises with every claim, `owner` and `lease_until` say who holds the run and until when
//! (in the callers' clock, which is the workers' system clock; leases must be long against the
//! clock skew between machines). [`Store::claim`] takes a run whose lease is free, expired, or the
//! caller's own, and refuses one another worker holds with [`StoreError::Leased`]; every append
//! checks its fence's epoch inside its own transaction, so a worker that lost its lease (it
//! stalled, another took the run) writes nothing ([`StoreError::Fenced`]). [`Store::park`] and
//! [`Store::release`] give the lease up so any worker may take the run at once;
//! [`Store::renew`] extends it (a worker's heartbeat); [`Store::claimable`] lists runs that have
//! something to do and no live lease, without waiting on other workers' transactions.
//!
//! # Wake-ups
//!
//! A write that gives a run something to do (a delivery, a notice to a parent run, a released
//! claim, a park with a delivery already waiting) sends `NOTIFY` in its own transaction;
//! [`Store::wake_ups`] listens on a connection of its own (`listen`). See `listen` for the
//! channel and what happens when the listening connection is lost.
//!
//! # Invariants
//!
//! - Indexes (timers, hooks, inbox, run status) change only through [`IndexChanges`], in the same
//!   transaction as the entries that imply them, as in the other stores.
//! - A refused request writes nothing: its transaction is rolled back.
//! - No caller hears "ok" before the commit holding its writes has returned (with
//!   `synchronous_commit` on, the server's default, that is after the WAL is flushed); a park mark
//!   alone is committed without waiting for the disk.
//! - The URL's password appears nowhere: not in errors, not in `Debug`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod codec;
mod connect;
mod group;
mod leases;
mod listen;
mod reads;
mod schema;
mod sql;
#[cfg(feature = "tls")]
mod tls;
mod writes;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Client, Pool};

use self::codec::Failure;
pub use self::connect::ConnectError;
use self::group::Grouped;
use self::writes::{AppendRows, NewRunRow};
use eve_runtime::journal::{Entry, Position, RunId};
use eve_runtime::secret::TokenHash;
use eve_runtime::store::{
    Append, Claimed, Commit, Created, Delivered, DeliveryPayload, Fence, HookRow, InboxItem, InboxLimits, IndexChanges,
    JournalPage, NewRun, PassedOver, Recovery, RunPage, RunQuery, RunRecord, RunSummary, Store, StoreError, Target,
    TimerRow, Watch, WorkerId,
};
use eve_runtime::time::Timestamp;

/// The variable naming the Postgres schema for eve's tables, with `EVE_DATABASE_URL` (default `eve`).
pub const DATABASE_SCHEMA_VARIABLE: &str = "EVE_DATABASE_SCHEMA";

// Linked in, this store is what `Runtime::builder()` opens when `EVE_DATABASE_URL` is set.
inventory::submit! {
    eve_runtime::DefaultStore {
        name: "postgres",
        variable: Some(eve_runtime::DATABASE_URL_VARIABLE),
        open: open_from_environment,
    }
}

/// The store at the URL in `EVE_DATABASE_URL`, with its tables in the schema `EVE_DATABASE_SCHEMA`
/// names.
fn open_from_environment(opening: &eve_runtime::Opening<'_>) -> Result<Arc<dyn Store>, StoreError> {
    let variable = eve_runtime::DATABASE_URL_VARIABLE;
    let url = std::env::var(variable)
        .map_err(|_| StoreError::Open { path: variable.into(), reason: format!("{variable} is not UTF-8") })?;
    let mut options = PostgresOptions::default();
    if let Ok(schema) = std::env::var(DATABASE_SCHEMA_VARIABLE) {
        options.schema = schema;
    }
    connect_for(&url, options, opening)
}

/// The store at `url`, holding a run it creates for the runtime's lease, connected lazily.
fn connect_for(
    url: &str,
    options: PostgresOptions,
    opening: &eve_runtime::Opening<'_>,
) -> Result<Arc<dyn Store>, StoreError> {
    let options = PostgresOptions { creation_lease: opening.lease, ..options };
    Ok(Arc::new(PostgresStore::connect_lazy(url, options).map_err(StoreError::from)?))
}

/// [`RuntimeBuilder::postgres`](PostgresBuilderExt::postgres): a runtime on a Postgres database
/// named in code. In the prelude of eve-tools with its `postgres` feature.
pub trait PostgresBuilderExt: Sized {
    /// Uses the shared Postgres store at `url` (`postgres://user:password@host:port/database`),
    /// with default [`PostgresOptions`]. The URL is checked by
    /// [`build`](eve_runtime::RuntimeBuilder::build); the database is first contacted, and eve's
    /// schema created or migrated, by the runtime's first request (usually
    /// [`Runtime::recover`](eve_runtime::Runtime::recover), which also makes the runtime a
    /// worker).
    ///
    /// ```no_run
    /// # async fn work() -> Result<(), eve_tools::Error> {
    /// use std::time::Duration;
    /// use eve_tools::prelude::*;
    /// let runtime = Runtime::builder()
    ///     .postgres("postgres://eve:secret@db.internal:5432/app")
    ///     .worker_id("worker-1")
    ///     .lease(Duration::from_secs(30))
    ///     .heartbeat(Duration::from_secs(10))
    ///     .build()?;
    /// runtime.recover().await?; // now a worker: it takes runs as they need it
    /// # Ok(())
    /// # }
    /// ```
    fn postgres(self, url: impl Into<String>) -> Self {
        self.postgres_with(url, PostgresOptions::default())
    }

    /// Uses the shared Postgres store at `url` with `options` (see
    /// [`postgres`](PostgresBuilderExt::postgres)). The creator of a run holds it for the
    /// runtime's [`lease`](eve_runtime::RuntimeBuilder::lease), whatever `options.creation_lease`
    /// says.
    fn postgres_with(self, url: impl Into<String>, options: PostgresOptions) -> Self;
}

impl PostgresBuilderExt for eve_runtime::RuntimeBuilder {
    fn postgres_with(self, url: impl Into<String>, options: PostgresOptions) -> Self {
        let url = url.into();
        self.open_store(move |opening| connect_for(&url, options, opening))
    }
}

/// How many times a request whose connection was found dead runs again on another connection.
const RETRIES: usize = 3;

/// Settings of a [`PostgresStore`].
///
/// ```
/// # use eve_tools::store::PostgresOptions;
/// let options = PostgresOptions { schema: "eve_staging".into(), pool_size: 32, ..PostgresOptions::default() };
/// assert_eq!(options.max_entry_bytes, 8 << 20);
/// ```
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// The Postgres schema holding eve's tables, created if absent. Lowercase letters, digits and
    /// `_`. Default `eve`.
    pub schema: String,
    /// The most connections the store opens. Default 16.
    pub pool_size: usize,
    /// How long one statement may run before Postgres cancels it (the transaction then fails and
    /// writes nothing). Default 30 s.
    pub statement_timeout: Duration,
    /// How long opening a connection, or waiting for a free one, may take. Default 10 s.
    pub connect_timeout: Duration,
    /// The largest journal entry or delivery accepted, in bytes of JSON; a larger one is refused
    /// with [`StoreError::TooLarge`] and nothing is written. Default 8 MiB.
    pub max_entry_bytes: usize,
    /// How many deliveries may wait for one run and for one hook. Default [`InboxLimits::DEFAULT`].
    pub inbox_limits: InboxLimits,
    /// How long the creator of a run holds it before another worker may claim it, counted from
    /// the run's creation time, unless it renews, parks or releases it first. Default 60 s.
    pub creation_lease: Duration,
    /// A PEM file of CA certificates to trust besides the Mozilla roots, for a server whose
    /// certificate a private CA signed (feature `postgres-tls`). Default `None`.
    pub ca_certificate: Option<PathBuf>,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "eve".into(),
            pool_size: 16,
            statement_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_entry_bytes: 8 << 20,
            inbox_limits: InboxLimits::DEFAULT,
            creation_lease: Duration::from_secs(60),
            ca_certificate: None,
        }
    }
}

/// The shared [`Store`]: durable, for many worker processes at once. See the module documentation.
///
/// ```no_run
/// # async fn connect() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use eve_tools::{Runtime, store::PostgresStore};
/// let store = PostgresStore::connect("postgres://eve:secret@db.internal:5432/eve").await?;
/// let runtime = Runtime::builder().shared_store(Arc::new(store)).build()?;
/// # drop(runtime);
/// # Ok(())
/// # }
/// ```
pub struct PostgresStore {
    pool: Pool,
    options: PostgresOptions,
    /// The server as errors name it: `user@host:port/database`, and the schema.
    target: String,
    /// The server alone, as [`ConnectError`]s name it.
    server: String,
    /// Set once the schema is prepared: by [`PostgresStore::connect_with`], or by the first request
    /// of a store made with [`PostgresStore::connect_lazy`].
    prepared: tokio::sync::OnceCell<()>,
    /// The channel wake-ups are sent on.
    channel: String,
    wake_ups: listen::WakeUps,
    /// The appends waiting to be written together ([`group`]).
    group: group::Group,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("target", &self.target).field("options", &self.options).finish()
    }
}

impl PostgresStore {
    /// The variable [`PostgresStore::from_env`] reads the URL from.
    pub const URL_VARIABLE: &'static str = "EVE_DATABASE_URL";

    /// Connects to the database at `url` with default [`PostgresOptions`], creating or migrating
    /// eve's schema in it. See [`ConnectError`] for what can go wrong.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        PostgresStore::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects to the database at the URL in `EVE_DATABASE_URL`, with default options.
    pub async fn from_env() -> Result<Self, ConnectError> {
        let url = std::env::var(Self::URL_VARIABLE).map_err(|_| ConnectError::InvalidUrl {
            reason: format!("{} is not set (or not UTF-8)", Self::URL_VARIABLE),
        })?;
        PostgresStore::connect(&url).await
    }

    /// Connects to the database at `url`, creating or migrating eve's schema in it.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, ConnectError> {
        let store = PostgresStore::connect_lazy(url, options)?;
        store.prepare().await?;
        Ok(store)
    }

    /// A store for the database at `url` that connects when it is first used: the URL and options
    /// are checked now, and the first request opens a connection and prepares the schema (a
    /// failure is reported by that request, as [`StoreError::Open`], or as a transient
    /// [`StoreError::Backend`] if the server could not be reached, and the next request tries
    /// again). `Runtime::builder().postgres(url)` opens its store this way, so that building a
    /// runtime needs no `.await`.
    ///
    /// ```
    /// # use eve_tools::store::{PostgresOptions, PostgresStore};
    /// let store = PostgresStore::connect_lazy("postgres://eve@db.internal/eve", PostgresOptions::default());
    /// assert!(store.is_ok(), "nothing is contacted yet");
    /// let refused = PostgresStore::connect_lazy("postgres://eve@db.internal:port/eve", PostgresOptions::default());
    /// assert!(refused.unwrap_err().to_string().contains("cannot be used"));
    /// ```
    pub fn connect_lazy(url: &str, options: PostgresOptions) -> Result<Self, ConnectError> {
        let (config, server) = connect::config(url, &options)?;
        let target = format!("{server} (schema {})", options.schema);
        let tls = connect::tls(&config, &options, &server)?;
        let channel = listen::channel(&options.schema);
        let wake_ups = listen::WakeUps::new(config.clone(), connect::same(&tls), channel.clone(), target.clone());
        let pool = connect::pool(config, tls, &options, &server)?;
        let prepared = tokio::sync::OnceCell::new();
        Ok(PostgresStore { pool, options, target, server, prepared, channel, wake_ups, group: group::Group::default() })
    }

    /// Creates or migrates the schema, once per store.
    async fn prepare(&self) -> Result<(), ConnectError> {
        let (options, server) = (&self.options, &self.server);
        let prepare = || async {
            let mut client = self
                .pool
                .get()
                .await
                .map_err(|error| ConnectError::from_pool(error, server, options.connect_timeout))?;
            let failed = |error: tokio_postgres::Error| ConnectError::from_prepare(&error, &options.schema, server);
            let tx = client.transaction().await.map_err(failed)?;
            schema::prepare(&tx, &options.schema, server).await?;
            tx.commit().await.map_err(failed)
        };
        self.prepared.get_or_try_init(prepare).await.map(|_| ())
    }

    /// The server and schema this store uses, as errors name them (never with the password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The settings this store was opened with.
    pub fn options(&self) -> &PostgresOptions {
        &self.options
    }

    /// A connection from the pool, once the schema is prepared.
    async fn client(&self) -> Result<Client, Failure> {
        if self.prepared.get().is_none() {
            self.prepare().await.map_err(|error| match error {
                // Worth trying again: the server may come back.
                ConnectError::Unreachable { .. } => Failure::Store(StoreError::Backend(error.to_string())),
                error => Failure::Store(error.into()),
            })?;
        }
        self.pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => Failure::Pg(error),
            other => Failure::Store(StoreError::Backend(format!(
                "no connection to Postgres at {} within {:?} (PostgresOptions::connect_timeout): {other}",
                self.target, self.options.connect_timeout
            ))),
        })
    }

    /// `run` encoded, claimed by `owner` if there is one.
    fn encode_new_run(&self, run: &NewRun, owner: Option<&WorkerId>) -> Result<NewRunRow, StoreError> {
        let entry = run.started_entry();
        Ok(NewRunRow {
            entry: codec::encode_entry(&entry, self.options.max_entry_bytes)?,
            changes: IndexChanges::of(std::slice::from_ref(&entry)),
            owner: owner
                .map(|owner| (owner.clone(), run.created_at.saturating_add(self.options.creation_lease).as_millis())),
            id: run.id.clone(),
            workflow_id: run.workflow_id.clone(),
            tool: run.tool.clone(),
            created_at: run.created_at.as_millis(),
        })
    }

    fn encode_append(&self, run: &RunId, fence: Fence, append: &Append) -> Result<AppendRows, StoreError> {
        let limit = self.options.max_entry_bytes;
        let entries = append.entries.iter().map(|entry| codec::encode_entry(entry, limit)).collect::<Result<_, _>>()?;
        let what = "a notice to another run (PostgresOptions::max_entry_bytes)";
        let notices = append
            .notices
            .iter()
            .map(|notice| {
                Ok(writes::NoticeRow {
                    run: notice.run.clone(),
                    delivery_id: notice.delivery_id.clone(),
                    kind: notice.delivery.kind(),
                    op: notice.delivery.hook_op().map(|op| i64::from(op.0)),
                    delivery: codec::encode(&notice.delivery, what, limit)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(AppendRows {
            notices,
            run: run.clone(),
            fence,
            first_seq: append.first_seq,
            entries,
            consumed: writes::inbox_ids(&append.consumed),
            changes: IndexChanges::of(&append.entries),
            runs: append.runs.iter().map(|run| self.encode_new_run(run, None)).collect::<Result<_, _>>()?,
        })
    }

    /// Writes an append's encoded rows: in a group commit if it is one statement, on a client of
    /// its own otherwise, tried again after a lost connection.
    async fn write_append(&self, rows: Arc<AppendRows>) -> Result<(), StoreError> {
        let what = format!("an append to run {}", rows.run);
        // An append is guarded by its first sequence number, so running it again after a lost
        // connection can never write it twice: the second try is refused if the first got through.
        let (mut lost, mut tries) = (None, RETRIES + 1);
        if rows.is_one_statement() {
            match self.append_grouped(&rows).await {
                Grouped::Written => return Ok(()),
                Grouped::Refused(failure) => return Err(failure.into_store_error(&what, &self.target)),
                Grouped::NotWritten => {}
                Grouped::InDoubt(reason) => {
                    // The group's statement was this append's first try.
                    tries -= 1;
                    let target = &self.target;
                    lost = Some(Failure::Store(StoreError::Backend(format!(
                        "lost the connection to Postgres at {target} while committing {what} ({reason}); it may \
                         or may not have been written: read the run back before trying again"
                    ))));
                }
            }
        }
        for _ in 0..tries {
            let result = match self.client().await {
                Ok(mut client) => {
                    let result = writes::append(&mut client, &rows, &self.channel).await;
                    discard_if_broken(client, &result);
                    result
                }
                Err(failure) => Err(failure),
            };
            match (result, lost.take()) {
                (Ok(()), _) => return Ok(()),
                (Err(failure), _) if failure.broke_connection() => lost = Some(failure),
                (Err(Failure::Store(conflict @ StoreError::SeqConflict { .. })), Some(earlier)) => {
                    return self.settle(&rows, earlier, Some(conflict)).await;
                }
                (Err(failure), _) => return Err(failure.into_store_error(&what, &self.target)),
            }
        }
        match lost {
            Some(failure) => self.settle(&rows, failure, None).await,
            None => Err(StoreError::Backend(format!("{what} was tried {} times", RETRIES + 1))),
        }
    }

    /// Settles an append that may have been written before its connection was lost, by reading
    /// the journal back: "ok" if its entries are there, else `refusal` if there is one (the journal
    /// moved on without them), else an error naming the lost connection.
    async fn settle(&self, rows: &AppendRows, lost: Failure, refusal: Option<StoreError>) -> Result<(), StoreError> {
        let what = || format!("an append to run {}", rows.run);
        let mut found = Err(Failure::Store(StoreError::Backend(String::new())));
        for _ in 0..=RETRIES {
            found = match self.client().await {
                Ok(client) => {
                    let found = writes::landed(&client, rows).await;
                    discard_if_broken(client, &found);
                    found
                }
                Err(failure) => Err(failure),
            };
            if !found.as_ref().is_err_and(Failure::is_lost_connection) {
                break;
            }
        }
        match (found, refusal) {
            (Ok(Some(true)), _) => Ok(()),
            (Ok(_), Some(refusal)) => Err(refusal),
            // Not in the journal: nothing of it was committed.
            (Ok(_), None) => match lost {
                Failure::Pg(error) | Failure::InDoubt(error) => Err(codec::pg_error(&error, &what(), &self.target)),
                other => Err(other.into_store_error(&what(), &self.target)),
            },
            (Err(failure), _) if failure.is_lost_connection() => Err(lost.into_store_error(&what(), &self.target)),
            (Err(failure), _) => Err(failure.into_store_error(&what(), &self.target)),
        }
    }
}

/// Takes a connection whose request found it broken out of the pool, so no later request gets it.
fn discard_if_broken<T>(client: Client, result: &Result<T, Failure>) {
    if result.as_ref().is_err_and(Failure::broke_connection) {
        drop(deadpool_postgres::Object::take(client));
    }
}

/// Runs `$body` (an expression using the connection `$client`) and maps its failure to a
/// [`StoreError`] naming `$what`; runs it again on another connection, up to [`RETRIES`] times,
/// if the connection was found dead before anything was committed.
macro_rules! with_client {
    ($store:expr, $what:expr, |$client:ident| $body:expr) => {{
        let mut attempt = 0;
        loop {
            let result = match $store.client().await {
                #[allow(unused_mut)]
                Ok(mut $client) => {
                    let result = $body.await;
                    discard_if_broken($client, &result);
                    result
                }
                Err(failure) => Err(failure),
            };
            match result {
                Err(failure) if failure.is_lost_connection() && attempt < RETRIES => attempt += 1,
                result => break result.map_err(|failure| failure.into_store_error(&$what, &$store.target)),
            }
        }
    }};
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
        let row = self.encode_new_run(&run, Some(owner))?;
        with_client!(self, format!("creating run {}", row.id), |client| writes::create_run(&mut client, &row))
    }

    async fn claim(
        &self,
        run: &RunId,
        owner: &WorkerId,
        lease: Duration,
        now: Timestamp,
        from_seq: u64,
    ) -> Result<Claimed, StoreError> {
        let until = now.saturating_add(lease);
        let claimed = with_client!(self, format!("a claim of run {run}"), |client| writes::claim(
            &mut client,
            run,
            owner,
            until,
            now,
            from_seq
        ));
        leases::claimed(&claimed);
        claimed
    }

    async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
        with_client!(self, format!("releasing run {run}"), |client| writes::release(&client, run, fence, &self.channel))
    }

    async fn renew(&self, run: &RunId, fence: Fence, lease: Duration, now: Timestamp) -> Result<(), StoreError> {
        let until = now.saturating_add(lease);
        let renewed = with_client!(self, format!("renewing the lease of run {run}"), |client| writes::renew(
            &client, run, fence, until
        ));
        leases::lost_if_fenced(&renewed);
        renewed
    }

    fn append<'a>(&'a self, run: &'a RunId, fence: Fence, append: &'a mut Append) -> Commit<'a> {
        // Encoded now: the write needs nothing more of the batch, which stays the caller's.
        match self.encode_append(run, fence, append) {
            Ok(rows) => Commit::pending(async move {
                let written = self.write_append(Arc::new(rows)).await;
                leases::lost_if_fenced(&written);
                written
            }),
            Err(refused) => Commit::Done(Err(refused)),
        }
    }

    async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
        with_client!(self, format!("parking run {run}"), |client| writes::park(
            &mut client,
            run,
            fence,
            next_seq,
            &self.channel
        ))
    }

    async fn recovery(&self) -> Result<Recovery, StoreError> {
        with_client!(self, "reading what to recover", |client| reads::recovery(&mut client))
    }

    async fn claimable(&self, now: Timestamp, limit: usize) -> Result<Vec<RunId>, StoreError> {
        self.claimable_except(now, limit, &[]).await
    }

    async fn claimable_except(
        &self,
        now: Timestamp,
        limit: usize,
        passed_over: &[PassedOver],
    ) -> Result<Vec<RunId>, StoreError> {
        with_client!(self, "listing claimable runs", |client| reads::claimable(&mut client, now, limit, passed_over))
    }

    fn continue_as_new<'a>(
        &'a self,
        run: &'a RunId,
        fence: Fence,
        started: &'a mut Option<Entry>,
        keep_inbox: bool,
    ) -> Commit<'a> {
        let started = started.as_ref().expect("Store::continue_as_new is given the entry to continue with");
        let text = match codec::encode_entry(started, self.options.max_entry_bytes) {
            Ok(text) => text,
            Err(refused) => return Commit::Done(Err(refused)),
        };
        let continued = eve_runtime::store::kit::continued(std::slice::from_ref(started));
        let build = eve_runtime::store::kit::build(std::slice::from_ref(started)).cloned();
        Commit::pending(async move {
            with_client!(self, format!("continuing run {run} as new"), |client| writes::continue_as_new(
                &mut client,
                run,
                fence,
                (continued, &text, build.as_ref()),
                keep_inbox,
                &self.channel
            ))
        })
    }

    async fn deliver(
        &self,
        target: Target,
        delivery_id: Option<&str>,
        payload: DeliveryPayload,
    ) -> Result<Delivered, StoreError> {
        let (limit, limits) = (self.options.max_entry_bytes, self.options.inbox_limits);
        with_client!(self, "a delivery", |client| writes::deliver(
            &mut client,
            &target,
            delivery_id,
            &payload,
            (limit, limits),
            &self.channel
        ))
    }

    async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
        with_client!(self, format!("reading run {run}'s inbox"), |client| reads::inbox(&client, run))
    }

    async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
        with_client!(self, "looking up a hook", |client| reads::find_hook(&client, token.as_str()))
    }

    async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
        with_client!(self, "listing timers", |client| reads::timers(&client))
    }

    async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
        with_client!(self, format!("loading run {run}"), |client| reads::load(&mut client, run))
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
        with_client!(self, "listing runs", |client| reads::list_runs(&client, query))
    }

    async fn tail(&self, run: &RunId) -> Result<Option<(RunSummary, Entry)>, StoreError> {
        with_client!(self, format!("reading the end of run {run}"), |client| reads::tail(&client, run))
    }

    async fn ready(&self) -> Result<(), StoreError> {
        with_client!(self, "checking that the database answers", |client| reads::ping(&client))?;
        match self.wake_ups.not_listening() {
            Some(reason) => Err(StoreError::Backend(reason)),
            None => Ok(()),
        }
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn wake_ups(&self) -> Option<tokio::sync::broadcast::Receiver<eve_runtime::store::WakeUp>> {
        self.wake_ups.subscribe()
    }

    async fn read(&self, run: &RunId, at: Position, limit: usize) -> Result<Option<JournalPage>, StoreError> {
        with_client!(self, format!("reading run {run}'s journal"), |client| reads::page(&client, run, at, limit))
    }

    async fn watch(&self, run: &RunId) -> Result<Option<Watch>, StoreError> {
        // Listening first: a commit the mark makes notify is then heard.
        let Some(commits) = self.wake_ups.subscribe_commits() else { return Ok(None) };
        with_client!(self, format!("watching run {run}"), |client| writes::watch(&client, run))?;
        Ok(Some(Watch::new(commits, writes::WATCH_FOR / 3)))
    }
}
