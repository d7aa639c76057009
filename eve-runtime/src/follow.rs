//! Following a run: its journal from a position on, as it is read from the store and then as it
//! grows.
//!
//! A follower reads the run's journal a page at a time ([`Store::read`]). Once it has read to the
//! end it waits for a notice that the journal grew, then reads on. The notice comes from the
//! executor of this process, which tells [`Followers`] after each commit, or, for a run another
//! process advances, from the store ([`Store::watch`]: Postgres's `LISTEN`). A notice says only
//! "read on": entries always come from the store, so a follower
//!
//! - never sees an entry that is not durable (nothing is published ahead of the journal);
//! - never misses one between what it read and what it was told: it registers for notices before
//!   its first read, and a commit it was not told of is one its next read finds;
//! - never sees one twice: it reads from the sequence number after the last one it yielded;
//! - never falls behind for good: notices coalesce, and one it missed is the same as one it saw,
//!   since it reads to the end either way.
//!
//! A continue-as-new replaces the run's journal with a new history ([`Position::history`] one
//! higher), whose sequence numbers start again at 0. The store keeps the histories it replaced
//! ([`KEPT_HISTORIES`] of them), so a follower still reading one reads it to its end, then goes on
//! with the next; a follower further behind misses what the store no longer keeps, and goes on
//! with the oldest history kept.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::{broadcast, watch};

use crate::error::Error;
use crate::journal::{Entry, RunId};
pub use crate::journal::{Position, PositionError};
use crate::store::{KEPT_HISTORIES, Store, WakeUp};

/// How many entries a follower reads at a time.
const PAGE: usize = 256;

/// How often a follower of a shared store that sends no notices reads again.
const POLL: Duration = Duration::from_secs(1);

/// One journaled entry of a followed run, with its position.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Followed {
    /// Where it stands in the run's journal.
    pub position: Position,
    /// The entry.
    pub entry: Entry,
}

/// The runs this process's followers wait on, which the executor tells after each commit.
///
/// A commit costs one atomic load while nobody follows anything. A follower counts itself in
/// before its first read and the executor looks at the count after each commit, so either the
/// follower's read comes after the commit (and finds its entries) or the executor sees the
/// follower (and tells it): the store orders the commit and the read.
#[derive(Debug, Default)]
pub(crate) struct Followers {
    count: AtomicUsize,
    runs: Mutex<HashMap<RunId, watch::Sender<()>>>,
}

impl Followers {
    /// Tells `run`'s followers, if it has any, that its journal grew.
    #[inline]
    pub fn committed(&self, run: &RunId) {
        if self.count.load(Ordering::SeqCst) != 0 {
            self.tell(run);
        }
    }

    /// [`Followers::committed`] when someone follows a run: kept out of the commit's code.
    #[cold]
    #[inline(never)]
    fn tell(&self, run: &RunId) {
        if let Some(sender) = self.lock().get(run) {
            sender.send_replace(());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, watch::Sender<()>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a follower of `run` until the returned subscription drops.
    fn subscribe(self: &Arc<Self>, run: &RunId) -> Subscription {
        let receiver = {
            let mut runs = self.lock();
            self.count.fetch_add(1, Ordering::SeqCst);
            runs.entry(run.clone()).or_insert_with(|| watch::channel(()).0).subscribe()
        };
        Subscription { followers: self.clone(), run: run.clone(), receiver }
    }
}

/// A follower's registration with [`Followers`]; leaves when dropped.
struct Subscription {
    followers: Arc<Followers>,
    run: RunId,
    receiver: watch::Receiver<()>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut runs = self.followers.lock();
        self.followers.count.fetch_sub(1, Ordering::SeqCst);
        // This receiver still counts: it is the last one if it is the only one.
        if runs.get(&self.run).is_some_and(|sender| sender.receiver_count() <= 1) {
            runs.remove(&self.run);
        }
    }
}

/// A run's journal from a position on: see [`Runtime::follow`](crate::Runtime::follow).
///
/// A stream of [`Followed`] entries in journal order, each exactly once. It ends after the entry
/// that ends the run, or with an error if the store fails (follow again from the position after
/// the last entry received to go on). It does not end while the run goes on, parked for a day or
/// not: drop it to stop following. Once ended, it stays ended: polled again, it says so again
/// ([`FusedStream`](futures::stream::FusedStream)).
#[must_use = "a stream does nothing unless polled"]
pub struct Follow {
    inner: futures::stream::Fuse<BoxedFollow>,
    caught_up: Arc<AtomicBool>,
}

impl fmt::Debug for Follow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Follow").finish_non_exhaustive()
    }
}

