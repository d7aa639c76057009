//! Devbox as a background durable tool: the `devbox` example's task against the fake api-devbox,
//! over real HTTP on loopback. The fake is in manual mode: each test posts the task's state
//! changes itself, then lets the runtime settle, and reads back what the service saw.

use std::sync::LazyLock;

use eve_examples::devbox::{APPLY_FINDINGS, DevboxOutcome, use_api};
use eve_examples::fakes::Mode;
use eve_examples::fakes::devbox::{FakeDevbox, FakeTask};
use eve_tests::http::{Served, serve_with};
use eve_tools::http::WEBHOOK_PATH;
use eve_tools::{
    AccessToken, Answer, Display, Entry, MemoryTokenStore, OpenQuestion, Principal, RunEvent, RunFailure, RunHandle,
    RunOutcome, StartOptions, TokenSet, TokenStore,
};
use serde_json::{Value, json};

use super::support::{drain, steps_run};

/// One service for the whole test binary, as the tool's setting is one per process. Tests keep
/// apart by their tasks' titles.
static DEVBOX: LazyLock<FakeDevbox> = LazyLock::new(|| {
    let fake = FakeDevbox::start(Mode::Manual);
    use_api(fake.base());
    fake
});

/// A runtime served on loopback whose `devbox` sign-in already has a token for `ada`.
async fn served() -> Served {
    let tokens = MemoryTokenStore::new();
    let token = TokenSet::new(AccessToken::new(DEVBOX.issue_token()));
    tokens.save(&Principal::new("ada"), token).await.unwrap();
    let provider = DEVBOX.oauth().token_store(tokens).build().unwrap();
    serve_with(|runtime| runtime.auth_provider("devbox", provider), |server| server).await
}

fn input(title: &str, pr: Option<bool>) -> Value {
    let prompt = "Find and fix the race between checkout and inventory updates.";
    json!({ "repos": ["acme/shop"], "prompt": prompt, "title": title, "pr": pr })
}

/// Starts a task as `ada` and returns its run and the task the service created for it.
async fn start(served: &Served, title: &str, pr: Option<bool>) -> (RunHandle, FakeTask) {
    let options = StartOptions::new().principal("ada");
    let run = served.runtime.start_with("devbox", input(title, pr), options).await.unwrap();
    run.parked().await.unwrap();
    (run, DEVBOX.task_titled(title).expect("the task was created"))
}

/// Posts each state change to the task's webhook, checks each was accepted, and lets the run react.
async fn post(served: &Served, task: &FakeTask, states: &[&str]) {
    for state in states {
        assert_eq!(DEVBOX.change(&task.task_id, state).await, 202, "{state}");
    }
    served.runtime.settle().await;
}

async fn questions(served: &Served, run: &RunHandle) -> Vec<OpenQuestion> {
    served.runtime.open_questions(run.id()).await.unwrap()
}

/// Answers the run's only open question.
async fn answer(served: &Served, run: &RunHandle, answer: Answer) {
    let open = questions(served, run).await;
    assert_eq!(open.len(), 1, "one question open: {open:?}");
    served.runtime.answer(run.id(), &open[0].request_id, answer).await.unwrap();
    served.runtime.settle().await;
}

fn outcome(outcome: RunOutcome) -> DevboxOutcome {
    let RunOutcome::Completed(output) = outcome else { panic!("the run did not complete: {outcome:?}") };
    serde_json::from_value(output).unwrap()
}

async fn count(served: &Served, run: &RunHandle, entry: fn(&Entry) -> bool) -> usize {
    served.runtime.journal(run.id()).await.unwrap().entries.iter().filter(|found| entry(found)).count()
}

