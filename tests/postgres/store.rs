//! The Postgres store passes the whole store conformance suite and the shared-store cases, each
//! test in a schema of its own; and bad input (a malformed URL, an unreachable server, a refused
//! login, a missing database or privilege, a schema from a newer eve, a connection lost midway, a
//! server crash) gets a clear typed error and loses nothing acknowledged.
//!
//! The tests use the server in `EVE_TEST_DATABASE_URL`, or start a throwaway cluster themselves
//! with `scripts/postgres.sh` (see `cluster.rs`); without either they fail, saying why.

use std::time::Duration;

// The suites are eve-runtime's exported macros, which the facade does not re-export.
use eve_runtime::{claims_conformance_suite, conformance_suite, shared_conformance_suite};
use eve_tools::Timestamp;
use eve_tools::journal::{Entry, Op, RecordKind};
use eve_tools::store::{
    Append, Created, Delivered, Delivery, DeliveryPayload, Fence, NewRun, Notice, PostgresConnectError,
    PostgresOptions, PostgresStore, RunQuery, Store, StoreError, Target, WakeUp, WorkerId,
};
use serde_json::json;

use crate::cluster::{self, Cluster, Schema};

async fn fixture() -> (PostgresStore, Schema) {
    let schema = Schema::new().await;
    let store = schema.store().await;
    (store, schema)
}

conformance_suite!(postgres, fixture());
claims_conformance_suite!(postgres_claims, fixture());
shared_conformance_suite!(postgres_shared, fixture());

/// Creates `run` for `worker` and returns the fence of its claim.
async fn created(store: &PostgresStore, run: &NewRun, worker: &WorkerId) -> Fence {
    let Ok(Created::New(fence)) = store.create_run(run.clone(), worker).await else { panic!("{} is created", run.id) };
    fence
}

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: id.parse().expect("a valid run id"),
        workflow_id: "postgres::workflow".into(),
        tool: "postgres_tool".into(),
        input: json!({"city": "Zürich"}),
        created_at: Timestamp::from_millis(1_000),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    }
}

fn record(op: u32) -> Entry {
    Entry::Recorded { op: Op(op), kind: RecordKind::Random, value: json!(op).into() }
}

fn append_of(first_seq: u64, entries: Vec<Entry>) -> Append {
    Append { first_seq, entries, consumed: Vec::new(), notices: Vec::new(), runs: Vec::new() }
}

/// The URL of the shared server with its password (and user, or database) replaced.
fn with(url: &str, user: Option<&str>, password: &str, database: Option<&str>) -> String {
    let config: tokio_postgres::Config = url.parse().expect("the test URL parses");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = user.map(str::to_owned).or(config.get_user().map(str::to_owned)).unwrap_or_default();
    let database = database.map(str::to_owned).or(config.get_dbname().map(str::to_owned)).unwrap_or_default();
    format!("postgres://{user}:{password}@{host}:{port}/{database}")
}

async fn connect_error(url: &str, options: PostgresOptions) -> PostgresConnectError {
    match PostgresStore::connect_with(url, options).await {
        Ok(store) => panic!("connecting should fail, but a store opened: {store:?}"),
        Err(error) => error,
    }
}

// ---- Bad input -----------------------------------------------------------------------------------

/// A URL that does not parse is refused before anything is contacted, without repeating it (it
/// may hold a password).
#[tokio::test]
async fn a_malformed_url_is_refused_without_repeating_it() {
    for url in ["postgres://eve:hunter2@localhost:notaport/eve", "host=localhost password=hunter2 port=x", ""] {
        let error = connect_error(url, PostgresOptions::default()).await;
        assert!(matches!(error, PostgresConnectError::InvalidUrl { .. }), "{url:?}: got {error:?}");
        assert!(!error.to_string().contains("hunter2"), "the password is not repeated: {error}");
    }
    // Another database's URL is named as such, not as a parse error deep inside it.
    let error = connect_error("mysql://eve:hunter2@localhost/eve", PostgresOptions::default()).await;
    let message = error.to_string();
    assert!(message.contains("it is a `mysql://` URL, and eve's shared store is PostgreSQL"), "{message}");
    assert!(
        message.contains("postgres://user:password@host:port/database") && !message.contains("hunter2"),
        "{message}"
    );
    let options = PostgresOptions { schema: "Robert'); DROP TABLE students;--".into(), ..PostgresOptions::default() };
    let error = connect_error("postgres://eve@localhost/eve", options).await;
    assert!(matches!(error, PostgresConnectError::InvalidUrl { ref reason } if reason.contains("schema")), "{error}");
}

/// Nothing listening at the address: `Unreachable`, naming the host and port.
#[tokio::test]
async fn an_unreachable_server_is_named() {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a port").port();
    let url = format!("postgres://eve:hunter2@127.0.0.1:{port}/eve");
    let options = PostgresOptions { connect_timeout: Duration::from_secs(2), ..PostgresOptions::default() };
    let error = connect_error(&url, options).await;
    assert!(matches!(error, PostgresConnectError::Unreachable { .. }), "got {error:?}");
    let message = error.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "the message names the server: {message}");
    assert!(!message.contains("hunter2"), "the password is not shown: {message}");
    assert!(matches!(StoreError::from(error), StoreError::Open { .. }), "it converts to StoreError::Open");
}

