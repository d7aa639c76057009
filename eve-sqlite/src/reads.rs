//! The SQL of every read, run by the reader threads. Queries that read several tables do so in one
//! read transaction, so what they return is one consistent snapshot (a run's summary always
//! counts exactly the entries returned with it).

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{self, Failure, int};
use super::readers::{Pending, Queue};
use eve_runtime::journal::{BuildStamp, Entry, Op, Position, RunId};
use eve_runtime::store::{
    HookMeta, HookRow, InboxItem, JournalPage, Recovery, RunPage, RunQuery, RunRecord, RunSummary, StoreError,
    TimerRow, WaitingSignIn,
};

/// The SQL of a run's journal length, in a statement on `runs`: the row keeps it while the run
/// is parked or finished (the park and the finishing append write it); while the run goes on, its
/// appends leave the row alone (schema version 4), and the length is one past the journal's last
/// `seq`, found by a seek to the end of the run's part of the journal's index.
macro_rules! length_sql {
    () => {
        "CASE WHEN runs.parked = 1 OR runs.status <> 'active' THEN runs.entries \
         ELSE coalesce((SELECT seq FROM journal WHERE run_id = runs.id ORDER BY seq DESC LIMIT 1) + 1, 0) END"
    };
}
pub(super) use length_sql;

/// A run's status and journal length; no row if the run does not exist.
pub(super) const RUN_STATE: &str = concat!("SELECT status, ", length_sql!(), " FROM runs WHERE id = ?1");

/// A range of a run's journal, in order, through the index by run.
pub(super) const JOURNAL: &str =
    "SELECT seq, entry FROM journal WHERE run_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq";

/// Where one entry of a run's journal is in the table.
pub(super) const ENTRY_ID: &str = "SELECT id FROM journal WHERE run_id = ?1 AND seq = ?2";

/// A run's entries in a range of the table, in order: all of the range when nothing else was
/// appended among them. `NOT INDEXED`: the range of ids, never the index by run (which the planner
/// would otherwise take for the run's condition, then sort).
pub(super) const JOURNAL_SPAN: &str =
    "SELECT seq, entry FROM journal NOT INDEXED WHERE id >= ?1 AND id <= ?2 AND run_id = ?3 ORDER BY id";

/// A range at least this long is looked for as one range of the table (see [`span`]); a shorter
/// one is read through the index, which costs less than finding the range's ends.
const SPAN_FROM: u64 = 32;

/// A run's pending inbox, oldest first.
const INBOX: &str = "SELECT id, delivery FROM inbox WHERE run_id = ?1 AND consumed = 0 ORDER BY id";

/// How many runs have not finished.
const UNFINISHED: &str = "SELECT count(*) FROM runs WHERE status = 'active'";

/// The runs a recovery wakes: unfinished and not parked, or with a delivery to take.
const RUNNABLE: &str = "SELECT id FROM runs WHERE status = 'active' AND parked = 0 \
                        UNION SELECT DISTINCT run_id FROM inbox WHERE consumed = 0";

/// The sign-ins runs wait for.
const SIGN_INS: &str = "SELECT hooks.run_id, hooks.op, hooks.meta, runs.tool FROM hooks \
                        JOIN runs ON runs.id = hooks.run_id \
                        WHERE json_extract(hooks.meta, '$.kind') = 'auth' ORDER BY hooks.run_id, hooks.op";

/// Every armed timer.
const TIMERS: &str = "SELECT run_id, op, kind, due FROM timers ORDER BY run_id, op, kind DESC";

/// The statements a start runs, which each reader thread prepares while it is idle (see
/// `readers::serve`): a recovery's first, then a claim's.
pub(super) const WARM: [&str; 9] =
    [UNFINISHED, RUNNABLE, SIGN_INS, TIMERS, RUN_STATE, ENTRY_ID, JOURNAL_SPAN, INBOX, JOURNAL];

/// A run and its whole journal.
pub(super) fn load(conn: &mut Connection, run: &RunId) -> Result<Option<RunRecord>, Failure> {
    let tx = conn.transaction()?;
    let Some(summary) = summary(&tx, run)? else { return Ok(None) };
    let entries = journal(&tx, run, 0, summary.entries)?;
    Ok(Some(RunRecord { summary, entries }))
}

