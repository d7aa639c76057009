//! Executor tests that look inside: the replay index, the op table's hashing, the wakers a body
//! leaves on its abort signal, and the sign-in callbacks the runtime holds. The executor's
//! behaviour through the public API is tested in `tests/core/executor.rs`.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::context::WorkflowCtx;
use crate::error::StepError;
use crate::journal::{Entry, InputHash, Op, StepOutcome};
use crate::registry::{BodyFuture, EntryPoint, Shape, ToolDescriptor};
use crate::runtime::{RunOutcome, Runtime};
use crate::step::{RetryPolicy, StepCall, StepCtx, StepDef};
use crate::store::MemoryStore;
use crate::time::{ManualClock, Timestamp};

// Registered by the tests that start them: `register!` here would be this crate's own
// `link_section`, which its `forbid(unsafe_code)` refuses.
macro_rules! workflow {
    ($tool:ident, $name:literal, $entry:ident) => {
        static $tool: ToolDescriptor = ToolDescriptor {
            name: $name,
            description: "",
            workflow_id: concat!("tests::", $name),
            shape: Shape::WORKFLOW_TOOL,
    input_schema: || json!({ "type": "object" }),
            validate_input: |_| Ok(()),
            output_schema: || None,
            entry: EntryPoint::Workflow($entry),
            fingerprint: "0000000000000000",
            version: "0.0.0",
        };
    };
}

workflow!(POLLS_ABORT, "t.polls_abort", polls_abort_body);
fn polls_abort_body(_input: Value, ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move {
        let signal = ctx.abort_signal();
        for _ in 0..1_000 {
            tokio::select! {
                biased;
                () = signal.aborted() => return Ok(json!("aborted")),
                () = std::future::ready(()) => {}
            }
        }
        let waiting = crate::run_core::current().expect("polled by the executor").lock().cancel_wakers.len();
        Ok(json!(waiting))
    })
}

/// Signs in with `test`, then returns.
fn signs_in_body(_input: Value, _ctx: WorkflowCtx) -> BodyFuture {
    Box::pin(async move { Ok(json!(needs_token().await?)) })
}
workflow!(SIGNS_IN, "t.signs_in", signs_in_body);

const TEST_PROVIDER: crate::auth::Provider = crate::auth::Provider::new("test");

static SIGNED_IN_DEF: StepDef = StepDef::new("t::needs_token", "needs_token", RetryPolicy::DEFAULT);

fn needs_token() -> StepCall<String> {
    StepCall::new(&SIGNED_IN_DEF, (), |(), ctx: StepCtx| async move {
        ctx.get_token(&TEST_PROVIDER).await?;
        Ok::<_, StepError>("signed in".to_owned())
    })
}

/// A provider that hands out a token once a callback's code is exchanged.
#[derive(Default)]
struct TestProvider(Mutex<bool>);

#[async_trait::async_trait]
impl crate::auth::AuthProvider for TestProvider {
    async fn token(
        &self,
        _: &crate::auth::Principal,
    ) -> Result<Option<crate::auth::AccessToken>, crate::auth::AuthError> {
        Ok(self.0.lock().unwrap().then(|| crate::auth::AccessToken::new("token")))
    }

    async fn forget(&self, _: &crate::auth::Principal) -> Result<(), crate::auth::AuthError> {
        *self.0.lock().unwrap() = false;
        Ok(())
    }

    fn authorization_url(
        &self,
        _: &crate::auth::Principal,
        state: &str,
        _: &str,
    ) -> Result<String, crate::auth::AuthError> {
        Ok(format!("https://provider.example/authorize?state={state}"))
    }

    async fn exchange(&self, _: &crate::auth::Principal, _: &str, _: &str) -> Result<(), crate::auth::AuthError> {
        *self.0.lock().unwrap() = true;
        Ok(())
    }
}

// ---- Harness ------------------------------------------------------------------------------------

const START: Timestamp = Timestamp::from_millis(1_000_000);

struct Harness {
    store: Arc<MemoryStore>,
    clock: ManualClock,
}

impl Harness {
    fn new() -> Self {
        Harness { store: Arc::new(MemoryStore::new()), clock: ManualClock::new(START) }
    }

    /// A runtime over the harness's store; `cache` 0 forces every resume to replay.
    fn runtime(&self, cache: usize) -> Runtime {
        Runtime::builder()
            .shared_store(self.store.clone())
            .clock(self.clock.clone())
            .secret_key(crate::secret::SecretKey::generate())
            .warm_cache(cache)
            .build()
            .unwrap()
    }
}