/// A wrong password and an unknown user are both a refused login, saying what to check and never
/// showing the password.
#[tokio::test]
async fn a_refused_login_says_so() {
    let server = cluster::server_url();
    for url in [with(server, None, "wrong-password", None), with(server, Some("nobody_here"), "x-password", None)] {
        let error = connect_error(&url, PostgresOptions::default()).await;
        assert!(matches!(error, PostgresConnectError::LoginRefused { .. }), "got {error:?}");
        let message = error.to_string();
        assert!(message.contains("refused the login"), "{message}");
        assert!(!message.contains("wrong-password") && !message.contains("x-password"), "{message}");
    }
}

/// A database that does not exist is named as such.
#[tokio::test]
async fn a_missing_database_is_named() {
    let server = cluster::server_url();
    let password =
        server.parse::<tokio_postgres::Config>().ok().and_then(|config| config.get_password().map(<[u8]>::to_vec));
    let password = String::from_utf8(password.unwrap_or_default()).expect("a UTF-8 password");
    let error =
        connect_error(&with(server, None, &password, Some("no_such_database")), PostgresOptions::default()).await;
    assert!(matches!(error, PostgresConnectError::NoDatabase { .. }), "got {error:?}");
    assert!(error.to_string().contains("no_such_database"), "{error}");
}

/// A user that may neither create a schema nor use an existing one is told what to grant.
#[tokio::test]
async fn a_user_without_privileges_is_told_what_to_grant() {
    let schema = Schema::new().await;
    let admin = schema.admin().await;
    let role = format!("{}_role", schema.name);
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'"))
        .await
        .expect("the role can be created");
    let url = with(schema.url(), Some(&role), &format!("pw-{role}"), None);
    let error = connect_error(&url, schema.options()).await;
    assert!(matches!(error, PostgresConnectError::Privileges { .. }), "got {error:?}");
    assert!(error.to_string().contains("grant it CREATE"), "{error}");
    admin.batch_execute(&format!("DROP ROLE {role}")).await.expect("the role can be dropped");
}

/// `sslmode=require` in a build without the `postgres-tls` feature (this crate builds eve-tools
/// without it) is refused up front, saying which feature to enable.
#[tokio::test]
async fn tls_without_the_feature_is_refused_clearly() {
    let error = connect_error("postgres://eve:pw@localhost/eve?sslmode=require", PostgresOptions::default()).await;
    assert!(matches!(error, PostgresConnectError::Tls { .. }), "got {error:?}");
    assert!(error.to_string().contains("postgres-tls"), "{error}");
}

/// A schema written by a newer eve is refused with both versions named, and left as it was.
#[tokio::test]
async fn a_newer_schema_is_refused_untouched() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let Ok(Created::New(_)) = store.create_run(new_run("kept"), &WorkerId("w".into())).await else { panic!("created") };
    drop(store);
    let admin = schema.admin().await;
    admin.batch_execute("UPDATE schema_version SET version = 99, written_by = 'eve from the future'").await.unwrap();
    let error = connect_error(&schema.store_url(), schema.options()).await;
    match &error {
        PostgresConnectError::NewerSchema { found: 99, supported: 5, .. } => {}
        other => panic!("expected NewerSchema 99 > 5, got {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("99") && message.contains("nothing was changed"), "{message}");
    let row = admin.query_one("SELECT version, written_by, (SELECT count(*) FROM runs) FROM schema_version", &[]).await;
    let row = row.expect("the schema is still there");
    assert_eq!(
        (row.get::<_, i32>(0), row.get::<_, String>(1), row.get::<_, i64>(2)),
        (99, "eve from the future".into(), 1)
    );
}

/// A schema of version 1 (before the runs list was indexed by tool, before runs numbered their
/// histories, and before they kept their build's fingerprint) is migrated when a worker opens it:
/// its runs stay, the index appears, a run that had continued as new knows its history's number,
/// and an unfinished run keeps the fingerprint its journal records.
#[tokio::test]
async fn a_version_1_schema_is_migrated_in_place() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let Ok(Created::New(_)) = store.create_run(new_run("kept"), &WorkerId("w".into())).await else { panic!("created") };
    drop(store);
    let admin = schema.admin().await;
    admin
        .batch_execute(
            "DROP INDEX runs_by_tool; DROP TABLE journal_previous;
             ALTER TABLE runs DROP COLUMN continued, DROP COLUMN followed_until, DROP COLUMN fingerprint, DROP COLUMN version;
             UPDATE journal SET entry = jsonb_set(entry::jsonb, '{run_started,continued}', '2')::text WHERE seq = 0;
             UPDATE journal SET entry = jsonb_set(entry::jsonb, '{run_started,build}',
                 '{\"fingerprint\": \"feedc0de00000000\", \"version\": \"0.1.0\"}')::text WHERE seq = 0;
             UPDATE schema_version SET version = 1",
        )
        .await
        .unwrap();
    let store = schema.store().await;
    let listed = store.list_runs(&RunQuery::newest(10).tool("postgres_tool")).await.expect("the runs list");
    assert_eq!(listed.runs.len(), 1, "the run is still there, listed by its tool");
    let build = listed.runs[0].build.as_ref().map(|build| (build.fingerprint.as_str(), build.version.as_str()));
    assert_eq!(build, Some(("feedc0de00000000", "0.1.0")), "listed with its build");
    let page = store
        .read(&listed.runs[0].id, eve_tools::journal::Position::START, 1)
        .await
        .expect("the journal reads")
        .expect("the run exists");
    assert_eq!(page.continued, 2, "the run's history number is read from its first entry");
    let fingerprint: Option<String> = admin.query_one("SELECT fingerprint FROM runs", &[]).await.unwrap().get(0);
    assert_eq!(fingerprint.as_deref(), Some("feedc0de00000000"), "the run's build is read from its first entry");
    let version: Option<String> = admin.query_one("SELECT version FROM runs", &[]).await.unwrap().get(0);
    assert_eq!(version.as_deref(), Some("0.1.0"), "with its version");
    let version: i32 = admin.query_one("SELECT version FROM schema_version", &[]).await.unwrap().get(0);
    assert_eq!(version, 5);
    let index = admin
        .query_opt("SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'runs_by_tool'", &[])
        .await
        .unwrap();
    assert!(index.is_some(), "the migration made the index");
}

