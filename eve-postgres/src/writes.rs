//! The SQL of every write. Each runs in one transaction and either commits or returns the refusal
//! the [`Store`](eve_runtime::store::Store) contract names, having written nothing (the transaction is
//! rolled back when it is dropped). The checks are reported in the memory store's order (run
//! exists, fence, run unfinished, sequence number, hook tokens), so every store gives the same
//! error for the same request.
//!
//! # Concurrency
//!
//! Every write that depends on a run's state first changes or locks the run's row, so writes to
//! one run are ordered by that row lock and each sees the last committed state:
//!
//! - an append's first statement is one conditional `UPDATE runs` (fence epoch, status, journal
//!   length) that also inserts the entries and consumes inbox items (data-modifying CTEs); a
//!   stale writer's `UPDATE` matches no row, so the statement writes nothing and the transaction
//!   is rolled back. An append implying no index change is that statement alone, which Postgres
//!   commits as a transaction of its own (one round trip), or shares one such statement with the
//!   appends other runs make at the same moment ([`advance_many`], see [`group`](super::group));
//!   the others add the index changes in the same explicit transaction. A claim raising the epoch at the same moment holds the row:
//!   the append waits for it, then finds the epoch changed;
//! - a claim is one conditional `UPDATE runs` that takes the lease only if it is free, expired or
//!   the caller's own, so of two workers claiming at once exactly one wins;
//! - a delivery locks the run's row `FOR SHARE`: it waits for an append in flight, so it never
//!   lands in the inbox of a run that finished meanwhile, and a finishing append waits for it and
//!   then deletes it with the rest of the inbox. Deliveries do not lock each other out, so under
//!   concurrent deliveries to one run the inbox limits may be passed by at most the number in
//!   flight at once.
//!
//! Commits are synchronous (durable before they return) except a park mark's, which may be lost
//! in a crash at the cost of one replay.
//!
//! A write that gives a run something to do sends a wake-up (`pg_notify` on the schema's channel,
//! see [`listen`](super::listen)) in its own transaction: an accepted delivery, a notice to another
//! run, a released claim, and a park that finds a delivery already waiting.

use deadpool_postgres::{Client, GenericClient, Transaction};

use super::codec::{self, Failure, int, kind_name, status_name};
use super::sql::{execute, query, query_one, query_opt};
use eve_runtime::journal::{BuildStamp, Op, RunId};
use eve_runtime::store::{
    Claimed, Created, Delivered, Delivery, DeliveryPayload, Fence, HookMeta, InboxLimits, IndexChanges, KEPT_HISTORIES,
    StoreError, Target, WorkerId,
};
use eve_runtime::time::Timestamp;

/// The server's clock in milliseconds, as SQL: a follower's watch of a run (`runs.followed_until`)
/// is set and read on it, so the workers' clocks do not matter.
macro_rules! now_ms {
    () => {
        "(extract(epoch FROM statement_timestamp()) * 1000)::bigint"
    };
}

/// How much smaller than an entry a delivery must be, as in the SQLite store: the entry recording
/// a delivery is a few dozen bytes longer than it, so an accepted delivery always fits the journal.
pub(super) const DELIVERY_HEADROOM: usize = 64;

/// A run to create, encoded.
pub(super) struct NewRunRow {
    pub id: RunId,
    pub workflow_id: String,
    pub tool: String,
    pub created_at: u64,
    /// Who claims it as it is created, and until when; `None` for a run an append starts, which
    /// any worker may claim.
    pub owner: Option<(WorkerId, u64)>,
    /// The `RunStarted` entry as JSON.
    pub entry: String,
    /// The index changes it implies (none today; applied so indexes cannot drift from the journal).
    pub changes: IndexChanges,
}

/// An append, encoded.
pub(super) struct AppendRows {
    pub run: RunId,
    pub fence: Fence,
    pub first_seq: u64,
    /// The entries as JSON, in order.
    pub entries: Vec<String>,
    pub consumed: Vec<i64>,
    pub changes: IndexChanges,
    /// Deliveries to other runs the append implies (see `Append::notices`), encoded.
    pub notices: Vec<NoticeRow>,
    /// The runs the append starts (see `Append::runs`), created unclaimed.
    pub runs: Vec<NewRunRow>,
}

