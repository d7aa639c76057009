//! Questions to people: `ctx.ask`, answered once, withdrawn on a signal, refused when the answer
//! does not fit, and replayed identically when raced against a timer.

use std::time::Duration;

use eve_tests::{World, executed, executions};
use eve_tools::prelude::*;
use eve_tools::{Answer, AnswerError, Error, FormOutcome, RunEvent, RunOutcome, StartOptions};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Nothing.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

fn deploy_question() -> Ask {
    Ask::confirmation("Deploy api?").option("approve", "Deploy").primary().option("cancel", "Cancel")
}

/// Asks once and returns the outcome.
#[workflow_tool]
pub async fn ask_once(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    Ok(ctx.ask(deploy_question()).await)
}

/// Asks two questions at once and returns both answers, in order.
#[workflow_tool]
pub async fn ask_two(_input: Nothing, ctx: &WorkflowCtx) -> Result<Vec<AskOutcome>, ToolError> {
    let first = ctx.ask(Ask::text("Your name?"));
    let second = ctx.ask(deploy_question());
    let (first, second) = futures::join!(first, second);
    Ok(vec![first, second])
}

async fn request_ids(runtime: &Runtime, run: &eve_tools::RunId) -> Vec<String> {
    runtime.open_questions(run).await.unwrap().into_iter().map(|question| question.request_id).collect()
}

#[tokio::test]
async fn an_answer_resolves_the_ask_and_the_events_say_so() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("ask_once", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let questions = runtime.open_questions(run.id()).await.unwrap();
    assert_eq!(questions.len(), 1);
    assert_eq!(questions[0].request, deploy_question());
    runtime.answer(run.id(), &questions[0].request_id, Answer::option("approve")).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "status": "answered", "optionId": "approve" })));
    let seen: Vec<Value> = std::iter::from_fn(|| events.try_recv().ok())
        .filter(|event| matches!(event, RunEvent::InputRequested { .. } | RunEvent::InputResolved { .. }))
        .map(|event| serde_json::to_value(event).unwrap())
        .collect();
    assert_eq!(seen[0]["event"], "input.requested");
    assert_eq!(seen[0]["requestId"], json!(questions[0].request_id));
    assert_eq!(seen[0]["request"]["prompt"], "Deploy api?");
    assert_eq!(seen[1]["event"], "input.resolved");
    assert_eq!(seen[1]["outcome"], json!({ "status": "answered", "optionId": "approve" }));
}

#[tokio::test]
async fn several_questions_may_be_open_and_each_is_answered_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("ask_two", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let ids = request_ids(&runtime, run.id()).await;
    assert_eq!(ids.len(), 2, "both questions are open at once");
    runtime.answer(run.id(), &ids[1], Answer::option("cancel")).await.unwrap();
    let again = runtime.answer(run.id(), &ids[1], Answer::option("approve")).await.unwrap_err();
    assert!(matches!(again, Error::Answer(AnswerError::NotOpen { .. })), "answered once: {again}");
    runtime.answer(run.id(), &ids[0], Answer::text("Ada")).await.unwrap();
    let outcome = run.outcome().await.unwrap();
    let expected = json!([{ "status": "answered", "text": "Ada" }, { "status": "answered", "optionId": "cancel" }]);
    assert_eq!(outcome, RunOutcome::Completed(expected));
}

