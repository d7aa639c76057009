//! [`RuntimeBuilder`]: the store, clock, key, sign-in providers and limits a [`Runtime`] starts with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Error, Runtime, Shared};
use crate::auth::AuthProvider;
use crate::events::EventBus;
use crate::executor::{DEFAULT_GRACE, Engine, HistoryLimits, Msg};
use crate::registry;
use crate::run_core::Services;
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
    open_store: Option<OpenStore>,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    key: Option<SecretKey>,
    cache_capacity: usize,
    idle_capacity: usize,
    grace: Duration,
    lease: Duration,
    heartbeat: Duration,
    poll: Duration,
    worker: Option<String>,
    event_capacity: usize,
    replay_concurrency: usize,
    history_limit: u64,
    hook_buffer: usize,
    providers: HashMap<String, Arc<dyn AuthProvider>>,
    public_url: String,
    state: crate::state::State,
    /// Checks the outer layers add for the state they keep (a subagent's settings, say).
    checks: Vec<StateCheck>,
}

/// A check of the builder's state, run by [`RuntimeBuilder::build`] before anything opens.
pub type StateCheck = fn(&crate::state::State) -> Result<(), Error>;

impl Runtime {
    /// A builder with the defaults: the system clock, and the store a linked part offers as the
    /// default ([`DefaultStore`]): the Postgres database at `EVE_DATABASE_URL` if that variable is
    /// set (with `eve-postgres`, the `postgres` feature of eve-tools), else embedded SQLite in
    /// `.eve/eve.db` (with `eve-sqlite`, the `sqlite` feature, on by default), else a memory store.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new().open_store(default_store)
    }
}

impl RuntimeBuilder {
    /// The defaults, but for the store: a memory store unless one is given or opened with
    /// [`RuntimeBuilder::open_store`]. [`Runtime::builder`] opens the default store.
    pub(super) fn new() -> Self {
        RuntimeBuilder {
            store: None,
            open_store: None,
            path: PathBuf::from(".eve"),
            clock: Arc::new(SystemClock),
            key: None,
            cache_capacity: 4096,
            idle_capacity: DEFAULT_WARM_IDLE,
            grace: DEFAULT_GRACE,
            lease: DEFAULT_LEASE,
            heartbeat: DEFAULT_HEARTBEAT,
            poll: DEFAULT_POLL,
            worker: None,
            event_capacity: 4_096,
            replay_concurrency: 64,
            history_limit: DEFAULT_HISTORY_LIMIT,
            hook_buffer: 1_000,
            providers: HashMap::new(),
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            state: crate::state::State::default(),
            checks: Vec::new(),
        }
    }

