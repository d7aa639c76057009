//! The SQL of every write, run on the write connection in a batch's transaction.
//!
//! Each function either succeeds or returns the refusal the [`Store`](eve_runtime::store::Store)
//! contract names; the writer then undoes whatever it wrote (see [`super::writer`]), so "refused"
//! always means "nothing written". Most refusals come before the first write, which spares the
//! writer a savepoint per request. The checks happen in the same order as in the memory store (run exists, fence, run
//! unfinished, sequence number, hook tokens), so both report the same error for the same request.
//!
//! The hot path of an append is one `INSERT` per entry, and index rows only for entries that imply
//! them. Its checks (fence, status, journal length) are made in memory when the run's claim knows
//! them (see [`Epochs`]), else against the file. The run's row is written only when the append
//! changes the run's status or clears its parked mark: while a run goes on, its length is the
//! journal's own (schema version 4), so a step's commit writes the journal alone. Before, an
//! `UPDATE` of the row checked and advanced the length on every append, about a quarter of the
//! writer's time under many concurrent runs. The journal is stored in the order of its appends
//! (schema version 5), so the entries of many runs committed together fill the table's last page
//! and a few pages of its index by run, rather than one page per run.

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{self, Failure, int, kind_name, status_name};
use super::epochs::{Claim, Epochs};
use super::reads::{length_sql, run_state};
use eve_runtime::journal::{BuildStamp, Op, RunId};
use eve_runtime::store::{
    Created, Delivered, DeliveryPayload, Fence, HookMeta, HookRow, InboxLimits, IndexChanges, KEPT_HISTORIES,
    StoreError, Target,
};

/// How much smaller than an entry a delivery must be. The entry that records a delivery
/// (`HookReceived`, `AskResolved`, `CancelRequested`) is a few dozen bytes longer than the
/// delivery, so an accepted delivery always fits in the journal when the run takes it.
pub(super) const DELIVERY_HEADROOM: usize = 64;

/// A run to create, encoded.
pub(super) struct NewRunRow {
    pub id: RunId,
    pub workflow_id: String,
    pub tool: String,
    pub created_at: u64,
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
    pub consumed: Vec<u64>,
    pub changes: IndexChanges,
    /// The notices to other runs, with each delivery as JSON.
    pub notices: Vec<(RunId, String, Option<u32>, String)>,
    /// The runs the append starts, created unclaimed.
    pub runs: Vec<NewRunRow>,
}

/// Creates the run claimed by its creator at epoch 1, or reports that the id is taken.
pub(super) fn create_run(conn: &Connection, row: &NewRunRow, epochs: &Epochs) -> Result<Created, Failure> {
    if !insert_run(conn, row)? {
        return Ok(Created::Existing);
    }
    epochs.created(&row.id);
    Ok(Created::New(Fence { epoch: 1 }))
}

/// Inserts the run with its `RunStarted` entry, unclaimed, unless its id is taken; returns whether
/// it did.
fn insert_run(conn: &Connection, row: &NewRunRow) -> Result<bool, Failure> {
    let sql = "INSERT INTO runs (id, workflow_id, tool, status, created_at, entries, fingerprint, version) \
               VALUES (?1, ?2, ?3, 'active', ?4, 1, ?5, ?6) ON CONFLICT (id) DO NOTHING";
    let build = row.changes.build.as_ref();
    let (fingerprint, version) = (build.map(|build| &build.fingerprint), build.map(|build| &build.version));
    let params = params![row.id.as_str(), row.workflow_id, row.tool, int(row.created_at), fingerprint, version];
    if conn.prepare_cached(sql)?.execute(params)? == 0 {
        return Ok(false);
    }
    insert_entries(conn, &row.id, 0, std::slice::from_ref(&row.entry))?;
    apply_indexes(conn, &row.id, &row.changes)?;
    Ok(true)
}

