//! Regressions in sign-in inside steps, each once a failing test:
//!
//! - `authorization.required` was published before its `AuthRequired` entry was durable, so a
//!   callback that followed the published URL at once was refused as unknown;
//! - a restart after `AuthCompleted` was journaled, with a token store that does not survive
//!   restarts, failed the step as "rejected right after sign-in" instead of asking again.

mod url_race {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use eve_tests::START;
    use eve_tests::oauth_server::{FakeOAuth, provider_url};
    use eve_tools::prelude::*;
    use eve_tools::secret::{SecretKey, TokenHash};
    use eve_tools::store::*;
    use eve_tools::{Entry, ManualClock, RunEvent, RunId, Timestamp};
    use serde_json::json;
    use tokio::sync::Semaphore;

    const FAKE: Provider = Provider::new("fake");

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Input {}

    #[step]
    async fn needs_token(ctx: &StepCtx) -> Result<(), StepError> {
        ctx.get_token(&FAKE).await?;
        Ok(())
    }

    /// Needs a sign-in.
    #[workflow_tool]
    pub async fn race(_input: Input, ctx: &WorkflowCtx) -> Result<(), ToolError> {
        Ok(needs_token(ctx).await?)
    }

    /// A memory store whose appends of `AuthRequired` wait until the test lets them through.
    struct Gated {
        inner: MemoryStore,
        gate: Arc<Semaphore>,
        /// Released once an `AuthRequired` append has started waiting at the gate.
        held: Arc<Semaphore>,
    }

    #[async_trait]
    impl Store for Gated {
        async fn create_run(&self, run: NewRun, owner: &WorkerId) -> Result<Created, StoreError> {
            self.inner.create_run(run, owner).await
        }
        async fn claim(
            &self,
            run: &RunId,
            owner: &WorkerId,
            lease: Duration,
            now: Timestamp,
            from: u64,
        ) -> Result<Claimed, StoreError> {
            self.inner.claim(run, owner, lease, now, from).await
        }
        async fn release(&self, run: &RunId, fence: Fence) -> Result<(), StoreError> {
            self.inner.release(run, fence).await
        }
        async fn append(&self, run: &RunId, fence: Fence, append: &Append) -> Result<(), StoreError> {
            if append.entries.iter().any(|entry| matches!(entry, Entry::AuthRequired { .. })) {
                self.held.add_permits(1);
                let _permit = self.gate.acquire().await.unwrap();
            }
            self.inner.append(run, fence, append).await
        }
        async fn park(&self, run: &RunId, fence: Fence, next_seq: u64) -> Result<(), StoreError> {
            self.inner.park(run, fence, next_seq).await
        }

        async fn recovery(&self) -> Result<Recovery, StoreError> {
            self.inner.recovery().await
        }

        async fn continue_as_new(
            &self,
            run: &RunId,
            fence: Fence,
            started: &Entry,
            keep_inbox: bool,
        ) -> Result<(), StoreError> {
            self.inner.continue_as_new(run, fence, started, keep_inbox).await
        }

        async fn deliver(
            &self,
            target: Target,
            id: Option<&str>,
            delivery: DeliveryPayload,
        ) -> Result<Delivered, StoreError> {
            self.inner.deliver(target, id, delivery).await
        }
        async fn inbox(&self, run: &RunId) -> Result<Vec<InboxItem>, StoreError> {
            self.inner.inbox(run).await
        }
        async fn find_hook(&self, token: &TokenHash) -> Result<Option<HookRow>, StoreError> {
            self.inner.find_hook(token).await
        }
        async fn timers(&self) -> Result<Vec<TimerRow>, StoreError> {
            self.inner.timers().await
        }
        async fn load(&self, run: &RunId) -> Result<Option<RunRecord>, StoreError> {
            self.inner.load(run).await
        }
        async fn list_runs(&self, query: &RunQuery) -> Result<RunPage, StoreError> {
            self.inner.list_runs(query).await
        }
        fn max_entry_bytes(&self) -> Option<usize> {
            self.inner.max_entry_bytes()
        }