impl AppendRows {
    /// Whether the append is its journal rows and consumed inbox items alone, written by one
    /// statement: it implies no index change, notice or new run.
    pub(super) fn is_one_statement(&self) -> bool {
        implies_nothing(&self.changes) && self.notices.is_empty() && self.runs.is_empty()
    }
}

/// A notice to another run's inbox, encoded.
pub(super) struct NoticeRow {
    pub run: RunId,
    pub delivery_id: String,
    pub kind: &'static str,
    pub op: Option<i64>,
    /// The delivery as JSON.
    pub delivery: String,
}

/// Commits `tx`, reporting a connection lost during the commit as in doubt.
async fn commit(tx: Transaction<'_>) -> Result<(), Failure> {
    tx.commit()
        .await
        .map_err(|error| if codec::is_connection_loss(&error) { Failure::InDoubt(error) } else { Failure::Pg(error) })
}

/// Creates the run, claimed by its creator at epoch 1, or reports that the id is taken.
pub(super) async fn create_run(client: &mut Client, row: &NewRunRow) -> Result<Created, Failure> {
    let tx = client.transaction().await?;
    if !insert_run(&tx, row).await? {
        return Ok(Created::Existing);
    }
    commit(tx).await?;
    Ok(Created::New(Fence { epoch: 1 }))
}

/// Inserts the run with its `RunStarted` entry, claimed at epoch 1 if it has an owner and
/// unclaimed at epoch 0 if not, unless its id is taken; returns whether it did.
async fn insert_run(tx: &Transaction<'_>, row: &NewRunRow) -> Result<bool, Failure> {
    let sql = "WITH created AS (
                   INSERT INTO runs (id, workflow_id, tool, status, created_at, entries, epoch, owner, lease_until)
                   VALUES ($1, $2, $3, 'active', $4, 1, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING id
               )
               INSERT INTO journal (run_id, seq, entry) SELECT id, 0, $8 FROM created";
    let created_at = int(row.created_at);
    let epoch = i64::from(row.owner.is_some());
    let owner = row.owner.as_ref().map(|(owner, _)| owner.0.as_bytes());
    let lease_until = row.owner.as_ref().map(|(_, until)| int(*until));
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &row.id.as_str(),
        &row.workflow_id.as_bytes(),
        &row.tool.as_bytes(),
        &created_at,
        &epoch,
        &owner,
        &lease_until,
        &row.entry,
    ];
    if execute(tx, sql, &params).await? == 0 {
        return Ok(false);
    }
    apply_indexes(tx, &row.id, &row.changes).await?;
    Ok(true)
}

/// Takes the run for `owner` unless another worker's lease outlives `now`, raising its epoch, and
/// reads what the claimer needs, all in one transaction.
pub(super) async fn claim(
    client: &mut Client,
    run: &RunId,
    owner: &WorkerId,
    lease_until: Timestamp,
    now: Timestamp,
    from_seq: u64,
) -> Result<Claimed, Failure> {
    let tx = client.transaction().await?;
    let sql = "UPDATE runs SET epoch = epoch + 1, owner = $2, lease_until = $3
               WHERE id = $1 AND (owner IS NULL OR owner = $2 OR lease_until <= $4)
               RETURNING epoch, entries";
    let (until, now) = (int(lease_until.as_millis()), int(now.as_millis()));
    let mut taken = None;
    // A lease released between the `UPDATE` and the look at why it matched nothing is free: try again.
    for _ in 0..3 {
        taken = query_opt(&tx, sql, &[&run.as_str(), &owner.0.as_bytes(), &until, &now]).await?;
        match taken {
            Some(_) => break,
            None => match why_not_claimed(&tx, run, now).await? {
                Some(refusal) => return Err(refusal.into()),
                None => continue,
            },
        }
    }
    let Some(row) = taken else {
        return Err(StoreError::Backend(format!("run {run}'s lease kept changing while it was being claimed")).into());
    };
    let (epoch, next_seq) = (codec::uint(row.try_get(0)?)?, codec::uint(row.try_get(1)?)?);
    let entries = super::reads::journal(&tx, run, from_seq, next_seq).await?;
    let inbox = super::reads::inbox(&tx, run).await?;
    commit(tx).await?;
    Ok(Claimed { fence: Fence { epoch }, entries, next_seq, inbox })
}

