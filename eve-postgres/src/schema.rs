//! The tables of an eve Postgres schema, and how they are created and migrated.
//!
//! Everything lives in one Postgres schema ([`PostgresOptions::schema`](super::PostgresOptions),
//! `eve` by default), created if absent. Its `schema_version` table holds one row: the version of
//! the tables ([`VERSION`]) and which eve wrote them. [`prepare`] runs in one transaction under
//! `pg_advisory_xact_lock` (keyed by the schema's name), so of several workers starting at once one
//! creates or migrates the tables and the others find them ready; a crash midway leaves nothing.
//! A schema of a newer version is refused before anything is written.
//!
//! Tables (text keys use the `C` collation, so they compare byte for byte, as run ids sort;
//! strings a user chooses freely, such as tool names, workflow ids, worker ids and delivery ids,
//! are stored as their UTF-8 bytes, as Postgres `text` cannot hold a NUL character):
//!
//! - `runs`: one row per run; `entries` is the journal length; `parked` marks a run that waits on
//!   durable waits only (cleared by every append); `epoch`, `owner` and `lease_until` are the
//!   current claim: every claim raises `epoch`, and an append must present it; `owner` is `NULL`
//!   once the claim is released (or the run parked), and a lease whose `lease_until` has passed
//!   may be taken by any worker. `position` grows with creation, for listings. `fingerprint` is
//!   that of the build the run's history runs on and `version` that build's version (both `NULL`
//!   if its journal records none), changed only with the entries that name a build
//!   (`run_started`, `run_upgraded`).
//! - `journal`: `(run_id, seq) -> entry` JSON text, dense from 0; the key refuses a second write of
//!   one position.
//! - `timers`: pending sleeps and retries, one row per `(run_id, op, kind)`.
//! - `hooks`: `token_hash -> (run_id, op, kind, meta)` for unfinished runs only; never a token.
//! - `inbox`: deliveries with their kind and the op of the hook they are for, `UNIQUE (run_id,
//!   delivery_id)` so a repeated delivery id is a duplicate even after its item was consumed; ids
//!   come from an identity column and are never reused. A finished run's rows are deleted.

use tokio_postgres::Transaction;

use super::codec::describe;
use super::connect::ConnectError;

/// The version of the tables this build writes and understands; older schemas are migrated.
pub(super) const VERSION: i32 = 5;

/// The SQL that brings a schema from version `n` to `n + 1`, at index `n`: index 0 creates the
/// tables in an empty schema.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the tables.
    r#"
CREATE TABLE runs (
    id          text COLLATE "C" PRIMARY KEY,
    position    bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    workflow_id bytea NOT NULL,
    tool        bytea NOT NULL,
    status      text NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'cancelled')),
    created_at  bigint NOT NULL,
    entries     bigint NOT NULL,
    parked      boolean NOT NULL DEFAULT false,
    epoch       bigint NOT NULL,
    owner       bytea,
    lease_until bigint
);
CREATE INDEX runs_by_status ON runs (status, position);
CREATE INDEX runs_unparked ON runs (id) WHERE status = 'active' AND NOT parked;

CREATE TABLE journal (
    run_id text COLLATE "C" NOT NULL,
    seq    bigint NOT NULL,
    entry  text NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE timers (
    run_id text COLLATE "C" NOT NULL,
    op     bigint NOT NULL,
    kind   text NOT NULL CHECK (kind IN ('sleep', 'retry')),
    due    bigint NOT NULL,
    PRIMARY KEY (run_id, op, kind)
);
CREATE INDEX timers_by_due ON timers (due);

CREATE TABLE hooks (
    token_hash text COLLATE "C" PRIMARY KEY,
    run_id     text COLLATE "C" NOT NULL,
    op         bigint NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('hook', 'webhook', 'auth')),
    meta       text NOT NULL
);
CREATE INDEX hooks_by_run ON hooks (run_id);

CREATE TABLE inbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      text COLLATE "C" NOT NULL,
    delivery_id bytea,
    kind        text NOT NULL CHECK (kind IN ('hook', 'cancel', 'answer', 'auth')),
    delivery    text NOT NULL,
    op          bigint,
    consumed    boolean NOT NULL DEFAULT false,
    UNIQUE (run_id, delivery_id)
);
CREATE INDEX inbox_pending ON inbox (run_id, id) WHERE NOT consumed;
CREATE INDEX inbox_pending_by_hook ON inbox (run_id, op) WHERE NOT consumed;
"#,
    // 1 -> 2: the inspector lists runs by tool, a page at a time.
    r#"
CREATE INDEX runs_by_tool ON runs (tool, position);
"#,
    // 2 -> 3: each run keeps the number of its history, which followers read with each page, the
    // histories before it, which followers still reading one read to its end, and until when a
    // follower watches it (in milliseconds of the server's clock), which its commits
    // notify while the time lasts.
    r#"
