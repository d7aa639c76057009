//! Hook deliveries, below HTTP: a payload goes to the store without a lookup before it, and a run
//! rebuilt for a delivery takes it from its claim; a hook's token takes only its own kind of
//! delivery; a run refused a token another run holds leaves the holder's payloads alone; and a
//! payload for a hook that has closed is refused as unknown, whatever its type.

use std::sync::Arc;

use eve_tests::faulty::Faulty;
use eve_tests::http::{hand_over, handed_over};
use eve_tests::{World, within};
use eve_tools::prelude::*;
use eve_tools::store::MemoryStore;
use eve_tools::{Entry, RunOutcome, RunStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A tool input with nothing in it.
#[derive(Deserialize, JsonSchema)]
pub struct Nothing {}

/// Returns the first payload its hook receives.
#[workflow_tool]
pub async fn echo_hook(_input: Nothing, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let mut hook = create_hook_with_token::<Value>(format!("echo-{}", ctx.run_id()));
    Ok(hook.recv().await?)
}

#[tokio::test]
async fn a_run_rebuilt_for_a_delivery_takes_it_from_its_claim_without_reading_the_inbox_again() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let first = world.runtime(0);
    let parked = first.start("echo_hook", json!({})).await.unwrap();
    let restarted = first.start("echo_hook", json!({})).await.unwrap();
    parked.parked().await.unwrap();
    restarted.parked().await.unwrap();
    // Without a warm cache the first is rebuilt by this process; the second by a new one.
    for (runtime, run, payload) in [(first, parked, 7), (world.runtime(0), restarted, 8)] {
        let reads = faulty.inbox_reads();
        runtime.resume_hook(&format!("echo-{}", run.id()), json!(payload)).await.unwrap();
        let outcome = runtime.handle(run.id().clone()).outcome().await.unwrap();
        assert_eq!(outcome, RunOutcome::Completed(json!(payload)));
        assert_eq!(faulty.inbox_reads(), reads, "the claim read the inbox; the wake's message asks for no read");
    }
}

/// Returns the body of the first request its webhook receives.
#[workflow_tool]
pub async fn echo_webhook(_input: Nothing, ctx: &WorkflowCtx) -> Result<Value, ToolError> {
    let mut webhook = create_webhook();
    hand_over(ctx, webhook.url()).await?;
    let request = webhook.recv().await?;
    Ok(json!(request.body))
}

#[tokio::test]
async fn a_hook_payload_goes_to_the_store_without_a_lookup_before_it() {
    let faulty = Faulty::new(Arc::new(MemoryStore::new()));
    let world = World::over(faulty.clone());
    let runtime = world.runtime(0);
    let run = runtime.start("echo_hook", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let lookups = faulty.hook_lookups();
    runtime.resume_hook(&format!("echo-{}", run.id()), json!(5)).await.unwrap();
    // The store finds the hook as it takes the delivery; a lookup first is one more round trip
    // to it (a reader thread for SQLite, the network for Postgres) on every delivery.
    assert_eq!(faulty.hook_lookups(), lookups, "the delivery looked the hook up before the store did");
    assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(json!(5)));
}

#[tokio::test]
async fn a_token_given_to_the_other_kind_of_delivery_is_refused_and_reaches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for world in [World::in_memory(), World::sqlite(dir.path())] {
        let runtime = world.runtime(0);
        let hooked = runtime.start("echo_hook", json!({})).await.unwrap();
        let webhooked = runtime.start("echo_webhook", json!({})).await.unwrap();
        hooked.parked().await.unwrap();
        webhooked.parked().await.unwrap();
        let url = handed_over(&runtime, webhooked.id()).await;
        let webhook = url.rsplit('/').next().expect("a webhook's URL ends with its token").to_owned();
        let hook = format!("echo-{}", hooked.id());

        let refused = runtime.resume_hook(&webhook, json!("a payload")).await.unwrap_err();
        assert!(matches!(refused, eve_tools::Error::UnknownHook), "a webhook takes HTTP requests only: {refused}");
        let request = WebhookRequest::new("POST", b"a request".as_slice());
        let refused = runtime.deliver_webhook(&hook, None, request).await.unwrap_err();
        assert!(matches!(refused, eve_tools::Error::UnknownHook), "a hook takes payloads only: {refused}");
        runtime.settle().await;
        for run in [&hooked, &webhooked] {
            let journal = runtime.journal(run.id()).await.unwrap();
            assert_eq!(journal.summary.status, RunStatus::Active, "nothing reached {}", run.id());
            assert!(!journal.entries.iter().any(|entry| matches!(entry, Entry::HookReceived { .. })));
        }

        runtime.resume_hook(&hook, json!("right")).await.unwrap();
        let request = WebhookRequest::new("POST", b"right too".as_slice());
        runtime.deliver_webhook(&webhook, None, request).await.unwrap();
        assert_eq!(within("the hook's run", hooked.outcome()).await.unwrap(), RunOutcome::Completed(json!("right")));
        let outcome = within("the webhook's run", webhooked.outcome()).await.unwrap();
        assert_eq!(outcome, RunOutcome::Completed(json!("right too")));
    }
}