/// Appends the entries and applies the index changes they imply.
pub(super) fn append(conn: &Connection, rows: &AppendRows, epochs: &Epochs) -> Result<(), Failure> {
    let claim = check_append(conn, rows, epochs)?;
    // The entries are the first write, so a refusal found here leaves nothing to undo.
    insert_entries(conn, &rows.run, rows.first_seq, &rows.entries).map_err(|failure| {
        // An entry already at that place: the journal grew past what the claim knew (see
        // `Epochs`), and the file says how.
        let taken = matches!(&failure, Failure::Sqlite(error)
            if error.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation));
        match taken.then(|| check_run(conn, rows)) {
            Some(Err(refusal)) => refusal,
            _ => failure,
        }
    })?;
    update_run(conn, rows, claim.unmarked)?;
    consume(conn, &rows.run, &rows.consumed)?;
    apply_indexes(conn, &rows.run, &rows.changes)?;
    for run in &rows.runs {
        insert_run(conn, run)?;
    }
    for (run, delivery_id, op, delivery) in &rows.notices {
        accept_notice(conn, run, delivery_id, *op, delivery)?;
    }
    Ok(())
}

/// Accepts a notice into an unfinished run's inbox; a repeated delivery id is dropped.
fn accept_notice(
    conn: &Connection,
    run: &RunId,
    delivery_id: &str,
    op: Option<u32>,
    delivery: &str,
) -> Result<(), Failure> {
    if !is_active(conn, run)? {
        return Ok(());
    }
    let sql = "INSERT INTO inbox (run_id, delivery_id, delivery, op) VALUES (?1, ?2, ?3, ?4) \
               ON CONFLICT (run_id, delivery_id) DO NOTHING";
    conn.prepare_cached(sql)?.execute(params![run.as_str(), delivery_id, delivery, op])?;
    Ok(())
}

/// Checks the fence, then that the run is unfinished and its journal `rows.first_seq` long (in
/// the memory store's order), and returns what the claim knows. The status and length are read
/// from the file only when the claim does not know them (see [`Epochs`]).
fn check_append(conn: &Connection, rows: &AppendRows, epochs: &Epochs) -> Result<Claim, Failure> {
    let claim = epochs.known(&rows.run);
    if claim.epoch != rows.fence.epoch {
        return Err(fenced(conn, &rows.run, rows.fence, claim.epoch)?.into());
    }
    if claim.length != Some(rows.first_seq) {
        check_run(conn, rows)?;
    }
    Ok(claim)
}

const SET_STATUS: &str = "UPDATE runs SET status = ?2, entries = ?3 WHERE id = ?1";

const CLEAR_MARK: &str = "UPDATE runs SET parked = 0 WHERE id = ?1 AND parked = 1";

const SET_BUILD: &str = "UPDATE runs SET fingerprint = ?2, version = ?3 WHERE id = ?1";

/// Writes the run's row if the append changes it: its status (and then its final length), or the
/// parked mark it clears.
fn update_run(conn: &Connection, rows: &AppendRows, unmarked: bool) -> Result<(), Failure> {
    let run = rows.run.as_str();
    // SQLite rewrites every index on a column the `SET` names, even to the same value, so the
    // status and the mark are each written only when they change.
    if let Some(status) = rows.changes.status.map(status_name) {
        let length = int(rows.first_seq + rows.entries.len() as u64);
        conn.prepare_cached(SET_STATUS)?.execute(params![run, status, length])?;
    }
    // The append clears the parked mark (see `Store::park`); the row is written only if it was set,
    // and the statement is spared when the run is known to have none (see `Epochs`).
    if !unmarked {
        conn.prepare_cached(CLEAR_MARK)?.execute([run])?;
    }
    // Only the entries that name a build (`RunUpgraded`) change it: rare, so one more statement.
    if let Some(build) = &rows.changes.build {
        conn.prepare_cached(SET_BUILD)?.execute(params![run, build.fingerprint, build.version])?;
    }
    Ok(())
}

