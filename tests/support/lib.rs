//! Helpers shared by the integration tests: a runtime over a shared store and a manual clock,
//! and a log of step executions so tests can prove what ran and what was replayed.

use std::sync::{Arc, Mutex};

use eve_tools::store::{MemoryStore, Store};
use eve_tools::{ManualClock, RunId, Runtime, RuntimeBuilder, StepCtx, Timestamp};

pub mod faulty;
pub mod feed;
pub mod follow;
pub mod http;
pub mod oauth_server;
pub mod otlp;
pub mod tools;

/// The instant every test clock starts at.
pub const START: Timestamp = Timestamp::from_millis(1_700_000_000_000);

/// A store and a clock that outlive any one runtime, as a database and the wall clock outlive a
/// process. Each `runtime()` is a fresh "process" over them.
pub struct World {
    /// The store every runtime of this world shares.
    pub store: Arc<dyn Store>,
    /// The clock every runtime of this world reads.
    pub clock: ManualClock,
}

impl World {
    /// A world with an in-memory store.
    pub fn in_memory() -> Self {
        World { store: Arc::new(MemoryStore::new()), clock: ManualClock::new(START) }
    }

    /// A world whose store is a fresh SQLite file in `dir`, as the default runtime uses.
    pub fn sqlite(dir: &std::path::Path) -> Self {
        let store = eve_tools::store::SqliteStore::open(dir.join("eve.db")).expect("a fresh SQLite store opens");
        World { store: Arc::new(store), clock: ManualClock::new(START) }
    }

    /// A world over `store`, for tests that wrap a store (see [`faulty::Faulty`]).
    pub fn over(store: Arc<dyn Store>) -> Self {
        World { store, clock: ManualClock::new(START) }
    }

    /// Closes the store once nothing else holds it (a dropped runtime's tasks end a moment
    /// later), so the next [`World::sqlite`] over the same directory opens it, as a restarted
    /// process would.
    pub async fn close(self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&self.store) > 1 {
            assert!(std::time::Instant::now() < deadline, "the runtimes over the store let go of it");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Writes the run `new` with `entries` after its start into this world's store, unclaimed,
    /// as a process of another build would have left it, for the next runtime to take.
    pub async fn write_run(&self, new: eve_tools::store::NewRun, entries: Vec<eve_tools::Entry>) -> RunId {
        use eve_tools::store::{Append, Created, WorkerId};
        let id = new.id.clone();
        let owner = WorkerId("importer".into());
        let Created::New(fence) = self.store.create_run(new, &owner).await.unwrap() else { panic!("a new run") };
        let mut append = Append { first_seq: 1, entries, ..Append::default() };
        self.store.append(&id, fence, &mut append).await.unwrap();
        self.store.release(&id, fence).await.unwrap();
        id
    }

    /// Writes an unclaimed run of `tool` (workflow `workflow_id`) with `input` and `entries` after
    /// its start, created now and recording no build, as an older build would have left it: see
    /// [`World::write_run`].
    pub async fn import_run(
        &self,
        workflow_id: &str,
        tool: &str,
        input: serde_json::Value,
        entries: Vec<eve_tools::Entry>,
    ) -> RunId {
        use eve_tools::Clock;
        let new = eve_tools::store::NewRun {
            id: RunId::generate(),
            workflow_id: workflow_id.to_owned(),
            tool: tool.to_owned(),
            input,
            created_at: self.clock.now(),
            principal: None,
            interactive: true,
            parent: None,
            traceparent: None,
            build: None,
            forked_from: None,
        };
        self.write_run(new, entries).await
    }

    /// A new runtime (a new "process") over this world; `warm_cache` 0 makes every resume replay.
    pub fn runtime(&self, warm_cache: usize) -> Runtime {
        self.builder(warm_cache).build().expect("a runtime builds inside a Tokio runtime")
    }

    /// The builder of [`World::runtime`], for tests that configure more (auth providers, say).
    pub fn builder(&self, warm_cache: usize) -> RuntimeBuilder {
        Runtime::builder()
            .shared_store(self.store.clone())
            .clock(self.clock.clone())
            .secret_key(KEY.clone())
            .warm_cache(warm_cache)
    }
}

/// One secret key for every runtime of the test binary, as one deployment keeps one key file.
static KEY: std::sync::LazyLock<eve_tools::secret::SecretKey> =
    std::sync::LazyLock::new(eve_tools::secret::SecretKey::generate);

static EXECUTIONS: Mutex<Vec<(String, String, u32)>> = Mutex::new(Vec::new());

/// Records that a step attempt executed (call it first thing in a test step).
pub fn executed(ctx: &StepCtx, step: &str) {
    let run = ctx.run_id().map(ToString::to_string).unwrap_or_default();
    EXECUTIONS.lock().unwrap().push((run, step.to_owned(), ctx.attempt()));
}

/// The attempt numbers of every execution of `step` in `run`, in order.
pub fn executions(run: &RunId, step: &str) -> Vec<u32> {
    let log = EXECUTIONS.lock().unwrap();
    log.iter().filter(|(r, s, _)| r == run.as_str() && s == step).map(|(_, _, attempt)| *attempt).collect()
}

/// Waits for `future`, failing the test instead of hanging if it takes over 20 s (real time): for
/// tests of defects that made runs stall forever.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    let limit = std::time::Duration::from_secs(20);
    tokio::time::timeout(limit, future).await.unwrap_or_else(|_| panic!("{what} did not happen within {limit:?}"))
}