        fn is_durable(&self) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_published_sign_in_url_works_at_once() {
        let clock = ManualClock::new(START);
        let fake = FakeOAuth::start("CANARYrace").await;
        let (gate, held) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
        let runtime = Runtime::builder()
            .store(Gated { inner: MemoryStore::new(), gate: gate.clone(), held: held.clone() })
            .clock(clock.clone())
            .secret_key(SecretKey::generate())
            .auth_provider("fake", fake.provider("fake", clock).build().unwrap())
            .build()
            .unwrap();
        let mut events = runtime.events();
        let run = runtime.start("race", json!({})).await.unwrap();
        // While `AuthRequired` is not yet durable, no sign-in URL may have been published.
        held.acquire().await.unwrap().forget();
        let published_early = std::iter::from_fn(|| events.try_recv().ok())
            .any(|event| matches!(event, RunEvent::AuthorizationRequired { .. }));
        assert!(!published_early, "the sign-in URL was published before its callback could be accepted");
        gate.add_permits(1);
        let url = loop {
            if let RunEvent::AuthorizationRequired { url, .. } = events.recv().await.unwrap() {
                break url;
            }
        };
        // Published means durable: the callback is accepted at once.
        let redirect = fake.follow(&provider_url(&runtime, &url).await, "ada").await;
        let callback = runtime.complete_authorization("fake", &redirect.state, &redirect.code).await;
        assert!(callback.is_ok(), "the published URL's callback was refused: {callback:?}");
        run.outcome().await.unwrap();
    }
}

mod restart_after_sign_in {
    use std::sync::atomic::{AtomicBool, Ordering};

    use eve_tests::World;
    use eve_tests::oauth_server::{FakeOAuth, provider_url};
    use eve_tools::prelude::*;
    use eve_tools::{Phase, RunEvent, RunOutcome};
    use serde_json::json;
    use tokio::sync::Semaphore;

    const FAKE: Provider = Provider::new("fake");
    static FIRST_PROCESS: AtomicBool = AtomicBool::new(true);
    static NEVER: Semaphore = Semaphore::const_new(0);

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct Input {}

    #[step]
    async fn use_token(ctx: &StepCtx) -> Result<String, StepError> {
        ctx.get_token(&FAKE).await?;
        if FIRST_PROCESS.load(Ordering::SeqCst) {
            let _hang = NEVER.acquire().await; // the first process "crashes" while this attempt runs
        }
        Ok("used".to_owned())
    }

    /// Needs a sign-in.
    #[workflow_tool]
    pub async fn restart_after_sign_in(_input: Input, ctx: &WorkflowCtx) -> Result<String, ToolError> {
        Ok(use_token(ctx).await?)
    }

    #[tokio::test]
    async fn a_restart_right_after_sign_in_asks_for_a_new_sign_in_instead_of_failing() {
        let world = World::in_memory();
        let fake = FakeOAuth::start("CANARYrestart").await;
        let process = || {
            world
                .builder(0)
                .auth_provider("fake", fake.provider("fake", world.clock.clone()).build().unwrap())
                .build()
                .unwrap()
        };
        let first = process();
        let mut events = first.events();
        let run = first.start("restart_after_sign_in", json!({})).await.unwrap();
        run.parked().await.unwrap();
        let url = loop {
            if let RunEvent::AuthorizationRequired { url, .. } = events.recv().await.unwrap() {
                break url;
            }
        };
        let redirect = fake.follow(&provider_url(&first, &url).await, "ada").await;
        first.complete_authorization("fake", &redirect.state, &redirect.code).await.unwrap();
        loop {
            // AuthCompleted is durable and the retried attempt is running (and hangs)
            if let RunEvent::AuthorizationCompleted { .. } = events.recv().await.unwrap() {
                break;
            }
        }

        FIRST_PROCESS.store(false, Ordering::SeqCst);
        let second = process(); // a new process: its MemoryTokenStore is empty
        let mut events = second.events();
        second.recover().await.unwrap();
        let run = second.handle(run.id().clone());
        let phase = run.parked().await.unwrap();
        let failure = match &phase {
            Phase::Finished(RunOutcome::Failed(failure)) => Some(failure.clone()),
            _ => None,
        };
        assert_eq!(failure, None, "the run failed although no token was rejected");
        let asked = std::iter::from_fn(|| events.try_recv().ok())
            .any(|event| matches!(event, RunEvent::AuthorizationRequired { .. }));
        assert!(asked, "a new sign-in is asked for");
    }
}
