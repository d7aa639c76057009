//! Define a workflow tool: `deploy` plans, asks a person to approve, and deploys only if they do.
//! Run twice: approved over the HTTP API a channel would use, then cancelled.
//!
//! ```text
//! cargo run --example deploy
//! ```

use eve_examples::deploy::Deployed;
use eve_tools::http::Server;
use eve_tools::store::MemoryStore;
use eve_tools::{Answer, Entry, RunId, Runtime};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let runtime = Runtime::builder().store(MemoryStore::new()).public_url(&base).build()?;
    let server = Server::new(runtime.clone()).serve(listener)?;
    let http = reqwest::Client::builder().no_proxy().build()?;
    println!("eve example: deploy, a workflow tool that waits for a person (runtime served at {base})\n");

    println!("— approved, over HTTP");
    let started: Value = http
        .post(format!("{base}/v1/tools/deploy/runs"))
        .json(&json!({ "input": { "service": "api" } }))
        .send()
        .await?
        .json()
        .await?;
    let run: RunId = started["runId"].as_str().ok_or("no runId")?.parse()?;
    println!("    POST /v1/tools/deploy/runs {{\"service\": \"api\"}} started {run}");
    runtime.handle(run.clone()).parked().await?;
    println!(
        "    steps so far: {:?}; the run parked, holding no task, while the person reads",
        steps(&runtime, &run).await?
    );
    let questions: Value = http.get(format!("{base}/v1/runs/{run}/questions")).send().await?.json().await?;
    let question = &questions["questions"][0];
    println!(
        "    GET .../questions: {}",
        question["request"]["prompt"].as_str().unwrap_or_default().replace("\n\n", " | ")
    );
    let request = question["requestId"].as_str().ok_or("no requestId")?;
    let answer = http.post(format!("{base}/v1/runs/{run}/questions/{request}")).json(&json!({ "optionId": "approve" }));
    println!("    POST .../questions/{request} {{\"optionId\": \"approve\"}}: {}", answer.send().await?.status());
    let outcome = runtime.handle(run.clone()).outcome().await?;
    println!("    steps: {:?}", steps(&runtime, &run).await?);
    println!("    result: {}\n", describe(outcome.output())?);

    println!("— cancelled");
    let run = runtime.start("deploy", json!({ "service": "billing" })).await?;
    run.parked().await?;
    let question = runtime.open_questions(run.id()).await?.remove(0);
    println!("    asked: {}", question.request.prompt.replace("\n\n", " | "));
    runtime.answer(run.id(), &question.request_id, Answer::option("cancel")).await?;
    println!("    the person picks \"Cancel\"");
    let outcome = run.outcome().await?;
    println!("    steps: {:?} (apply_deploy never ran)", steps(&runtime, run.id()).await?);
    println!("    result: {}", describe(outcome.output())?);

    server.shutdown().await;
    Ok(())
}

/// Says what the tool returned.
fn describe(output: Option<&Value>) -> Result<String, Box<dyn std::error::Error>> {
    let deployed: Deployed = serde_json::from_value(output.cloned().ok_or("the run did not complete")?)?;
    Ok(match deployed {
        Deployed { deployed: true, url, .. } => format!("deployed at {}", url.unwrap_or_default()),
        Deployed { reason, .. } => format!("not deployed ({})", reason.unwrap_or_default()),
    })
}

/// The steps the run's journal records as completed.
async fn steps(runtime: &Runtime, run: &RunId) -> Result<Vec<String>, eve_tools::Error> {
    let entries = runtime.journal(run).await?.entries;
    let names = entries.into_iter().filter_map(|entry| match entry {
        Entry::StepCompleted { name, .. } => Some(name.into_owned()),
        _ => None,
    });
    Ok(names.collect())
}
