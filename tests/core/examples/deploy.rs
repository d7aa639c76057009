//! Define a workflow tool: the `deploy` example's tool plans, asks, and deploys only when a person
//! picks "Deploy", whether they answer through the runtime or over HTTP.

use eve_examples::deploy::Deployed;
use eve_tests::World;
use eve_tests::http::{Seen, serve};
use eve_tools::{Answer, Display, RunOutcome, Runtime, StartOptions, Style};
use serde_json::{Value, json};

use super::support::{drain, steps_run, steps_started};

/// Starts `deploy` for `api` and returns its run once it has asked.
async fn start(runtime: &Runtime, options: StartOptions) -> eve_tools::RunHandle {
    let run = runtime.start_with("deploy", json!({ "service": "api" }), options).await.unwrap();
    run.parked().await.unwrap();
    run
}

fn deployed(outcome: RunOutcome) -> Deployed {
    let RunOutcome::Completed(output) = outcome else { panic!("the run did not complete: {outcome:?}") };
    serde_json::from_value(output).unwrap()
}

#[tokio::test]
async fn the_question_shows_the_plan_and_approving_deploys() {
    let runtime = World::in_memory().runtime(16);
    let run = start(&runtime, StartOptions::new()).await;
    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    let ask = &question.request;
    assert!(ask.prompt.starts_with("Deploy api?\n\nRoll out api v2 to 3 regions"), "{}", ask.prompt);
    assert_eq!(ask.display, Display::Confirmation);
    let options: Vec<_> = ask.options.iter().map(|option| (&*option.id, &*option.label, option.style)).collect();
    assert_eq!(options, [("approve", "Deploy", Style::Primary), ("cancel", "Cancel", Style::Default)]);
    assert_eq!(steps_run(&runtime.journal(run.id()).await.unwrap().entries), ["plan_deploy"], "nothing deployed yet");

    runtime.answer(run.id(), &question.request_id, Answer::option("approve")).await.unwrap();
    let outcome = deployed(run.outcome().await.unwrap());
    assert_eq!(outcome, Deployed { deployed: true, reason: None, url: Some("https://api.example.com".into()) });
    assert_eq!(steps_run(&runtime.journal(run.id()).await.unwrap().entries), ["plan_deploy", "apply_deploy"]);
}

#[tokio::test]
async fn anything_but_deploy_deploys_nothing_and_never_starts_the_deploy_step() {
    let rejected = || Deployed { deployed: false, reason: Some("rejected".into()), url: None };
    // (how the run is started, what happens to its question, how the run ends)
    let cases: [(&str, StartOptions, Option<Answer>, Option<Deployed>); 3] = [
        ("the person picks Cancel", StartOptions::new(), Some(Answer::option("cancel")), Some(rejected())),
        ("nobody can answer", StartOptions::new().non_interactive(), None, Some(rejected())),
        ("the run is cancelled while it waits", StartOptions::new(), None, None),
    ];
    for (case, options, answer, expected) in cases {
        let runtime = World::in_memory().runtime(16);
        let mut events = runtime.events();
        let run = start(&runtime, options).await;
        match (answer, &expected) {
            (Some(answer), _) => {
                let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
                runtime.answer(run.id(), &question.request_id, answer).await.unwrap();
            }
            (None, None) => runtime.cancel(run.id(), "the user changed their mind").await.unwrap(),
            (None, Some(_)) => {}
        }
        let outcome = run.outcome().await.unwrap();
        match expected {
            Some(expected) => assert_eq!(deployed(outcome), expected, "{case}"),
            None => assert_eq!(outcome, RunOutcome::Cancelled, "{case}"),
        }
        assert_eq!(steps_started(&drain(&mut events), run.id()), ["plan_deploy"], "{case}: no deploy attempt");
        assert_eq!(steps_run(&runtime.journal(run.id()).await.unwrap().entries), ["plan_deploy"], "{case}");
    }
}

#[tokio::test]
async fn the_approval_can_come_over_http() {
    let served = serve().await;
    let client = &served.client;
    let started = client.post(served.url("/v1/tools/deploy/runs")).json(&json!({ "input": { "service": "web" } }));
    let started = Seen::of(started.send().await.unwrap()).await;
    assert_eq!(started.status, 201);
    let run = started.json()["runId"].as_str().unwrap().to_owned();
    served.runtime.handle(run.parse().unwrap()).parked().await.unwrap();

    let questions = Seen::of(client.get(served.url(&format!("/v1/runs/{run}/questions"))).send().await.unwrap()).await;
    let question = questions.json()["questions"][0].clone();
    assert!(question["request"]["prompt"].as_str().unwrap().starts_with("Deploy web?"), "{question}");
    let request = question["requestId"].as_str().unwrap();
    let answer = client.post(served.url(&format!("/v1/runs/{run}/questions/{request}")));
    let answered = Seen::of(answer.json(&json!({ "optionId": "approve" })).send().await.unwrap()).await;
    assert_eq!(answered.status, 204);

    served.runtime.handle(run.parse().unwrap()).outcome().await.unwrap();
    let status = Seen::of(client.get(served.url(&format!("/v1/runs/{run}"))).send().await.unwrap()).await.json();
    assert_eq!(status["status"], "completed");
    let output: &Value = &status["outcome"]["output"];
    assert_eq!(*output, json!({ "deployed": true, "url": "https://web.example.com" }));
}
