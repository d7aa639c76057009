//! [`RuntimeBuilder`]: the store, clock, key, sign-in providers and limits a [`Runtime`] starts with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Error, Runtime, Shared};
use crate::auth::AuthProvider;
use crate::events::EventBus;
use crate::executor::core::Services;
use crate::executor::{DEFAULT_GRACE, Engine, HistoryLimits, Msg};
use crate::registry;
use crate::secret::SecretKey;
use crate::store::{MemoryStore, Store, StoreError, WorkerId};
use crate::time::{Clock, SystemClock};
use crate::timers::TimerService;

/// Configures and builds a [`Runtime`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), eve_tools::Error> {
/// use eve_tools::{Runtime, store::MemoryStore};
/// let runtime = Runtime::builder().store(MemoryStore::new()).build()?;
/// assert!(runtime.runs(None, 10).await?.is_empty());
/// # Ok(())
/// # }
/// ```
pub struct RuntimeBuilder {
    store: Option<Arc<dyn Store>>,
    /// Opens the store when none is given; `None` means a memory store.
    default_store: Option<DefaultStore>,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    key: Option<SecretKey>,
    cache_capacity: usize,
    grace: Duration,
    lease: Duration,
    event_capacity: usize,
    replay_concurrency: usize,
    history_limit: u64,
    hook_buffer: usize,
    providers: HashMap<String, Arc<dyn AuthProvider>>,
    public_url: String,
    state: crate::state::State,
}

impl RuntimeBuilder {
    /// The defaults: embedded SQLite in `.eve/eve.db`, the system clock.
    /// The defaults, but for the store: a memory store unless one is given or a default set with
    /// [`RuntimeBuilder::default_store`]. `Runtime::builder()` (in `crate::defaults`) sets the
    /// embedded SQLite store as the default.
    pub(crate) fn new() -> Self {
        RuntimeBuilder {
            store: None,
            default_store: None,
            path: PathBuf::from(".eve"),
            clock: Arc::new(SystemClock),
            key: None,
            cache_capacity: 4096,
            grace: DEFAULT_GRACE,
            lease: Duration::from_secs(60),
            event_capacity: 4_096,
            replay_concurrency: 64,
            history_limit: DEFAULT_HISTORY_LIMIT,
            hook_buffer: 1_000,
            providers: HashMap::new(),
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            state: crate::state::State::default(),
        }
    }

    /// Gives steps and plain tools a shared value of type `T` (an HTTP client, a service's base
    /// URL, a connection pool), read with `StepCtx::state::<T>()` or `ToolCtx::state::<T>()`.
    /// A second value of the same type replaces the first.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Registers the auth provider that `Provider::new(id)` handles in steps name.
    pub fn auth_provider(mut self, id: impl Into<String>, provider: impl AuthProvider) -> Self {
        self.providers.insert(id.into(), Arc::new(provider));
        self
    }

    /// The base URL people and systems reach this runtime's HTTP server at, for webhook and
    /// sign-in callback URLs (default `http://127.0.0.1:7700`).
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Uses `store` instead of the default embedded SQLite file.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Opens the store with `open` in the data directory when none is given.
    pub(crate) fn default_store(mut self, open: DefaultStore) -> Self {
        self.default_store = Some(open);
        self
    }

    /// Uses a store shared with other handles.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Where the default SQLite store and secret key live (default `.eve`).
    pub fn data_dir(mut self, path: impl AsRef<Path>) -> Self {
        self.path = path.as_ref().to_path_buf();
        self
    }

