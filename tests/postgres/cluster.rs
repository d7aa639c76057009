//! Where the Postgres tests find a server, and a fresh schema per test.
//!
//! With `EVE_TEST_DATABASE_URL` set (for instance by `eval "$(scripts/postgres.sh start)"`), the
//! tests use that server. Without it, the first test to need one starts a throwaway cluster with
//! the same script (`initdb` and `pg_ctl` as the `postgres` user, a temporary directory, a free
//! loopback port), shared by every test of this process; the script leaves a watchdog that stops
//! the cluster and removes its directory once this process has exited, however it exits. If no
//! server can be had, every Postgres test fails and says why: nothing is skipped.
//!
//! Each test gets its own schema (`t_` and random hex), so tests run in parallel without seeing
//! each other's runs; its stores' connections carry the schema's name as `application_name`, so a
//! test can find its own backends in `pg_stat_activity`. [`Schema`] drops it when the test ends,
//! after ending those backends: a test's runtime is gone by then, so a connection of its may
//! still hold a transaction the runtime never got to roll back.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use eve_tools::store::{PostgresOptions, PostgresStore};
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The variable naming the server the tests use.
pub const URL_VARIABLE: &str = "EVE_TEST_DATABASE_URL";

/// A running cluster started by `scripts/postgres.sh`.
pub struct Cluster {
    /// Its URL, with the superuser's password.
    pub url: String,
    /// Its directory, for `scripts/postgres.sh stop` and `restart`.
    pub dir: String,
}

impl Cluster {
    /// Starts a throwaway cluster, stopped once this process exits (or when dropped).
    pub fn start() -> Result<Cluster, String> {
        let output = Command::new("bash")
            .arg(script())
            .arg("start")
            .env("EVE_POSTGRES_WATCH_PID", std::process::id().to_string())
            .output()
            .map_err(|error| format!("cannot run bash {}: {error}", script().display()))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        }
        let printed = String::from_utf8_lossy(&output.stdout);
        let value = |name: &str| {
            let prefix = format!("export {name}=");
            printed.lines().find_map(|line| line.strip_prefix(&prefix)).map(str::to_owned)
        };
        match (value(URL_VARIABLE), value("EVE_POSTGRES_DIR")) {
            (Some(url), Some(dir)) => Ok(Cluster { url, dir }),
            _ => Err(format!("scripts/postgres.sh start printed no URL and directory: {printed}")),
        }
    }

    /// Restarts the server (`fast`, or `immediate`: as after a crash, without a checkpoint).
    pub fn restart(&self, mode: &str) {
        let status = Command::new("bash").arg(script()).args(["restart", &self.dir, mode]).status();
        assert!(status.is_ok_and(|status| status.success()), "scripts/postgres.sh restart {mode} failed");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).args(["stop", &self.dir]).status();
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
}

/// The URL of the server every test shares; panics, saying why and what to do, if there is none.
pub fn server_url() -> &'static str {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var(URL_VARIABLE) {
            return Ok(url);
        }
        // Kept for the life of the process: the script's watchdog stops it after the process exits.
        let cluster = Cluster::start()?;
        let url = cluster.url.clone();
        std::mem::forget(cluster);
        Ok(url)
    });
    match server {
        Ok(url) => url,
        Err(reason) => panic!(
            "the Postgres tests need a server and none could be had. Either point them at one with \
             {URL_VARIABLE} (`eval \"$(scripts/postgres.sh start)\"` starts a throwaway one), or install \
             PostgreSQL (the tests then start a throwaway cluster themselves). Starting one failed: {reason}"
        ),
    }
}

/// Held by every test while it uses the shared server: shared by most, alone by a test that
/// measures speed, so no other test's load weighs on its figures.
fn gate() -> Arc<RwLock<()>> {
    static GATE: OnceLock<Arc<RwLock<()>>> = OnceLock::new();
    GATE.get_or_init(|| Arc::new(RwLock::new(()))).clone()
}

/// How a test holds the [`gate`]: kept, never read, until the test ends.
type Turn = (Option<OwnedRwLockReadGuard<()>>, Option<OwnedRwLockWriteGuard<()>>);

/// A schema of its own for one test, dropped (with everything in it) when the value is dropped.
pub struct Schema {
    url: String,
    /// Its name.
    pub name: String,
    _turn: Turn,
}

impl Schema {
    /// A new, unused schema name on the shared server (the schema itself is created by the store).
    pub async fn new() -> Schema {
        Schema::with((Some(gate().read_owned().await), None))
    }

    /// Like [`Schema::new`], once no other test uses the server, and keeping it to itself (for the
    /// figures of `benches/postgres.rs`, which includes this file).
    #[allow(dead_code, reason = "the tests time nothing; the benches use it")]
    pub async fn alone() -> Schema {
        Schema::with((None, Some(gate().write_owned().await)))
    }

    fn with(turn: Turn) -> Schema {
        let mut bytes = [0u8; 8];
        eve_tools::secret::fill_random(&mut bytes);
        let suffix: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Schema { url: server_url().to_owned(), name: format!("t_{suffix}"), _turn: turn }
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's URL, with the schema's name as `application_name`.
    pub fn store_url(&self) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}application_name={}", self.url, self.name)
    }

    /// Options for a store in this schema, with a small pool as many tests run at once.
    pub fn options(&self) -> PostgresOptions {
        PostgresOptions { schema: self.name.clone(), pool_size: 8, ..PostgresOptions::default() }
    }

    /// A store in this schema.
    pub async fn store(&self) -> PostgresStore {
        let store = PostgresStore::connect_with(&self.store_url(), self.options()).await;
        store.unwrap_or_else(|error| panic!("a store in a fresh schema should open: {error}"))
    }

    /// A plain connection to the server, as an administrator, its search path on this schema.
    pub async fn admin(&self) -> tokio_postgres::Client {
        admin(&self.url, Some(&self.name)).await
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // Dropped inside a test's runtime, which cannot be blocked on: drop the schema from a thread
        // with a runtime of its own, and wait for it.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.ok()?;
                tokio::spawn(connection);
                let ours = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1";
                client.execute(ours, &[&name]).await.ok()?;
                let drop = format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {name} CASCADE");
                client.batch_execute(&drop).await.ok()
            })
        });
        let _ = dropped.join();
    }
}

/// A plain connection to the server at `url`, with its search path on `schema` if given.
pub async fn admin(url: &str, schema: Option<&str>) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("the test server accepts the administrator");
    tokio::spawn(connection);
    if let Some(schema) = schema {
        client.batch_execute(&format!("SET search_path = {schema}")).await.expect("the search path can be set");
    }
    client
}
