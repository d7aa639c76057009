//! Group commit: the appends of one worker that imply nothing but journal rows (a step's
//! completion, a recorded value, consumed inbox items) go to Postgres together, in one statement
//! that is its own transaction. Appends that imply index changes, notices or new runs keep a
//! transaction of their own.
//!
//! When many runs append at once, each would otherwise pay a round trip and a commit of its own,
//! and on a small machine the server's work per transaction, more than the disk, bounds how many
//! steps a second the workers complete. Grouped, they share one.
//!
//! # How a group forms
//!
//! No task of its own: the first caller to find nobody leading becomes the *leader*. It takes what
//! is queued (its own append first), at most one append per run and [`MOST`] in all, writes them
//! with one statement, tells each caller what became of its append, and hands the lead to the
//! caller that has waited longest, so no caller leads for ever under a steady load. Callers that
//! come while a group is being written queue up for the next one, so groups grow with the load,
//! and a lone append is written at once by its own caller.
//!
//! # What each caller is told
//!
//! Each append of a group is checked on its own (fence epoch, status and journal length, in the
//! `UPDATE` that advances its run), so one refused append does not stop the others; a refused one
//! is told why, read back as for a single append. If the statement fails, nothing of the group was
//! written (it is one transaction) and each caller writes its append alone; if the connection is
//! lost while it runs, each caller settles its append the store's usual way (written again,
//! guarded by its first sequence number, or read back).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use deadpool_postgres::Client;
use tokio::sync::oneshot;

use super::codec::{self, Failure};
use super::writes::{self, AppendRows};
use super::{PostgresStore, discard_if_broken};

/// The most appends one statement writes.
const MOST: usize = 128;

/// The most bytes of entries one statement carries beyond its first append's.
const MOST_BYTES: usize = 4 << 20;

/// The appends waiting for a group, and whether a caller leads.
#[derive(Default)]
pub(super) struct Group {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    led: bool,
}

/// An append waiting for its group, and how to tell its caller what happened to it.
struct Waiting {
    rows: Arc<AppendRows>,
    told: oneshot::Sender<Told>,
}

/// What a waiting caller is told.
enum Told {
    /// What became of its append.
    Done(Grouped),
    /// It leads now. Its append was taken out of the queue, to be put back first.
    Lead,
}

/// What became of an append sent with a group.
pub(super) enum Grouped {
    Written,
    /// Refused, for this reason; nothing of it was written.
    Refused(Failure),
    /// Nothing of the group was written: the append is to be written alone.
    NotWritten,
    /// The connection was lost while the statement ran, for this reason: the append may or may not
    /// have been written.
    InDoubt(String),
}

impl Group {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PostgresStore {
    /// Writes `rows` (an append implying no index change, notice or new run) together with the
    /// appends other runs make at the same moment. See the module documentation.
    pub(super) async fn append_grouped(&self, rows: &Arc<AppendRows>) -> Grouped {
        let mut handed_lead = false;
        loop {
            let (told, answer) = oneshot::channel();
            let waiting = Waiting { rows: Arc::clone(rows), told };
            let leads = {
                let mut queue = self.group.lock();
                if handed_lead {
                    // It has waited longest: its append goes first.
                    queue.waiting.push_front(waiting);
                    true
                } else {
                    queue.waiting.push_back(waiting);
                    !std::mem::replace(&mut queue.led, true)
                }
            };
            let mut answer = Answer { store: self, told: Some(answer) };
            if leads {
                let lead = Lead { store: self };
                lead.write_next_group().await;
            }
            let told = answer.told.as_mut().expect("taken only here").await;
            answer.told = None;
            match told {
                Ok(Told::Done(grouped)) => return grouped,
                Ok(Told::Lead) => handed_lead = true,
                // The leader's future was dropped while it wrote the group: the statement may
                // have run.
                Err(_) => return Grouped::InDoubt("the group holding it was abandoned midway".to_owned()),
            }
        }
    }

