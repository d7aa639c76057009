//! How the SQLite store fails: every failure is a typed error that says what to do, and none of
//! them loses or half-writes anything the store acknowledged.

use std::path::{Path, PathBuf};

use eve_tools::Timestamp;
use eve_tools::journal::{Entry, Op, RecordKind, RunId};
use eve_tools::secret::TokenHash;
use eve_tools::store::{
    Append, Created, Delivery, DeliveryPayload, Fence, NewRun, RunQuery, SqliteOptions, SqliteStore, Store, StoreError,
    Target, WorkerId,
};
use serde_json::{Value, json};

fn new_run(id: &str, input: Value) -> NewRun {
    NewRun {
        id: id.parse().expect("a valid run id"),
        workflow_id: "failures::workflow".into(),
        tool: "failures_tool".into(),
        input,
        created_at: Timestamp::from_millis(1_000),
        principal: None,
        interactive: true,
        parent: None,
        traceparent: None,
        build: None,
        forked_from: None,
    }
}

fn filler(op: u32, bytes: usize) -> Entry {
    Entry::Recorded { op: Op(op), kind: RecordKind::Random, value: json!(format!("{op:06}").repeat(bytes / 6)).into() }
}

async fn create(store: &SqliteStore, run: &NewRun) -> Fence {
    match store.create_run(run.clone(), &WorkerId("failures".into())).await {
        Ok(Created::New(fence)) => fence,
        other => panic!("run {} should be created, got {other:?}", run.id),
    }
}

async fn journal(store: &SqliteStore, run: &RunId) -> Vec<Entry> {
    store.load(run).await.expect("load succeeds").expect("the run exists").entries
}

fn open_error(path: &Path) -> (String, String) {
    match SqliteStore::open(path) {
        Err(StoreError::Open { path, reason }) => (path, reason),
        other => panic!("opening {} should fail with StoreError::Open, got {other:?}", path.display()),
    }
}

fn corrupt_error(path: &Path) -> StoreError {
    match SqliteStore::open(path) {
        Err(error @ StoreError::Corrupt { .. }) => error,
        other => panic!("opening {} should fail with StoreError::Corrupt, got {other:?}", path.display()),
    }
}

/// A directory is not a database file: the error names the path and says what to give instead.
#[test]
fn a_directory_cannot_be_opened_as_a_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (path, reason) = open_error(dir.path());
    assert_eq!(path, dir.path().display().to_string());
    assert!(reason.contains("is a directory"), "the reason says why: {reason}");
}

/// A store whose directory cannot be created (its parent is a regular file, which stops root too)
/// fails to open with the path, the file in the way, and what the data folder must be.
#[test]
fn a_store_whose_directory_cannot_be_created_fails_to_open() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a directory").expect("a plain file can be written");
    let target = file.join("data").join("eve.db");
    let (path, reason) = open_error(&target);
    assert_eq!(path, target.display().to_string());
    assert!(reason.contains(&format!("{} is a file, not a folder", file.display())), "the reason says why: {reason}");
    assert!(reason.contains("EVE_DATA_DIR"), "and what to give instead: {reason}");
}

/// While one store holds the file, a second open is refused and says to stop the other process or
/// use another data_dir; once the first store is dropped, the file opens again.
#[test]
fn a_store_in_use_cannot_be_opened_again() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    let first = SqliteStore::open(&path).expect("the first open succeeds");
    let refused = SqliteStore::open(&path).expect_err("a second open is refused");
    let StoreError::InUse { path: named, lock } = &refused else { panic!("{refused:?}") };
    assert_eq!((named, lock), (&path.display().to_string(), &format!("{}.lock", path.display())));
    let message = refused.to_string();
    assert!(message.contains("another eve process is using the store"), "{message}");
    assert!(message.contains("data_dir"), "the message says what to do: {message}");
    drop(first);
    SqliteStore::open(&path).expect("the store opens once the first one is dropped");
}

/// A file of garbage is reported corrupt at open, with advice to restore from a backup.
#[test]
fn a_garbage_file_is_reported_corrupt() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    std::fs::write(&path, b"this is certainly not a SQLite database file. ".repeat(200)).expect("garbage is written");
    let error = corrupt_error(&path);
    assert!(error.to_string().contains("restore it from a backup"), "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "the error names the file: {error}");
}