/// Why a claim's `UPDATE` matched no row: no such run, or another worker's lease; `None` if the
/// lease is free after all (released or expired since).
async fn why_not_claimed<C: GenericClient>(conn: &C, run: &RunId, now: i64) -> Result<Option<StoreError>, Failure> {
    let sql = "SELECT owner, lease_until FROM runs WHERE id = $1";
    let Some(row) = query_opt(conn, sql, &[&run.as_str()]).await? else {
        return Ok(Some(StoreError::RunNotFound(run.clone())));
    };
    let (owner, until): (Option<&[u8]>, Option<i64>) = (row.try_get(0)?, row.try_get(1)?);
    match (owner, until) {
        (Some(owner), Some(until)) if until > now => {
            let owner = codec::text(owner, "owner")?;
            Ok(Some(StoreError::Leased { run: run.clone(), owner, until: codec::timestamp(until)? }))
        }
        _ => Ok(None),
    }
}

/// Gives up the claim `fence` holds, if it is still the current one, and wakes the workers: the
/// run may be claimed at once.
pub(super) async fn release(client: &Client, run: &RunId, fence: Fence, channel: &str) -> Result<(), Failure> {
    let sql = "WITH released AS (
                   UPDATE runs SET owner = NULL, lease_until = NULL WHERE id = $1 AND epoch = $2 RETURNING id
               )
               SELECT count(pg_notify($3, id)) FROM released";
    let row = query_one(client, sql, &[&run.as_str(), &int(fence.epoch), &channel]).await?;
    if row.try_get::<_, i64>(0)? == 0 {
        current(client, run).await?;
    }
    Ok(())
}

/// Wakes the workers listening on `channel` for `run` when the transaction commits.
async fn notify<C: GenericClient>(conn: &C, channel: &str, run: &RunId) -> Result<(), Failure> {
    query_one(conn, "SELECT pg_notify($1, $2)", &[&channel, &run.as_str()]).await?;
    Ok(())
}

/// Extends the lease of the claim `fence` holds to `lease_until`.
pub(super) async fn renew(client: &Client, run: &RunId, fence: Fence, lease_until: Timestamp) -> Result<(), Failure> {
    let sql = "UPDATE runs SET lease_until = $3 WHERE id = $1 AND epoch = $2 AND owner IS NOT NULL";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
        [&run.as_str(), &int(fence.epoch), &int(lease_until.as_millis())];
    if execute(client, sql, &params).await? == 1 {
        return Ok(());
    }
    let Current { epoch, .. } = current(client, run).await?;
    if epoch != fence.epoch {
        return Err(StoreError::Fenced { run: run.clone(), held: fence.epoch, current: epoch }.into());
    }
    // The claim was released (or the run parked): there is no lease to extend.
    Ok(())
}

/// Appends the entries, consumes the inbox items and applies the index changes they imply. An
/// append that implies no index change (a step's result, a recorded value: most of them) is one
/// statement committed on its own, one round trip; the others take a transaction.
pub(super) async fn append(client: &mut Client, rows: &AppendRows, channel: &str) -> Result<(), Failure> {
    if rows.is_one_statement() {
        let advanced = advance(client, rows, channel).await.map_err(|error| {
            // The statement is its own commit: lost midway, it may have been written.
            if codec::is_connection_loss(&error) { Failure::InDoubt(error) } else { Failure::Pg(error) }
        })?;
        if advanced != 1 {
            return Err(why_refused(client, rows).await?.into());
        }
        return Ok(());
    }
    let tx = client.transaction().await?;
    if advance(&tx, rows, channel).await? != 1 {
        return Err(why_refused(&tx, rows).await?.into());
    }
    apply_indexes(&tx, &rows.run, &rows.changes).await?;
    for run in &rows.runs {
        if insert_run(&tx, run).await? {
            notify(&tx, channel, &run.id).await?;
        }
    }
    for notice in &rows.notices {
        if accept_notice(&tx, notice).await? {
            notify(&tx, channel, &notice.run).await?;
        }
    }
    commit(tx).await
}