#[tokio::test]
async fn answers_that_do_not_fit_are_refused_and_change_nothing() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("ask_once", json!({})).await.unwrap();
    let other = runtime.start("ask_once", json!({})).await.unwrap();
    run.parked().await.unwrap();
    other.parked().await.unwrap();
    let id = request_ids(&runtime, run.id()).await.remove(0);
    let refusals = [
        runtime.answer(run.id(), &id, Answer::option("yes")).await.unwrap_err().to_string(),
        runtime.answer(run.id(), &id, Answer::text("sure")).await.unwrap_err().to_string(),
        runtime.answer(run.id(), &id, Answer::default()).await.unwrap_err().to_string(),
        runtime.answer(run.id(), "ask-99", Answer::option("approve")).await.unwrap_err().to_string(),
        runtime.answer(run.id(), "no-such-request", Answer::option("approve")).await.unwrap_err().to_string(),
    ];
    assert_eq!(refusals[0], "`option_id` \"yes\" is not one of the question's options (approve, cancel)");
    assert_eq!(refusals[1], "`text` is not accepted: this question only takes one of its options");
    assert_eq!(refusals[2], "the answer is empty: give `option_id`, `text`, or both");
    assert!(refusals[3].contains("has no open question ask-99"), "{}", refusals[3]);
    assert!(refusals[4].contains("has no open question no-such-request"), "{}", refusals[4]);
    let unknown_run: eve_tools::RunId = "run_nobody".parse().unwrap();
    let error = runtime.answer(&unknown_run, &id, Answer::option("approve")).await.unwrap_err();
    assert!(matches!(error, Error::RunNotFound(_)), "{error}");
    assert_eq!(request_ids(&runtime, run.id()).await, std::slice::from_ref(&id), "the question is still open");
    runtime.answer(other.id(), &id, Answer::option("cancel")).await.unwrap();
    assert_eq!(other.outcome().await.unwrap().output().unwrap()["optionId"], "cancel");
    assert_eq!(
        request_ids(&runtime, run.id()).await,
        std::slice::from_ref(&id),
        "answering the other run changed nothing here"
    );
    runtime.answer(run.id(), &id, Answer::option("approve")).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output().unwrap()["optionId"], "approve");
}

/// Asks, but withdraws the question after an hour without an answer.
#[workflow_tool]
pub async fn ask_for_an_hour(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    Ok(ctx.ask(deploy_question()).until(Box::pin(sleep(Duration::from_secs(3600)))).await)
}

#[tokio::test]
async fn a_withdrawn_ask_resolves_cancelled_and_refuses_later_answers() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("ask_for_an_hour", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let id = request_ids(&runtime, run.id()).await.remove(0);
    world.clock.advance(Duration::from_secs(3600));
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!({ "status": "cancelled" })));
    let resolved = std::iter::from_fn(|| events.try_recv().ok()).find_map(|event| match event {
        RunEvent::InputResolved { outcome, .. } => Some(outcome),
        _ => None,
    });
    assert_eq!(resolved, Some(AskOutcome::Cancelled), "channels are told to stop offering the question");
    assert!(runtime.answer(run.id(), &id, Answer::option("approve")).await.is_err());
}

/// Asks, waits for a signal on a hook, then withdraws the question.
#[workflow_tool]
pub async fn ask_then_withdraw(_input: Nothing, ctx: &WorkflowCtx) -> Result<AskOutcome, ToolError> {
    let pending = ctx.ask(deploy_question());
    let mut signal = create_hook_with_token::<bool>(format!("withdraw-{}", ctx.run_id()));
    signal.recv().await?;
    Ok(pending.withdraw().await)
}

#[tokio::test]
async fn an_answer_that_reached_the_runtime_before_the_withdrawal_wins() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("ask_then_withdraw", json!({})).await.unwrap();
    let id = run.id().clone();
    run.parked().await.unwrap();
    let request = request_ids(&runtime, &id).await.remove(0);
    // The person answers; then the body is told to withdraw. The answer is already in the inbox.
    runtime.answer(&id, &request, Answer::option("approve")).await.unwrap();
    runtime.resume_hook(&format!("withdraw-{id}"), json!(true)).await.unwrap();
    let outcome = runtime.handle(id).outcome().await.unwrap();
    assert_eq!(outcome, RunOutcome::Completed(json!({ "status": "answered", "optionId": "approve" })));
}

#[tokio::test]
async fn a_withdrawal_before_any_answer_cancels_the_question() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let run = runtime.start("ask_then_withdraw", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let request = request_ids(&runtime, run.id()).await.remove(0);
    runtime.resume_hook(&format!("withdraw-{}", run.id()), json!(true)).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!({ "status": "cancelled" })));
    assert!(runtime.answer(run.id(), &request, Answer::option("approve")).await.is_err(), "too late");
}

#[tokio::test]
async fn a_run_nobody_can_answer_gets_unavailable_at_once() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let options = StartOptions::new().non_interactive();
    let run = runtime.start_with("ask_once", json!({}), options).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!({ "status": "unavailable" })));
    let entries = runtime.journal(run.id()).await.unwrap().entries;
    let resolved = entries
        .iter()
        .any(|entry| matches!(entry, eve_tools::Entry::AskResolved { outcome: AskOutcome::Unavailable, .. }));
    assert!(resolved, "the journal records that nobody could answer");
}