/// A finished run is released, as the schema says: its row keeps no `owner` and no
/// `lease_until`, whether it completed, failed or was cancelled.
#[tokio::test]
async fn a_finished_run_holds_no_claim() {
    let (store, schema) = fixture().await;
    let worker = WorkerId("w".into());
    let endings = [
        ("completes", Entry::RunCompleted { output: json!("done") }),
        ("fails", Entry::RunFailed { failure: eve_tools::journal::RunFailure::Tool { message: "broken".into() } }),
        ("is-cancelled", Entry::RunCancelled {}),
    ];
    let admin = schema.admin().await;
    for (id, ending) in endings {
        let run = new_run(id);
        let fence = created(&store, &run, &worker).await;
        let held = "SELECT owner IS NOT NULL, lease_until IS NOT NULL, status FROM runs WHERE id = $1";
        let row = admin.query_one(held, &[&id]).await.unwrap();
        assert_eq!((row.get::<_, bool>(0), row.get::<_, bool>(1)), (true, true), "an active run is held");
        store.append(&run.id, fence, &mut append_of(1, vec![record(0), ending])).await.expect("the run finishes");
        let row = admin.query_one(held, &[&id]).await.unwrap();
        let (owner, lease, status): (bool, bool, String) = (row.get(0), row.get(1), row.get(2));
        assert_ne!(status, "active", "{id}");
        assert_eq!((owner, lease), (false, false), "run {id} ({status}) is released");
    }
}

/// Many workers opening one fresh schema at once: the advisory lock lets one create the tables
/// and the others find them ready; every one of them works.
#[tokio::test]
async fn workers_starting_at_once_create_the_schema_once() {
    let schema = Schema::new().await;
    let url = schema.store_url();
    let opened = futures::future::join_all((0..6).map(|_| PostgresStore::connect_with(&url, schema.options()))).await;
    let stores: Vec<PostgresStore> =
        opened.into_iter().map(|store| store.unwrap_or_else(|error| panic!("every worker opens: {error}"))).collect();
    for (index, store) in stores.iter().enumerate() {
        let created = store.create_run(new_run(&format!("run-{index}")), &WorkerId(format!("w{index}"))).await;
        assert!(matches!(created, Ok(Created::New(_))), "worker {index} can create a run: {created:?}");
    }
    let listed = stores[0].list_runs(&RunQuery::newest(100)).await.expect("listing succeeds").runs;
    assert_eq!(listed.len(), 6, "every worker sees every run");
    let admin = schema.admin().await;
    let version: i32 = admin.query_one("SELECT version FROM schema_version", &[]).await.unwrap().get(0);
    assert_eq!(version, 5);
}