impl futures::stream::FusedStream for Follow {
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
}

impl Stream for Follow {
    type Item = Result<Followed, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// The stream of a follower's entries, before it is fused.
type BoxedFollow = Pin<Box<dyn Stream<Item = Result<Followed, Error>> + Send>>;

/// What a follower holds between entries.
struct Follower {
    store: Arc<dyn Store>,
    run: RunId,
    next: Position,
    local: Subscription,
    /// Notices of other processes' commits, on a shared store.
    shared: Option<Shared>,
    ready: VecDeque<Followed>,
    /// Whether the last read reached the end of the journal.
    at_end: bool,
    /// Whether every entry that read found has been yielded: see [`Follow::is_caught_up`].
    caught_up: Arc<AtomicBool>,
    /// Whether the follower has looked for the run's end at the end of the journal.
    looked_for_end: bool,
    ended: bool,
}

impl Follow {
    /// Follows `run` in `store` from `from`, told of this process's commits by `followers`.
    pub(crate) fn new(store: Arc<dyn Store>, followers: &Arc<Followers>, run: RunId, from: Position) -> Follow {
        let local = followers.subscribe(&run);
        let caught_up = Arc::new(AtomicBool::new(false));
        let follower = Follower {
            store,
            run,
            next: from,
            local,
            shared: None,
            ready: VecDeque::new(),
            at_end: false,
            caught_up: caught_up.clone(),
            looked_for_end: false,
            ended: false,
        };
        let stream = futures::stream::unfold(Some(follower), |follower| async move {
            let mut follower = follower?;
            match follower.next_entry().await {
                Ok(Some(followed)) => Some((Ok(followed), Some(follower))),
                Ok(None) => None,
                // An error ends the stream: the caller follows again from where it got to.
                Err(error) => Some((Err(error), None)),
            }
        });
        // Fused: a caller may poll again after the end, and gets the end again.
        let boxed: BoxedFollow = Box::pin(stream);
        Follow { inner: boxed.fuse(), caught_up }
    }

    /// Whether the entries yielded so far are all the journal held when the follower last read
    /// it: true once the last entry that read found is yielded, until the next read finds more.
    ///
    /// A follower that acts on where the run stands (puts a question the run has open to a
    /// person, say) waits until it is caught up, so it does not act on a state the journal has
    /// already left behind in entries it has not yet taken.
    pub fn is_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Relaxed)
    }
}

impl Follower {
    async fn next_entry(&mut self) -> Result<Option<Followed>, Error> {
        loop {
            if self.ready.len() == 1 && !self.at_end && !self.ready[0].entry.is_terminal() {
                // The last entry of a full page: read past it first, so that yielding it says
                // whether the follower is caught up.
                self.read().await?;
            }
            if let Some(followed) = self.ready.pop_front() {
                self.ended = followed.entry.is_terminal();
                self.caught_up.store(self.at_end && self.ready.is_empty(), Ordering::Relaxed);
                return Ok(Some(followed));
            }
            if self.ended {
                return Ok(None);
            }
            // Marked seen before the read: a commit after this point is found by the read, or
            // wakes the wait below.
            self.local.receiver.borrow_and_update();
            if self.read().await? {
                continue;
            }
            if !self.looked_for_end {
                self.looked_for_end = true;
                if self.finished_before().await? {
                    return Ok(None);
                }
            }
            self.wait().await?;
        }
    }