/// Checks against the file that the run is unfinished and its journal `rows.first_seq` long.
fn check_run(conn: &Connection, rows: &AppendRows) -> Result<(), Failure> {
    let run = &rows.run;
    let (status, length) = current_row(conn, run)?;
    if status != "active" {
        return Err(StoreError::RunFinished(run.clone()).into());
    }
    if length != rows.first_seq {
        return Err(StoreError::SeqConflict { run: run.clone(), expected: rows.first_seq, actual: length }.into());
    }
    Ok(())
}

/// A fence that is not the current one: [`StoreError::Fenced`], or [`StoreError::RunFinished`] for a
/// finished run (whose epoch is forgotten), or [`StoreError::RunNotFound`].
fn fenced(conn: &Connection, run: &RunId, held: Fence, current: u64) -> Result<StoreError, Failure> {
    let (status, _) = current_row(conn, run)?;
    if status != "active" {
        return Ok(StoreError::RunFinished(run.clone()));
    }
    Ok(StoreError::Fenced { run: run.clone(), held: held.epoch, current })
}

/// The status and journal length of `run`, or [`StoreError::RunNotFound`].
fn current_row(conn: &Connection, run: &RunId) -> Result<(String, u64), Failure> {
    let Some((status, entries)) = run_state(conn, run)? else {
        return Err(StoreError::RunNotFound(run.clone()).into());
    };
    Ok((status, codec::uint(entries)?))
}

const INSERT_ENTRY: &str = "INSERT INTO journal (run_id, seq, entry) VALUES (?1, ?2, ?3)";

fn insert_entries(conn: &Connection, run: &RunId, first_seq: u64, entries: &[String]) -> Result<(), Failure> {
    let mut insert = conn.prepare_cached(INSERT_ENTRY)?;
    for (seq, entry) in (first_seq..).zip(entries) {
        insert.execute(params![run.as_str(), int(seq), entry])?;
    }
    Ok(())
}

const CONSUME: &str = "UPDATE inbox SET consumed = 1 WHERE id = ?1 AND run_id = ?2";

/// Marks inbox items consumed; ids of other runs' items are ignored.
fn consume(conn: &Connection, run: &RunId, ids: &[u64]) -> Result<(), Failure> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut update = conn.prepare_cached(CONSUME)?;
    for id in ids {
        update.execute(params![int(*id), run.as_str()])?;
    }
    Ok(())
}

/// Applies `changes` in the memory store's order: timers added, timers removed, hooks, finish.
fn apply_indexes(conn: &Connection, run: &RunId, changes: &IndexChanges) -> Result<(), Failure> {
    for (op, due, kind) in &changes.timers_added {
        let sql = "INSERT INTO timers (run_id, op, kind, due) VALUES (?1, ?2, ?3, ?4) \
                   ON CONFLICT (run_id, op, kind) DO UPDATE SET due = excluded.due";
        conn.prepare_cached(sql)?.execute(params![run.as_str(), op.0, kind_name(*kind), int(due.as_millis())])?;
    }
    for (op, kind) in &changes.timers_removed {
        let sql = "DELETE FROM timers WHERE run_id = ?1 AND op = ?2 AND kind = ?3";
        conn.prepare_cached(sql)?.execute(params![run.as_str(), op.0, kind_name(*kind)])?;
    }
    for (op, token_hash, meta) in &changes.hooks_added {
        add_hook(conn, run, *op, token_hash, meta)?;
    }
    for op in &changes.hooks_removed {
        let sql = "DELETE FROM hooks WHERE run_id = ?1 AND op = ?2";
        conn.prepare_cached(sql)?.execute(params![run.as_str(), op.0])?;
    }
    if changes.status.is_some() {
        finish(conn, run)?;
    }
    Ok(())
}