/// Asks without waiting for the answer and returns at once.
#[workflow_tool]
pub async fn ask_and_leave(_input: Nothing, ctx: &WorkflowCtx) -> Result<(), ToolError> {
    let _pending = ctx.ask(deploy_question());
    note(ctx, "leaving".into()).await?;
    Ok(())
}

#[step]
async fn note(ctx: &StepCtx, text: String) -> Result<String, StepError> {
    executed(ctx, "note");
    Ok(text)
}

#[tokio::test]
async fn ending_the_run_withdraws_its_open_questions() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let mut events = runtime.events();
    let run = runtime.start("ask_and_leave", json!({})).await.unwrap();
    run.outcome().await.unwrap();
    let resolved = std::iter::from_fn(|| events.try_recv().ok()).find_map(|event| match event {
        RunEvent::InputResolved { outcome, request_id, .. } => Some((request_id, outcome)),
        _ => None,
    });
    assert_eq!(resolved, Some(("ask-0".to_owned(), AskOutcome::Cancelled)));
    assert!(runtime.open_questions(run.id()).await.unwrap().is_empty());
    assert!(runtime.answer(run.id(), "ask-0", Answer::option("approve")).await.is_err());
}

/// Races a question against a one-minute deadline, then notes the winner.
#[workflow_tool]
pub async fn ask_or_deadline(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut pending = ctx.ask(deploy_question());
    let winner = tokio::select! {
        biased;
        answer = &mut pending => format!("answer: {}", answer.status()),
        fired = sleep(Duration::from_secs(60)) => { fired?; "deadline".to_owned() }
    };
    let winner = note(ctx, winner).await?;
    let mut release = create_hook_with_token::<bool>(format!("release-{}", ctx.run_id()));
    release.recv().await?;
    Ok(winner)
}

#[tokio::test]
async fn racing_an_ask_against_a_sleep_replays_to_the_same_winner() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let run = runtime.start("ask_or_deadline", json!({})).await.unwrap();
    let id = run.id().clone();
    run.parked().await.unwrap();
    let request = request_ids(&runtime, &id).await.remove(0);
    world.clock.advance(Duration::from_secs(60));
    runtime.settle().await;
    // The answer arrives after the deadline fired; the question is still open, so it is accepted.
    runtime.answer(&id, &request, Answer::option("approve")).await.unwrap();
    runtime.settle().await;
    drop(runtime);
    let runtime = world.runtime(0);
    runtime.recover().await.unwrap();
    runtime.resume_hook(&format!("release-{id}"), json!(true)).await.unwrap();
    assert_eq!(runtime.handle(id.clone()).outcome().await.unwrap(), RunOutcome::Completed(json!("deadline")));
    assert_eq!(executions(&id, "note"), [1]);
}

#[tokio::test]
async fn the_provided_ask_question_and_sleep_tools_work() {
    let world = World::in_memory();
    let runtime = world.runtime(16);
    let input = json!({ "prompt": "Pick a color", "display": "select", "options": [
        { "id": "red", "label": "Red" }, { "id": "blue", "label": "Blue", "description": "calm" }
    ]});
    let run = runtime.start("ask_question", input).await.unwrap();
    run.parked().await.unwrap();
    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    assert_eq!(question.request.options[1].description.as_deref(), Some("calm"));
    runtime.answer(run.id(), &question.request_id, Answer::option("blue")).await.unwrap();
    assert_eq!(run.outcome().await.unwrap().output().unwrap()["optionId"], "blue");

    let nap = runtime.start("sleep", json!({ "seconds": 90 })).await.unwrap();
    nap.parked().await.unwrap();
    world.clock.advance(Duration::from_secs(90));
    assert_eq!(nap.outcome().await.unwrap(), RunOutcome::Completed(json!("Slept 90 seconds.")));
    let error = runtime.start("sleep", json!({ "seconds": -1 })).await.unwrap_err();
    assert!(error.to_string().starts_with("invalid input for tool `sleep`"), "{error}");
}