/// A run's summary and last entry, in one snapshot.
pub(super) fn tail(conn: &mut Connection, run: &RunId) -> Result<Option<(RunSummary, Entry)>, Failure> {
    let tx = conn.transaction()?;
    let Some(summary) = summary(&tx, run)? else { return Ok(None) };
    let last = summary.entries.saturating_sub(1);
    let entry = journal(&tx, run, last, summary.entries)?.pop();
    Ok(entry.map(|entry| (summary, entry)))
}

/// At most `limit` entries of history `at.history` of the run's journal from `at.seq` on, and the
/// number of its current history, in one snapshot.
pub(super) fn page(
    conn: &mut Connection,
    run: &RunId,
    at: Position,
    limit: usize,
) -> Result<Option<JournalPage>, Failure> {
    let tx = conn.transaction()?;
    let sql = concat!("SELECT continued, ", length_sql!(), " FROM runs WHERE id = ?1");
    let row = tx.prepare_cached(sql)?.query_row([run.as_str()], |row| Ok((row.get(0)?, row.get(1)?))).optional()?;
    let Some((continued, length)): Option<(u32, i64)> = row else { return Ok(None) };
    let limit = u64::try_from(limit).unwrap_or(u64::MAX);
    let entries = if at.history == continued {
        let to = at.seq.saturating_add(limit).min(codec::uint(length)?);
        if at.seq < to { journal(&tx, run, at.seq, to)? } else { Vec::new() }
    } else if at.history < continued {
        let sql = "SELECT seq, entry FROM journal_previous WHERE run_id = ?1 AND history = ?2 AND seq >= ?3 \
                   ORDER BY seq LIMIT ?4";
        let mut statement = tx.prepare_cached(sql)?;
        let mut rows = statement.query(params![run.as_str(), at.history, int(at.seq), int(limit)])?;
        let (mut entries, mut bytes) = (Vec::new(), 0);
        while let Some(row) = rows.next()? {
            entries.push(decode_row(run, row.get(0)?, row, &mut bytes)?);
        }
        entries
    } else {
        Vec::new()
    };
    Ok(Some(JournalPage::new(continued, entries)))
}

/// A journal at least this long is read in two halves at once, the second on another reader
/// thread: decoding its entries is most of a long claim, and the halves decode in parallel.
const SPLIT_FROM: u64 = 512;

/// What a claim reads.
pub(super) struct ClaimRead {
    /// The journal from the claim's `from_seq`, or its first part if [`rest`](Self::rest) is set.
    pub entries: Vec<Entry>,
    /// The rest of the journal, being read on another thread.
    pub rest: Option<Pending<Vec<Entry>>>,
    /// The journal's length.
    pub next_seq: u64,
    /// Whether the run is unfinished.
    pub active: bool,
    /// The length in bytes of the text of [`entries`](Self::entries).
    pub text: usize,
    /// The pending inbox.
    pub inbox: Vec<InboxItem>,
}

/// What a claim returns besides its fence, read in one snapshot: the journal from `from_seq`, the
/// journal's length, whether the run is unfinished, and the pending inbox.
/// [`StoreError::RunNotFound`] if the run does not exist.
///
/// Given `other`, a journal of [`SPLIT_FROM`] entries or more has its second half read by another
/// thread at the same time, in a snapshot of its own (see [`journal_rest`]); the caller appends
/// it. (The caller waits for it rather than this thread: a reader thread that waited for another
/// could wait for ever, should every other thread wait likewise.)
pub(super) fn claimed(
    conn: &mut Connection,
    run: &RunId,
    from_seq: u64,
    other: Option<&Queue>,
) -> Result<ClaimRead, Failure> {
    let tx = conn.transaction()?;
    let Some((status, length)) = run_state(&tx, run)? else { return Err(StoreError::RunNotFound(run.clone()).into()) };
    claimed_in(&tx, run, from_seq, (status, length), other)
}