/// Puts a notice in its run's inbox, unless the run is finished (or gone) or the delivery id was
/// taken already. The run's row is locked `FOR SHARE`, as a delivery locks it, so a notice never
/// lands in the inbox of a run that finished meanwhile. Notices go from child runs to their
/// parents, or from a parent to a child its append creates (a row no other transaction can see
/// yet), so two appends never wait on each other's rows in a cycle. Returns whether the notice was
/// put in the inbox.
async fn accept_notice(tx: &Transaction<'_>, notice: &NoticeRow) -> Result<bool, Failure> {
    let sql = "SELECT status = 'active' FROM runs WHERE id = $1 FOR SHARE";
    let active: Option<bool> =
        query_opt(tx, sql, &[&notice.run.as_str()]).await?.map(|row| row.try_get(0)).transpose()?;
    if active != Some(true) {
        return Ok(false);
    }
    let sql = "INSERT INTO inbox (run_id, delivery_id, kind, delivery, op) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (run_id, delivery_id) DO NOTHING";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&notice.run.as_str(), &notice.delivery_id.as_bytes(), &notice.kind, &notice.delivery, &notice.op];
    Ok(execute(tx, sql, &params).await? == 1)
}

fn implies_nothing(changes: &IndexChanges) -> bool {
    let IndexChanges { timers_added, timers_removed, hooks_added, hooks_removed, status, build } = changes;
    timers_added.is_empty()
        && timers_removed.is_empty()
        && hooks_added.is_empty()
        && hooks_removed.is_empty()
        && status.is_none()
        && build.is_none()
}

/// The statement at the heart of an append: checks the fence, status and journal length while
/// advancing them, inserts the entries and consumes the inbox items, or, if a check fails, changes
/// nothing. An append that finishes the run (`$5`, the new status) also releases its claim, as the
/// schema promises: a finished run has no owner, so no worker appears to hold it. Returns how many
/// runs it advanced (1 or 0).
pub(super) async fn advance<C: GenericClient>(
    conn: &C,
    rows: &AppendRows,
    channel: &str,
) -> Result<i64, tokio_postgres::Error> {
    let sql = concat!(
        "WITH advanced AS (
                   UPDATE runs SET entries = entries + cardinality($3::text[]), status = coalesce($5, status),
                                   parked = false,
                                   owner = CASE WHEN $5::text IS NULL THEN owner END,
                                   lease_until = CASE WHEN $5::text IS NULL THEN lease_until END
                   WHERE id = $1 AND epoch = $4 AND entries = $2 AND status = 'active'
                   RETURNING id, followed_until
               ), notified AS (
                   SELECT pg_notify($7, 'j:' || id) FROM advanced WHERE followed_until > ",
        now_ms!(),
        "
               ), written AS (
                   INSERT INTO journal (run_id, seq, entry)
                   SELECT advanced.id, $2 + added.ordinality - 1, added.entry
                   FROM advanced, unnest($3::text[]) WITH ORDINALITY AS added (entry, ordinality)
               ), consumed AS (
                   UPDATE inbox SET consumed = true
                   WHERE run_id IN (SELECT id FROM advanced) AND id = ANY ($6::bigint[]) AND NOT consumed
               )
               SELECT (SELECT count(*) FROM advanced) + 0 * (SELECT count(*) FROM notified)"
    );
    let (first, epoch, status) = (int(rows.first_seq), int(rows.fence.epoch), rows.changes.status.map(status_name));
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
        [&rows.run.as_str(), &first, &rows.entries, &epoch, &status, &rows.consumed, &channel];
    query_one(conn, sql, &params).await?.try_get(0)
}

