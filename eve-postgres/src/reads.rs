//! The SQL of every read. A read of several tables runs in one `REPEATABLE READ` read-only
//! transaction, so what it returns is one consistent snapshot (a run's summary counts exactly the
//! entries returned with it); a one-statement read is a snapshot by itself.

use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::IsolationLevel;
use tokio_postgres::Row;

use super::codec::{self, Failure, int};
use super::sql::{query, query_opt};
use eve_runtime::journal::{BuildStamp, Entry, Position, RunId};
use eve_runtime::store::{
    HookMeta, HookRow, InboxItem, JournalPage, PassedOver, Recovery, RunPage, RunQuery, RunRecord, RunSummary,
    TimerRow, WaitingSignIn,
};
use eve_runtime::time::Timestamp;

/// The columns [`decode_summary`] reads, in order.
const SUMMARY: &str = "id, workflow_id, tool, status, created_at, entries, parked, fingerprint, version";

fn decode_summary(row: &Row) -> Result<RunSummary, Failure> {
    let id: &str = row.try_get(0)?;
    let status: &str = row.try_get(3)?;
    Ok(RunSummary {
        id: codec::run_id(id)?,
        workflow_id: codec::text(row.try_get(1)?, "workflow_id")?,
        tool: codec::text(row.try_get(2)?, "tool")?,
        status: codec::status(status)?,
        created_at: codec::timestamp(row.try_get(4)?)?,
        entries: codec::uint(row.try_get(5)?)?,
        parked: row.try_get(6)?,
        build: row
            .try_get::<_, Option<String>>(7)?
            .zip(row.try_get::<_, Option<String>>(8)?)
            .map(|(fingerprint, version)| BuildStamp { fingerprint, version }),
    })
}

/// A run and its whole journal.
pub(super) async fn load(client: &mut Client, run: &RunId) -> Result<Option<RunRecord>, Failure> {
    let tx = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
    let sql = format!("SELECT {SUMMARY} FROM runs WHERE id = $1");
    let Some(row) = query_opt(&tx, &sql, &[&run.as_str()]).await? else { return Ok(None) };
    let summary = decode_summary(&row)?;
    let entries = journal(&tx, run, 0, summary.entries).await?;
    tx.commit().await?;
    Ok(Some(RunRecord { summary, entries }))
}

/// A run's summary and last entry, in one statement.
pub(super) async fn tail(client: &Client, run: &RunId) -> Result<Option<(RunSummary, Entry)>, Failure> {
    let sql = "SELECT runs.id, workflow_id, tool, status, created_at, entries, parked, fingerprint, version,
                      journal.seq, journal.entry
               FROM runs JOIN journal ON journal.run_id = runs.id AND journal.seq = runs.entries - 1
               WHERE runs.id = $1";
    let Some(row) = query_opt(client, sql, &[&run.as_str()]).await? else { return Ok(None) };
    let summary = decode_summary(&row)?;
    let entry = codec::decode_entry(run, row.try_get(9)?, row.try_get(10)?)?;
    Ok(Some((summary, entry)))
}

/// At most `limit` entries of history `at.history` of the run's journal from `at.seq` on, and the
/// number of its current history, in one statement (one snapshot): from `journal` if that history
/// is the current one, from `journal_previous` if it is one before.
pub(super) async fn page(
    client: &Client,
    run: &RunId,
    at: Position,
    limit: usize,
) -> Result<Option<JournalPage>, Failure> {
    let sql = "SELECT runs.continued, page.seq, page.entry FROM runs
               LEFT JOIN LATERAL (
                   SELECT seq, entry FROM journal
                   WHERE run_id = runs.id AND runs.continued = $4 AND seq >= $2
                   UNION ALL
                   SELECT seq, entry FROM journal_previous
                   WHERE run_id = runs.id AND runs.continued > $4 AND history = $4 AND seq >= $2
                   ORDER BY seq LIMIT $3
               ) page ON true
               WHERE runs.id = $1 ORDER BY page.seq";
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let history = i32::try_from(at.history).unwrap_or(i32::MAX);
    let rows = query(client, sql, &[&run.as_str(), &int(at.seq), &limit, &history]).await?;
    let Some(first) = rows.first() else { return Ok(None) };
    let continued: i32 = first.try_get(0)?;
    let mut entries = Vec::with_capacity(rows.len());
    for row in &rows {
        if let Some(seq) = row.try_get::<_, Option<i64>>(1)? {
            entries.push(codec::decode_entry(run, seq, row.try_get(2)?)?);
        }
    }
    Ok(Some(JournalPage::new(u32::try_from(continued).unwrap_or(0), entries)))
}

