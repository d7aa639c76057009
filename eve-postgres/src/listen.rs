//! Wake-ups between workers: `NOTIFY` in the writes that give a run something to do, `LISTEN` on
//! one connection of its own per store.
//!
//! The writes (a delivery, a notice to a parent, a released claim, a park with a delivery waiting)
//! call `pg_notify(channel, run id)` inside their own transaction, so a wake-up is sent exactly
//! when the write commits, and never for one that rolled back. The channel is named for the schema
//! ([`channel`]), so stores on other schemas of the same database do not hear each other.
//!
//! [`WakeUps::subscribe`] starts, on first use, a task holding one connection (outside the pool)
//! that listens on the channel and broadcasts each run id as [`WakeUp::Run`]. The task sends
//! [`WakeUp::Missed`] each time it (re)connects, since notifications sent while it had no
//! connection are lost; it opens a new connection after a lost one, waiting 100 ms, doubling up to
//! 5 s. It stops once nobody subscribes any more, and the next subscriber starts it again.
//! Notifications are a shortcut: the workers' polls of `Store::claimable` find the same runs.
//!
//! The same channel carries notices for followers (`Store::watch`): a commit to a run whose
//! `followed_until` has not passed sends `j:` and the run id, which the task broadcasts to the
//! followers' subscribers instead. Runs nobody follows send nothing, so a worker's commits pay
//! for `NOTIFY` (which serializes the commits that send one) only while someone watches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::AsyncMessage;

use super::connect::Tls;
use eve_runtime::journal::RunId;
use eve_runtime::store::WakeUp;

/// How many wake-ups a subscriber may fall behind by before it is told it missed some.
const CAPACITY: usize = 4_096;

/// How often the listening task checks that it still has subscribers while nothing is heard.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The first and the longest wait before opening a new listening connection after a lost one.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The notification channel of the schema: `eve_wake_<schema>`, or, if that is longer than a
/// Postgres identifier may be (63 bytes), `eve_wake_` and a hash of the schema's name.
pub(super) fn channel(schema: &str) -> String {
    let named = format!("eve_wake_{schema}");
    if named.len() <= 63 {
        return named;
    }
    format!("eve_wake_{:016x}", eve_runtime::journal::InputHash::of(schema.as_bytes()).0)
}

/// The listening side of a store: see the module documentation.
pub(super) struct WakeUps {
    inner: Arc<Inner>,
}

struct Inner {
    config: tokio_postgres::Config,
    tls: Tls,
    channel: String,
    /// The server, as logs name it.
    target: String,
    sender: broadcast::Sender<WakeUp>,
    /// Where notices of watched runs' commits go (payloads `j:` and the run id).
    commits: broadcast::Sender<WakeUp>,
    /// Whether the listening task runs; changed only with this lock held, together with the
    /// subscriber count it depends on.
    running: Mutex<bool>,
    /// Whether the task holds a connection that listens now, for readiness probes.
    listening: AtomicBool,
}

impl WakeUps {
    pub(super) fn new(mut config: tokio_postgres::Config, tls: Tls, channel: String, target: String) -> Self {
        // A connection that only listens sends nothing, so a silently dropped peer is found by
        // TCP keepalives; a restarted server closes it at once.
        config.keepalives(true).keepalives_idle(Duration::from_secs(10));
        let (sender, commits) = (broadcast::channel(CAPACITY).0, broadcast::channel(CAPACITY).0);
        let running = Mutex::new(false);
        let inner = Inner { config, tls, channel, target, sender, commits, running, listening: AtomicBool::new(false) };
        WakeUps { inner: Arc::new(inner) }
    }

    /// A new subscriber to wake-ups; starts the listening task if it is not running. `None`
    /// outside a Tokio runtime.
    pub(super) fn subscribe(&self) -> Option<broadcast::Receiver<WakeUp>> {
        self.listen(&self.inner.sender)
    }