/// Indexes the hook, refusing a token hash another (necessarily unfinished) run holds.
fn add_hook(conn: &Connection, run: &RunId, op: Op, token_hash: &str, meta: &HookMeta) -> Result<(), Failure> {
    // The upsert updates only a row of the same run, so zero changed rows means another run holds it.
    let sql = "INSERT INTO hooks (token_hash, run_id, op, meta) VALUES (?1, ?2, ?3, ?4) \
               ON CONFLICT (token_hash) DO UPDATE SET op = excluded.op, meta = excluded.meta \
               WHERE hooks.run_id = excluded.run_id";
    let meta = serde_json::to_string(meta).expect("hook metadata always serializes");
    if conn.prepare_cached(sql)?.execute(params![token_hash, run.as_str(), op.0, meta])? == 0 {
        return Err(StoreError::HookTokenInUse { run: run.clone(), op }.into());
    }
    Ok(())
}

const FINISH: [&str; 3] = [
    "DELETE FROM timers WHERE run_id = ?1",
    "DELETE FROM hooks WHERE run_id = ?1",
    "DELETE FROM inbox WHERE run_id = ?1",
];

/// Releases what only an unfinished run holds: its timers, hook tokens and inbox.
fn finish(conn: &Connection, run: &RunId) -> Result<(), Failure> {
    for sql in FINISH {
        conn.prepare_cached(sql)?.execute([run.as_str()])?;
    }
    Ok(())
}

/// The statements a start's first writes run, which the writer thread prepares when it starts
/// (see `writer::serve`): a replayed run's parked mark first, then a delivery, then the append of
/// the run it wakes, up to its end.
pub(super) const WARM: [&str; 10] = [
    PARK,
    HOOK_STANDING,
    ACCEPT_DELIVERY,
    INSERT_ENTRY,
    CLEAR_MARK,
    CONSUME,
    SET_STATUS,
    FINISH[0],
    FINISH[1],
    FINISH[2],
];

/// Marks a run parked, and keeps its length in its row, if it is unfinished and its journal is
/// still `?2` entries long.
pub(super) const PARK: &str = concat!(
    "UPDATE runs SET parked = 1, entries = ?2 WHERE id = ?1 AND status = 'active' AND ",
    length_sql!(),
    " = ?2"
);

/// Marks the run parked unless the fence is stale or the journal grew past `next_seq`.
pub(super) fn park(
    conn: &Connection,
    run: &RunId,
    fence: Fence,
    next_seq: u64,
    epochs: &Epochs,
) -> Result<(), Failure> {
    if epochs.current(run) != fence.epoch {
        return Ok(());
    }
    conn.prepare_cached(PARK)?.execute(params![run.as_str(), int(next_seq)])?;
    Ok(())
}

/// Replaces the run's history with one that starts with `started` (see `Store::continue_as_new`).
pub(super) fn continue_as_new(
    conn: &Connection,
    run: &RunId,
    fence: Fence,
    started: (u32, &str, Option<&BuildStamp>),
    epochs: &Epochs,
    keep_inbox: bool,
) -> Result<(), Failure> {
    let (continued, started, build) = started;
    let current = epochs.current(run);
    if current != fence.epoch {
        return Err(fenced(conn, run, fence, current)?.into());
    }
    let sql = "UPDATE runs SET parked = 0, continued = ?2, fingerprint = ?3, version = ?4 \
               WHERE id = ?1 AND status = 'active'";
    let (fingerprint, version) = (build.map(|build| &build.fingerprint), build.map(|build| &build.version));
    if conn.prepare_cached(sql)?.execute(params![run.as_str(), continued, fingerprint, version])? == 0 {
        current_row(conn, run)?;
        return Err(StoreError::RunFinished(run.clone()).into());
    }
    let inbox =
        "DELETE FROM inbox WHERE run_id = ?1 AND (consumed = 1 OR json_extract(delivery, '$.type') <> 'cancel')";
    // The history that ends is set aside for followers, numbered one below the new one; histories
    // older than the store keeps go.
    let set_aside = "INSERT INTO journal_previous (run_id, history, seq, entry) \
                     SELECT run_id, ?2, seq, entry FROM journal WHERE run_id = ?1";
    conn.prepare_cached(set_aside)?.execute(params![run.as_str(), continued.saturating_sub(1)])?;
    let sql = "DELETE FROM journal_previous WHERE run_id = ?1 AND history < ?2";
    conn.prepare_cached(sql)?.execute(params![run.as_str(), continued.saturating_sub(KEPT_HISTORIES)])?;
    let statements = [
        "DELETE FROM journal WHERE run_id = ?1",
        "DELETE FROM timers WHERE run_id = ?1",
        "DELETE FROM hooks WHERE run_id = ?1",
    ];
    for sql in statements.into_iter().chain((!keep_inbox).then_some(inbox)) {
        conn.prepare_cached(sql)?.execute([run.as_str()])?;
    }
    insert_entries(conn, run, 0, std::slice::from_ref(&started.to_owned()))
}