#[tokio::test]
async fn a_task_that_needs_attention_asks_relays_the_answer_and_returns_the_pull_request() {
    let served = served().await;
    let (run, task) = start(&served, "Fix the checkout race", None).await;
    assert!(task.webhook_url.starts_with(&served.url(WEBHOOK_PATH)), "one webhook, registered before the task");
    assert_eq!(task.repos, ["acme/shop"]);
    assert!(task.prompts[0].ends_with("Deliverable: Open a pull request with the change."), "{:?}", task.prompts);

    post(&served, &task, &["pending", "running"]).await;
    assert!(questions(&served, &run).await.is_empty());
    post(&served, &task, &["attention-required"]).await;
    let asked = questions(&served, &run).await.remove(0).request;
    let task_url = format!("{}/tasks/{}", DEVBOX.base(), task.task_id);
    assert_eq!(asked.display, Display::Text);
    assert_eq!(
        asked.prompt,
        format!(
            "Devbox needs your input to continue \"Fix the checkout race\".\n\
             Open {task_url} to see what it is asking, then reply here."
        )
    );
    answer(&served, &run, Answer::text("Target the release-2 branch.")).await;
    assert_eq!(DEVBOX.task(&task.task_id).unwrap().prompts[1..], ["Target the release-2 branch."]);

    post(&served, &task, &["running", "complete"]).await;
    let done = outcome(run.outcome().await.unwrap());
    assert_eq!((done.prs.len(), done.task_url), (1, task_url));
    assert!(done.prs[0].starts_with("https://github.com/acme/shop/pull/"), "{:?}", done.prs);
    assert_eq!(done.summary, format!("Made the change in acme/shop and opened {}.", done.prs[0]));
    let seen = DEVBOX.task(&task.task_id).unwrap();
    assert_eq!((seen.reads, seen.stopped), (1, false));
    let steps = steps_run(&served.runtime.journal(run.id()).await.unwrap().entries);
    assert_eq!(steps, ["create_devbox_task", "prompt_devbox", "read_devbox_task"]);
}

#[tokio::test]
async fn a_review_is_followed_by_the_fix_in_the_same_run() {
    let served = served().await;
    let (run, task) = start(&served, "Review the checkout flow", Some(false)).await;
    assert!(task.prompts[0].ends_with("do not open a pull request."), "{:?}", task.prompts);
    post(&served, &task, &["running", "complete"]).await;
    let asked = questions(&served, &run).await.remove(0).request;
    assert!(asked.prompt.starts_with("Review finished:\n\n2 findings in acme/shop: "), "{}", asked.prompt);
    assert!(asked.prompt.ends_with("\n\nApply these findings?"), "{}", asked.prompt);
    let options: Vec<_> = asked.options.iter().map(|option| option.id.as_str()).collect();
    assert_eq!((asked.display, options), (Display::Confirmation, vec!["apply", "done"]));

    answer(&served, &run, Answer::option("apply")).await;
    assert_eq!(DEVBOX.task(&task.task_id).unwrap().prompts.last().unwrap(), APPLY_FINDINGS);
    post(&served, &task, &["running", "complete"]).await;
    // As in the seed, a finished review task asks again; the person is done now.
    answer(&served, &run, Answer::option("done")).await;
    let done = outcome(run.outcome().await.unwrap());
    assert_eq!(done.prs.len(), 1, "the fix opened a pull request: {done:?}");
    assert_eq!(DEVBOX.task(&task.task_id).unwrap().reads, 2);
}

#[tokio::test]
async fn duplicate_out_of_order_foreign_and_malformed_posts_are_harmless() {
    let served = served().await;
    let (run, task) = start(&served, "Harden the webhook handler", None).await;
    let id = task.task_id.as_str();
    post(&served, &task, &["running", "pending"]).await;
    assert_eq!(DEVBOX.redeliver(id, 0).await, 202, "a retried delivery is answered like the first");
    for body in [
        json!({ "taskId": "task-of-someone-else", "state": "complete" }).to_string(),
        json!({ "taskId": id, "state": "exploded" }).to_string(),
        json!({ "state": "complete" }).to_string(),
        "not json at all".to_owned(),
    ] {
        assert_eq!(DEVBOX.post(id, &body).await, 202, "{body}");
    }
    served.runtime.settle().await;
    assert!(questions(&served, &run).await.is_empty(), "nothing to ask about");
    assert_eq!(DEVBOX.task(id).unwrap().reads, 0, "another task's `complete` read nothing");
    let received = |entry: &Entry| matches!(entry, Entry::HookReceived { .. });
    assert_eq!(count(&served, &run, received).await, 6, "the retried delivery arrived once");

    post(&served, &task, &["attention-required"]).await;
    let attention = DEVBOX.task(id).unwrap().deliveries.len() - 1;
    assert_eq!(DEVBOX.redeliver(id, attention).await, 202);
    post(&served, &task, &["attention-required"]).await; // a second notification, not a retry
    served.runtime.settle().await;
    assert_eq!(questions(&served, &run).await.len(), 1, "the retry asked nothing; the repeat waits its turn");
    answer(&served, &run, Answer::text("main")).await;
    answer(&served, &run, Answer::text("main, as I said")).await; // the repeat asks again
    assert_eq!(DEVBOX.task(id).unwrap().prompts[1..], ["main", "main, as I said"]);

    post(&served, &task, &["complete"]).await;
    outcome(run.outcome().await.unwrap());
    assert_eq!(DEVBOX.change(id, "complete").await, 404, "a post after the run ended reaches nothing");
    assert_eq!(DEVBOX.task(id).unwrap().reads, 1);
}