/// Closing a store that has served reads still checkpoints and removes its WAL: the read
/// connections close before the writer, so the writer's is the last connection to the file.
#[tokio::test]
async fn closing_after_reads_checkpoints_and_removes_the_wal() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    {
        let store = SqliteStore::open(&path).expect("the store opens");
        for index in 0..8 {
            let run = new_run(&format!("run-{index}"), json!(index));
            create(&store, &run).await;
            let loaded = store.load(&run.id).await.expect("the run loads");
            assert!(loaded.is_some(), "run-{index} is read back");
        }
        assert!(wal_path(&path).exists(), "an open store writes ahead");
    }
    assert!(!wal_path(&path).exists(), "closing the store checkpoints and removes its WAL");
}

/// A store file cut short (a lost tail) is reported corrupt at open, before anything is written.
#[tokio::test]
async fn a_truncated_file_is_reported_corrupt() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    {
        let store = SqliteStore::open(&path).expect("the store opens");
        for index in 0..40 {
            let run = new_run(&format!("run-{index}"), json!("x".repeat(2_000)));
            create(&store, &run).await;
        }
    }
    assert!(!wal_path(&path).exists(), "closing the store checkpoints and removes its WAL");
    let length = std::fs::metadata(&path).expect("the file exists").len();
    std::fs::OpenOptions::new().write(true).open(&path).and_then(|file| file.set_len(length / 2)).expect("truncates");
    let error = corrupt_error(&path);
    assert!(error.to_string().contains("restore it from a backup"), "{error}");
}

/// A process killed during a checkpoint can leave page 1 (and so the header's page count) already
/// copied from the WAL while the pages after it are not: the file is shorter than its header says,
/// but the WAL still holds every page. Such a file opens, with every row, as SQLite recovers it.
#[tokio::test]
async fn a_file_cut_short_by_a_crash_during_a_checkpoint_opens_from_its_wal() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (path, copy) = (dir.path().join("eve.db"), dir.path().join("copy.db"));
    let store = SqliteStore::open(&path).expect("the store opens");
    for index in 0..40 {
        let run = new_run(&format!("run-{index}"), json!("x".repeat(2_000)));
        create(&store, &run).await;
    }
    // While the store is open its pages live in the WAL: copy the pair as a crash would leave it.
    std::fs::copy(&path, &copy).expect("the database copies");
    std::fs::copy(wal_path(&path), wal_path(&copy)).expect("the WAL copies");
    drop(store);
    let wal = std::fs::read(wal_path(&copy)).expect("the WAL reads");
    let page_one = last_wal_frame_of_page(&wal, 1).expect("the WAL holds page 1");
    let mut file = std::fs::OpenOptions::new().write(true).open(&copy).expect("the copy opens");
    std::io::Write::write_all(&mut file, page_one).expect("page 1 is written as a checkpoint would");
    drop(file);
    let length = std::fs::metadata(&copy).expect("the copy exists").len();
    let header_pages = u32::from_be_bytes(page_one[28..32].try_into().expect("four bytes"));
    assert!(u64::from(header_pages) * 4096 > length, "the file is shorter than its header says");

    let store = SqliteStore::open(&copy).expect("a file whose WAL recovers it opens");
    let runs = store.list_runs(&RunQuery::newest(100)).await.expect("the runs list").runs;
    assert_eq!(runs.len(), 40, "every row is there");
}

/// The data of the last frame in `wal` that holds page `page` (a WAL is a 32-byte header, then
/// frames of a 24-byte header, whose first 4 bytes are the page number, and one page).
fn last_wal_frame_of_page(wal: &[u8], page: u32) -> Option<&[u8]> {
    let page_size = u32::from_be_bytes(wal[8..12].try_into().ok()?) as usize;
    let frames = wal[32..].chunks_exact(24 + page_size);
    frames.rev().find(|frame| frame[0..4] == page.to_be_bytes()).map(|frame| &frame[24..])
}

fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// A file written by a newer eve (a higher schema version) is refused without being changed.
#[test]
fn a_newer_schema_version_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    drop(SqliteStore::open(&path).expect("the store opens"));
    let conn = rusqlite::Connection::open(&path).expect("the file opens in plain SQLite");
    conn.pragma_update(None, "user_version", 99).expect("the version can be changed");
    drop(conn);
    let (_, reason) = open_error(&path);
    assert!(reason.contains("newer eve") && reason.contains("99"), "the reason names the version: {reason}");
    let conn = rusqlite::Connection::open(&path).expect("the file opens in plain SQLite");
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).expect("readable");
    assert_eq!(version, 99, "the refused file is left as it was");
}

/// A file written by the first schema version (1: no parked mark, no hook column in the inbox, the
/// journal's length kept in the run's row) is migrated at open, in place, and everything in it
/// reads back. The upgrade is logged at info level as it starts and ends, so a user whose open
/// waits on a long copy sees why.
#[tokio::test]
async fn a_file_of_the_previous_schema_version_is_migrated_at_open() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    let conn = rusqlite::Connection::open(&path).expect("plain SQLite creates the file");
    conn.execute_batch(VERSION_1).expect("the version 1 schema is created");
    // A run in its third history, which the file's rows do not number: the migration reads it.
    let mut started = new_run("old-run", json!({"from": "v1"})).started_entry();
    if let Entry::RunStarted { continued, .. } = &mut started {
        *continued = 2;
    }
    let text = serde_json::to_string(&started).unwrap();
    conn.execute("INSERT INTO journal (run_id, seq, entry) VALUES ('old-run', 0, ?1)", [text]).unwrap();
    drop(conn);

    let logged = Logged::default();
    let subscriber = tracing_subscriber::fmt().with_writer(logged.clone()).with_ansi(false).finish();
    let store =
        tracing::subscriber::with_default(subscriber, || SqliteStore::open(&path)).expect("a version 1 file opens");
    let logged = logged.text();
    assert!(logged.contains("upgrading the eve store's schema") && logged.contains("from=1 to=7"), "{logged}");
    assert!(logged.contains("upgraded the eve store's schema") && logged.contains("took_ms="), "{logged}");
    let record = store.load(&"old-run".parse().unwrap()).await.expect("load").expect("the run is there");
    assert_eq!(record.entries, vec![started]);
    let page = store
        .read(&"old-run".parse().unwrap(), eve_tools::journal::Position::START, 10)
        .await
        .expect("read")
        .expect("the run is there");
    assert_eq!(page.continued, 2, "the run's history is numbered from its first entry");
    assert!(!record.summary.parked, "runs from before the mark count as not parked");
    assert_eq!(record.summary.entries, 1, "the run's length is its journal's");
    let recovery = store.recovery().await.expect("recovery reads");
    assert_eq!(recovery.runnable, vec!["old-run".parse::<RunId>().unwrap()], "so they are loaded at start-up");
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("the file opens in plain SQLite");
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).expect("readable");
    assert_eq!(version, 7, "the file now has the current version");
}

/// What a `tracing` subscriber wrote, to read back.
#[derive(Clone, Default)]
struct Logged(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Logged {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logged {
    type Writer = Logged;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The schema eve wrote as version 1.
const VERSION_1: &str = "
PRAGMA application_id = 1163281713;
PRAGMA user_version = 1;
CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, workflow_id TEXT NOT NULL, tool TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'cancelled')),
    created_at INTEGER NOT NULL, entries INTEGER NOT NULL);
CREATE INDEX runs_by_status ON runs (status);
CREATE TABLE journal (run_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE TABLE timers (run_id TEXT NOT NULL, op INTEGER NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('sleep', 'retry')),
    due INTEGER NOT NULL, PRIMARY KEY (run_id, op, kind)) WITHOUT ROWID;