/// [`advance`] for the appends of many runs, one each, in one statement (a transaction of its
/// own; see [`group`](super::group)). Each run is checked and advanced on its own; returns the
/// runs it advanced. The rows are locked in the order of their ids, so two such statements of
/// different workers never wait on each other in a cycle.
pub(super) async fn advance_many(
    client: &Client,
    group: &[&AppendRows],
    channel: &str,
) -> Result<std::collections::HashSet<String>, tokio_postgres::Error> {
    let sql = concat!(
        "WITH batch AS (
                   SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                       AS batch (id, first_seq, epoch, added)
               ), locked AS (
                   SELECT runs.id FROM runs JOIN batch USING (id)
                   WHERE runs.epoch = batch.epoch AND runs.entries = batch.first_seq AND runs.status = 'active'
                   ORDER BY runs.id FOR UPDATE OF runs
               ), advanced AS (
                   UPDATE runs SET entries = runs.entries + batch.added, parked = false
                   FROM batch
                   WHERE runs.id = batch.id AND runs.id IN (SELECT id FROM locked)
                   RETURNING runs.id, runs.followed_until
               ), notified AS (
                   SELECT pg_notify($10, 'j:' || id) FROM advanced WHERE followed_until > ",
        now_ms!(),
        "
               ), written AS (
                   INSERT INTO journal (run_id, seq, entry)
                   SELECT added.run_id, added.seq, added.entry
                   FROM unnest($5::text[], $6::bigint[], $7::text[]) AS added (run_id, seq, entry)
                   WHERE added.run_id IN (SELECT id FROM advanced)
               ), consumed AS (
                   UPDATE inbox SET consumed = true
                   FROM unnest($8::text[], $9::bigint[]) AS item (run_id, id)
                   WHERE inbox.run_id = item.run_id AND inbox.id = item.id AND NOT inbox.consumed
                     AND item.run_id IN (SELECT id FROM advanced)
               )
               SELECT id FROM advanced WHERE (SELECT count(*) FROM notified) >= 0"
    );
    let mut sorted = group.to_vec();
    sorted.sort_by(|left, right| left.run.as_str().cmp(right.run.as_str()));
    let ids: Vec<&str> = sorted.iter().map(|rows| rows.run.as_str()).collect();
    let first: Vec<i64> = sorted.iter().map(|rows| int(rows.first_seq)).collect();
    let epochs: Vec<i64> = sorted.iter().map(|rows| int(rows.fence.epoch)).collect();
    let added: Vec<i64> = sorted.iter().map(|rows| int(rows.entries.len() as u64)).collect();
    let (mut entry_runs, mut seqs, mut entries) = (Vec::new(), Vec::new(), Vec::new());
    let (mut consumed_runs, mut consumed) = (Vec::new(), Vec::new());
    for rows in &sorted {
        for (offset, entry) in rows.entries.iter().enumerate() {
            entry_runs.push(rows.run.as_str());
            seqs.push(int(rows.first_seq + offset as u64));
            entries.push(entry.as_str());
        }
        for id in &rows.consumed {
            consumed_runs.push(rows.run.as_str());
            consumed.push(*id);
        }
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 10] =
        [&ids, &first, &epochs, &added, &entry_runs, &seqs, &entries, &consumed_runs, &consumed, &channel];
    let rows = query(client, sql, &params).await?;
    rows.iter().map(|row| row.try_get(0)).collect()
}

/// Why an append's `UPDATE` matched no row, checked in the memory store's order.
pub(super) async fn why_refused<C: GenericClient>(conn: &C, rows: &AppendRows) -> Result<StoreError, Failure> {
    let run = &rows.run;
    let Current { epoch, active, entries } = current(conn, run).await?;
    let error = if epoch != rows.fence.epoch {
        StoreError::Fenced { run: run.clone(), held: rows.fence.epoch, current: epoch }
    } else if !active {
        StoreError::RunFinished(run.clone())
    } else if entries != rows.first_seq {
        StoreError::SeqConflict { run: run.clone(), expected: rows.first_seq, actual: entries }
    } else {
        StoreError::Backend(format!("run {run}'s append matched no row although every check passes"))
    };
    Ok(error)
}

/// A run's claim epoch, whether it is unfinished, and its journal length.
struct Current {
    epoch: u64,
    active: bool,
    entries: u64,
}