/// What [`claimed`] reads, read ahead of the claim (see `ahead`): `None` if the run does not
/// exist, is finished, or has a journal longer than `max_entries`, which is left for the claim.
pub(super) fn claimed_ahead(
    conn: &mut Connection,
    run: &RunId,
    other: Option<&Queue>,
    max_entries: u64,
) -> Result<Option<ClaimRead>, Failure> {
    let tx = conn.transaction()?;
    match run_state(&tx, run)? {
        Some((status, length)) if status == "active" && codec::uint(length)? <= max_entries => {
            claimed_in(&tx, run, 0, (status, length), other).map(Some)
        }
        _ => Ok(None),
    }
}

/// A run's status and journal length, as [`run_state`] reads them.
pub(super) type RunState = (String, i64);

/// The run's state (`None` if it does not exist) and its pending inbox, in one snapshot: what a
/// claim reads besides a journal read ahead.
pub(super) fn state_and_inbox(
    conn: &mut Connection,
    run: &RunId,
) -> Result<(Option<RunState>, Vec<InboxItem>), Failure> {
    let tx = conn.transaction()?;
    Ok((run_state(&tx, run)?, inbox(&tx, run)?))
}

/// [`claimed`] within a read transaction, given the run's state as it read it.
fn claimed_in(
    tx: &Connection,
    run: &RunId,
    from_seq: u64,
    (status, length): (String, i64),
    other: Option<&Queue>,
) -> Result<ClaimRead, Failure> {
    let (active, next_seq) = (status == "active", codec::uint(length)?);
    let (split, rest) = match other {
        Some(queue) if next_seq.saturating_sub(from_seq) >= SPLIT_FROM => {
            let split = from_seq + (next_seq - from_seq) / 2;
            let run = run.clone();
            (split, Some(queue.queue(move |conn| journal_rest(conn, &run, split, next_seq))))
        }
        _ => (next_seq, None),
    };
    // Room for the rest too: it is appended to this part.
    let mut entries = Vec::with_capacity(capacity(from_seq, next_seq));
    let text = journal_into(tx, run, from_seq, split, &mut entries)?;
    let inbox = inbox(tx, run)?;
    Ok(ClaimRead { entries, rest, next_seq, active, inbox, text })
}

/// Entries `from..length` of a run's journal, `length` entries long when the claim read it, in a
/// snapshot of their own. A journal changes only through its run's appends, and the runtime
/// claims a run only while no activation of it runs, so these are the entries the claim's own
/// snapshot holds; should the length differ all the same, the run was written to meanwhile, and
/// the claim fails rather than join two different journals.
pub(super) fn journal_rest(conn: &mut Connection, run: &RunId, from: u64, length: u64) -> Result<Vec<Entry>, Failure> {
    let tx = conn.transaction()?;
    if run_state(&tx, run)?.map(|(_, current)| current) != Some(int(length)) {
        let reason = format!(
            "run {run}'s journal changed while it was being claimed (another activation of the run wrote to \
             it); claim the run again"
        );
        return Err(StoreError::Backend(reason).into());
    }
    journal(&tx, run, from, length)
}

/// The run's status and journal length, or `None` if the run does not exist.
pub(super) fn run_state(conn: &Connection, run: &RunId) -> Result<Option<RunState>, Failure> {
    let state = conn.prepare_cached(RUN_STATE)?.query_row([run.as_str()], |row| Ok((row.get(0)?, row.get(1)?)));
    Ok(state.optional()?)
}

type SummaryRow = (String, String, String, String, i64, i64, bool, Option<String>, Option<String>);

/// The columns a [`SummaryRow`] reads, in order.
const SUMMARY: &str =
    concat!("id, workflow_id, tool, status, created_at, ", length_sql!(), ", parked, fingerprint, version");

fn summary_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SummaryRow> {
    let build = (row.get(7)?, row.get(8)?);
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?, build.0, build.1))
}

fn decode_summary(
    (id, workflow_id, tool, status, created_at, entries, parked, fingerprint, version): SummaryRow,
) -> Result<RunSummary, Failure> {
    Ok(RunSummary {
        id: codec::run_id(&id)?,
        workflow_id,
        tool,
        status: codec::status(&status)?,
        created_at: codec::timestamp(created_at)?,
        entries: codec::uint(entries)?,
        parked,
        build: fingerprint.zip(version).map(|(fingerprint, version)| BuildStamp { fingerprint, version }),
    })
}

