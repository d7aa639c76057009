//! `host serve` exports when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, as `OTEL_SERVICE_NAME`, and
//! stopped by SIGTERM, exports what it still holds before it exits.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use eve_tests::otlp::Collector;
use serde_json::json;

#[tokio::test]
async fn serve_exports_the_runs_spans_and_flushes_them_when_stopped() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("EVE_DATA_DIR", dir.path())
        .env_remove("EVE_API_KEY")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SERVICE_NAME", "greeter")
        // Nothing leaves on the batch's timer during the test: what arrives was flushed at exit.
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let base = lines.by_ref().find_map(|line| line.strip_prefix("serving ").map(str::to_owned)).unwrap();
    let base = base.split(' ').next().unwrap().to_owned();
    // The server goes on printing (each finished run, its goodbye): its pipe is read to the end.
    std::thread::spawn(move || lines.for_each(drop));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let body = json!({ "runId": "greeted", "input": { "name": "Ada" } });
    let started = client.post(format!("{base}/v1/tools/greet_durably/runs")).json(&body).send().await.unwrap();
    assert_eq!(started.status(), 201);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status: serde_json::Value =
            client.get(format!("{base}/v1/runs/greeted")).send().await.unwrap().json().await.unwrap();
        if status["status"] == "completed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the run never completed: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(collector.spans().is_empty(), "nothing is exported before the batch is due or the server stops");

    let terminated = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(terminated.success());
    assert!(child.wait().unwrap().success(), "a drained server exits 0");
    let spans = collector.wait_for(Duration::from_secs(10), |spans| spans.iter().any(|span| span.name == "run"));
    let names: Vec<_> = spans.iter().map(|span| (span.name.as_str(), span.service.as_str())).collect();
    for expected in [("start", "greeter"), ("run", "greeter"), ("step", "greeter")] {
        assert!(names.contains(&expected), "{expected:?} in {names:?}");
    }
}