    /// Writes `group` with one statement; what became of each append, in order.
    async fn write_group(&self, group: &[&AppendRows]) -> Vec<Grouped> {
        let all = |grouped: &dyn Fn() -> Grouped| group.iter().map(|_| grouped()).collect();
        let Ok(client) = self.client().await else { return all(&|| Grouped::NotWritten) };
        // Dropped midway (the leader's future was), the connection still runs the statement: it
        // leaves the pool, so the next group does not queue behind it.
        let mut busy = Busy(Some(client));
        let client = busy.0.as_ref().expect("set above");
        let written = match group {
            // Alone, by the simpler statement, which the server plans and runs faster.
            [rows] => writes::advance(client, rows, &self.channel).await.map(|advanced| {
                let advanced = (advanced == 1).then(|| rows.run.as_str().to_owned());
                advanced.into_iter().collect()
            }),
            group => writes::advance_many(client, group, &self.channel).await,
        };
        let advanced = match written {
            Ok(advanced) => advanced,
            Err(error) => {
                let in_doubt = codec::is_connection_loss(&error).then(|| codec::describe(&error));
                discard_if_broken(busy.done(), &Err::<(), _>(Failure::Pg(error)));
                return match in_doubt {
                    Some(reason) => all(&|| Grouped::InDoubt(reason.clone())),
                    None => all(&|| Grouped::NotWritten),
                };
            }
        };
        let mut outcomes = Vec::with_capacity(group.len());
        let mut broken = Ok(());
        for rows in group {
            if advanced.contains(rows.run.as_str()) {
                outcomes.push(Grouped::Written);
                continue;
            }
            outcomes.push(match writes::why_refused(client, rows).await {
                Ok(refusal) => Grouped::Refused(Failure::Store(refusal)),
                // Not written, and why is unknown: written alone, it will be told.
                Err(failure) if failure.broke_connection() => {
                    broken = Err(failure);
                    Grouped::NotWritten
                }
                Err(failure) => Grouped::Refused(failure),
            });
            if broken.is_err() {
                break;
            }
        }
        outcomes.resize_with(group.len(), || Grouped::NotWritten);
        discard_if_broken(busy.done(), &broken);
        outcomes
    }
}

/// A connection running a group's statements: taken out of the pool if dropped before
/// [`Busy::done`].
struct Busy(Option<Client>);

impl Busy {
    fn done(&mut self) -> Client {
        self.0.take().expect("done once")
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// What a caller waits to be told. Dropped before it was read (the caller's future was dropped),
/// it passes on a lead it was handed, so the queue is never left without a leader.
struct Answer<'s> {
    store: &'s PostgresStore,
    told: Option<oneshot::Receiver<Told>>,
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        let Some(mut told) = self.told.take() else { return };
        told.close();
        if let Ok(Told::Lead) = told.try_recv() {
            drop(Lead { store: self.store });
        }
    }
}

/// The caller that writes the next group. Dropped, it hands the lead over (or gives it up), so a
/// leader whose future is dropped midway does not leave the queue without one.
struct Lead<'s> {
    store: &'s PostgresStore,
}

impl Lead<'_> {
    /// Takes the next group from the queue and writes it, telling each caller what became of its
    /// append.
    async fn write_next_group(&self) {
        let group = self.take();
        let rows: Vec<&AppendRows> = group.iter().map(|waiting| &*waiting.rows).collect();
        let outcomes = self.store.write_group(&rows).await;
        for (waiting, grouped) in group.into_iter().zip(outcomes) {
            // A caller that went away has nothing to be told.
            let _ = waiting.told.send(Told::Done(grouped));
        }
    }

    /// The oldest waiting appends, at most one per run, within [`MOST`] and [`MOST_BYTES`]. The
    /// appends of callers that went away are dropped unwritten.
    fn take(&self) -> Vec<Waiting> {
        let mut queue = self.store.group.lock();
        let (mut group, mut later, mut runs, mut bytes) = (Vec::new(), VecDeque::new(), HashSet::new(), 0);
        for waiting in std::mem::take(&mut queue.waiting) {
            if waiting.told.is_closed() {
                continue;
            }
            let size: usize = waiting.rows.entries.iter().map(String::len).sum();
            let fits = group.len() < MOST && (group.is_empty() || bytes + size <= MOST_BYTES);
            if fits && runs.insert(waiting.rows.run.clone()) {
                bytes += size;
                group.push(waiting);
            } else {
                later.push_back(waiting);
            }
        }
        queue.waiting = later;
        group
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut queue = self.store.group.lock();
        while let Some(next) = queue.waiting.pop_front() {
            if next.told.send(Told::Lead).is_ok() {
                return;
            }
        }
        queue.led = false;
    }
}