fn summary(conn: &Connection, run: &RunId) -> Result<Option<RunSummary>, Failure> {
    let sql = format!("SELECT {SUMMARY} FROM runs WHERE id = ?1");
    let row = conn.prepare_cached(&sql)?.query_row([run.as_str()], summary_row).optional()?;
    row.map(decode_summary).transpose()
}

/// `Ok` if the run exists, else [`StoreError::RunNotFound`].
pub(super) fn exists(conn: &mut Connection, run: &RunId) -> Result<(), Failure> {
    let sql = "SELECT 1 FROM runs WHERE id = ?1";
    let found: Option<i64> = conn.prepare_cached(sql)?.query_row([run.as_str()], |row| row.get(0)).optional()?;
    found.map(drop).ok_or_else(|| StoreError::RunNotFound(run.clone()).into())
}

/// Entries `from..to` of the run's journal.
fn journal(conn: &Connection, run: &RunId, from: u64, to: u64) -> Result<Vec<Entry>, Failure> {
    let mut entries = Vec::with_capacity(capacity(from, to));
    journal_into(conn, run, from, to, &mut entries)?;
    Ok(entries)
}

/// Room for entries `from..to`, within reason should the numbers be damaged.
fn capacity(from: u64, to: u64) -> usize {
    usize::try_from(to.saturating_sub(from)).unwrap_or(0).min(1 << 16)
}

/// Appends entries `from..to` of the run's journal to `entries`, and returns the length of
/// their text in bytes.
///
/// A history appended while no other run appended (a run alone, or a long stretch of one run) is
/// one range of the table, read in order without the index: as fast as a table keyed by run. A
/// history interleaved with others' is read through the index, a seek into the table per entry.
fn journal_into(
    conn: &Connection,
    run: &RunId,
    from: u64,
    to: u64,
    entries: &mut Vec<Entry>,
) -> Result<usize, Failure> {
    let (start, mut bytes) = (entries.len(), 0);
    if let Some((first, last)) = span(conn, run, from, to)? {
        let mut statement = conn.prepare_cached(JOURNAL_SPAN)?;
        let mut rows = statement.query(params![first, last, run.as_str()])?;
        let mut expected = int(from);
        while let Some(row) = rows.next()? {
            // The range holds exactly these entries (see `span`); a file whose ids were changed by
            // hand may not (it then has fewer, or one out of place), and is read through the index.
            if row.get::<_, i64>(0)? != expected {
                break;
            }
            entries.push(decode_row(run, expected, row, &mut bytes)?);
            expected += 1;
        }
        if u64::try_from(entries.len() - start) == Ok(to - from) {
            return Ok(bytes);
        }
        entries.truncate(start);
        bytes = 0;
    }
    let mut statement = conn.prepare_cached(JOURNAL)?;
    let mut rows = statement.query(params![run.as_str(), int(from), int(to)])?;
    while let Some(row) = rows.next()? {
        entries.push(decode_row(run, row.get(0)?, row, &mut bytes)?);
    }
    Ok(bytes)
}

/// The entry in column 1 of `row`, entry `seq` of `run`'s journal; adds its text's length to
/// `bytes`.
fn decode_row(run: &RunId, seq: i64, row: &rusqlite::Row<'_>, bytes: &mut usize) -> Result<Entry, Failure> {
    // Decoded from SQLite's own buffer: a replay reads every entry once, so no copy of its text.
    let text = row
        .get_ref(1)?
        .as_str()
        .map_err(|error| Failure::Decode(format!("run {run}'s journal entry {seq} is not text: {error}")))?;
    *bytes += text.len();
    codec::decode_entry(run, seq, text)
}