/// The pid of the schema's store connection waiting for a lock, once there is one. (Each call
/// reads `pg_stat_activity` in a transaction of its own: a transaction sees one snapshot of it.)
async fn waiting_backend(admin: &tokio_postgres::Client, schema: &Schema) -> i32 {
    let sql = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'";
    for _ in 0..500 {
        if let Some(row) = admin.query_opt(sql, &[&schema.name]).await.expect("pg_stat_activity reads") {
            return row.get(0);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no eve connection came to wait for the lock");
}

/// A connection lost in the middle of an append's transaction (its backend terminated while it
/// waits for a row lock) commits nothing: the store runs the append again on a fresh connection,
/// and when the connection is lost every time, reports a transient error naming the cause. Either
/// way the journal holds every acknowledged entry once and nothing else, and the store goes on.
#[tokio::test]
async fn a_connection_lost_mid_transaction_commits_nothing() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let worker = WorkerId("w".into());
    let run = new_run("cut-off");
    let fence = created(&store, &run, &worker).await;
    store.append(&run.id, fence, &mut append_of(1, vec![record(0)])).await.expect("the first append is acknowledged");

    let (mut admin, watcher) = (schema.admin().await, schema.admin().await);
    for kills in [1, 4] {
        let holder = admin.transaction().await.expect("a transaction");
        holder
            .execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&run.id.as_str()])
            .await
            .expect("the row locks");
        // The first round's append lands at 2; the second's, at 3, never does.
        let mut second = if kills == 1 { append_of(2, vec![record(1)]) } else { append_of(3, vec![record(9)]) };
        let appending = store.append(&run.id, fence, &mut second);
        let killing = async {
            for _ in 0..kills {
                let pid = waiting_backend(&watcher, &schema).await;
                watcher.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.expect("the backend is terminated");
                // Wait until it is gone, so the next look finds the retry's backend, not this one.
                let alive = "SELECT 1 FROM pg_stat_activity WHERE pid = $1";
                while watcher.query_opt(alive, &[&pid]).await.expect("pg_stat_activity reads").is_some() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            holder.rollback().await.expect("the lock is let go");
        };
        let (result, ()) = tokio::join!(appending, killing);
        match kills {
            1 => result.expect("a single lost connection is retried on a fresh one"),
            _ => {
                let error = result.expect_err("a connection lost at every try is reported");
                assert!(error.is_transient(), "a lost connection is worth retrying: {error:?}");
                let message = error.to_string();
                assert!(
                    message.contains("lost the connection") && message.contains("nothing of it was committed"),
                    "{message}"
                );
                assert!(message.contains("cut-off"), "the message names the run: {message}");
            }
        }
    }
    let entries = store.load(&run.id).await.expect("load succeeds").expect("the run exists").entries;
    assert_eq!(entries, vec![run.started_entry(), record(0), record(1)], "each acknowledged entry once, nothing else");
    store.append(&run.id, fence, &mut append_of(3, vec![record(2)])).await.expect("the store goes on");
}

/// A statement that waits past `PostgresOptions::statement_timeout` (here on a row lock another
/// session holds) is cancelled by the server: the append fails with a transient error naming the
/// timeout and writes nothing.
#[tokio::test]
async fn a_statement_past_its_timeout_is_cancelled_and_writes_nothing() {
    let schema = Schema::new().await;
    let options = PostgresOptions { statement_timeout: Duration::from_millis(300), ..schema.options() };
    let store = PostgresStore::connect_with(&schema.store_url(), options).await.expect("the store opens");
    let run = new_run("slow");
    let fence = created(&store, &run, &WorkerId("w".into())).await;
    let mut admin = schema.admin().await;
    let holder = admin.transaction().await.expect("a transaction");
    holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&run.id.as_str()]).await.expect("the row locks");
    let error =
        store.append(&run.id, fence, &mut append_of(1, vec![record(0)])).await.expect_err("the append times out");
    holder.rollback().await.expect("the lock is let go");
    assert!(error.is_transient(), "{error:?}");
    assert!(error.to_string().contains("statement timeout"), "the message names the timeout: {error}");
    assert_eq!(store.load(&run.id).await.unwrap().unwrap().entries.len(), 1, "nothing was written");
    store.append(&run.id, fence, &mut append_of(1, vec![record(0)])).await.expect("the store goes on");
}

/// After the server crashes and restarts (`pg_ctl restart -m immediate`: no checkpoint, recovery
/// from the WAL), everything acknowledged is there, and the same store, whose pooled connections
/// all died, goes on working without being reopened.
#[tokio::test]
async fn acknowledged_writes_survive_a_server_crash() {
    // Held so that the figures test, which measures alone, does not run beside this cluster's work.
    let _turn = Schema::new().await;
    let cluster =
        Cluster::start().unwrap_or_else(|reason| panic!("this test starts its own cluster, which failed: {reason}"));
    let options = PostgresOptions { pool_size: 4, ..PostgresOptions::default() };
    let store = PostgresStore::connect_with(&cluster.url, options).await.expect("the store opens");
    let worker = WorkerId("w".into());
    let mut journals = Vec::new();
    for index in 0..8 {
        let run = new_run(&format!("durable-{index}"));
        let fence = created(&store, &run, &worker).await;
        let hook = Entry::HookCreated {
            op: Op(1),
            token_hash: format!("hash-{index}"),
            nonce: None,
            conflict: false,
            webhook: None,
        };
        let added = vec![record(0), hook, Entry::TimerScheduled { op: Op(2), deadline: Timestamp::from_millis(9_000) }];
        store.append(&run.id, fence, &mut append_of(1, added.clone())).await.expect("acknowledged");
        let delivered = store
            .deliver(
                Target::Run(run.id.clone()),
                Some("d"),
                DeliveryPayload::Run(eve_tools::store::Delivery::Cancel { reason: "x".into(), keep_output: false }),
            )
            .await;
        assert!(matches!(delivered, Ok(Delivered::Accepted { .. })), "{delivered:?}");
        let mut journal = vec![run.started_entry()];
        journal.extend(added);
        journals.push((run.id, fence, journal));
    }
    cluster.restart("immediate");
    for (run, fence, journal) in &journals {
        let loaded = store.load(run).await.expect("the store reconnects").expect("the run survived");
        assert_eq!(&loaded.entries, journal, "run {run}'s journal survived whole");
        assert_eq!(store.inbox(run).await.expect("inbox reads").len(), 1, "its delivery survived");
        store
            .append(run, *fence, &mut append_of(4, vec![Entry::TimerFired { op: Op(2) }]))
            .await
            .expect("appends go on");
    }
    assert_eq!(store.timers().await.expect("timers read").len(), 0, "every timer fired");
}