/// Accepts a delivery into the inbox of the unfinished run `target` names, if it has room. What
/// the checks need (the hook, the run's state, a repeated id, the waiting deliveries) is read in
/// one statement: five statements cost a delivery four more trips through SQLite's engine, and a
/// store's first delivery after it opens four more statements to prepare.
pub(super) fn deliver(
    conn: &Connection,
    target: Target,
    delivery_id: Option<&str>,
    payload: DeliveryPayload,
    limit: usize,
    limits: InboxLimits,
) -> Result<Delivered, Failure> {
    let (run, delivery, standing) = match (target, payload) {
        (Target::Hook(hash), payload) => {
            let Some((hook, standing)) = hook_standing(conn, hash.as_str(), delivery_id, limits)? else {
                return Ok(Delivered::NotFound);
            };
            let Some(delivery) = payload.for_hook(&hook)? else { return Ok(Delivered::NotFound) };
            (hook.run, delivery, standing)
        }
        (Target::Run(run), DeliveryPayload::Run(delivery)) => {
            let Some(standing) = run_standing(conn, &run, delivery.hook_op(), delivery_id, limits)? else {
                return Ok(Delivered::NotFound);
            };
            (run, delivery, standing)
        }
        (Target::Run(_), _) => return Err(StoreError::MismatchedTarget.into()),
    };
    if !standing.active {
        return Ok(Delivered::NotFound);
    }
    // A repeat of a delivery already taken is a duplicate, however full the inbox is now.
    if standing.duplicate {
        return Ok(Delivered::Duplicate { run });
    }
    if standing.pending_run >= limits.per_run {
        return Err(StoreError::InboxFull { run, hook: None, pending: standing.pending_run }.into());
    }
    if let Some(op) = delivery.hook_op()
        && standing.pending_hook >= limits.per_hook
    {
        return Err(StoreError::InboxFull { run, hook: Some(op), pending: standing.pending_hook }.into());
    }
    let what = "a delivery (SqliteOptions::max_entry_bytes, less room for the journal entry that records it)";
    let text = codec::encode(&delivery, what, limit.saturating_sub(DELIVERY_HEADROOM))?;
    let op = delivery.hook_op().map(|op| op.0);
    let params = params![run.as_str(), delivery_id, text, op];
    let id: Option<i64> = conn.prepare_cached(ACCEPT_DELIVERY)?.query_row(params, |row| row.get(0)).optional()?;
    match id {
        Some(id) => Ok(Delivered::Accepted { run, id: codec::uint(id)? }),
        None => Ok(Delivered::Duplicate { run }),
    }
}

const ACCEPT_DELIVERY: &str = "INSERT INTO inbox (run_id, delivery_id, delivery, op) VALUES (?1, ?2, ?3, ?4) \
                               ON CONFLICT (run_id, delivery_id) DO NOTHING RETURNING id";