/// The table ids of entries `from` and `to - 1` of `run`'s journal, when as many ids separate
/// them as entries do: a run's appends take ascending ids (each one past the table's largest), so
/// the range between them then holds these entries and nothing else, and is read without the
/// index. [`journal_into`] checks that it got each entry in turn all the same. `None` for a short
/// range (see [`SPAN_FROM`]), or one that other runs' appends interleave.
fn span(conn: &Connection, run: &RunId, from: u64, to: u64) -> Result<Option<(i64, i64)>, Failure> {
    if to.saturating_sub(from) < SPAN_FROM {
        return Ok(None);
    }
    let mut statement = conn.prepare_cached(ENTRY_ID)?;
    let mut id = |seq: u64| statement.query_row(params![run.as_str(), int(seq)], |row| row.get::<_, i64>(0)).optional();
    let (Some(first), Some(last)) = (id(from)?, id(to - 1)?) else { return Ok(None) };
    Ok((last.checked_sub(first) == Some(int(to - 1 - from))).then_some((first, last)))
}

/// One page of the runs `query` asks for, newest first (by `rowid`, which grows with creation).
pub(super) fn list_runs(conn: &Connection, query: &RunQuery) -> Result<RunPage, Failure> {
    let (sql, values) = listing(query);
    let mut statement = conn.prepare_cached(&sql)?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(values.iter()), |row| Ok((summary_row(row)?, row.get::<_, i64>(9)?)))?;
    let listed = rows
        .map(|row| {
            let (summary, position) = row?;
            Ok((decode_summary(summary)?, codec::uint(position)?))
        })
        .collect::<Result<_, Failure>>()?;
    Ok(RunPage::of(query, listed))
}

/// The statement that lists `query`'s page, with its values. Each filter adds its condition, so
/// every combination has a plan of its own that walks an index (`runs_by_status`,
/// `runs_by_tool`, or the table itself) backwards from the cursor, with no sort: the cost is the
/// page's, not the store's.
pub(super) fn listing(query: &RunQuery) -> (String, Vec<Box<dyn rusqlite::ToSql>>) {
    let mut conditions = Vec::new();
    let mut values: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
    if let Some(status) = query.status {
        values.push(Box::new(codec::status_name(status)));
        conditions.push(format!("status = ?{}", values.len()));
    }
    if let Some(parked) = query.parked {
        values.push(Box::new(parked));
        conditions.push(format!("parked = ?{}", values.len()));
    }
    if let Some(tool) = &query.tool {
        values.push(Box::new(tool.clone()));
        conditions.push(format!("tool = ?{}", values.len()));
    }
    if let Some(before) = query.before {
        values.push(Box::new(int(before.position())));
        conditions.push(format!("rowid < ?{}", values.len()));
    }
    let filter = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    values.push(Box::new(int(query.limit.saturating_add(1) as u64)));
    let sql = format!("SELECT {SUMMARY}, rowid FROM runs {filter} ORDER BY rowid DESC LIMIT ?{}", values.len());
    (sql, values)
}

/// The run's inbox items not yet consumed, oldest first.
pub(super) fn inbox(conn: &Connection, run: &RunId) -> Result<Vec<InboxItem>, Failure> {
    let mut statement = conn.prepare_cached(INBOX)?;
    let rows = statement.query_map([run.as_str()], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))?;
    rows.map(|row| {
        let (id, text) = row?;
        let delivery = eve_runtime::journal::depth::from_str(&text).map_err(|error| {
            Failure::Decode(format!("inbox item {id} of run {run} is not a valid delivery: {error}"))
        })?;
        Ok(InboxItem { id: codec::uint(id)?, run: run.clone(), delivery })
    })
    .collect()
}

/// Every pending timer, ordered by run, operation and kind (sleep before retry) like the memory store.
pub(super) fn timers(conn: &Connection) -> Result<Vec<TimerRow>, Failure> {
    let mut statement = conn.prepare_cached(TIMERS)?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?, row.get::<_, i64>(3)?))
    })?;
    rows.map(|row| {
        let (run, op, kind, due) = row?;
        let op: Op = codec::op(op)?;
        Ok(TimerRow { run: codec::run_id(&run)?, op, due: codec::timestamp(due)?, kind: codec::kind(&kind)? })
    })
    .collect()
}