ALTER TABLE runs ADD COLUMN continued integer NOT NULL DEFAULT 0, ADD COLUMN followed_until bigint;
CREATE TABLE journal_previous (
    run_id  text COLLATE "C" NOT NULL,
    history integer NOT NULL,
    seq     bigint NOT NULL,
    entry   text NOT NULL,
    PRIMARY KEY (run_id, history, seq)
);
UPDATE runs SET continued = coalesce(
    (SELECT (entry::jsonb #>> '{run_started,continued}')::integer FROM journal WHERE run_id = runs.id AND seq = 0), 0)
WHERE status = 'active';
"#,
    // 3 -> 4: each run keeps the fingerprint of the build its history runs on (see
    // `eve_runtime::store::kit::build`), so a worker leaves out of its polls the runs its build
    // cannot replay without reading their journals. Unfinished runs take it from their journals;
    // NULL where a journal records none.
    r#"
ALTER TABLE runs ADD COLUMN fingerprint text;
UPDATE runs SET fingerprint = coalesce(
    (SELECT entry::jsonb #>> '{run_upgraded,build,fingerprint}' FROM journal
     WHERE run_id = runs.id AND entry LIKE '{"run_upgraded"%' ORDER BY seq DESC LIMIT 1),
    (SELECT entry::jsonb #>> '{run_started,build,fingerprint}' FROM journal WHERE run_id = runs.id AND seq = 0))
WHERE status = 'active';
"#,
    // 4 -> 5: each run keeps its build's version beside its fingerprint, so listings show the
    // build without reading journals. Filled as version 4 filled the fingerprint.
    r#"
ALTER TABLE runs ADD COLUMN version text;
UPDATE runs SET version = coalesce(
    (SELECT entry::jsonb #>> '{run_upgraded,build,version}' FROM journal
     WHERE run_id = runs.id AND entry LIKE '{"run_upgraded"%' ORDER BY seq DESC LIMIT 1),
    (SELECT entry::jsonb #>> '{run_started,build,version}' FROM journal WHERE run_id = runs.id AND seq = 0))
WHERE status = 'active';
"#,
];

/// The first key of the advisory lock that serializes schema preparation ("EVE1" in ASCII); the
/// second is a hash of the schema's name, so workers on different schemas do not wait for each
/// other.
const LOCK_CLASS: i32 = 0x4556_4531;

/// Makes sure `schema` holds this version's tables, creating or migrating them, in one transaction.
/// Refuses a newer version without changing anything.
pub(super) async fn prepare(tx: &Transaction<'_>, schema: &str, target: &str) -> Result<(), ConnectError> {
    let failed = |error: tokio_postgres::Error| ConnectError::from_prepare(&error, schema, target);
    tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&LOCK_CLASS, &schema]).await.map_err(failed)?;
    let exists = tx.query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema]).await.map_err(failed)?;
    if exists.is_none() {
        // Only when absent: CREATE SCHEMA checks the database's CREATE privilege even with IF NOT
        // EXISTS, and a user may be given an existing schema without it.
        tx.batch_execute(&format!("CREATE SCHEMA {schema}")).await.map_err(failed)?;
    }
    let found = version(tx, schema).await.map_err(failed)?;
    if found > VERSION {
        let (schema, target) = (schema.to_owned(), target.to_owned());
        return Err(ConnectError::NewerSchema { target, schema, found, supported: VERSION });
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(found).unwrap_or(0)) {
        tx.batch_execute(sql).await.map_err(|error| {
            let reason = format!("migrating from schema version {from} failed: {}", describe(&error));
            ConnectError::Backend { target: target.to_owned(), reason }
        })?;
    }
    if found < VERSION {
        let written_by = concat!("eve-runtime ", env!("CARGO_PKG_VERSION"));
        let sql = "INSERT INTO schema_version (only_row, version, written_by) VALUES (true, $1, $2) \
                   ON CONFLICT (only_row) DO UPDATE SET version = excluded.version, written_by = excluded.written_by";
        tx.execute(sql, &[&VERSION, &written_by]).await.map_err(failed)?;
    }
    Ok(())
}

/// The version of the tables in `schema`: 0 if it has none yet.
async fn version(tx: &Transaction<'_>, schema: &str) -> Result<i32, tokio_postgres::Error> {
    let sql = "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'schema_version'";
    if tx.query_opt(sql, &[&schema]).await?.is_none() {
        let create = "CREATE TABLE schema_version (
            only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
            version    integer NOT NULL,
            written_by text NOT NULL
        )";
        tx.batch_execute(create).await?;
        return Ok(0);
    }
    let row = tx.query_opt("SELECT version FROM schema_version", &[]).await?;
    row.map_or(Ok(0), |row| row.try_get(0))
}