/// Where a delivery's run stands: whether it is unfinished, whether the delivery's id was taken
/// before, and how many deliveries wait for the run and for the delivery's hook, each counted up
/// to its limit (so a full inbox costs no more to refuse than one at the limit).
struct Standing {
    active: bool,
    duplicate: bool,
    pending_run: usize,
    pending_hook: usize,
}

/// The columns of [`Standing`], for the run `run` and the hook `op` (both SQL expressions):
/// `?2` is the delivery id (or NULL), `?3` and `?4` the limits for the run and the hook.
macro_rules! standing_columns {
    ($run:literal, $op:literal) => {
        concat!(
            "?2 IS NOT NULL AND EXISTS (SELECT 1 FROM inbox WHERE run_id = ",
            $run,
            " AND delivery_id = ?2), ",
            "(SELECT count(*) FROM (SELECT 1 FROM inbox WHERE run_id = ",
            $run,
            " AND consumed = 0 LIMIT ?3)), ",
            "(SELECT count(*) FROM (SELECT 1 FROM inbox WHERE run_id = ",
            $run,
            " AND op = ",
            $op,
            " AND consumed = 0 LIMIT ?4))"
        )
    };
}

fn standing(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Standing> {
    let count = |index: usize| row.get::<_, i64>(index).map(|count| usize::try_from(count).unwrap_or(usize::MAX));
    Ok(Standing {
        active: row.get::<_, Option<bool>>(first)?.unwrap_or(false),
        duplicate: row.get(first + 1)?,
        pending_run: count(first + 2)?,
        pending_hook: count(first + 3)?,
    })
}

const HOOK_STANDING: &str = concat!(
    "SELECT h.run_id, h.op, h.meta, r.status = 'active', ",
    standing_columns!("h.run_id", "h.op"),
    " FROM hooks h LEFT JOIN runs r ON r.id = h.run_id WHERE h.token_hash = ?1"
);

/// The hook holding the token `hash` and where its run stands, or `None` if nobody holds it.
fn hook_standing(
    conn: &Connection,
    hash: &str,
    delivery_id: Option<&str>,
    limits: InboxLimits,
) -> Result<Option<(HookRow, Standing)>, Failure> {
    let params = params![hash, delivery_id, int(limits.per_run as u64), int(limits.per_hook as u64)];
    let row = conn
        .prepare_cached(HOOK_STANDING)?
        .query_row(params, |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?, standing(row, 3)?))
        })
        .optional()?;
    let Some((run, op, meta, standing)) = row else { return Ok(None) };
    let hook = HookRow { run: codec::run_id(&run)?, op: codec::op(op)?, meta: super::reads::hook_meta(&meta)? };
    Ok(Some((hook, standing)))
}

/// Where `run` stands for a delivery to its hook `op` (if any), or `None` if there is no such run.
fn run_standing(
    conn: &Connection,
    run: &RunId,
    op: Option<Op>,
    delivery_id: Option<&str>,
    limits: InboxLimits,
) -> Result<Option<Standing>, Failure> {
    let sql = concat!("SELECT status = 'active', ", standing_columns!("?1", "?5"), " FROM runs WHERE id = ?1");
    let limits = (int(limits.per_run as u64), int(limits.per_hook as u64));
    let params = params![run.as_str(), delivery_id, limits.0, limits.1, op.map(|op| op.0)];
    Ok(conn.prepare_cached(sql)?.query_row(params, |row| standing(row, 0)).optional()?)
}

fn is_active(conn: &Connection, run: &RunId) -> Result<bool, Failure> {
    let sql = "SELECT status = 'active' FROM runs WHERE id = ?1";
    let active = conn.prepare_cached(sql)?.query_row([run.as_str()], |row| row.get(0)).optional()?;
    Ok(active.unwrap_or(false))
}