/// The current state of `run`, or [`StoreError::RunNotFound`].
async fn current<C: GenericClient>(conn: &C, run: &RunId) -> Result<Current, Failure> {
    let sql = "SELECT epoch, status = 'active', entries FROM runs WHERE id = $1";
    let Some(row) = query_opt(conn, sql, &[&run.as_str()]).await? else {
        return Err(StoreError::RunNotFound(run.clone()).into());
    };
    let (epoch, active, entries): (i64, bool, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    Ok(Current { epoch: codec::uint(epoch)?, active, entries: codec::uint(entries)? })
}

/// Applies `changes` in the memory store's order: timers added, timers removed, hooks, finish.
async fn apply_indexes(tx: &Transaction<'_>, run: &RunId, changes: &IndexChanges) -> Result<(), Failure> {
    let id = run.as_str();
    for (op, due, kind) in &changes.timers_added {
        let sql = "INSERT INTO timers (run_id, op, kind, due) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (run_id, op, kind) DO UPDATE SET due = excluded.due";
        execute(tx, sql, &[&id, &i64::from(op.0), &kind_name(*kind), &int(due.as_millis())]).await?;
    }
    for (op, kind) in &changes.timers_removed {
        let sql = "DELETE FROM timers WHERE run_id = $1 AND op = $2 AND kind = $3";
        execute(tx, sql, &[&id, &i64::from(op.0), &kind_name(*kind)]).await?;
    }
    for (op, token_hash, meta) in &changes.hooks_added {
        add_hook(tx, run, *op, token_hash, meta).await?;
    }
    for op in &changes.hooks_removed {
        execute(tx, "DELETE FROM hooks WHERE run_id = $1 AND op = $2", &[&id, &i64::from(op.0)]).await?;
    }
    if let Some(build) = &changes.build {
        let sql = "UPDATE runs SET fingerprint = $2, version = $3 WHERE id = $1";
        execute(tx, sql, &[&id, &build.fingerprint, &build.version]).await?;
    }
    if changes.status.is_some() {
        release_indexes(tx, run).await?;
    }
    Ok(())
}

/// Indexes the hook, refusing a token hash another (necessarily unfinished) run holds.
async fn add_hook(tx: &Transaction<'_>, run: &RunId, op: Op, token_hash: &str, meta: &HookMeta) -> Result<(), Failure> {
    // The upsert updates only a row of the same run, so no row changed means another run holds it.
    let sql = "INSERT INTO hooks (token_hash, run_id, op, kind, meta) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (token_hash) DO UPDATE SET op = excluded.op, kind = excluded.kind, meta = excluded.meta
               WHERE hooks.run_id = excluded.run_id";
    let text = serde_json::to_string(meta).expect("hook metadata always serializes: it holds only strings and maps");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&token_hash, &run.as_str(), &i64::from(op.0), &codec::hook_kind(meta), &text];
    if execute(tx, sql, &params).await? == 0 {
        return Err(StoreError::HookTokenInUse { run: run.clone(), op }.into());
    }
    Ok(())
}

/// Releases what only an unfinished run holds: its timers, hook tokens and inbox.
async fn release_indexes(tx: &Transaction<'_>, run: &RunId) -> Result<(), Failure> {
    for sql in [
        "DELETE FROM timers WHERE run_id = $1",
        "DELETE FROM hooks WHERE run_id = $1",
        "DELETE FROM inbox WHERE run_id = $1",
    ] {
        execute(tx, sql, &[&run.as_str()]).await?;
    }
    Ok(())
}

/// Marks the run parked and gives up its lease, unless the fence is stale or the journal grew past
/// `next_seq`. A delivery already waiting (it arrived while the run was being advanced, too late
/// for it) wakes the workers, since the lease that made them leave it is gone. The commit does not
/// wait for the disk: a lost mark costs only a replay.
pub(super) async fn park(
    client: &mut Client,
    run: &RunId,
    fence: Fence,
    next_seq: u64,
    channel: &str,
) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    let sql = "WITH parked AS (
                   UPDATE runs SET parked = true, owner = NULL, lease_until = NULL
                   WHERE id = $1 AND epoch = $2 AND entries = $3 AND status = 'active'
                   RETURNING id
               )
               SELECT pg_notify($4, id) FROM parked
               WHERE EXISTS (SELECT 1 FROM inbox WHERE inbox.run_id = parked.id AND NOT consumed)";
    let (id, epoch, length) = (run.as_str(), int(fence.epoch), int(next_seq));
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [&id, &epoch, &length, &channel];
    let lazy = tx.batch_execute("SET LOCAL synchronous_commit = off");
    let mark = query(&tx, sql, &params);
    // Sent together: one round trip.
    futures::try_join!(lazy, mark)?;
    commit(tx).await
}

