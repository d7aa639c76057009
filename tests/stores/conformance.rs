//! The in-memory and SQLite stores pass the same conformance suite as every store eve ships (the
//! Postgres store's run is in the `postgres` binary, which needs a server), and the SQLite store
//! keeps everything it acknowledged across a close and reopen.

// The suites are eve-runtime's exported macros, which the facade does not re-export.
use eve_runtime::{claims_conformance_suite, conformance_suite};
use eve_tools::store::{MemoryStore, SqliteStore};

conformance_suite!(memory, async { MemoryStore::new() });
claims_conformance_suite!(memory_claims, async { MemoryStore::new() });

conformance_suite!(sqlite, async {
    let dir = tempfile::tempdir().expect("a temporary directory can be created");
    let store = SqliteStore::open(dir.path().join("eve.db")).expect("a fresh SQLite store opens");
    (store, dir)
});

claims_conformance_suite!(sqlite_claims, async {
    let dir = tempfile::tempdir().expect("a temporary directory can be created");
    let store = SqliteStore::open(dir.path().join("eve.db")).expect("a fresh SQLite store opens");
    (store, dir)
});

mod sqlite_reopen {
    use std::time::Duration;

    use eve_tools::journal::{Entry, Op};
    use eve_tools::secret::TokenHash;
    use eve_tools::store::{
        Append, Created, Delivered, DeliveryPayload, NewRun, RunQuery, SqliteStore, Store, Target, TimerKind, WorkerId,
    };
    use eve_tools::{RunStatus, Timestamp};
    use serde_json::json;

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.parse().expect("a valid run id"),
            workflow_id: "reopen::workflow".into(),
            tool: "reopen_tool".into(),
            input: json!({"city": "Zürich"}),
            created_at: Timestamp::from_millis(1_000),
            principal: None,
            interactive: true,
            parent: None,
            traceparent: None,
            build: None,
            forked_from: None,
        }
    }

    /// Everything acknowledged before the store is dropped is there after reopening: journals,
    /// statuses, timers, hooks and the pending inbox; and old claims are gone, so a new claim works.
    #[tokio::test]
    async fn acknowledged_writes_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("a temporary directory can be created");
        let path = dir.path().join("nested").join("eve.db");
        let worker = WorkerId("first-process".into());
        let (active, finished) = (new_run("run-active"), new_run("run-finished"));
        let hash = TokenHash::of("reopen-token");
        let (journal, item) = {
            let store = SqliteStore::open(&path).expect("the store opens");
            let Ok(Created::New(fence)) = store.create_run(active.clone(), &worker).await else { panic!("a new run") };
            let entries = vec![
                Entry::TimerScheduled { op: Op(0), deadline: Timestamp::from_millis(50_000) },
                Entry::HookCreated {
                    op: Op(1),
                    token_hash: hash.as_str().into(),
                    nonce: None,
                    conflict: false,
                    webhook: None,
                },
            ];
            let mut append = Append {
                first_seq: 1,
                entries: entries.clone(),
                consumed: Vec::new(),
                notices: Vec::new(),
                runs: Vec::new(),
            };
            store.append(&active.id, fence, &mut append).await.expect("the append is acknowledged");
            let delivered = store.deliver(Target::Hook(hash.clone()), Some("d1"), DeliveryPayload::Hook(json!("hi")));
            let Ok(Delivered::Accepted { id, .. }) = delivered.await else { panic!("the delivery is accepted") };
            let Ok(Created::New(done)) = store.create_run(finished.clone(), &worker).await else { panic!("a new run") };
            let mut end = Append {
                first_seq: 1,
                entries: vec![Entry::RunCompleted { output: json!(1) }],
                consumed: vec![],
                notices: vec![],
                runs: vec![],
            };
            store.append(&finished.id, done, &mut end).await.expect("the final append is acknowledged");
            let mut journal = vec![active.started_entry()];
            journal.extend(entries);
            (journal, id)
        };

        let store = SqliteStore::open(&path).expect("the store reopens");
        let loaded = store.load(&active.id).await.expect("load succeeds").expect("the run survived");
        assert_eq!(loaded.entries, journal);
        let statuses: Vec<_> = store
            .list_runs(&RunQuery::newest(10))
            .await
            .expect("listing succeeds")
            .runs
            .iter()
            .map(|s| s.status)
            .collect();
        assert_eq!(statuses, [RunStatus::Completed, RunStatus::Active]);
        let timers = store.timers().await.expect("timers succeed");
        assert_eq!(timers.len(), 1);
        assert_eq!(
            (timers[0].op, timers[0].kind, timers[0].due),
            (Op(0), TimerKind::Sleep, Timestamp::from_millis(50_000))
        );
        let hook = store.find_hook(&hash).await.expect("find_hook succeeds").map(|hook| (hook.run, hook.op));
        assert_eq!(hook, Some((active.id.clone(), Op(1))));
        let inbox = store.inbox(&active.id).await.expect("inbox succeeds");
        assert_eq!(inbox.iter().map(|item| item.id).collect::<Vec<_>>(), [item]);
        let again = store.deliver(Target::Hook(hash), Some("d1"), DeliveryPayload::Hook(json!("hi"))).await;
        assert!(matches!(again, Ok(Delivered::Duplicate { .. })), "delivery ids are remembered: {again:?}");
        let worker = WorkerId("second-process".into());
        let claimed = store.claim(&active.id, &worker, Duration::from_secs(30), Timestamp::from_millis(2_000), 0);
        let claimed = claimed.await.expect("the run can be claimed by the new process");
        assert_eq!(claimed.next_seq, 3);
        let mut append = Append {
            first_seq: 3,
            entries: vec![Entry::TimerFired { op: Op(0) }],
            consumed: vec![],
            notices: vec![],
            runs: vec![],
        };
        store.append(&active.id, claimed.fence, &mut append).await.expect("the new claim can append");
    }
}