    /// Gives steps and plain tools a shared value of type `T` (an HTTP client, a service's base
    /// URL, a connection pool), read with `StepCtx::state::<T>()` or `ToolCtx::state::<T>()`.
    /// A second value of the same type replaces the first.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The value of type `T` given so far, if any: for a part that adds to it (sessions keep
    /// their subagents so).
    pub fn state_value<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.state.get::<T>().ok()
    }

    /// Runs `check` over the state when the runtime is built, before anything opens (once, however
    /// often it is added): how a part refuses settings of its own that cannot work (an agent
    /// without a description, say).
    pub fn check_state(mut self, check: StateCheck) -> Self {
        if !self.checks.iter().any(|known| std::ptr::fn_addr_eq(*known, check)) {
            self.checks.push(check);
        }
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

    /// Opens the store with `open` when [`build`](RuntimeBuilder::build) runs, unless a store is
    /// given: how a part offers a store that needs the builder's settings (the data directory, the
    /// lease a shared store's creator holds a new run for).
    pub fn open_store(
        mut self,
        open: impl FnOnce(&Opening<'_>) -> Result<Arc<dyn Store>, StoreError> + Send + 'static,
    ) -> Self {
        self.open_store = Some(Box::new(open));
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

    /// Of the runs the warm cache keeps, keeps at most `runs` that parked idle: sessions between
    /// turns with no task working or being stopped, which wait on a person and may wait for days
    /// (default 32). The most recently active stay; an older one leaves memory, and its next
    /// message replays its current history (at most `compact_every` turns, typically well under a
    /// millisecond). A session parked mid-turn, waiting on a tool or a task, is not idle.
    pub fn warm_idle_runs(mut self, runs: usize) -> Self {
        self.idle_capacity = runs;
        self
    }

    /// How long a cancelled run may unwind before it ends cancelled regardless (default 30 s). The
    /// deadline is journaled with the cancellation, so a restart does not extend it.
    pub fn cancellation_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How many buffered events a slow subscriber may fall behind by (default 4,096). The buffer is
    /// made when the first subscriber comes ([`Runtime::events`](crate::Runtime::events)).
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

    /// Names this process in the leases of a shared store (Postgres), and in its logs. Every
    /// worker sharing a store needs a name of its own: two live workers with one name would take
    /// runs from each other (safely, as the store fences the one that lost, but wastefully).
    /// 1 to 128 bytes, no control characters.
    ///
    /// The default is made once per process: the host name, the process id and 4 random hex
    /// digits (`db-host-1-4711-3fa9`); a second runtime in the same process adds `-2`, and so on.
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker = Some(id.into());
        self
    }

    /// How long a worker's claim on a run of a shared store lasts unless renewed (default 30 s).
    /// A worker renews the claims of the runs it advances every [`heartbeat`](Self::heartbeat),
    /// and gives a run's claim up when the run parks; a worker that dies or stalls keeps its runs
    /// from the others for at most this long. Leases are measured by the workers' clocks, so keep
    /// this long against the clock skew between machines. Single-process stores ignore it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often a worker renews the leases of the runs it advances (default 10 s); at most half
    /// the [`lease`](Self::lease), so one late renewal does not lose a claim.
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// How often a worker polls a shared store for runs it can take (default 500 ms; 10 ms to
    /// 60 s): runs a dead worker held, due timers of runs no worker holds, and anything a lost
    /// wake-up did not announce are found within this long.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }

    /// Refuses settings that cannot work together, saying which and what to do.
    fn check(&self) -> Result<(), Error> {
        let invalid = |setting: &'static str, reason: String| Err(Error::InvalidConfig { setting, reason });
        if let Some(id) = &self.worker
            && (id.is_empty() || id.len() > 128 || id.chars().any(char::is_control))
        {
            return invalid(
                "worker_id",
                format!("{id:?} is not usable; use 1 to 128 bytes without control characters"),
            );
        }
        if self.lease < Duration::from_millis(100) {
            return invalid(
                "lease",
                format!("{:?} is too short; give a lease of 100 ms or more (30 s is the default)", self.lease),
            );
        }
        if self.heartbeat.is_zero() || self.heartbeat > self.lease / 2 {
            return invalid(
                "heartbeat",
                format!(
                    "{:?} does not renew a {:?} lease in time; renew at least twice per lease (a heartbeat of {:?} or less)",
                    self.heartbeat,
                    self.lease,
                    self.lease / 2
                ),
            );
        }
        if !(MIN_POLL..=MAX_POLL).contains(&self.poll) {
            return invalid("poll_interval", format!("{:?} is out of range; poll every 10 ms to 60 s", self.poll));
        }
        self.checks.iter().try_for_each(|check| check(&self.state))
    }

    /// Builds the runtime. Must be called inside a Tokio runtime.
    pub fn build(self) -> Result<Runtime, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoTokioRuntime)?;
        if let Some((name, workflow_ids)) = registry::duplicate_names().into_iter().next() {
            return Err(Error::DuplicateTool { name, workflow_ids });
        }
        registry::learn_step_names();
        self.check()?;
        // Only a folder this build makes is told to git to keep out: it holds the secret key.
        let new_folder = !self.path.exists();
        let store = match (self.store, self.open_store) {
            (Some(store), _) => store,
            (None, Some(open)) => open(&Opening { dir: &self.path, lease: self.lease })?,
            (None, None) => Arc::new(MemoryStore::new()),
        };
        let worker = self.worker.map_or_else(default_worker_id, WorkerId);
        let sharing = super::worker::Settings { heartbeat: self.heartbeat, poll: self.poll };
        let key = match self.key {
            Some(key) => key,
            None if store.is_durable() => {
                let path = self.path.join("eve.key");
                SecretKey::load_or_create(&path).map_err(|source| Error::SecretKey { path, source })?
            }
            None => SecretKey::generate(),
        };
        if new_folder && self.path.is_dir() {
            keep_out_of_git(&self.path);
        }
        let services = Arc::new(Services::new(self.clock.clone(), key, self.providers, self.public_url, self.state));
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            // The timer task and the executors hold the runtime weakly: they stop once it is dropped,
            // or once it stops (a due timer is in the store, for the next runtime to fire).
            let for_timers = weak.clone();
            let fire = move |run, op, kind| match for_timers.upgrade() {
                Some(shared) if !shared.is_stopping() => {
                    shared.wake(&run, Msg::Timer(op, kind));
                    true
                }
                _ => false,
            };
            let for_reports = weak.clone();
            let wake = Box::new(move |run: &crate::journal::RunId| {
                if let Some(shared) = for_reports.upgrade() {
                    shared.wake(run, Msg::Inbox);
                }
            });
            let _ = services.control.set(Arc::new(super::Control(weak.clone())));
            Shared::new(
                Engine {
                    max_entry_bytes: store.max_entry_bytes(),
                    gauges: crate::metrics::RunGauges::new(store.is_shared()),
                    store,
                    services,
                    events: EventBus::new(self.event_capacity),
                    timers: TimerService::start(self.clock.clone(), fire),
                    worker,
                    lease: self.lease,
                    grace: self.grace,
                    history: HistoryLimits { warning: self.history_limit / 5, limit: self.history_limit },
                    hook_buffer: self.hook_buffer,
                    stopping: watch::channel(false).0,
                    followers: Arc::default(),
                    wake,
                },
                super::CacheLimits { runs: self.cache_capacity, idle: self.idle_capacity },
                self.replay_concurrency,
                sharing,
            )
        });
        Ok(Runtime { shared })
    }
}