CREATE TABLE hooks (token_hash TEXT PRIMARY KEY NOT NULL, run_id TEXT NOT NULL, op INTEGER NOT NULL, meta TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX hooks_by_run ON hooks (run_id);
CREATE TABLE inbox (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, delivery_id TEXT,
    delivery TEXT NOT NULL, consumed INTEGER NOT NULL DEFAULT 0, UNIQUE (run_id, delivery_id));
CREATE INDEX inbox_pending ON inbox (run_id, id) WHERE consumed = 0;
INSERT INTO runs VALUES ('old-run', 'failures::workflow', 'failures_tool', 'active', 1000, 1);
";

/// A SQLite file that eve did not create is refused rather than mixed with eve's tables.
#[test]
fn a_foreign_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    let conn = rusqlite::Connection::open(&path).expect("plain SQLite creates the file");
    conn.execute_batch("CREATE TABLE notes (body TEXT)").expect("a foreign table is created");
    drop(conn);
    let (_, reason) = open_error(&path);
    assert!(reason.contains("did not create"), "{reason}");
}

/// When the disk fills, the appends that do not fit fail with DiskFull and leave no partial rows,
/// and every append acknowledged before is intact after a reopen, where writing resumes. Several
/// runs append at once, so commits group successful requests with failing ones.
#[tokio::test]
async fn a_full_disk_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("eve.db");
    let runs: Vec<NewRun> = (0..4).map(|index| new_run(&format!("run-filling-{index}"), json!(index))).collect();
    let mut acknowledged: Vec<Vec<Entry>> = runs.iter().map(|run| vec![run.started_entry()]).collect();
    {
        let options = SqliteOptions { max_page_count: Some(64), ..SqliteOptions::default() };
        let store = SqliteStore::open_with(&path, options).expect("the store opens");
        let mut fences = Vec::new();
        for run in &runs {
            fences.push(create(&store, run).await);
        }
        fill(&store, &runs, &fences, &mut acknowledged).await;
        let total: usize = acknowledged.iter().map(Vec::len).sum();
        assert!(total > 20, "the store took {total} entries before filling");
        // An append of several entries of which the first fit: none of them may be kept.
        let (run, seq) = (&runs[0].id, acknowledged[0].len() as u64);
        let mixed = vec![filler(9_000, 10), filler(9_001, 10), filler(9_002, 200_000)];
        let refused = store
            .append(
                run,
                fences[0],
                &mut Append { first_seq: seq, entries: mixed, consumed: vec![], notices: vec![], runs: vec![] },
            )
            .await;
        assert!(matches!(refused, Err(StoreError::DiskFull)), "got {refused:?}");
        assert_eq!(journal(&store, run).await, acknowledged[0], "reads still work and show no partial rows");
    }
    let store = SqliteStore::open(&path).expect("the store reopens without the page limit");
    for (run, expected) in runs.iter().zip(&acknowledged) {
        assert_eq!(&journal(&store, &run.id).await, expected, "every acknowledged entry of {} is intact", run.id);
        let summary = store.load(&run.id).await.expect("load succeeds").expect("the run exists").summary;
        assert_eq!(summary.entries, expected.len() as u64, "the run's length agrees with its journal");
    }
    let claimed = store.claim(&runs[0].id, &WorkerId("after".into()), Default::default(), Timestamp::EPOCH, 0).await;
    let fence = claimed.expect("the run can be claimed").fence;
    let mut next = Append {
        first_seq: acknowledged[0].len() as u64,
        entries: vec![filler(1, 100)],
        consumed: vec![],
        notices: vec![],
        runs: vec![],
    };
    store.append(&runs[0].id, fence, &mut next).await.expect("with space again, appends resume");
}

/// Appends 3 KB entries to every run at once, round after round, recording those acknowledged,
/// until each run has had an append refused; every refusal must be DiskFull.
async fn fill(store: &SqliteStore, runs: &[NewRun], fences: &[Fence], acknowledged: &mut [Vec<Entry>]) {
    let mut full = vec![false; runs.len()];
    for op in 0..10_000 {
        if full.iter().all(|full| *full) {
            return;
        }
        let open: Vec<usize> = (0..runs.len()).filter(|index| !full[*index]).collect();
        let appends = open.iter().map(|&index| {
            let mut append = Append {
                first_seq: acknowledged[index].len() as u64,
                entries: vec![filler(op, 3_000)],
                consumed: vec![],
                notices: vec![],
                runs: vec![],
            };
            let (store, run, fence) = (&store, &runs[index].id, fences[index]);
            async move { store.append(run, fence, &mut append).await }
        });
        for (index, result) in open.iter().zip(futures::future::join_all(appends).await) {
            match result {
                Ok(()) => acknowledged[*index].push(filler(op, 3_000)),
                Err(StoreError::DiskFull) => full[*index] = true,
                Err(error) => panic!("a full disk should be DiskFull, got {error}"),
            }
        }
    }
    panic!("a store capped at 64 pages should fill up long before 100 MB of entries");
}