    /// Reads the next page into `ready`, or moves on to the next history kept; false if there was
    /// nothing to read.
    async fn read(&mut self) -> Result<bool, Error> {
        let page = self.store.read(&self.run, self.next, PAGE).await?;
        let page = page.ok_or_else(|| Error::RunNotFound(self.run.clone()))?;
        self.at_end = page.entries.len() < PAGE && page.continued == self.next.history;
        if page.continued < self.next.history {
            return Err(Error::PositionAhead { run: self.run.clone(), position: self.next, history: page.continued });
        }
        if page.entries.is_empty() {
            if page.continued == self.next.history {
                return Ok(false);
            }
            // The follower read its history to the end, or the store no longer keeps it: go on
            // with the next history, or the oldest the store keeps.
            let history = (self.next.history + 1).max(page.continued.saturating_sub(KEPT_HISTORIES));
            self.next = Position::new(history, 0);
            self.looked_for_end = false;
            return Ok(true);
        }
        for entry in page.entries {
            self.ready.push_back(Followed { position: self.next, entry });
            self.next = self.next.next();
        }
        Ok(true)
    }

    /// Whether the journal ended before the follower's position: the entry before it ends the run.
    async fn finished_before(&self) -> Result<bool, Error> {
        let Some(last) = self.next.seq.checked_sub(1) else { return Ok(false) };
        let page = self.store.read(&self.run, Position::new(self.next.history, last), 1).await?;
        Ok(page.is_some_and(|page| {
            page.continued == self.next.history && page.entries.first().is_some_and(Entry::is_terminal)
        }))
    }

    /// Waits for a notice that the run's journal may have grown.
    async fn wait(&mut self) -> Result<(), Error> {
        if !self.store.is_shared() {
            // A single-process store: this process makes every commit.
            let _ = self.local.receiver.changed().await;
            return Ok(());
        }
        let Some(shared) = &mut self.shared else {
            self.shared = Some(Shared::watch(&*self.store, &self.run).await?);
            // Told of commits from now on; one made before is found by reading again.
            return Ok(());
        };
        let Some(commits) = &mut shared.commits else {
            // The store cannot send notices (no Tokio runtime to listen with): look now and then.
            tokio::select! {
                _ = self.local.receiver.changed() => {}
                () = tokio::time::sleep(POLL) => {}
            }
            return Ok(());
        };
        loop {
            tokio::select! {
                _ = self.local.receiver.changed() => return Ok(()),
                notice = commits.recv() => match notice {
                    Ok(WakeUp::Run(run)) if run == self.run => return Ok(()),
                    Ok(WakeUp::Run(_)) => {}
                    // Notices may have been lost: read again.
                    Ok(WakeUp::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => return Ok(()),
                    Err(broadcast::error::RecvError::Closed) => {
                        self.shared = None;
                        return Ok(());
                    }
                },
                () = tokio::time::sleep_until(shared.renew_at) => {
                    // Keeps the store sending this run's notices; the subscription held goes on.
                    let renewed = self.store.watch(&self.run).await?;
                    shared.renew_at = tokio::time::Instant::now() + renewed.map_or(POLL, |watch| watch.renew_within);
                    return Ok(());
                }
            }
        }
    }
}

/// A follower's subscription to a shared store's notices of other processes' commits.
struct Shared {
    commits: Option<broadcast::Receiver<WakeUp>>,
    renew_at: tokio::time::Instant,
}

impl Shared {
    async fn watch(store: &dyn Store, run: &RunId) -> Result<Shared, Error> {
        let watch = store.watch(run).await?;
        let renew_within = watch.as_ref().map_or(POLL, |watch| watch.renew_within);
        Ok(Shared { commits: watch.map(|watch| watch.commits), renew_at: tokio::time::Instant::now() + renew_within })
    }
}
