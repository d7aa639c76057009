//! Devbox as a background durable tool: one run sees a whole api-devbox task through, from the
//! state changes the service posts to its webhook, asking the person who started it whenever the
//! task needs them. The service is a fake on loopback that works on its own (a few hundred
//! milliseconds per state); the person is simulated by this example, answering over the runtime.
//!
//! Two stories: a review that the person then has fixed, in the same run, after signing in to
//! Devbox; and a task cancelled while it waits for an answer, whose devbox is stopped.
//!
//! ```text
//! cargo run --example devbox
//! ```

use std::time::Duration;

use eve_examples::devbox::{DevboxOutcome, use_api};
use eve_examples::fakes::Mode;
use eve_examples::fakes::devbox::FakeDevbox;
use eve_tools::http::Server;
use eve_tools::store::MemoryStore;
use eve_tools::{Answer, Ask, Display, RunEvent, RunHandle, RunOutcome, Runtime, StartOptions};
use serde_json::json;
use tokio::sync::broadcast;

type Failure = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let devbox = FakeDevbox::start(Mode::Autopilot(Duration::from_millis(150)));
    use_api(devbox.base());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let runtime = Runtime::builder()
        .store(MemoryStore::new())
        .public_url(&base)
        .auth_provider("devbox", devbox.oauth().build()?)
        .build()?;
    let server = Server::new(runtime.clone()).serve(listener)?;
    // A person's browser: it keeps the cookie a sign-in link sets for the sign-in's callback.
    let browser = reqwest::Client::builder().no_proxy().cookie_store(true).build()?;
    println!("eve example: devbox, a background task that follows a Devbox task through its webhook");
    println!("(runtime at {base}, Devbox at {})\n", devbox.base());

    println!("— a review, then the fix, in one run");
    let input = json!({
        "repos": ["acme/shop"],
        "prompt": "Review the checkout flow for race conditions.",
        "title": "Checkout review",
        "pr": false,
    });
    let mut events = runtime.events();
    let run = runtime.start_with("devbox", input, StartOptions::new().principal("ada")).await?;
    let mut reviews = 0;
    while let Some(event) = next(&mut events, &run).await? {
        match event {
            RunEvent::AuthorizationRequired { url, task_id, .. } => {
                let task = task_id.unwrap_or_default();
                println!(
                    "    task {task} (the receipt the model got) needs Ada to sign in to Devbox; she opens the link"
                );
                let signed_in = browser.get(url).send().await?;
                println!("    Devbox sends her back to the runtime, which answers {}", signed_in.status());
            }
            RunEvent::InputRequested { request_id, request, .. } => {
                let answer = person(&browser, &request, &mut reviews).await?;
                runtime.answer(run.id(), &request_id, answer).await?;
            }
            _ => {}
        }
    }
    report(run.outcome().await?)?;

    println!("\n— cancelled while Devbox waits for an answer");
    let input = json!({ "repos": ["acme/shop"], "prompt": "Upgrade the payment SDK to v5.", "title": "SDK upgrade" });
    let run = runtime.start_with("devbox", input, StartOptions::new().principal("ada")).await?;
    while let Some(event) = next(&mut events, &run).await? {
        if let RunEvent::InputRequested { request, .. } = event {
            println!("    asked: {}", request.prompt.lines().next().unwrap_or_default());
            println!("    instead of answering, Ada cancels the task (task_cancel)");
            runtime.cancel(run.id(), "task_cancel").await?;
        }
    }
    println!("    the run ended {:?}", run.outcome().await?);
    let stopped = devbox.task_titled("SDK upgrade").is_some_and(|task| task.stopped);
    println!("    Devbox saw its devbox stopped by the cleanup: {stopped}");

    server.shutdown().await;
    Ok(())
}

/// The next event about `run`, or `None` once it has finished.
async fn next(events: &mut broadcast::Receiver<RunEvent>, run: &RunHandle) -> Result<Option<RunEvent>, Failure> {
    loop {
        let event = events.recv().await?;
        if event.run() != run.id() {
            continue;
        }
        return Ok(match event {
            RunEvent::Finished { .. } => None,
            event => Some(event),
        });
    }
}

/// How Ada answers: she reads the task page when Devbox needs her, applies the first review's
/// findings, and is done after that.
async fn person(browser: &reqwest::Client, request: &Ask, reviews: &mut u32) -> Result<Answer, Failure> {
    let headline = request.prompt.lines().next().unwrap_or_default();
    println!("    asked: {headline}");
    if request.display == Display::Text {
        let page = request.prompt.split_whitespace().find(|word| word.starts_with("http")).ok_or("no task page")?;
        let page = browser.get(page).send().await?.text().await?;
        println!("    Ada opens the task page: {}", page.lines().last().unwrap_or_default());
        println!("    Ada answers: \"Base it on main.\"");
        return Ok(Answer::text("Base it on main."));
    }
    *reviews += 1;
    let summary = request.prompt.lines().nth(2).unwrap_or_default();
    println!("    {summary}");
    Ok(if *reviews == 1 {
        println!("    Ada picks \"Apply the findings\"");
        Answer::option("apply")
    } else {
        println!("    Ada picks \"Done\"");
        Answer::option("done")
    })
}

/// Prints what the task returned.
fn report(outcome: RunOutcome) -> Result<(), Failure> {
    let RunOutcome::Completed(output) = outcome else { return Err(format!("the task ended {outcome:?}").into()) };
    let DevboxOutcome { summary, prs, task_url } = serde_json::from_value(output)?;
    println!("    the agent is woken with the result: {summary}");
    println!("    pull requests: {prs:?}; task page: {task_url}");
    Ok(())
}