/// A follower keeps the run's view current entry by entry: the two questions open as they are
/// asked, each closed as it is answered, nothing open once the run ends; and the view it keeps is
/// the one the whole journal folds into.
#[tokio::test]
async fn a_followed_view_opens_and_closes_questions_as_the_journal_does() {
    use eve_tools::journal::Position;
    use eve_tools::view::RunView;
    use futures::StreamExt;

    let runtime = World::in_memory().runtime(16);
    let run = runtime.start("ask_two", json!({})).await.unwrap();
    let mut follow = runtime.follow(run.id(), Position::START);
    let mut view = RunView::new();
    let mut asked = Vec::new();
    while view.questions.len() < 2 {
        let followed = eve_tests::within("the questions", follow.next()).await.unwrap().unwrap();
        view.apply(followed.position, &followed.entry);
        asked.push(view.questions.len());
    }
    assert!(asked.contains(&1), "the first question opened before the second: {asked:?}");
    let ids: Vec<String> = view.questions.iter().map(|question| question.request_id.clone()).collect();
    assert_eq!(ids, request_ids(&runtime, run.id()).await, "the run API lists the questions the view has open");
    runtime.answer(run.id(), &ids[0], Answer::text("Ada")).await.unwrap();
    while view.questions.len() > 1 {
        let followed = eve_tests::within("the first answer", follow.next()).await.unwrap().unwrap();
        view.apply(followed.position, &followed.entry);
    }
    assert_eq!(view.questions[0].request_id, ids[1], "the second question is still open");
    runtime.answer(run.id(), &ids[1], Answer::option("approve")).await.unwrap();
    while let Some(followed) = eve_tests::within("the rest", follow.next()).await {
        let followed = followed.unwrap();
        view.apply(followed.position, &followed.entry);
    }
    assert!(view.questions.is_empty() && view.status() == eve_tools::RunStatus::Completed, "{view:?}");
    assert_eq!(view, RunView::of(&runtime.journal(run.id()).await.unwrap().entries));
}

/// Where to deploy.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Env {
    /// Production
    Prod,
    /// Staging
    Staging,
}

/// How to deploy, asked as a form.
#[derive(Debug, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
pub struct Plan {
    /// Where.
    env: Env,
    /// How many replicas.
    #[serde(default = "two")]
    replicas: u8,
    /// Who to tell, if anyone.
    notify: Option<String>,
}

fn two() -> u8 {
    2
}

/// Asks for a plan as a form and says what came of it: the plan the body got as a `Plan`, or
/// the outcome's name.
#[workflow_tool]
pub async fn ask_for_a_plan(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    Ok(match ctx.ask_form::<Plan>("Deploy how?")?.await {
        FormOutcome::Answered(plan) => format!("{:?} x{} notify {:?}", plan.env, plan.replicas, plan.notify),
        FormOutcome::Declined => "declined".into(),
        FormOutcome::Cancelled => "cancelled".into(),
        FormOutcome::Unavailable => "unavailable".into(),
    })
}