// ---- Group commit --------------------------------------------------------------------------------

/// What one append of a group-commit round ended with, by what it was expected to end with.
type Answered = Result<(Expect, Result<(), StoreError>), tokio::task::JoinError>;

/// What a group-commit round expects of one run's append.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Written,
    Fenced,
    SeqConflict,
}

/// Appends that many runs make at once share commits, and each is still checked on its own: in
/// one round of 60 concurrent appends (held back behind a table lock until all are queued), those
/// of runs another worker took are refused `Fenced`, those with a stale sequence number
/// `SeqConflict`, and the rest are written, consuming their inbox items, all in a handful of
/// transactions rather than 60. Then ten more rounds with nothing held back, every journal checked
/// entry by entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_made_at_once_share_commits_and_each_is_checked_on_its_own() {
    let (store, schema) = fixture().await;
    let store = std::sync::Arc::new(store);
    let (worker, thief) = (WorkerId("w".into()), WorkerId("thief".into()));
    let mut runs = Vec::new();
    for index in 0..60 {
        let run = new_run(&format!("group-{index:02}"));
        let fence = created(&store, &run, &worker).await;
        let expect = match index % 6 {
            0 => {
                // Another worker takes it once the creator's lease has run out.
                let later = Timestamp::from_millis(1_000_000_000);
                store.claim(&run.id, &thief, Duration::from_secs(60), later, 1).await.expect("the thief claims it");
                Expect::Fenced
            }
            1 => Expect::SeqConflict,
            _ => Expect::Written,
        };
        let cancel = DeliveryPayload::Run(Delivery::Cancel { reason: "stop".into(), keep_output: false });
        let item = match store.deliver(Target::Run(run.id.clone()), None, cancel).await {
            Ok(Delivered::Accepted { id, .. }) => id,
            other => panic!("the delivery is accepted: {other:?}"),
        };
        runs.push((run, fence, expect, item));
    }
    let round = |first_seq: u64, consume: bool| {
        let store = std::sync::Arc::clone(&store);
        let appends = runs.iter().map(move |(run, fence, expect, item)| {
            let store = std::sync::Arc::clone(&store);
            let first_seq = if *expect == Expect::SeqConflict { first_seq + 5 } else { first_seq };
            let mut append = append_of(first_seq, vec![record(first_seq as u32), record(1_000 + first_seq as u32)]);
            if consume {
                append.consumed = vec![*item];
            }
            let (id, fence, expect) = (run.id.clone(), *fence, *expect);
            tokio::spawn(async move { (expect, store.append(&id, fence, &mut append).await) })
        });
        futures::future::join_all(appends.collect::<Vec<_>>())
    };
    let check = |results: Vec<Answered>| {
        for result in results {
            match result.expect("the append's task ends") {
                (Expect::Written, Ok(())) => {}
                (Expect::Fenced, Err(StoreError::Fenced { held: 1, current: 2, .. })) => {}
                (Expect::SeqConflict, Err(StoreError::SeqConflict { .. })) => {}
                other => panic!("an append got the wrong answer: {other:?}"),
            }
        }
    };

    // Round 1, held back behind a lock on the journal until every append has queued.
    let mut admin = schema.admin().await;
    let holder = admin.transaction().await.expect("a transaction");
    holder.batch_execute("LOCK TABLE journal IN EXCLUSIVE MODE").await.expect("the journal locks");
    let first = tokio::spawn(round(1, true));
    tokio::time::sleep(Duration::from_millis(500)).await;
    holder.rollback().await.expect("the lock is let go");
    check(first.await.expect("the round ends"));
    let watcher = schema.admin().await;
    let sql = "SELECT count(DISTINCT xmin::text) FROM journal WHERE seq = 1";
    let commits: i64 = watcher.query_one(sql, &[]).await.expect("the journal reads").get(0);
    assert!((1..=5).contains(&commits), "40 appends at once should share a few commits, took {commits}");

    for first_seq in (3..23).step_by(2) {
        check(round(first_seq, false).await);
    }
    for (run, _, expect, item) in &runs {
        let entries = store.load(&run.id).await.expect("load succeeds").expect("the run exists").entries;
        let inbox = store.inbox(&run.id).await.expect("the inbox reads");
        match expect {
            Expect::Written => {
                let mut expected = vec![run.started_entry()];
                for seq in (1..23).step_by(2) {
                    expected.extend([record(seq), record(1_000 + seq)]);
                }
                assert_eq!(entries, expected, "run {}: each entry once, in order", run.id);
                assert!(inbox.is_empty(), "run {}: its item was consumed with its first append", run.id);
            }
            _ => {
                assert_eq!(entries, vec![run.started_entry()], "run {}: a refused append writes nothing", run.id);
                assert_eq!(inbox.iter().map(|waiting| waiting.id).collect::<Vec<_>>(), vec![*item], "{}", run.id);
            }
        }
    }
}

