//! Ask now, act when answered: the `refund_order` example's task is a background task with a
//! `refund_order-xxxxxx` task id whose question stays open, across a restart too, and whose
//! refund step runs only on approval.

use eve_examples::refund_order::{Receipt, Refund};
use eve_tests::World;
use eve_tools::{Answer, Entry, ManualClock, RunOutcome, Runtime, Shape, StartOptions};
use serde_json::json;

use super::support::{drain, has_shape, process, steps_run, steps_started, stop, task_id};

const BASE36: &str = "0123456789abcdefghijklmnopqrstuvwxyz";
const HEX: &str = "0123456789abcdef";

fn refund(outcome: RunOutcome) -> Refund {
    let RunOutcome::Completed(output) = outcome else { panic!("the run did not complete: {outcome:?}") };
    serde_json::from_value(output).unwrap()
}

async fn start(runtime: &Runtime, order: &str) -> eve_tools::RunHandle {
    let run = runtime.start("refund_order", json!({ "orderId": order, "amount": 25.5 })).await.unwrap();
    run.parked().await.unwrap();
    run
}

#[tokio::test]
async fn the_task_asks_at_once_and_refunds_with_a_receipt_when_approved() {
    let manifest = eve_tools::manifest();
    let tool = manifest.tools.iter().find(|tool| tool.name == "refund_order").unwrap();
    assert_eq!(tool.shape, Shape::TASK, "a background task: the model gets a receipt");

    let runtime = World::in_memory().runtime(16);
    let mut events = runtime.events();
    let run = start(&runtime, "A-1001").await;
    assert!(has_shape(run.id().as_str(), "run_", 24, HEX), "{}", run.id());
    let task = task_id(&drain(&mut events), run.id()).expect("the question names its task");
    assert!(has_shape(&task, "refund_order-", 6, BASE36), "{task}");

    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    assert_eq!(question.request.prompt, "Refund $25.50 on order A-1001?");
    let ids: Vec<_> = question.request.options.iter().map(|option| option.id.as_str()).collect();
    assert_eq!(ids, ["approve", "deny"]);
    runtime.answer(run.id(), &question.request_id, Answer::option("approve")).await.unwrap();

    let Refund { refunded, receipt } = refund(run.outcome().await.unwrap());
    let Receipt { refund_id, order_id, amount, task_id } = receipt.expect("a receipt");
    assert!(refunded);
    assert_eq!((order_id.as_str(), amount, task_id), ("A-1001", 25.5, task));
    assert!(refund_id.starts_with("re_run"), "{refund_id}");
    assert_eq!(steps_run(&runtime.journal(run.id()).await.unwrap().entries), ["issue_refund"]);
}

#[tokio::test]
async fn denying_or_nobody_to_ask_refunds_nothing() {
    for (case, options, answer) in [
        ("denied", StartOptions::new(), Some("deny")),
        ("nobody can answer", StartOptions::new().non_interactive(), None),
    ] {
        let runtime = World::in_memory().runtime(16);
        let mut events = runtime.events();
        let input = json!({ "orderId": "A-1002", "amount": 5 });
        let run = runtime.start_with("refund_order", input, options).await.unwrap();
        run.parked().await.unwrap();
        if let Some(answer) = answer {
            let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
            runtime.answer(run.id(), &question.request_id, Answer::option(answer)).await.unwrap();
        }
        assert_eq!(refund(run.outcome().await.unwrap()), Refund { refunded: false, receipt: None }, "{case}");
        assert!(steps_started(&drain(&mut events), run.id()).is_empty(), "{case}: the refund step never ran");
    }
}

#[tokio::test]
async fn the_question_stays_open_across_a_restart_and_is_answered_in_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(eve_tests::START);

    let first = process(dir.path(), &clock);
    let mut events = first.events();
    let run = start(&first, "A-1003").await;
    let (id, task) = (run.id().clone(), task_id(&drain(&mut events), run.id()).unwrap());
    let asked = first.open_questions(&id).await.unwrap();
    drop((events, run));
    stop(first).await;

    let second = process(dir.path(), &clock);
    assert_eq!(second.recover().await.unwrap(), 1, "the task is still running");
    assert_eq!(second.open_questions(&id).await.unwrap(), asked, "the same question, still open");
    second.answer(&id, &asked[0].request_id, Answer::option("approve")).await.unwrap();
    let refunded = refund(second.handle(id.clone()).outcome().await.unwrap());
    assert_eq!(refunded.receipt.unwrap().task_id, task, "the same task id after the restart");

    let entries = second.journal(&id).await.unwrap().entries;
    let asks = entries.iter().filter(|entry| matches!(entry, Entry::AskCreated { .. })).count();
    assert_eq!((asks, steps_run(&entries)), (1, vec!["issue_refund".to_owned()]), "asked once, refunded once");
}