#[tokio::test]
async fn an_errored_task_fails_the_run_with_the_tasks_error() {
    let served = served().await;
    let (run, task) = start(&served, "Upgrade the payment SDK", None).await;
    post(&served, &task, &["running"]).await;
    let error = "cargo test failed: 3 tests failed in checkout::total";
    assert_eq!(DEVBOX.fail(&task.task_id, error).await, 202);
    let failure = RunFailure::Tool { message: error.to_owned() };
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Failed(failure));
    assert_eq!(DEVBOX.task(&task.task_id).unwrap().reads, 1, "the error was read from the service");
}

#[tokio::test]
async fn cancelling_the_task_stops_the_devbox_and_the_run_ends_cancelled() {
    for (title, states) in [
        ("Cancelled while running", &["running"][..]),
        ("Cancelled while asking", &["running", "attention-required"][..]),
    ] {
        let served = served().await;
        let mut events = served.runtime.events();
        let (run, task) = start(&served, title, None).await;
        post(&served, &task, states).await;
        served.runtime.cancel(run.id(), "task_cancel").await.unwrap();
        assert_eq!(run.outcome().await.unwrap(), RunOutcome::Cancelled, "{title}");

        assert!(DEVBOX.task(&task.task_id).unwrap().stopped, "{title}: the service saw the stop");
        let entries = served.runtime.journal(run.id()).await.unwrap().entries;
        let cancel = entries.iter().position(|entry| matches!(entry, Entry::CancelRequested { .. })).unwrap();
        let stop = entries
            .iter()
            .position(|entry| matches!(entry, Entry::StepCompleted { name, .. } if name == "stop_devbox"));
        assert!(stop.is_some_and(|stop| stop > cancel), "{title}: stopped from the cleanup, after the cancellation");
        assert!(questions(&served, &run).await.is_empty(), "{title}: no question left open");
        let withdrawn = drain(&mut events).iter().any(|event| matches!(event, RunEvent::InputResolved { .. }));
        assert_eq!(withdrawn, states.contains(&"attention-required"), "{title}: the open question was withdrawn");
        assert_eq!(DEVBOX.change(&task.task_id, "running").await, 404, "{title}: the webhook is gone");
    }
}

#[tokio::test]
async fn without_a_token_the_run_parks_on_sign_in_and_creates_the_task_after_it() {
    let served = served().await;
    let mut events = served.runtime.events();
    let options = StartOptions::new().principal("bob");
    let run = served.runtime.start_with("devbox", input("Signed in later", None), options).await.unwrap();
    run.parked().await.unwrap();
    assert!(DEVBOX.task_titled("Signed in later").is_none(), "nothing is created before the sign-in");
    let url = drain(&mut events).into_iter().find_map(|event| match event {
        RunEvent::AuthorizationRequired { url, provider, .. } if provider == "devbox" => Some(url),
        _ => None,
    });

    // Bob opens the link: the service signs him in and sends his browser back to the runtime.
    let signed_in = served.client.get(url.expect("a sign-in link")).send().await.unwrap();
    assert_eq!(signed_in.status(), 200);
    served.runtime.settle().await;
    let task = DEVBOX.task_titled("Signed in later").expect("the task was created after the sign-in");
    let completed = |entry: &Entry| matches!(entry, Entry::AuthCompleted { .. });
    assert_eq!(count(&served, &run, completed).await, 1);
    post(&served, &task, &["complete"]).await;
    assert_eq!(outcome(run.outcome().await.unwrap()).prs.len(), 1);
}
