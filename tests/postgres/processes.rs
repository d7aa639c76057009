//! Worker processes for the multi-worker tests: a [`Fleet`] of `pg-worker worker` processes on one
//! schema of a Postgres server, which a test starts, kills (SIGKILL), pauses (SIGSTOP, SIGCONT)
//! and restarts, plus client commands (`pg-worker answer ...`) and a store of its own to read what
//! the workers wrote.
//!
//! Each worker's stderr (its logs, with `EVE_LOG=info`) and its stdout after the address line go
//! to files in the fleet's directory, named for the worker and its generation, so a failing test
//! can be read afterwards (the directory is kept when `EVE_KEEP_LOGS` is set).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use eve_tools::store::{PostgresOptions, PostgresStore};

/// The worker binary this test binary was built with.
pub const WORKER_BIN: &str = env!("CARGO_BIN_EXE_pg-worker");

/// How a fleet's workers hold and look for runs.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub lease: Duration,
    pub heartbeat: Duration,
    pub poll: Duration,
}

/// Worker processes sharing one schema.
pub struct Fleet {
    /// The server's URL.
    pub url: String,
    /// The schema the workers share.
    pub schema: String,
    timing: Timing,
    dir: Option<tempfile::TempDir>,
    /// Every worker started, by slot; a killed one is replaced in its slot.
    pub workers: Vec<Worker>,
    /// Variables every command of the fleet gets besides the store's.
    env: Vec<(String, String)>,
}

/// One worker process.
pub struct Worker {
    /// Its name (`EVE_WORKER_ID`), kept across restarts.
    pub name: String,
    /// How many times a process was started under this name.
    pub generation: u32,
    child: Child,
    /// Its HTTP server's base URL.
    pub base: String,
    /// The binary it runs (another build's, in the rolling deploy).
    bin: PathBuf,
}