/// Entries `from..to` of the run's journal.
pub(super) async fn journal<C: GenericClient>(
    conn: &C,
    run: &RunId,
    from: u64,
    to: u64,
) -> Result<Vec<Entry>, Failure> {
    if from >= to {
        return Ok(Vec::new());
    }
    let sql = "SELECT seq, entry FROM journal WHERE run_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq";
    let rows = query(conn, sql, &[&run.as_str(), &int(from), &int(to)]).await?;
    rows.iter().map(|row| codec::decode_entry(run, row.try_get(0)?, row.try_get(1)?)).collect()
}

/// A round trip to the server on a pooled connection, for [`Store::ready`](eve_runtime::store::Store::ready).
pub(super) async fn ping(client: &Client) -> Result<(), Failure> {
    client.simple_query("SELECT 1").await?;
    Ok(())
}

/// One page of the runs `query` asks for, newest first (by `position`, which grows with
/// creation). Each filter adds its condition, so every combination walks an index
/// (`runs_by_status`, `runs_by_tool`, or `position`'s) from the cursor backwards.
pub(super) async fn list_runs(client: &Client, asked: &RunQuery) -> Result<RunPage, Failure> {
    let status = asked.status.map(codec::status_name);
    let tool = asked.tool.as_deref().map(str::as_bytes);
    let before = asked.before.map(|before| int(before.position()));
    let limit = int(asked.limit.saturating_add(1) as u64);
    let mut conditions = Vec::new();
    let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
    if let Some(status) = &status {
        values.push(status);
        conditions.push(format!("status = ${}", values.len()));
    }
    if let Some(parked) = &asked.parked {
        values.push(parked);
        conditions.push(format!("parked = ${}", values.len()));
    }
    if let Some(tool) = &tool {
        values.push(tool);
        conditions.push(format!("tool = ${}", values.len()));
    }
    if let Some(before) = &before {
        values.push(before);
        conditions.push(format!("position < ${}", values.len()));
    }
    let filter = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    values.push(&limit);
    let sql = format!("SELECT {SUMMARY}, position FROM runs {filter} ORDER BY position DESC LIMIT ${}", values.len());
    let rows = query(client, &sql, &values).await?;
    let listed = rows
        .iter()
        .map(|row| Ok((decode_summary(row)?, codec::uint(row.try_get(9)?)?)))
        .collect::<Result<_, Failure>>()?;
    Ok(RunPage::of(asked, listed))
}

/// The run's inbox items not yet consumed, oldest first.
pub(super) async fn inbox<C: GenericClient>(conn: &C, run: &RunId) -> Result<Vec<InboxItem>, Failure> {
    let sql = "SELECT id, delivery FROM inbox WHERE run_id = $1 AND NOT consumed ORDER BY id";
    let rows = query(conn, sql, &[&run.as_str()]).await?;
    rows.iter()
        .map(|row| {
            let id: i64 = row.try_get(0)?;
            let delivery = codec::decode_delivery(run, id, row.try_get(1)?)?;
            Ok(InboxItem { id: codec::uint(id)?, run: run.clone(), delivery })
        })
        .collect()
}

/// Every pending timer, ordered by run, operation and kind (sleep before retry) like the memory store.
pub(super) async fn timers<C: GenericClient>(conn: &C) -> Result<Vec<TimerRow>, Failure> {
    let sql = "SELECT run_id, op, kind, due FROM timers ORDER BY run_id, op, kind DESC";
    let rows = query(conn, sql, &[]).await?;
    rows.iter()
        .map(|row| {
            Ok(TimerRow {
                run: codec::run_id(row.try_get(0)?)?,
                op: codec::op(row.try_get(1)?)?,
                kind: codec::kind(row.try_get(2)?)?,
                due: codec::timestamp(row.try_get(3)?)?,
            })
        })
        .collect()
}