/// Replaces the run's history with one that starts with `started` (see `Store::continue_as_new`),
/// which runs on the build with `fingerprint` and `version`.
pub(super) async fn continue_as_new(
    client: &mut Client,
    run: &RunId,
    fence: Fence,
    (continued, started, build): (u32, &str, Option<&BuildStamp>),
    keep_inbox: bool,
    channel: &str,
) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    let sql = concat!(
        "UPDATE runs SET entries = 1, parked = false, continued = $3, fingerprint = $4, version = $5 ",
        "WHERE id = $1 AND epoch = $2 AND status = 'active' RETURNING followed_until > ",
        now_ms!()
    );
    let continued = i32::try_from(continued).unwrap_or(i32::MAX);
    let (fingerprint, version) = (build.map(|build| &build.fingerprint), build.map(|build| &build.version));
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&run.as_str(), &int(fence.epoch), &continued, &fingerprint, &version];
    let updated = query_opt(&tx, sql, &params).await?;
    let Some(updated) = updated else {
        let Current { epoch, .. } = current(&tx, run).await?;
        if epoch != fence.epoch {
            return Err(StoreError::Fenced { run: run.clone(), held: fence.epoch, current: epoch }.into());
        }
        return Err(StoreError::RunFinished(run.clone()).into());
    };
    let inbox = "DELETE FROM inbox WHERE run_id = $1 AND (consumed OR kind <> 'cancel')";
    // The history that ends is set aside for followers (numbered one below the new one, which the
    // row now holds); histories older than the store keeps go.
    let set_aside = "INSERT INTO journal_previous (run_id, history, seq, entry)
                     SELECT run_id, $2, seq, entry FROM journal WHERE run_id = $1";
    let previous = continued.saturating_sub(1);
    execute(&tx, set_aside, &[&run.as_str(), &previous]).await?;
    let oldest = continued.saturating_sub(i32::try_from(KEPT_HISTORIES).unwrap_or(i32::MAX));
    execute(&tx, "DELETE FROM journal_previous WHERE run_id = $1 AND history < $2", &[&run.as_str(), &oldest]).await?;
    let statements = [
        "DELETE FROM journal WHERE run_id = $1",
        "DELETE FROM timers WHERE run_id = $1",
        "DELETE FROM hooks WHERE run_id = $1",
    ];
    for sql in statements.into_iter().chain((!keep_inbox).then_some(inbox)) {
        execute(&tx, sql, &[&run.as_str()]).await?;
    }
    execute(&tx, "INSERT INTO journal (run_id, seq, entry) VALUES ($1, 0, $2)", &[&run.as_str(), &started]).await?;
    if updated.try_get::<_, Option<bool>>(0)? == Some(true) {
        query_one(&tx, "SELECT pg_notify($1, 'j:' || $2)", &[&channel, &run.as_str()]).await?;
    }
    commit(tx).await
}

/// Marks `run` watched by a follower for [`WATCH_FOR`] from now on the server's clock, so its
/// commits notify (see [`listen`](super::listen)). A run that does not exist is left alone: its
/// follower finds it missing when it reads.
pub(super) async fn watch<C: GenericClient>(conn: &C, run: &RunId) -> Result<(), Failure> {
    let sql = concat!(
        "UPDATE runs SET followed_until = greatest(coalesce(followed_until, 0), ",
        now_ms!(),
        " + $2) WHERE id = $1"
    );
    let watch_for = i64::try_from(WATCH_FOR.as_millis()).unwrap_or(i64::MAX);
    execute(conn, sql, &[&run.as_str(), &watch_for]).await?;
    Ok(())
}

/// How long a follower's watch of a run lasts unless renewed.
pub(super) const WATCH_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Accepts a delivery into the inbox of the unfinished run `target` names, if it has room, and
/// wakes the workers for it.
pub(super) async fn deliver(
    client: &mut Client,
    target: &Target,
    delivery_id: Option<&str>,
    payload: &DeliveryPayload,
    (limit, limits): (usize, InboxLimits),
    channel: &str,
) -> Result<Delivered, Failure> {
    let tx = client.transaction().await?;
    let Some((run, delivery)) = resolve(&tx, target, payload).await? else { return Ok(Delivered::NotFound) };
    let sql = "SELECT status = 'active' FROM runs WHERE id = $1 FOR SHARE";
    let active: Option<bool> = query_opt(&tx, sql, &[&run.as_str()]).await?.map(|row| row.try_get(0)).transpose()?;
    if active != Some(true) || !still_holds(&tx, target, &run, &delivery).await? {
        return Ok(Delivered::NotFound);
    }
    // A repeat of a delivery already taken is a duplicate, however full the inbox is now.
    if let Some(id) = delivery_id {
        let sql = "SELECT 1 FROM inbox WHERE run_id = $1 AND delivery_id = $2";
        if query_opt(&tx, sql, &[&run.as_str(), &id.as_bytes()]).await?.is_some() {
            return Ok(Delivered::Duplicate { run });
        }
    }
    check_room(&tx, &run, delivery.hook_op(), limits).await?;
    let what = "a delivery (PostgresOptions::max_entry_bytes, less room for the journal entry that records it)";
    let text = codec::encode(&delivery, what, limit.saturating_sub(DELIVERY_HEADROOM))?;
    let sql = "INSERT INTO inbox (run_id, delivery_id, kind, delivery, op) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (run_id, delivery_id) DO NOTHING RETURNING id";
    let (op, delivery_id) = (delivery.hook_op().map(|op| i64::from(op.0)), delivery_id.map(str::as_bytes));
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&run.as_str(), &delivery_id, &delivery.kind(), &text, &op];
    let Some(row) = query_opt(&tx, sql, &params).await? else { return Ok(Delivered::Duplicate { run }) };
    let id = codec::uint(row.try_get(0)?)?;
    notify(&tx, channel, &run).await?;
    commit(tx).await?;
    Ok(Delivered::Accepted { run, id })
}