    /// A new subscriber to the notices of watched runs' commits; starts the listening task if it
    /// is not running. `None` outside a Tokio runtime.
    pub(super) fn subscribe_commits(&self) -> Option<broadcast::Receiver<WakeUp>> {
        self.listen(&self.inner.commits)
    }

    /// Why this store is not ready to hear wake-ups, if it is not: its listening task runs (a
    /// worker or a follower subscribed) but holds no listening connection now, between a lost one
    /// and the next. `None` when it listens, or when nobody needs it to.
    pub(super) fn not_listening(&self) -> Option<String> {
        let running = *self.inner.running.lock().expect("the listener's lock is never poisoned");
        (running && !self.inner.listening.load(Ordering::Acquire)).then(|| {
            format!("not listening for wake-ups from {}: the connection is being opened again", self.inner.target)
        })
    }

    fn listen(&self, sender: &broadcast::Sender<WakeUp>) -> Option<broadcast::Receiver<WakeUp>> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let mut running = self.inner.running.lock().expect("the listener's lock is never poisoned");
        let receiver = sender.subscribe();
        if !*running {
            *running = true;
            handle.spawn(listen(self.inner.clone()));
        }
        Some(receiver)
    }
}

impl Inner {
    /// Whether nobody subscribes any more, to wake-ups or to commits.
    fn unheard(&self) -> bool {
        self.sender.receiver_count() == 0 && self.commits.receiver_count() == 0
    }
}

/// Keeps a listening connection open while anyone subscribes.
async fn listen(inner: Arc<Inner>) {
    let mut delay = RECONNECT_FIRST;
    loop {
        let listened = listen_once(&inner).await;
        inner.listening.store(false, Ordering::Release);
        match listened {
            Ok(()) => delay = RECONNECT_FIRST,
            Err(reason) => {
                tracing::warn!(
                    target = inner.target,
                    "lost the connection listening for wake-ups ({reason}); reconnecting in {delay:?}"
                );
            }
        }
        if stop_if_unheard(&inner) {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RECONNECT_MAX);
        if stop_if_unheard(&inner) {
            return;
        }
    }
}

/// Marks the task stopped if nobody subscribes any more; true if it should stop.
fn stop_if_unheard(inner: &Inner) -> bool {
    let mut running = inner.running.lock().expect("the listener's lock is never poisoned");
    if inner.unheard() {
        *running = false;
        return true;
    }
    false
}

/// Opens a connection, listens, and forwards notifications until the connection ends (an error)
/// or nobody subscribes any more (`Ok`).
async fn listen_once(inner: &Inner) -> Result<(), String> {
    let (client, mut connection) =
        inner.config.connect(super::connect::same(&inner.tls)).await.map_err(|error| error.to_string())?;
    let (messages, mut heard) = mpsc::unbounded_channel();
    // The connection is driven by its own task, which hands its notifications over.
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(message) => {
                    if messages.send(message).is_err() {
                        return Ok(());
                    }
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        Err("the server closed the connection".to_owned())
    });
    let listening = client.batch_execute(&format!("LISTEN {}", inner.channel)).await;
    if let Err(error) = listening {
        driver.abort();
        return Err(error.to_string());
    }
    // Notifications sent while there was no connection are lost: have the workers look around,
    // and the followers read again.
    inner.listening.store(true, Ordering::Release);
    let _ = inner.sender.send(WakeUp::Missed);
    let _ = inner.commits.send(WakeUp::Missed);
    loop {
        match tokio::time::timeout(IDLE_CHECK, heard.recv()).await {
            Ok(Some(AsyncMessage::Notification(notification))) => {
                let (sender, payload) = match notification.payload().strip_prefix("j:") {
                    Some(run) => (&inner.commits, run),
                    None => (&inner.sender, notification.payload()),
                };
                if let Ok(run) = payload.parse::<RunId>() {
                    let _ = sender.send(WakeUp::Run(run));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(driver.await.unwrap_or_else(|error| Err(error.to_string())).err().unwrap_or_default());
            }
            Err(_) => {}
        }
        if inner.unheard() {
            driver.abort();
            drop(client);
            return Ok(());
        }
    }
}