/// What the hook `paid-{key}` takes.
#[derive(Deserialize, JsonSchema)]
pub struct Paid {
    /// The key of the hook.
    key: String,
}

/// A payment.
#[derive(Debug, Deserialize)]
pub struct Payment {
    /// Cents paid.
    paid: u64,
}

/// A note, which another tool waits for on the same token as a payment.
#[derive(Debug, Deserialize)]
pub struct Note {
    /// The text.
    note: String,
}

/// Waits for a payment on the hook `paid-{key}`.
#[workflow_tool]
pub async fn await_paid(input: Paid, _ctx: &WorkflowCtx) -> Result<u64, ToolError> {
    let mut hook = create_hook_with_token::<Payment>(format!("paid-{}", input.key));
    Ok(hook.recv().await?.paid)
}

/// Waits for a note on the hook `paid-{key}`, which a payment's run may hold already.
#[workflow_tool]
pub async fn await_note(input: Paid, _ctx: &WorkflowCtx) -> Result<String, ToolError> {
    let mut hook = create_hook_with_token::<Note>(format!("paid-{}", input.key));
    Ok(hook.recv().await?.note)
}

#[tokio::test]
async fn a_run_refused_a_token_another_run_holds_does_not_refuse_the_holders_payloads() {
    let world = World::in_memory();
    let runtime = world.runtime(0);
    let holder = runtime.start("await_paid", json!({ "key": "a" })).await.unwrap();
    holder.parked().await.unwrap();
    // The second hook asks for the held token, so it never receives anything; its type is not
    // the one a delivery to the token must have.
    let refused = runtime.start("await_note", json!({ "key": "a" })).await.unwrap();
    let outcome = within("the refused hook's run", refused.outcome()).await.unwrap();
    assert!(matches!(outcome, RunOutcome::Failed(_)), "the token is taken: {outcome:?}");

    let delivered = runtime.resume_hook("paid-a", json!({ "paid": 5 })).await;
    assert!(delivered.is_ok(), "a payment for the holder was refused: {delivered:?}");
    assert_eq!(within("the holder's end", holder.outcome()).await.unwrap(), RunOutcome::Completed(json!(5)));
}

#[tokio::test]
async fn a_payload_for_a_hook_that_has_closed_is_refused_as_unknown_whatever_its_type() {
    let dir = tempfile::tempdir().unwrap();
    for world in [World::in_memory(), World::sqlite(dir.path())] {
        let runtime = world.runtime(0);
        let run = runtime.start("await_paid", json!({ "key": "b" })).await.unwrap();
        run.parked().await.unwrap();
        let wrong = runtime.resume_hook("paid-b", json!({ "paid": "all" })).await.unwrap_err();
        assert!(matches!(wrong, eve_tools::Error::InvalidPayload { .. }), "the hook is open: {wrong}");
        runtime.resume_hook("paid-b", json!({ "paid": 7 })).await.unwrap();
        assert_eq!(within("the run's end", run.outcome()).await.unwrap(), RunOutcome::Completed(json!(7)));

        // The hook has closed with its run: whatever is sent to it now, there is nothing to send
        // it to, and the caller must hear that rather than how to fix the payload.
        for payload in [json!({ "paid": "all" }), json!({ "paid": 8 })] {
            let refused = runtime.resume_hook("paid-b", payload.clone()).await.unwrap_err();
            assert!(matches!(refused, eve_tools::Error::UnknownHook), "{payload} to a closed hook: {refused}");
        }
    }
}