/// The run a delivery is for and what it carries, or `None` if no unfinished run holds the hook.
async fn resolve(
    tx: &Transaction<'_>,
    target: &Target,
    payload: &DeliveryPayload,
) -> Result<Option<(RunId, Delivery)>, Failure> {
    match (target, payload) {
        (Target::Hook(hash), payload) => {
            let Some(hook) = super::reads::find_hook(tx, hash.as_str()).await? else { return Ok(None) };
            Ok(payload.clone().for_hook(&hook)?.map(|delivery| (hook.run, delivery)))
        }
        (Target::Run(run), DeliveryPayload::Run(delivery)) => Ok(Some((run.clone(), delivery.clone()))),
        (Target::Run(_), _) => Err(StoreError::MismatchedTarget.into()),
    }
}

/// Whether a hook target still belongs to `run` at the op resolved before the run's row was locked
/// (a history continued as new in between released it).
async fn still_holds(tx: &Transaction<'_>, target: &Target, run: &RunId, delivery: &Delivery) -> Result<bool, Failure> {
    let Target::Hook(hash) = target else { return Ok(true) };
    let hook = super::reads::find_hook(tx, hash.as_str()).await?;
    Ok(hook.is_some_and(|hook| &hook.run == run && Some(hook.op) == delivery.hook_op()))
}

/// Refuses a delivery that would put more than `limits` in waiting for its run or its hook. The
/// counts stop at the limit, so a full inbox costs no more to refuse than one at the limit.
async fn check_room(tx: &Transaction<'_>, run: &RunId, hook: Option<Op>, limits: InboxLimits) -> Result<(), Failure> {
    let sql = "SELECT count(*) FROM (SELECT 1 FROM inbox WHERE run_id = $1 AND NOT consumed LIMIT $2) AS waiting";
    let row = query_one(tx, sql, &[&run.as_str(), &int(limits.per_run as u64)]).await?;
    let pending = codec::uint(row.try_get(0)?)? as usize;
    if pending >= limits.per_run {
        return Err(StoreError::InboxFull { run: run.clone(), hook: None, pending }.into());
    }
    let Some(op) = hook else { return Ok(()) };
    let sql =
        "SELECT count(*) FROM (SELECT 1 FROM inbox WHERE run_id = $1 AND op = $2 AND NOT consumed LIMIT $3) AS waiting";
    let row = query_one(tx, sql, &[&run.as_str(), &i64::from(op.0), &int(limits.per_hook as u64)]).await?;
    let pending = codec::uint(row.try_get(0)?)? as usize;
    if pending >= limits.per_hook {
        return Err(StoreError::InboxFull { run: run.clone(), hook: Some(op), pending }.into());
    }
    Ok(())
}

/// Whether an append whose commit was in doubt is in the journal: every entry at its position,
/// byte for byte. `None` if the journal holds none of them (it was not committed).
pub(super) async fn landed(client: &Client, rows: &AppendRows) -> Result<Option<bool>, Failure> {
    let sql = "SELECT entry FROM journal WHERE run_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq";
    let end = int(rows.first_seq + rows.entries.len() as u64);
    let found = query(client, sql, &[&rows.run.as_str(), &int(rows.first_seq), &end]).await?;
    if found.is_empty() {
        return Ok(None);
    }
    let texts: Vec<String> = found.iter().map(|row| row.try_get(0)).collect::<Result<_, _>>()?;
    Ok(Some(texts == rows.entries))
}

/// Consumed inbox ids as Postgres integers.
pub(super) fn inbox_ids(ids: &[u64]) -> Vec<i64> {
    ids.iter().map(|id| int(*id)).collect()
}