fn completed(op: u32, name: &str, args: Value, value: Value) -> Entry {
    let input_hash = InputHash::of(serde_json::to_string(&args).unwrap().as_bytes());
    Entry::StepCompleted {
        op: Op(op),
        name: name.to_owned().into(),
        input_hash,
        attempt: 1,
        outcome: StepOutcome::Ok { value: value.into() },
        took_ms: None,
    }
}

#[test]
fn the_replay_index_borrows_the_names_of_known_steps_and_copies_the_rest() {
    use std::borrow::Cow;

    use crate::run_core::ReplayIndex;

    let entries = [
        completed(0, "add", json!([1]), json!(2)),
        completed(1, "renamed", json!([2]), json!(3)),
        completed(2, "add", json!([3]), json!(4)),
    ];
    let index = ReplayIndex::build(&entries, |name| (name == "add").then_some("add"));
    let name = |op| &index.signatures[&Op(op)].name;
    assert!(matches!(name(0), Cow::Borrowed("add")), "{:?}", name(0));
    assert!(matches!(name(1), Cow::Owned(copied) if copied == "renamed"), "{:?}", name(1));
    assert!(matches!(name(2), Cow::Borrowed("add")), "{:?}", name(2));
    // Borrowed or copied, a signature equals the one the body's call makes.
    for (op, entry) in entries.iter().enumerate() {
        assert_eq!(Some(&index.signatures[&Op(op as u32)]), entry.signature().as_ref());
    }
}

/// Waiting on the abort signal again and again keeps one waker, not one per poll.
#[tokio::test]
async fn polling_the_abort_signal_keeps_one_waker() {
    crate::registry::Submit::submit(&POLLS_ABORT);
    let runtime = Harness::new().runtime(16);
    let run = runtime.start("t.polls_abort", json!({})).await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!(1)));
}

/// A completed sign-in's callback is forgotten once the run journals it: the set of callbacks
/// being handled does not grow with every sign-in.
#[tokio::test]
async fn a_completed_sign_in_leaves_no_callback_claim_behind() {
    crate::registry::Submit::submit(&SIGNS_IN);
    let harness = Harness::new();
    let runtime = Runtime::builder()
        .shared_store(harness.store.clone())
        .clock(harness.clock.clone())
        .secret_key(crate::secret::SecretKey::generate())
        .auth_provider("test", TestProvider::default())
        .build()
        .unwrap();
    let mut events = runtime.events();
    let run = runtime.start("t.signs_in", json!({})).await.unwrap();
    run.parked().await.unwrap();
    let state = std::iter::from_fn(|| events.try_recv().ok())
        .find_map(|event| match event {
            crate::RunEvent::AuthorizationRequired { op, .. } => Some(op),
            _ => None,
        })
        .map(|op| {
            let record = futures::executor::block_on(runtime.journal(run.id())).unwrap();
            let nonce = record.entries.iter().find_map(|entry| match entry {
                Entry::AuthRequired { op: at, nonce, .. } if *at == op => Some(nonce.clone()),
                _ => None,
            });
            runtime.shared.services.auth_state(run.id(), op, &nonce.unwrap())
        })
        .expect("the run asks for a sign-in");
    runtime.complete_authorization("test", state.expose(), "code").await.unwrap();
    assert_eq!(run.outcome().await.unwrap(), RunOutcome::Completed(json!("signed in")));
    assert_eq!(runtime.shared.services.callbacks.len(), 0, "no claim is left once the sign-in is journaled");
}

// ---- The op table's hashing --------------------------------------------------------------------

#[test]
fn consecutive_ops_hash_to_consecutive_buckets_with_differing_tags() {
    use std::hash::BuildHasher;
    let hasher = std::hash::BuildHasherDefault::<crate::run_core::OpHasher>::default();
    let hashes: Vec<u64> = (0..10_000).map(|op| hasher.hash_one(Op(op))).collect();
    for (op, hash) in hashes.iter().enumerate() {
        // The bucket a table of up to 2^57 buckets picks is the op number itself.
        assert_eq!(hash & ((1 << 57) - 1), op as u64, "op {op}");
    }
    // The top 7 bits tell keys in one group apart: they must not all be the same.
    let tags: std::collections::HashSet<u64> = hashes.iter().map(|hash| hash >> 57).collect();
    assert!(tags.len() > 100, "only {} distinct tags", tags.len());
    // And a map keyed by ops still works as a map.
    let mut map = crate::run_core::OpMap::default();
    for op in (0..1_000).rev() {
        map.insert(Op(op), op * 2);
    }
    assert!((0..1_000).all(|op| map.get(&Op(op)) == Some(&(op * 2))));
}