/// The hook holding a token hash (only unfinished runs hold one).
pub(super) async fn find_hook<C: GenericClient>(conn: &C, token_hash: &str) -> Result<Option<HookRow>, Failure> {
    let sql = "SELECT run_id, op, meta FROM hooks WHERE token_hash = $1";
    let Some(row) = query_opt(conn, sql, &[&token_hash]).await? else { return Ok(None) };
    let meta = codec::decode_meta(row.try_get(2)?)?;
    Ok(Some(HookRow { run: codec::run_id(row.try_get(0)?)?, op: codec::op(row.try_get(1)?)?, meta }))
}

/// What a runtime needs at start-up, read in one snapshot (see `Store::recovery`).
pub(super) async fn recovery(client: &mut Client) -> Result<Recovery, Failure> {
    let tx = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
    let row = query_opt(&tx, "SELECT count(*) FROM runs WHERE status = 'active'", &[]).await?;
    let unfinished = row.map(|row| row.try_get::<_, i64>(0)).transpose()?.unwrap_or(0);
    let sql = "SELECT id FROM runs WHERE status = 'active' AND NOT parked
               UNION SELECT DISTINCT run_id FROM inbox WHERE NOT consumed";
    let mut runnable = ids(&tx, sql, &[]).await?;
    let mut sign_ins = Vec::new();
    let sql = "SELECT hooks.run_id, hooks.op, hooks.meta, runs.tool FROM hooks JOIN runs ON runs.id = hooks.run_id
               WHERE hooks.kind = 'auth' ORDER BY hooks.run_id, hooks.op";
    for row in query(&tx, sql, &[]).await? {
        let run = codec::run_id(row.try_get(0)?)?;
        match codec::decode_meta(row.try_get(2)?)? {
            HookMeta::Auth { provider, nonce } if !nonce.is_empty() => {
                let (op, tool) = (codec::op(row.try_get(1)?)?, codec::text(row.try_get(3)?, "tool")?);
                sign_ins.push(WaitingSignIn { run, tool, op, provider, nonce });
            }
            // Without a nonce, replaying the run publishes its link.
            _ => runnable.push(run),
        }
    }
    runnable.sort();
    runnable.dedup();
    let timers = timers(&tx).await?;
    tx.commit().await?;
    Ok(Recovery { unfinished: codec::uint(unfinished)? as usize, runnable, timers, sign_ins })
}

/// Unfinished runs a worker may claim at `now` (see `Store::claimable`): with something to do,
/// and not leased to a worker whose lease outlives `now`. Rows that another transaction holds
/// locked (a claim, an append or a delivery in flight) are skipped, not waited for; the row locks
/// taken here end with the transaction, at once, and its commit does not wait for the disk.
///
/// The runs `passed_over` names are left out while their fingerprint is the one given (see
/// `Store::claimable_except`).
pub(super) async fn claimable(
    client: &mut Client,
    now: Timestamp,
    limit: usize,
    passed_over: &[PassedOver],
) -> Result<Vec<RunId>, Failure> {
    let tx = client.transaction().await?;
    let sql = "SELECT id FROM runs
               WHERE id IN (
                   SELECT id FROM runs WHERE status = 'active' AND NOT parked
                   UNION SELECT run_id FROM inbox WHERE NOT consumed
                   UNION SELECT run_id FROM timers WHERE due <= $1
               )
               AND status = 'active' AND (owner IS NULL OR lease_until <= $1)
               AND NOT EXISTS (
                   SELECT 1 FROM unnest($3::text[], $4::text[]) AS passed (id, fingerprint)
                   WHERE passed.id = runs.id AND passed.fingerprint IS NOT DISTINCT FROM runs.fingerprint
               )
               ORDER BY position LIMIT $2
               FOR UPDATE SKIP LOCKED";
    let (now, limit) = (int(now.as_millis()), int(limit as u64));
    let passed: Vec<&str> = passed_over.iter().map(|passed| passed.run.as_str()).collect();
    let fingerprints: Vec<Option<&str>> = passed_over.iter().map(|passed| passed.fingerprint.as_deref()).collect();
    let lazy = tx.batch_execute("SET LOCAL synchronous_commit = off");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [&now, &limit, &passed, &fingerprints];
    let found = ids(&tx, sql, &params);
    let ((), runs) = futures::try_join!(async { lazy.await.map_err(Failure::from) }, found)?;
    tx.commit().await?;
    Ok(runs)
}

async fn ids<C: GenericClient>(
    conn: &C,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<RunId>, Failure> {
    let rows = query(conn, sql, params).await?;
    rows.iter().map(|row| codec::run_id(row.try_get(0)?)).collect()
}
