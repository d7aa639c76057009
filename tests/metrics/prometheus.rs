//! A real Prometheus server scrapes a `serve` process while it runs a known workload, and its
//! query API reports exactly that workload; `promtool check metrics` accepts the exposition.
//!
//! Prometheus and promtool are Debian's, installed by `scripts/prometheus.sh` if missing; without
//! them the test fails with the script's reason, never skips. The server this test starts is its
//! own: a free loopback port, a data directory in a temporary directory, killed when the test
//! ends, whatever the package's own service does.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The run API's key the `serve` process requires, which the scrape sends too.
const KEY: &str = "a key for the scraper";

/// How many runs the workload starts.
const RUNS: usize = 7;

/// How long Prometheus gets to start, and then to scrape what the workload did.
const PATIENCE: Duration = Duration::from_secs(60);

/// A child process, killed when dropped, so a failing test leaves none behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The paths `scripts/prometheus.sh` prints, installing Prometheus first if needed.
fn installed() -> (PathBuf, PathBuf) {
    let installed = eve_tests::tools::installed("prometheus.sh", "the metrics test needs Prometheus and promtool");
    (installed.path("PROMETHEUS"), installed.path("PROMTOOL"))
}

/// Starts the test binary's host with `serve` on a free loopback port, requiring [`KEY`], and
/// returns it with the address its banner names.
fn serve(data: &Path) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("EVE_DATA_DIR", data)
        .env("EVE_API_KEY", KEY)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the host binary starts");
    let (sender, lines) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    // Read to the end, after the banner too: a closed pipe would fail serve's next line.
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|line| drop(sender.send(line))));
    let served = Killed(child);
    loop {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("serve prints its banner");
        if let Some(address) = line.strip_prefix("serving http://") {
            return (served, address.to_owned());
        }
    }
}

/// A free loopback port (free when asked: Prometheus binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts Prometheus on `port`, scraping `/metrics` of `target` every second with the key, its
/// configuration and data in `dir`.
fn prometheus(binary: &Path, dir: &Path, port: u16, target: &str) -> Killed {
    let config = dir.join("prometheus.yml");
    let mut file = std::fs::File::create(&config).unwrap();
    write!(
        file,
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n  - job_name: eve\n    metrics_path: /metrics\n\
         \x20   authorization:\n      type: Bearer\n      credentials: '{KEY}'\n\
         \x20   static_configs:\n      - targets: ['{target}']\n"
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    Killed(child)
}

/// The value of the one series `query` selects, as Prometheus's query API answers it now.
async fn query(client: &reqwest::Client, prometheus: &str, query: &str) -> Option<f64> {
    let url = format!("{prometheus}/api/v1/query");
    let answer: Value = client.get(url).query(&[("query", query)]).send().await.ok()?.json().await.ok()?;
    assert_eq!(answer["status"], "success", "{query}: {answer}");
    let series = answer["data"]["result"].as_array()?;
    assert!(series.len() <= 1, "{query} selects one series: {answer}");
    series.first()?["value"][1].as_str()?.parse().ok()
}

/// Asks `query` until it answers `expected` or [`PATIENCE`] runs out, then says what it answered.
async fn eventually(client: &reqwest::Client, prometheus: &str, what: &str, expected: f64) -> Option<f64> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answered = query(client, prometheus, what).await;
        if answered == Some(expected) || Instant::now() > deadline {
            return answered;
        }
        // Prometheus scrapes on its own clock, every second: this waits for its next scrape.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn prometheus_scrapes_serve_and_counts_a_known_workload_exactly() {
    let (prometheus_binary, promtool) = installed();
    let dir = tempfile::tempdir().unwrap();
    let (_served, address) = serve(&dir.path().join("eve"));
    let port = free_port();
    let _prometheus = prometheus(&prometheus_binary, dir.path(), port, &address);
    let prometheus = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();

    let up = eventually(&client, &prometheus, "up{job=\"eve\"}", 1.0).await;
    let log = || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    assert_eq!(up, Some(1.0), "Prometheus scrapes serve with the key; its log:\n{}", log());

    let api = format!("http://{address}/v1");
    let mut runs = Vec::new();
    for n in 0..RUNS {
        let start = client.post(format!("{api}/tools/greet_durably/runs")).bearer_auth(KEY);
        let started = start.json(&json!({ "input": { "name": format!("visitor {n}") } })).send().await.unwrap();
        assert_eq!(started.status(), 201);
        runs.push(started.json::<Value>().await.unwrap()["runId"].as_str().unwrap().to_owned());
    }
    for run in &runs {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let status = client.get(format!("{api}/runs/{run}")).bearer_auth(KEY).send().await.unwrap();
            let status: Value = status.json().await.unwrap();
            if status["status"] == "completed" {
                break;
            }
            assert!(Instant::now() < deadline, "run {run} completes: {status}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let runs = RUNS as f64;
    let finished = "eve_runs_finished_total{tool=\"greet_durably\",outcome=\"completed\"}";
    assert_eq!(eventually(&client, &prometheus, finished, runs).await, Some(runs), "{finished}");
    let started = "eve_runs_started_total{tool=\"greet_durably\"}";
    assert_eq!(query(&client, &prometheus, started).await, Some(runs), "{started}");
    let steps = "eve_step_duration_seconds_count{step=\"compose\"}";
    assert_eq!(eventually(&client, &prometheus, steps, runs).await, Some(runs), "{steps}");
    let attempts = "eve_step_attempts_total{step=\"compose\"}";
    assert_eq!(query(&client, &prometheus, attempts).await, Some(runs), "{attempts}");
    let under_a_minute = "eve_step_duration_seconds_bucket{step=\"compose\",le=\"60\"}";
    assert_eq!(query(&client, &prometheus, under_a_minute).await, Some(runs), "{under_a_minute}");
    assert_eq!(query(&client, &prometheus, "eve_runs_active").await, Some(0.0));
    assert_eq!(query(&client, &prometheus, "eve_runs_parked").await, Some(0.0));

    let exposition = client.get(format!("http://{address}/metrics")).bearer_auth(KEY).send().await.unwrap();
    let exposition = exposition.text().await.unwrap();
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    check.stdin.take().unwrap().write_all(exposition.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics refuses the exposition:\n{}{}\n{exposition}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