/// Grouped appends racing every other write to the same runs: while one worker appends 30 rounds
/// to 40 runs at once, another worker claims runs from under it at random moments and deliveries
/// arrive for all of them. For every run the answers are some writes, then only `Fenced` (never a
/// write after its run was taken, never a lost or doubled entry), its journal holds exactly the
/// entries acknowledged, and its inbox every delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grouped_appends_race_claims_and_deliveries() {
    let (store, _schema) = fixture().await;
    let store = std::sync::Arc::new(store);
    let (worker, thief) = (WorkerId("w".into()), WorkerId("thief".into()));
    let mut runs = Vec::new();
    for index in 0..40 {
        let run = new_run(&format!("race-{index:02}"));
        let fence = created(&store, &run, &worker).await;
        runs.push((run, fence));
    }
    let appending = runs.iter().map(|(run, fence)| {
        let (store, id, fence) = (std::sync::Arc::clone(&store), run.id.clone(), *fence);
        tokio::spawn(async move {
            let mut answers = Vec::new();
            let mut next = 1;
            for round in 0..30_u32 {
                let answer = store.append(&id, fence, &mut append_of(next, vec![record(round)])).await;
                if answer.is_ok() {
                    next += 1;
                }
                answers.push(answer);
            }
            answers
        })
    });
    let appending = futures::future::join_all(appending.collect::<Vec<_>>());
    let stealing = async {
        // Every third run, each at its own moment while the rounds go on.
        for (run, _) in runs.iter().step_by(3) {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let later = Timestamp::from_millis(1_000_000_000);
            store.claim(&run.id, &thief, Duration::from_secs(60), later, 0).await.expect("the thief claims it");
        }
    };
    let delivering = async {
        for round in 0..3 {
            for (run, _) in &runs {
                let cancel = DeliveryPayload::Run(Delivery::Cancel { reason: format!("r{round}"), keep_output: false });
                let delivered = store.deliver(Target::Run(run.id.clone()), None, cancel).await.expect("delivered");
                assert!(matches!(delivered, Delivered::Accepted { .. }), "{delivered:?}");
            }
        }
    };
    let (answers, (), ()) = tokio::join!(appending, stealing, delivering);
    for ((run, _), answers) in runs.iter().zip(answers) {
        let answers = answers.expect("the appends' task ends");
        let written = answers.iter().take_while(|answer| answer.is_ok()).count();
        for answer in &answers[written..] {
            assert!(
                matches!(answer, Err(StoreError::Fenced { .. })),
                "run {}: after a refusal, only Fenced: {answer:?}",
                run.id
            );
        }
        let entries = store.load(&run.id).await.expect("load succeeds").expect("the run exists").entries;
        let mut expected = vec![run.started_entry()];
        expected.extend((0..written as u32).map(record));
        assert_eq!(entries, expected, "run {}: exactly the acknowledged entries", run.id);
        assert_eq!(store.inbox(&run.id).await.expect("the inbox reads").len(), 3, "run {}: every delivery", run.id);
    }
}