    /// Uses `clock` instead of the system clock (tests use a `ManualClock`).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Uses `key` to derive hook tokens instead of the key file in the data directory.
    pub fn secret_key(mut self, key: SecretKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Keeps up to `runs` parked runs in memory so they resume without replay (default 4,096;
    /// 0 disables the cache, so every resume replays).
    pub fn warm_cache(mut self, runs: usize) -> Self {
        self.cache_capacity = runs;
        self
    }

    /// How long a cancelled run may unwind before it ends cancelled regardless (default 30 s). The
    /// deadline is journaled with the cancellation, so a restart does not extend it.
    pub fn cancellation_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How many buffered events a slow subscriber may fall behind by (default 4,096).
    pub fn event_capacity(mut self, events: usize) -> Self {
        self.event_capacity = events.max(1);
        self
    }

    /// How many journal entries one history of a run may have (default 50,000). A run that
    /// reaches the limit fails with `RunFailure::HistoryLimit`; at a fifth of it (10,000 by
    /// default) the runtime publishes `RunEvent::HistoryWarning` and logs a warning. A workflow
    /// that loops for ever ends each stretch with `ctx.continue_as_new(input)`, which starts a
    /// fresh history under the same run id.
    pub fn history_limit(mut self, entries: u64) -> Self {
        self.history_limit = entries.max(2);
        self
    }

    /// How many payloads a hook holds that its body has not taken yet (default 1,000). Further
    /// deliveries wait in the store's inbox, which refuses them once it holds its own limit
    /// ([`InboxLimits`](crate::store::InboxLimits); `429` over HTTP), so a sender that outpaces
    /// the body is slowed down rather than growing the run's journal without bound.
    pub fn hook_buffer(mut self, payloads: usize) -> Self {
        self.hook_buffer = payloads.max(1);
        self
    }

    /// Builds the runtime. Must be called inside a Tokio runtime.
    pub fn build(self) -> Result<Runtime, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoTokioRuntime)?;
        if let Some((name, workflow_ids)) = registry::duplicate_names().into_iter().next() {
            return Err(Error::DuplicateTool { name, workflow_ids });
        }
        let store = match (self.store, self.default_store) {
            (Some(store), _) => store,
            (None, Some(open)) => open(&self.path)?,
            (None, None) => Arc::new(MemoryStore::new()),
        };
        let key = match self.key {
            Some(key) => key,
            None if store.is_durable() => {
                let path = self.path.join("eve.key");
                SecretKey::load_or_create(&path).map_err(|source| Error::SecretKey { path, source })?
            }
            None => SecretKey::generate(),
        };
        let services = Arc::new(Services::new(self.clock.clone(), key, self.providers, self.public_url, self.state));
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            // The timer task and the executors hold the runtime weakly: they stop once it is dropped.
            let for_timers = weak.clone();
            let fire = move |run, op, kind| {
                for_timers.upgrade().map(|shared| shared.wake(&run, Msg::Timer(op, kind))).is_some()
            };
            let for_reports = weak.clone();
            let wake = Box::new(move |run: &crate::journal::RunId| {
                if let Some(shared) = for_reports.upgrade() {
                    shared.wake(run, Msg::Inbox);
                }
            });
            let host: Weak<dyn std::any::Any + Send + Sync> = weak.clone();
            let _ = services.host.set(host);
            Shared::new(
                Engine {
                    store,
                    services,
                    events: EventBus::new(self.event_capacity),
                    timers: TimerService::start(self.clock.clone(), fire),
                    worker: WorkerId::generate(),
                    lease: self.lease,
                    grace: self.grace,
                    history: HistoryLimits { warning: self.history_limit / 5, limit: self.history_limit },
                    hook_buffer: self.hook_buffer,
                    stopping: watch::channel(false).0,
                    wake,
                },
                self.cache_capacity,
                self.replay_concurrency,
            )
        });
        Ok(Runtime { shared })
    }
}

/// Opens the store a runtime uses when given none, in its data directory.
pub(crate) type DefaultStore = fn(&Path) -> Result<Arc<dyn Store>, StoreError>;

/// How many entries one history of a run may have unless told otherwise.
const DEFAULT_HISTORY_LIMIT: u64 = 50_000;

/// The public URL the runtime assumes unless told otherwise: its default HTTP address.
const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:7700";