/// The hook holding a token hash (only unfinished runs hold one).
pub(super) fn find_hook(conn: &Connection, token_hash: &str) -> Result<Option<HookRow>, Failure> {
    let sql = "SELECT run_id, op, meta FROM hooks WHERE token_hash = ?1";
    let row: Option<(String, i64, String)> = conn
        .prepare_cached(sql)?
        .query_row([token_hash], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    row.map(|(run, op, meta)| Ok(HookRow { run: codec::run_id(&run)?, op: codec::op(op)?, meta: hook_meta(&meta)? }))
        .transpose()
}

/// A hook row's `meta` column, decoded.
pub(super) fn hook_meta(text: &str) -> Result<HookMeta, Failure> {
    serde_json::from_str(text).map_err(|error| {
        StoreError::Corrupt { path: "the hooks table".into(), reason: format!("unreadable hook metadata: {error}") }
            .into()
    })
}

/// What a runtime needs at start-up, read in one snapshot (see `Store::recovery`).
pub(super) fn recovery(conn: &mut Connection) -> Result<Recovery, Failure> {
    recovery_in(&*conn.transaction()?)
}

/// How many journal entries a start reads ahead at most, over all the runs it reads for (see
/// [`start`]).
pub(super) const START_ENTRIES: u64 = 16_384;

/// How much journal text a start reads ahead: once its runs' journals hold this many bytes, it
/// reads no further run's. (The run that crosses the mark is read whole: its claim would read it
/// at once all the same.)
pub(super) const START_TEXT: usize = 16 << 20;

/// What a start reads ahead as the store opens: the recovery, and the claims of the runs it
/// wakes, in its order, within [`START_ENTRIES`] and [`START_TEXT`].
pub(super) struct StartRead {
    /// What [`recovery`] reads.
    pub recovery: Recovery,
    /// What [`claimed`] reads for each of the first runnable runs, from the journal's start.
    pub claims: Vec<(RunId, ClaimRead)>,
}

/// The recovery and the claims a start makes first, in one snapshot (the second halves of long
/// journals in their own, as in [`claimed`]), within `entries` entries and `text_limit` bytes of
/// their text ([`START_ENTRIES`] and [`START_TEXT`] as a store opens).
pub(super) fn start(
    conn: &mut Connection,
    other: Option<&Queue>,
    (mut entries, text_limit): (u64, usize),
) -> Result<StartRead, Failure> {
    let tx = conn.transaction()?;
    let recovery = recovery_in(&tx)?;
    let (mut claims, mut text) = (Vec::new(), 0);
    for run in &recovery.runnable {
        let Some((status, length)) = run_state(&tx, run)? else { continue };
        let Some(left) = entries.checked_sub(codec::uint(length)?) else { break };
        entries = left;
        let claim = claimed_in(&tx, run, 0, (status, length), other)?;
        // A second half, read elsewhere, is about as long as the first.
        text += if claim.rest.is_some() { 2 * claim.text } else { claim.text };
        claims.push((run.clone(), claim));
        if text >= text_limit {
            break;
        }
    }
    Ok(StartRead { recovery, claims })
}

fn recovery_in(tx: &Connection) -> Result<Recovery, Failure> {
    let unfinished: i64 = tx.prepare_cached(UNFINISHED)?.query_row([], |row| row.get(0))?;
    let mut runnable = ids(tx, RUNNABLE)?;
    let mut sign_ins = Vec::new();
    let mut statement = tx.prepare_cached(SIGN_INS)?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?, row.get::<_, String>(3)?))
    })?;
    for row in rows {
        let (run, op, meta, tool) = row?;
        let run = codec::run_id(&run)?;
        match serde_json::from_str(&meta) {
            Ok(HookMeta::Auth { provider, nonce }) if !nonce.is_empty() => {
                sign_ins.push(WaitingSignIn { run, tool, op: codec::op(op)?, provider, nonce });
            }
            // Written before nonces were indexed: replaying the run publishes its link.
            _ => runnable.push(run),
        }
    }
    drop(statement);
    runnable.sort();
    runnable.dedup();
    let timers = timers(tx)?;
    Ok(Recovery { unfinished: codec::uint(unfinished)? as usize, runnable, timers, sign_ins })
}

fn ids(conn: &Connection, sql: &str) -> Result<Vec<RunId>, Failure> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
    rows.map(|row| codec::run_id(&row?)).collect()
}