/// An entry or delivery over `max_entry_bytes` is refused with TooLarge naming the limit, and
/// nothing of the request is written.
#[tokio::test]
async fn an_oversized_entry_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = SqliteOptions { max_entry_bytes: 1_024, ..SqliteOptions::default() };
    let store = SqliteStore::open_with(dir.path().join("eve.db"), options).expect("the store opens");
    let huge = new_run("run-huge", json!("x".repeat(2_000)));
    let created = store.create_run(huge.clone(), &WorkerId("w".into())).await;
    assert_too_large(created.map(drop));
    assert!(store.load(&huge.id).await.expect("load succeeds").is_none(), "the oversized run was not created");
    let run = new_run("run-small", json!(null));
    let fence = create(&store, &run).await;
    let hash = TokenHash::of("large");
    let hook =
        Entry::HookCreated { op: Op(0), token_hash: hash.as_str().into(), nonce: None, conflict: false, webhook: None };
    let entries = vec![hook.clone(), filler(1, 2_000)];
    let appended = store
        .append(&run.id, fence, &mut Append { first_seq: 1, entries, consumed: vec![], notices: vec![], runs: vec![] })
        .await;
    assert_too_large(appended);
    assert_eq!(journal(&store, &run.id).await.len(), 1, "no entry of the oversized append was written");
    assert_eq!(store.find_hook(&hash).await.expect("find_hook succeeds"), None);
    store
        .append(
            &run.id,
            fence,
            &mut Append { first_seq: 1, entries: vec![hook], consumed: vec![], notices: vec![], runs: vec![] },
        )
        .await
        .expect("fits");
    // A delivery must leave room for the entry that records it (64 bytes), so one that would
    // itself just fit is refused too: accepted, it could never be journaled.
    for size in [2_000, 1_024 - 40] {
        let payload = DeliveryPayload::Hook(json!("y".repeat(size)));
        let delivered = store.deliver(Target::Hook(hash.clone()), None, payload).await;
        assert_too_large_by(delivered.map(drop), 1_024 - 64);
    }
    assert!(store.inbox(&run.id).await.expect("inbox succeeds").is_empty(), "the oversized delivery was not kept");
    let fits = DeliveryPayload::Hook(json!("y".repeat(1_024 - 100)));
    store.deliver(Target::Hook(hash.clone()), None, fits).await.expect("a delivery with room for its entry fits");
    let [item] = store.inbox(&run.id).await.expect("inbox succeeds").try_into().expect("one delivery");
    let Delivery::Hook { op, payload } = item.delivery else { panic!("a hook delivery") };
    let entries = vec![Entry::HookReceived { op, payload }];
    let recorded = store
        .append(
            &run.id,
            fence,
            &mut Append { first_seq: 2, entries, consumed: vec![item.id], notices: vec![], runs: vec![] },
        )
        .await;
    recorded.expect("the entry recording an accepted delivery fits");
}

fn assert_too_large(result: Result<(), StoreError>) {
    assert_too_large_by(result, 1_024);
}

fn assert_too_large_by(result: Result<(), StoreError>, expected: usize) {
    match result {
        Err(error @ StoreError::TooLarge { limit, .. }) if limit == expected => {
            assert!(
                error.to_string().contains(&format!("{expected}-byte limit")),
                "the error names the limit: {error}"
            );
        }
        other => panic!("an oversized value should be refused with TooLarge, got {other:?}"),
    }
}

