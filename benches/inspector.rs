//! The inspector's runs list on a big store: `GET /v1/runs` over loopback HTTP against a SQLite
//! store holding 100,000 runs, with a target of at most 100 ms per page.
//!
//! The store is filled through the runtime, as users fill it: 100,000 runs of four tools, of
//! which a tenth fail, a tenth stay parked on a hook, and the rest complete. Timed, each a full
//! request and response of 50 runs (the page's size):
//!
//! - `first_page`: the newest runs;
//! - `by_status`: failed runs only (a tenth);
//! - `by_tool`: one tool's runs (a quarter);
//! - `deep_page`: the page that starts half-way down the list, by its cursor;
//! - `sparse`: running runs of one tool, of which there are none: the filter walks the whole of
//!   that tool's index, the worst case of the listing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use eve_benches::{close, heading, micros, multi_thread, record, report, secret_key, size};
use eve_tools::http::Server;
use eve_tools::prelude::*;
use eve_tools::store::{SqliteStore, Store};
use serde_json::{Value, json};

/// Which of the four tools a run is of, and what it does.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Kind {
    n: u64,
}

/// Completes, fails, or parks on a hook, by `n`.
async fn by_kind(input: Kind) -> Result<u64, ToolError> {
    match input.n % 10 {
        0 => Err(ToolError::new("the tenth run fails")),
        1 => Ok(create_hook_with_token::<u64>(format!("list-{}", input.n)).recv().await?),
        _ => Ok(input.n),
    }
}

/// The first tool.
#[workflow_tool]
pub async fn list_alpha(input: Kind) -> Result<u64, ToolError> {
    by_kind(input).await
}

/// The second tool.
#[workflow_tool]
pub async fn list_beta(input: Kind) -> Result<u64, ToolError> {
    by_kind(input).await
}

/// The third tool.
#[workflow_tool]
pub async fn list_gamma(input: Kind) -> Result<u64, ToolError> {
    by_kind(input).await
}

/// The fourth tool.
#[workflow_tool]
pub async fn list_delta(input: Kind) -> Result<u64, ToolError> {
    by_kind(input).await
}

const TOOLS: [&str; 4] = ["list_alpha", "list_beta", "list_gamma", "list_delta"];

/// Runs `count` runs, `batch` at a time, each until it finishes or parks.
async fn fill(runtime: &Runtime, count: u64, batch: u64) {
    for first in (0..count).step_by(batch as usize) {
        let starts = (first..(first + batch).min(count)).map(|n| {
            let runtime = runtime.clone();
            async move {
                let run = runtime.start(TOOLS[(n % 4) as usize], json!({ "n": n })).await.expect("the tool exists");
                run.parked().await.expect("the run settles");
            }
        });
        futures::future::join_all(starts).await;
    }
}

fn listing(c: &mut Criterion) {
    let count = size(100_000, 2_000);
    let tokio = multi_thread();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("eve.db")).expect("the store opens"));
    let (server, base) = tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let runtime = Runtime::builder().shared_store(store.clone()).secret_key(secret_key()).public_url(&base);
        let runtime = runtime.build().expect("a runtime builds inside Tokio");
        let filled = Instant::now();
        fill(&runtime, count, 500).await;
        println!("filled the store with {count} runs in {:.1} s", filled.elapsed().as_secs_f64());
        (Server::new(runtime).serve(listener).expect("the server starts"), base)
    });
    let client = reqwest::Client::builder().no_proxy().build().expect("a client");
    let get = |path: &str| -> Value {
        let url = format!("{base}{path}");
        tokio.block_on(async {
            let response = client.get(&url).send().await.expect("the server answers");
            assert!(response.status().is_success(), "{url}: {}", response.status());
            response.json().await.expect("a JSON page")
        })
    };
    // The cursor half-way down, found by walking pages of 200.
    let mut middle = String::new();
    let mut seen = 0;
    while seen < count / 2 {
        let page = get(&format!(
            "/v1/runs?limit=200{}",
            if middle.is_empty() { String::new() } else { format!("&before={middle}") }
        ));
        seen += page["runs"].as_array().expect("runs").len() as u64;
        middle = page["next"].as_str().expect("more pages").to_owned();
    }
    let cases = [
        ("first_page", "/v1/runs?limit=50".to_owned(), 50),
        ("by_status", "/v1/runs?limit=50&status=failed".to_owned(), 50),
        ("by_tool", "/v1/runs?limit=50&tool=list_gamma".to_owned(), 50),
        ("deep_page", format!("/v1/runs?limit=50&before={middle}"), 50),
        ("sparse", "/v1/runs?limit=50&tool=list_gamma&status=running".to_owned(), 0),
    ];
    let mut group = c.benchmark_group("inspector");
    group.sample_size(20).sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for (name, path, expected) in &cases {
        assert_eq!(get(path)["runs"].as_array().expect("runs").len(), *expected, "{path}");
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    get(path);
                }
                record(&format!("inspector/{name}"), iters, start.elapsed())
            })
        });
    }
    group.finish();
    tokio.block_on(async {
        server.shutdown().await;
        close(store).await;
    });
}

fn main() {
    let mut criterion = Criterion::default().without_plots().configure_from_args();
    listing(&mut criterion);
    criterion.final_summary();
    heading("inspector: GET /v1/runs, 50 runs a page, on a SQLite store of 100,000 runs");
    for (name, what) in [
        ("first_page", "the newest page"),
        ("by_status", "failed runs (a tenth)"),
        ("by_tool", "one tool's runs (a quarter)"),
        ("deep_page", "the page half-way down, by cursor"),
        ("sparse", "running runs of one tool (none: walks its index)"),
    ] {
        report(what, format!("{:.2} ms", micros(&format!("inspector/{name}")) / 1_000.0), "≤ 100 ms");
    }
}