/// A caller whose append leads a group and is dropped midway (here while the statement waits on a
/// row lock another session holds) hands the lead on: the appends queued behind it are written at
/// once, not after the lock is let go, and not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dropped_midway_hands_the_lead_on() {
    let (store, schema) = fixture().await;
    let store = std::sync::Arc::new(store);
    let worker = WorkerId("w".into());
    let mut fences = Vec::new();
    for name in ["stuck", "next-a", "next-b"] {
        let run = new_run(name);
        let fence = created(&store, &run, &worker).await;
        fences.push((run, fence));
    }
    let mut admin = schema.admin().await;
    let holder = admin.transaction().await.expect("a transaction");
    let (stuck, stuck_fence) = fences[0].clone();
    holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&stuck.id.as_str()]).await.expect("the row locks");
    let leader = {
        let store = std::sync::Arc::clone(&store);
        tokio::spawn(async move { store.append(&stuck.id, stuck_fence, &mut append_of(1, vec![record(0)])).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued: Vec<_> = fences[1..]
        .iter()
        .map(|(run, fence)| {
            let (store, id, fence) = (std::sync::Arc::clone(&store), run.id.clone(), *fence);
            tokio::spawn(async move { store.append(&id, fence, &mut append_of(1, vec![record(1)])).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    leader.abort();
    for append in queued {
        let written = tokio::time::timeout(Duration::from_secs(10), append).await;
        written.expect("a queued append is written while the lock is held").expect("its task ends").expect("written");
    }
    for (run, _) in &fences[1..] {
        let entries = store.load(&run.id).await.expect("load succeeds").expect("the run exists").entries;
        assert_eq!(entries, vec![run.started_entry(), record(1)]);
    }
    holder.rollback().await.expect("the lock is let go");
}

// ---- Wake-ups and lazy connections ---------------------------------------------------------------

/// The next wake-up a subscriber hears, within five seconds.
async fn heard(wake_ups: &mut tokio::sync::broadcast::Receiver<WakeUp>) -> WakeUp {
    match tokio::time::timeout(Duration::from_secs(5), wake_ups.recv()).await {
        Ok(Ok(wake_up)) => wake_up,
        other => panic!("a wake-up should arrive within 5 s, got {other:?}"),
    }
}

/// Nothing more is heard for a while (200 ms).
async fn silent(wake_ups: &mut tokio::sync::broadcast::Receiver<WakeUp>) {
    let next = tokio::time::timeout(Duration::from_millis(200), wake_ups.recv()).await;
    assert!(next.is_err(), "no wake-up was expected, got {next:?}");
}

/// Every write that gives a run something to do wakes the workers listening on the schema, from
/// any store: a delivery, a notice to a parent, a released claim, and a park that finds a delivery
/// waiting; a park with nothing waiting, and a refused delivery, wake nobody. A store on another
/// schema hears none of it.
#[tokio::test]
async fn writes_that_give_a_run_work_wake_the_listeners() {
    let (schema, other) = (Schema::new().await, Schema::new().await);
    let (listener, writer, elsewhere) = (schema.store().await, schema.store().await, other.store().await);
    let mut wake_ups = listener.wake_ups().expect("a shared store has wake-ups");
    let mut unrelated = elsewhere.wake_ups().expect("a shared store has wake-ups");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Missed, "the first connection asks for a look around");
    assert_eq!(heard(&mut unrelated).await, WakeUp::Missed);
    let worker = WorkerId("w".into());
    let (parent, child) = (new_run("parent"), new_run("child"));
    let Ok(Created::New(parent_fence)) = writer.create_run(parent.clone(), &worker).await else { panic!("created") };
    let Ok(Created::New(child_fence)) = writer.create_run(child.clone(), &worker).await else { panic!("created") };
    silent(&mut wake_ups).await;

    writer.park(&parent.id, parent_fence, 1).await.expect("parks");
    silent(&mut wake_ups).await;
    let cancel = |reason: &str| DeliveryPayload::Run(Delivery::Cancel { reason: reason.into(), keep_output: false });
    let delivered = writer.deliver(Target::Run(parent.id.clone()), Some("c"), cancel("stop")).await;
    assert!(matches!(delivered, Ok(Delivered::Accepted { .. })), "{delivered:?}");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Run(parent.id.clone()), "a delivery wakes its run");
    let repeated = writer.deliver(Target::Run(parent.id.clone()), Some("c"), cancel("stop")).await;
    assert!(matches!(repeated, Ok(Delivered::Duplicate { .. })), "{repeated:?}");
    silent(&mut wake_ups).await;

    let notice = Notice {
        run: parent.id.clone(),
        delivery_id: "child:1".into(),
        delivery: Delivery::Hook { op: Op(3), payload: json!("done") },
    };
    let mut append = Append { notices: vec![notice], ..append_of(1, vec![record(0)]) };
    writer.append(&child.id, child_fence, &mut append).await.expect("the child appends");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Run(parent.id.clone()), "a notice wakes the parent");

    writer.park(&child.id, child_fence, 2).await.expect("parks");
    silent(&mut wake_ups).await;
    let claimed = writer.claim(&parent.id, &worker, Duration::from_secs(30), Timestamp::from_millis(2_000), 0).await;
    let fence = claimed.expect("the parent is claimed").fence;
    writer.park(&parent.id, fence, 1).await.expect("parks with deliveries waiting");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Run(parent.id.clone()), "a park with work waiting wakes it");
    let claimed = writer.claim(&child.id, &worker, Duration::from_secs(30), Timestamp::from_millis(2_000), 0).await;
    writer.release(&child.id, claimed.expect("the child is claimed").fence).await.expect("releases");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Run(child.id.clone()), "a released claim wakes the run");
    silent(&mut unrelated).await;
}

/// When the listening connection is lost (its backend terminated), the store opens another, says
/// that wake-ups may have been missed, and goes on delivering them.
#[tokio::test]
async fn a_lost_listening_connection_is_reopened_and_reported() {
    let schema = Schema::new().await;
    let store = schema.store().await;
    let mut wake_ups = store.wake_ups().expect("a shared store has wake-ups");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Missed);
    let admin = schema.admin().await;
    let listening = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = $1 AND query LIKE 'LISTEN%'";
    let terminated = admin.query(listening, &[&schema.name]).await.expect("pg_stat_activity reads");
    assert_eq!(terminated.len(), 1, "one connection listens");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Missed, "the new connection says wake-ups may have been lost");
    let run = new_run("after");
    let fence = created(&store, &run, &WorkerId("w".into())).await;
    store.release(&run.id, fence).await.expect("releases");
    assert_eq!(heard(&mut wake_ups).await, WakeUp::Run(run.id), "wake-ups flow again");
}