/// A form is listed with its schema (defaults, titled choices, required fields); an answer that
/// does not fit is refused, naming the field, and changes nothing; one that fits reaches the body
/// as the type.
#[tokio::test]
async fn a_form_is_answered_with_a_value_of_its_type_and_refused_naming_the_field() {
    let runtime = World::in_memory().runtime(16);
    let run = runtime.start("ask_for_a_plan", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    assert_eq!(question.request.display, eve_tools::Display::Form);
    let schema = question.request.schema.clone().unwrap();
    assert_eq!(schema["required"], json!(["env"]));
    assert_eq!(schema["properties"]["replicas"]["default"], 2);
    let envs = json!([{"const": "prod", "title": "Production"}, {"const": "staging", "title": "Staging"}]);
    assert_eq!(schema["properties"]["env"]["oneOf"], envs);
    let id = &question.request_id;
    // (an answer, what its refusal says)
    let refused = [
        (Answer::value(json!({"replicas": 3})), "the value does not fit the form: field `env` is required"),
        (
            Answer::value(json!({"env": "dev"})),
            "the value does not fit the form: field `env` must be one of prod, staging, not \"dev\"",
        ),
        (
            Answer::value(json!({"env": "prod", "replicas": 300})),
            "the value does not fit the form: field `replicas` must be at most 255, not 300",
        ),
        (
            Answer::value(json!({"env": "prod", "region": "eu"})),
            "the value does not fit the form: the form has no field `region`; its fields are `env`, `notify`, `replicas`",
        ),
        (
            Answer::option("prod"),
            "this question is a form: answer with `value`, a JSON object of its fields (see its `schema`)",
        ),
    ];
    for (answer, message) in refused {
        let error = runtime.answer(run.id(), id, answer).await.unwrap_err();
        assert_eq!(error.to_string(), message);
    }
    assert_eq!(request_ids(&runtime, run.id()).await, std::slice::from_ref(id), "the form is still open");
    runtime.answer(run.id(), id, Answer::value(json!({"env": "staging", "notify": "ops"}))).await.unwrap();
    let output = run.outcome().await.unwrap();
    assert_eq!(output, RunOutcome::Completed(json!("Staging x2 notify Some(\"ops\")")));
}

/// Declining and dismissing are outcomes the body sees, journaled as such; a run nobody can
/// answer gets `Unavailable`.
#[tokio::test]
async fn a_declined_or_dismissed_form_is_an_outcome_the_body_sees() {
    let runtime = World::in_memory().runtime(16);
    for (answer, expected) in [(Answer::declined(), "declined"), (Answer::dismissed(), "cancelled")] {
        let run = runtime.start("ask_for_a_plan", json!({})).await.unwrap();
        run.parked().await.unwrap();
        let id = request_ids(&runtime, run.id()).await.remove(0);
        runtime.answer(run.id(), &id, answer).await.unwrap();
        assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(expected)));
        let journal = runtime.journal(run.id()).await.unwrap();
        let resolved = journal.entries.iter().find_map(|entry| match entry {
            eve_tools::Entry::AskResolved { outcome, .. } => Some(outcome.status()),
            _ => None,
        });
        assert_eq!(resolved, Some(expected));
    }
    let options = StartOptions::new().non_interactive();
    let run = runtime.start_with("ask_for_a_plan", json!({}), options).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("unavailable")));
}

/// Asks the client's model to name a capital and says what came of it.
#[workflow_tool]
pub async fn ask_the_model(_input: Nothing, ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let request = eve_tools::sample::Sampling::user("What is the capital of France?", 20).system("One word.");
    Ok(match ctx.sample(request).await {
        eve_tools::SampleOutcome::Completed(completion) => {
            format!("{} said {}", completion.model, completion.text().unwrap_or("(not text)"))
        }
        other => format!("{other:?}"),
    })
}

/// A request for the client's model is listed with the run's questions (display `sampling`,
/// its request journaled), answered once with a completion as the value (one that is not a
/// completion is refused, naming the field), and the body gets the completion.
#[tokio::test]
async fn a_sampling_request_is_answered_with_a_completion_from_any_surface() {
    let runtime = World::in_memory().runtime(16);
    let run = runtime.start("ask_the_model", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let question = runtime.open_questions(run.id()).await.unwrap().remove(0);
    assert_eq!(question.request.display, eve_tools::Display::Sampling);
    let public = serde_json::to_value(&question.request).unwrap();
    assert_eq!(public["sampling"]["systemPrompt"], "One word.");
    assert_eq!(
        public["sampling"]["messages"][0]["content"],
        json!({"type": "text", "text": "What is the capital of France?"})
    );
    let id = &question.request_id;
    let error = runtime.answer(run.id(), id, Answer::text("Paris")).await.unwrap_err();
    assert!(error.to_string().starts_with("this request is for the client's model: answer with `value`"), "{error}");
    let wrong = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}});
    let error = runtime.answer(run.id(), id, Answer::value(wrong)).await.unwrap_err();
    assert!(error.to_string().starts_with("the value is not a completion: missing field `model`"), "{error}");
    let wrong = json!({"role": "model", "content": {"type": "text", "text": "Paris"}, "model": "m"});
    let error = runtime.answer(run.id(), id, Answer::value(wrong)).await.unwrap_err();
    assert!(
        error.to_string().starts_with("the value is not a completion at `role`: unknown variant `model`"),
        "{error}"
    );
    let completion = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m-1", "stopReason": "endTurn"});
    runtime.answer(run.id(), id, Answer::value(completion)).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("m-1 said Paris")));
}