/// Crash tests: a child process (this test binary, re-run) is SIGKILLed while paused at each
/// commit boundary in turn (eve-tools' `failpoints` feature, which this crate enables).
mod crash {
    use std::io::{BufRead, BufReader};
    use std::path::Path;
    use std::process::{Command, Stdio};

    use eve_tools::journal::RunId;
    use eve_tools::store::{Append, SqliteStore, Store, WorkerId};
    use serde_json::json;

    use super::{filler, new_run};

    /// Set in the child: the directory of the store it writes to.
    const CHILD_DIR: &str = "EVE_TEST_CRASH_CHILD_DIR";
    /// This test's name, for re-running it as the child.
    const NAME: &str = "sqlite_failures::crash::a_kill_at_each_commit_boundary_keeps_exactly_the_committed_batches";
    /// The child's appends after creating its run; each is one batch.
    const APPENDS: u32 = 3;

    /// Killed just before a COMMIT, the store holds none of that batch; killed just after, it holds
    /// all of it (though the caller never heard back). The lock dies with the process.
    #[test]
    fn a_kill_at_each_commit_boundary_keeps_exactly_the_committed_batches() {
        if let Ok(dir) = std::env::var(CHILD_DIR) {
            return child(Path::new(&dir));
        }
        for pause in 1..=2 * (APPENDS + 1) {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let line = run_child_until_paused(dir.path(), pause);
            // Hits alternate before/after COMMIT, so `pause / 2` batches have committed either way.
            let boundary = if pause % 2 == 1 { "before" } else { "after" };
            assert_eq!(line, format!("eve-failpoint: paused at sqlite.{boundary}_commit (#{pause})"));
            check_store(dir.path(), pause / 2);
        }
    }

    /// The child: creates a run and appends to it one entry at a time (one commit each).
    fn child(dir: &Path) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async {
            let store = SqliteStore::open(dir.join("eve.db")).expect("the child opens the store");
            let run = new_run("run-crash", json!(null));
            let eve_tools::store::Created::New(fence) =
                store.create_run(run.clone(), &WorkerId("child".into())).await.expect("created")
            else {
                panic!("the child's run is new")
            };
            for op in 0..APPENDS {
                let mut append = Append {
                    first_seq: u64::from(op) + 1,
                    entries: vec![filler(op, 60)],
                    consumed: vec![],
                    notices: vec![],
                    runs: vec![],
                };
                store.append(&run.id, fence, &mut append).await.expect("appended");
            }
        });
    }

    /// Starts the child paused at hit `pause`, returns the line it printed, and SIGKILLs it.
    fn run_child_until_paused(dir: &Path, pause: u32) -> String {
        let mut child = Command::new(std::env::current_exe().expect("the test binary's path"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir)
            .env("EVE_FAILPOINT_PAUSE", pause.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the child starts");
        let stderr = BufReader::new(child.stderr.take().expect("the child's stderr is piped"));
        let line = stderr.lines().map_while(Result::ok).find(|line| line.starts_with("eve-failpoint:"));
        child.kill().expect("the paused child can be killed");
        child.wait().expect("the killed child is reaped");
        line.unwrap_or_else(|| panic!("the child finished without pausing at failpoint #{pause}"))
    }

    /// The store holds exactly the first `committed` batches: the run's creation, then one entry each.
    fn check_store(dir: &Path, committed: u32) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async {
            let store = SqliteStore::open(dir.join("eve.db")).expect("the store reopens after the kill");
            let run = new_run("run-crash", json!(null));
            let loaded = store.load(&run.id).await.expect("load succeeds");
            let Some(loaded) = loaded else {
                assert_eq!(committed, 0, "the run's creation was committed, so the run must exist");
                return;
            };
            let mut expected = vec![run.started_entry()];
            expected.extend((0..committed.saturating_sub(1)).map(|op| filler(op, 60)));
            assert_eq!(loaded.entries, expected, "exactly the {committed} committed batches survive");
            let id: RunId = run.id;
            let claimed =
                store.claim(&id, &WorkerId("after".into()), Default::default(), eve_tools::Timestamp::EPOCH, 0).await;
            claimed.expect("the dead process's claim does not block a new one");
        });
    }
}
