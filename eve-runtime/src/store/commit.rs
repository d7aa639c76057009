//! [`Commit`]: what a store's write of a run's journal gives back, made at once or to await.
//!
//! The trait's other methods are `async` (with `async-trait`, so each call allocates its future).
//! The two that write a run's journal, [`Store::append`](super::Store::append) and
//! [`Store::continue_as_new`](super::Store::continue_as_new), return a `Commit` instead: a store
//! that decides without waiting (the in-memory store does no I/O) answers [`Commit::Done`], and a
//! chain of steps on it, one append a step, allocates no future for its commits; a store that
//! writes to a disk or a server answers [`Commit::Pending`]. The caller awaits either the same way,
//! or matches on it where a future would cost.

use std::future::{Future, IntoFuture, Ready};

use futures::future::{BoxFuture, Either};

use crate::error::StoreError;

/// The result of a write to a run's journal ([`Store::append`](super::Store::append),
/// [`Store::continue_as_new`](super::Store::continue_as_new)): made already, or made by awaiting
/// it. Awaiting a `Commit` gives the write's result either way.
///
/// ```
/// use eve_tools::journal::{Entry, Op, RecordKind};
/// use eve_tools::Timestamp;
/// use eve_tools::store::{Append, Commit, Created, MemoryStore, NewRun, Store, WorkerId};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let run = NewRun {
///     id: "run-1".parse().unwrap(),
///     workflow_id: "demo::workflow".into(),
///     tool: "demo".into(),
///     input: serde_json::json!({}),
///     created_at: Timestamp::from_millis(0),
///     principal: None,
///     interactive: false,
///     parent: None,
///     traceparent: None,
///     build: None,
///     forked_from: None,
/// };
/// let Created::New(fence) = store.create_run(run.clone(), &WorkerId::generate()).await.unwrap() else {
///     unreachable!("the run is new")
/// };
/// let now = Entry::Recorded { op: Op(0), kind: RecordKind::Now, value: serde_json::json!(0).into() };
/// let mut batch = Append { first_seq: 1, entries: vec![now], ..Append::default() };
/// // The in-memory store appends at once, and may keep the entries it was lent.
/// let commit = store.append(&run.id, fence, &mut batch);
/// assert!(matches!(commit, Commit::Done(Ok(()))));
///
/// // Any store's commit can be awaited instead.
/// let mut next = Append { first_seq: 2, ..Append::default() };
/// store.append(&run.id, fence, &mut next).await.unwrap();
/// # });
/// ```
#[must_use = "a pending commit writes nothing until it is awaited"]
pub enum Commit<'a> {
    /// The store wrote (or refused) already, without waiting.
    Done(Result<(), StoreError>),
    /// The store writes (or refuses) when this future is awaited; dropped unawaited, it may
    /// write nothing.
    Pending(BoxFuture<'a, Result<(), StoreError>>),
}

impl<'a> Commit<'a> {
    /// The commit `write` makes when it is awaited: what a store that waits on a disk or a server
    /// returns (the future is boxed).
    pub fn pending(write: impl Future<Output = Result<(), StoreError>> + Send + 'a) -> Self {
        Commit::Pending(Box::pin(write))
    }
}

impl<'a> IntoFuture for Commit<'a> {
    type Output = Result<(), StoreError>;
    type IntoFuture = Either<Ready<Result<(), StoreError>>, BoxFuture<'a, Result<(), StoreError>>>;

    fn into_future(self) -> Self::IntoFuture {
        match self {
            Commit::Done(result) => Either::Left(std::future::ready(result)),
            Commit::Pending(write) => Either::Right(write),
        }
    }
}

impl std::fmt::Debug for Commit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Commit::Done(result) => f.debug_tuple("Done").field(result).finish(),
            Commit::Pending(_) => f.write_str("Pending(..)"),
        }
    }
}