/// Writes a `.gitignore` that ignores everything into the data folder this build just made: the
/// folder holds the secret key and the store, neither of which belongs in a repository.
fn keep_out_of_git(folder: &Path) {
    let text = "# Made by eve: this folder holds the secret key (eve.key) and the run store.\n*\n";
    if let Err(error) = std::fs::write(folder.join(".gitignore"), text) {
        tracing::warn!(folder = %folder.display(), "cannot write the data folder's .gitignore: {error}");
    }
}

/// Opens the store a runtime uses when given none.
type OpenStore = Box<dyn FnOnce(&Opening<'_>) -> Result<Arc<dyn Store>, StoreError> + Send>;

/// What a store is opened with: see [`RuntimeBuilder::open_store`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Opening<'a> {
    /// The data directory ([`RuntimeBuilder::data_dir`]).
    pub dir: &'a Path,
    /// The lease a shared store's creator holds a new run for ([`RuntimeBuilder::lease`]).
    pub lease: Duration,
}

/// A store a linked part offers as the default of [`Runtime::builder`], submitted with
/// `inventory::submit!`: the embedded SQLite store offers itself so, and the Postgres store for
/// when `EVE_DATABASE_URL` is set. A default with a `variable` is used when that variable is set,
/// and wins over those without.
#[derive(Debug)]
pub struct DefaultStore {
    /// The store's name, as errors say it (`sqlite`).
    pub name: &'static str,
    /// The environment variable that selects this store, if any.
    pub variable: Option<&'static str>,
    /// Opens the store.
    pub open: fn(&Opening<'_>) -> Result<Arc<dyn Store>, StoreError>,
}

inventory::collect!(DefaultStore);

/// The variable naming a Postgres database that [`Runtime::builder`] uses when it is set.
pub const DATABASE_URL_VARIABLE: &str = "EVE_DATABASE_URL";

/// Opens the store [`Runtime::builder`] uses unless given one: see [`DefaultStore`].
fn default_store(opening: &Opening<'_>) -> Result<Arc<dyn Store>, StoreError> {
    let defaults: Vec<&DefaultStore> = inventory::iter::<DefaultStore>().collect();
    let set = |variable: &str| std::env::var_os(variable).is_some();
    if let Some(chosen) = defaults.iter().find(|default| default.variable.is_some_and(set)) {
        return (chosen.open)(opening);
    }
    if set(DATABASE_URL_VARIABLE) {
        let reason = format!(
            "{DATABASE_URL_VARIABLE} names a Postgres database, but this binary has no Postgres store: enable the \
             `postgres` feature of eve-tools, or unset the variable to use the embedded store"
        );
        return Err(StoreError::Open { path: DATABASE_URL_VARIABLE.into(), reason });
    }
    match defaults.iter().find(|default| default.variable.is_none()) {
        Some(embedded) => (embedded.open)(opening),
        None => Ok(Arc::new(MemoryStore::new())),
    }
}

/// How many idle runs the warm cache keeps by default: enough for the sessions people are talking
/// to right now; the many more left idle would each hold about 7 KB for nothing.
const DEFAULT_WARM_IDLE: usize = 32;

/// How long a claim of a shared store lasts unless renewed, unless told otherwise.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a worker renews its leases, unless told otherwise.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

/// How often a worker polls a shared store for runs to take, unless told otherwise.
const DEFAULT_POLL: Duration = Duration::from_millis(500);

/// The shortest and longest poll interval accepted.
const MIN_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_secs(60);

/// The worker id a runtime takes unless told otherwise: see [`RuntimeBuilder::worker_id`].
fn default_worker_id() -> WorkerId {
    static BASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static RUNTIMES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = BASE.get_or_init(|| {
        let mut bytes = [0u8; 2];
        crate::random::fill_random(&mut bytes);
        format!("{}-{}-{:02x}{:02x}", host_name(), std::process::id(), bytes[0], bytes[1])
    });
    match RUNTIMES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
        0 => WorkerId(base.clone()),
        n => WorkerId(format!("{base}-{}", n + 1)),
    }
}

/// This machine's name, as far as it can be read without a system call: the kernel's (Linux), or
/// `HOSTNAME`; letters, digits, `.`, `-` and `_` only, at most 64 of them.
fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let name: String =
        name.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')).take(64).collect();
    if name.is_empty() { "host".to_owned() } else { name }
}

/// How many entries one history of a run may have unless told otherwise.
const DEFAULT_HISTORY_LIMIT: u64 = 50_000;

/// The public URL the runtime assumes unless told otherwise: its default HTTP address.
const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:7700";