impl Fleet {
    /// A fleet on `schema` of the server at `url`, with a fresh data directory holding the secret
    /// key every worker shares; no worker is started yet.
    pub fn new(url: &str, schema: &str, timing: Timing) -> Fleet {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut key = [0u8; 32];
        eve_tools::secret::fill_random(&mut key);
        std::fs::write(dir.path().join("eve.key"), key).expect("the shared key is written");
        Fleet {
            url: url.to_owned(),
            schema: schema.to_owned(),
            timing,
            dir: Some(dir),
            workers: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Where the workers' logs are.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the directory is kept until the fleet stops").path()
    }

    /// Gives every command started from now on the variable `name` (an exporter's endpoint, say).
    pub fn env(&mut self, name: &str, value: &str) {
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// A command running `pg-worker` against the fleet's store, as `name`.
    pub fn command(&self, name: &str) -> Command {
        self.command_of(Path::new(WORKER_BIN), name)
    }

    /// A command running the worker binary `bin` against the fleet's store, as `name`.
    pub fn command_of(&self, bin: &Path, name: &str) -> Command {
        let mut command = Command::new(bin);
        command
            .env("EVE_DATABASE_URL", &self.url)
            .env("EVE_DATABASE_SCHEMA", &self.schema)
            .env("EVE_DATA_DIR", self.dir())
            .env("EVE_WORKER_ID", name)
            .env("EVE_LOG", "info")
            .env_remove("EVE_ADDR")
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// Starts worker `name` in a new slot; returns its slot.
    pub fn start(&mut self, name: &str) -> usize {
        self.start_binary(name, Path::new(WORKER_BIN))
    }

    /// Starts worker `name` running the binary `bin` (another build of `pg-worker`) in a new slot;
    /// returns its slot.
    pub fn start_binary(&mut self, name: &str, bin: &Path) -> usize {
        let worker = self.spawn(bin, name, 1);
        self.workers.push(worker);
        self.workers.len() - 1
    }

    fn spawn(&self, bin: &Path, name: &str, generation: u32) -> Worker {
        let Timing { lease, heartbeat, poll } = self.timing;
        let log = |kind: &str| self.dir().join(format!("{name}-{generation}.{kind}"));
        let stderr = std::fs::File::create(log("err")).expect("a log file");
        let mut child = self
            .command_of(bin, name)
            .args(["worker", "--addr", "127.0.0.1:0"])
            .args(["--lease", &format!("{}ms", lease.as_millis())])
            .args(["--heartbeat", &format!("{}ms", heartbeat.as_millis())])
            .args(["--poll", &format!("{}ms", poll.as_millis())])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("the worker starts");
        let base = listening(&mut child, log("out"))
            .unwrap_or_else(|| panic!("worker {name} did not start; see {}", log("err").display()));
        Worker { name: name.to_owned(), generation, child, base, bin: bin.to_owned() }
    }

    /// SIGKILLs the worker in `slot` (no goodbye: its claims stay until their leases expire).
    pub fn kill(&mut self, slot: usize) {
        let worker = &mut self.workers[slot];
        worker.child.kill().expect("SIGKILL the worker");
        worker.child.wait().expect("the killed worker is reaped");
    }

    /// SIGKILLs the worker in `slot` and starts a new process under its name.
    pub fn kill_and_restart(&mut self, slot: usize) {
        let old = &mut self.workers[slot];
        old.child.kill().expect("SIGKILL the worker");
        old.child.wait().expect("the killed worker is reaped");
        let (name, generation, bin) = (old.name.clone(), old.generation + 1, old.bin.clone());
        self.workers[slot] = self.spawn(&bin, &name, generation);
    }

    /// The base URLs of the workers now running.
    pub fn bases(&self) -> Vec<String> {
        self.workers.iter().map(|worker| worker.base.clone()).collect()
    }

    /// A store on the fleet's schema, for the test to read (and, as a client, write) runs.
    pub async fn store(&self) -> PostgresStore {
        let options = PostgresOptions { schema: self.schema.clone(), pool_size: 4, ..PostgresOptions::default() };
        PostgresStore::connect_with(&self.url, options).await.expect("the test's store opens")
    }

    /// A plain connection with its search path on the fleet's schema.
    pub async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.expect("the server accepts the test");
        tokio::spawn(connection);
        client.batch_execute(&format!("SET search_path = {}", self.schema)).await.expect("the search path is set");
        client
    }

    /// Runs a client command (`answer`, `cancel`, `runs`, ...) to its end: (success, stdout, stderr).
    pub fn client(&self, args: &[&str]) -> (bool, String, String) {
        self.client_of(Path::new(WORKER_BIN), args)
    }

    /// Runs a client command of the worker binary `bin` to its end: (success, stdout, stderr).
    pub fn client_of(&self, bin: &Path, args: &[&str]) -> (bool, String, String) {
        let output = self.command_of(bin, "client").args(args).env_remove("EVE_LOG").output().expect("the client runs");
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        (output.status.success(), text(output.stdout), text(output.stderr))
    }

    /// Stops every worker (SIGKILL: nothing is left to finish) and keeps the logs if asked to.
    pub fn stop(mut self) {
        for worker in &mut self.workers {
            let _ = worker.child.kill();
            let _ = worker.child.wait();
        }
        if let Some(dir) = self.dir.take().filter(|_| std::env::var_os("EVE_KEEP_LOGS").is_some()) {
            eprintln!("worker logs kept in {}", dir.keep().display());
        }
    }
}

impl Worker {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status();
        assert!(status.is_ok_and(|status| status.success()), "kill -{signal} {}", self.pid());
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _ = worker.child.kill();
            let _ = worker.child.wait();
        }
    }
}

/// Reads the worker's stdout until it says where it listens (within 30 s); the rest of its stdout
/// goes to `log` from a thread of its own, so the pipe never fills.
fn listening(child: &mut Child, log: PathBuf) -> Option<String> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let (found, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut file = std::fs::File::create(log).ok();
        let mut found = Some(found);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(base) = line.strip_prefix("serving ").and_then(|rest| rest.split(' ').next())
                && let Some(found) = found.take()
            {
                let _ = found.send(base.to_owned());
            }
            if let Some(file) = file.as_mut() {
                let _ = writeln!(file, "{line}");
            }
        }
    });
    receiver.recv_timeout(Duration::from_secs(30)).ok()
}
