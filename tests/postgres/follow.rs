//! Following a run that a worker process advances: a runtime in this process, which claims
//! nothing, follows a run of 10,000 entries committed by the worker, as a slow client does
//! (starting late, falling behind, reconnecting), and gets every entry exactly once, in order, and
//! none before it is durable. The notices come through Postgres (`LISTEN`), since no commit is
//! this process's own.

use std::time::Duration;

use eve_tests::follow::{Slow, assert_whole_journal, follow_slowly};
use eve_tools::Runtime;
use eve_tools::prelude::*;
use serde_json::json;

use crate::cluster::Schema;
use crate::processes::{Fleet, Timing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_follower_reads_ten_thousand_entries_another_process_commits() {
    let schema = Schema::new().await;
    let timing = Timing {
        lease: Duration::from_secs(5),
        heartbeat: Duration::from_millis(500),
        poll: Duration::from_millis(200),
    };
    let mut fleet = Fleet::new(&schema.store_url(), &schema.name, timing);
    let slot = fleet.start("committer");
    let http = reqwest::Client::new();
    let base = &fleet.workers[slot].base;
    let body = json!({ "input": { "steps": 10_000, "rest_every": 25 }, "runId": "followed" });
    let response =
        http.post(format!("{base}/v1/tools/ticks/runs")).json(&body).send().await.expect("the worker answers");
    assert_eq!(response.status().as_u16(), 201, "the run starts");

    // Never recovered, this runtime claims no run: every commit it hears of is the worker's.
    let follower = Runtime::builder().postgres_with(schema.store_url(), schema.options()).build().expect("it builds");
    let run = "followed".parse().unwrap();
    let slow = Slow {
        late: 2_000,
        lag_after: 3_000,
        lag: Duration::from_millis(300),
        reconnect_after: 6_000,
        within: Duration::from_secs(120),
    };
    let received = follow_slowly(&follower, &run, slow).await;
    assert_eq!(received.len(), 10_002, "RunStarted, 10,000 steps and RunCompleted");
    assert_whole_journal(&follower, &run, &received).await;
    fleet.stop();
}