/// A lazily connected store checks its URL at once and reports what the first request finds: a
/// refused login as `StoreError::Open` naming the cause, an unreachable server as a transient
/// error (the next request tries again).
#[tokio::test]
async fn a_lazy_store_reports_connection_problems_on_first_use() {
    let malformed = PostgresStore::connect_lazy("postgres://eve:pw@localhost:port/eve", PostgresOptions::default());
    assert!(matches!(malformed, Err(PostgresConnectError::InvalidUrl { .. })), "{malformed:?}");

    let store = PostgresStore::connect_lazy(
        &with(cluster::server_url(), None, "wrong-password", None),
        PostgresOptions::default(),
    )
    .expect("nothing is contacted yet");
    let error = store.list_runs(&RunQuery::newest(1)).await.expect_err("the login is refused");
    assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
    assert!(
        error.to_string().contains("refused the login") && !error.to_string().contains("wrong-password"),
        "{error}"
    );

    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a port").port();
    let options = PostgresOptions { connect_timeout: Duration::from_secs(2), ..PostgresOptions::default() };
    let store = PostgresStore::connect_lazy(&format!("postgres://eve:pw@127.0.0.1:{port}/eve"), options).unwrap();
    let error = store.list_runs(&RunQuery::newest(1)).await.expect_err("nothing listens");
    assert!(error.is_transient() && error.to_string().contains(&format!("127.0.0.1:{port}")), "{error:?}");

    let schema = Schema::new().await;
    let store = PostgresStore::connect_lazy(&schema.store_url(), schema.options()).expect("a good URL");
    assert!(store.list_runs(&RunQuery::newest(1)).await.expect("the schema is prepared on first use").runs.is_empty());
}

// ---- Figures -------------------------------------------------------------------------------------

/// A readiness probe asks the database, and, once the store listens for wake-ups (a worker's
/// does), whether it still listens: between a lost listening connection and the next it is not
/// ready, and it says which server and why.
#[tokio::test]
async fn a_store_is_ready_while_its_database_answers_and_its_listener_listens() {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a port").port();
    let options = PostgresOptions { connect_timeout: Duration::from_secs(2), ..PostgresOptions::default() };
    let nowhere = PostgresStore::connect_lazy(&format!("postgres://eve:pw@127.0.0.1:{port}/eve"), options).unwrap();
    let error = nowhere.ready().await.expect_err("nothing listens there");
    assert!(error.is_transient() && error.to_string().contains(&format!("127.0.0.1:{port}")), "{error}");

    let (store, schema) = fixture().await;
    store.ready().await.expect("a client's store is ready while the database answers");
    let _worker = store.wake_ups().expect("inside Tokio");
    let store = &store;
    let until = |ready: bool| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let now = store.ready().await;
            if now.is_ok() == ready {
                return now;
            }
            assert!(tokio::time::Instant::now() < deadline, "still {now:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    until(true).await.expect("ready once it listens");

    let admin = schema.admin().await;
    let listener =
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'";
    let ended = admin.query(listener, &[&schema.name]).await.unwrap();
    assert_eq!(ended.len(), 1, "the store's one listening connection");
    let error = until(false).await.expect_err("not ready while it connects again");
    assert!(error.is_transient() && error.to_string().contains("not listening for wake-ups"), "{error}");
    until(true).await.expect("ready again once it listens again");
}

/// The value of the sample `series` in the recorder's exposition, 0 if it has none yet.
fn sample(metrics: &eve_tools::metrics::Metrics, series: &str) -> f64 {
    let text = metrics.render();
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}

/// A worker's claims are counted by how they end, and a lease another worker took over is counted
/// lost. Other tests of this process may claim meanwhile (under `cargo test`), so the counts are
/// compared as at least what this test did.
#[tokio::test]
async fn claims_and_lost_leases_are_counted() {
    let metrics = eve_tools::metrics::install().expect("the recorder installs");
    let (store, _schema) = fixture().await;
    let (held, claimed, lost) = (
        "eve_lease_claims_total{result=\"held\"}",
        "eve_lease_claims_total{result=\"claimed\"}",
        "eve_lease_losses_total",
    );
    let before = [held, claimed, lost].map(|series| sample(&metrics, series));
    let (worker, thief) = (WorkerId("w".into()), WorkerId("thief".into()));
    let run = new_run("counted");
    let fence = created(&store, &run, &worker).await;
    let refused = store.claim(&run.id, &thief, Duration::from_secs(60), Timestamp::from_millis(2_000), 1).await;
    assert!(matches!(refused, Err(StoreError::Leased { .. })), "the creator's lease is live: {refused:?}");
    let later = Timestamp::from_millis(1_000_000_000);
    store.claim(&run.id, &thief, Duration::from_secs(60), later, 1).await.expect("the thief claims it");
    let renewed = store.renew(&run.id, fence, Duration::from_secs(60), later).await;
    assert!(matches!(renewed, Err(StoreError::Fenced { .. })), "the creator lost the run: {renewed:?}");
    let after = [held, claimed, lost].map(|series| sample(&metrics, series));
    for ((series, before), after) in [held, claimed, lost].iter().zip(before).zip(after) {
        assert!(after >= before + 1.0, "{series}: {before} before, {after} after");
    }
}
