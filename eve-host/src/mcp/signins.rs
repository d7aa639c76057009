//! The sign-in links runs publish, heard on the runtime's event stream.
//!
//! The journal records that a step waits for a sign-in (`AuthRequired`) but not its link: the
//! link carries a callback `state` derived from the runtime's secret key, and only the runtime
//! builds it, when it publishes `authorization.required` (again after a restart, from
//! [`Runtime::recover`]). So the links are kept here, in memory, from the moment the server
//! listens until the sign-in completes or the run ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast::error::RecvError;

use eve_runtime::Runtime;
use eve_runtime::events::RunEvent;
use eve_runtime::journal::RunId;

/// Sign-in links by run and step op.
#[derive(Default)]
pub(crate) struct SignIns(Mutex<HashMap<RunId, Vec<(u32, String)>>>);

impl SignIns {
    /// Starts listening to `runtime`'s events. The listener holds the map weakly, so it stops at
    /// the first event after the last server over it is dropped.
    pub fn listen(runtime: &Runtime) -> Arc<SignIns> {
        let sign_ins = Arc::new(SignIns::default());
        let weak = Arc::downgrade(&sign_ins);
        let mut events = runtime.events();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!("the MCP server missed {missed} run events; some sign-in links may be unknown");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                match weak.upgrade() {
                    Some(sign_ins) => sign_ins.observe(event),
                    None => return,
                }
            }
        });
        sign_ins
    }

    fn observe(&self, event: RunEvent) {
        match event {
            RunEvent::AuthorizationRequired { run, op, url, .. } => {
                let mut links = self.lock();
                let links = links.entry(run).or_default();
                links.retain(|(known, _)| *known != op.0);
                links.push((op.0, url));
            }
            RunEvent::AuthorizationCompleted { run, op, .. } => {
                let mut links = self.lock();
                if let Some(waiting) = links.get_mut(&run) {
                    waiting.retain(|(known, _)| *known != op.0);
                    if waiting.is_empty() {
                        links.remove(&run);
                    }
                }
            }
            RunEvent::Finished { run, .. } => {
                self.lock().remove(&run);
            }
            _ => {}
        }
    }

    /// The link of the sign-in the step at `op` of `run` waits for, if this server heard it.
    pub fn link(&self, run: &RunId, op: u32) -> Option<String> {
        let links = self.lock();
        links.get(run)?.iter().find(|(known, _)| *known == op).map(|(_, url)| url.clone())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RunId, Vec<(u32, String)>>> {
        self.0.lock().expect("the sign-in links mutex is never poisoned: no code panics while holding it")
    }
}
