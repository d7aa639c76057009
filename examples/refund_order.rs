//! Ask now, act when answered: `refund_order` is a background task. The model gets a receipt at
//! once; the approval card stays open, here across a process restart, and the refund is issued
//! when someone approves it (and not when they deny it).
//!
//! ```text
//! cargo run --example refund_order
//! ```

use eve_examples::refund_order::Refund;
use eve_tools::{Answer, RunEvent, RunId, RunOutcome, Runtime};
use serde_json::json;
use tokio::sync::broadcast;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let process = || Runtime::builder().data_dir(dir.path()).build();
    println!("eve example: refund_order, a background task that asks now and acts when answered");
    println!("(store: {})\n", dir.path().join("eve.db").display());

    println!("— approved, after a restart");
    let first = process()?;
    let mut events = first.events();
    let input = json!({ "orderId": "A-1001", "amount": 25.5 });
    println!("    the model calls refund_order {input}");
    let run = first.start("refund_order", input).await?;
    let (task_id, prompt) = asked(&mut events, run.id()).await?;
    println!("    the model receives {}", json!({ "status": "working", "taskId": task_id }));
    println!("    the approval card on the channel: {prompt:?} [Refund | Deny]");
    run.parked().await?;
    println!("    the conversation goes on; then the process stops");
    let id = run.id().clone();
    drop((events, run));
    stop(first).await;

    let second = process()?;
    println!("    a new process recovers {} unfinished run(s)", second.recover().await?);
    let card = second.open_questions(&id).await?.remove(0);
    println!("    the card is still open ({}); the approver clicks \"Refund\"", card.request_id);
    second.answer(&id, &card.request_id, Answer::option("approve")).await?;
    println!("    the agent is woken with: {}\n", describe(second.handle(id).outcome().await?)?);

    println!("— denied");
    let mut events = second.events();
    let run = second.start("refund_order", json!({ "orderId": "A-1002", "amount": 990 })).await?;
    let (_, prompt) = asked(&mut events, run.id()).await?;
    println!("    the approval card: {prompt:?}; the approver clicks \"Deny\"");
    let card = second.open_questions(run.id()).await?.remove(0);
    second.answer(run.id(), &card.request_id, Answer::option("deny")).await?;
    println!("    the agent is woken with: {}", describe(run.outcome().await?)?);
    Ok(())
}

/// Says what the task returned.
fn describe(outcome: RunOutcome) -> Result<String, Box<dyn std::error::Error>> {
    let RunOutcome::Completed(output) = outcome else { return Err(format!("the task ended {outcome:?}").into()) };
    Ok(match serde_json::from_value(output)? {
        Refund { refunded: true, receipt: Some(receipt) } => {
            format!(
                "refunded ${:.2} on {} (refund {}, task {})",
                receipt.amount, receipt.order_id, receipt.refund_id, receipt.task_id
            )
        }
        _ => "not refunded".to_owned(),
    })
}

/// Waits for the run's question; returns its task id and prompt.
async fn asked(
    events: &mut broadcast::Receiver<RunEvent>,
    run: &RunId,
) -> Result<(String, String), Box<dyn std::error::Error>> {
    loop {
        if let RunEvent::InputRequested { run: of, task_id, request, .. } = events.recv().await?
            && of == *run
        {
            return Ok((task_id.unwrap_or_default(), request.prompt));
        }
    }
}

/// Stops a process: drops its runtime and waits until the store has closed and released its file
/// lock, as it does when a binary exits.
async fn stop(runtime: Runtime) {
    runtime.shutdown().await;
}
