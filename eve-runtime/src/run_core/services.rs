//! What a run's body and its executor need from the runtime: the clock, the key, sign-in
//! providers, the public URL, the host's state, and the two pieces of bookkeeping that deliveries
//! from outside share with running steps (manual webhook responses, sign-in callbacks in hand).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::auth::{AUTH_CALLBACK_PATH, AuthError, AuthProvider, Principal};
use crate::control::RunControl;
use crate::journal::webhook::WebhookResponse;
use crate::journal::{Op, RunId};
use crate::secret::{SecretKey, Token};
use crate::time::Clock;

/// What the body's primitives need from the runtime.
pub(crate) struct Services {
    pub clock: Arc<dyn Clock>,
    pub key: SecretKey,
    /// Auth providers by id.
    pub providers: HashMap<String, Arc<dyn AuthProvider>>,
    /// The base URL webhook and callback URLs start with, such as `http://127.0.0.1:7700`.
    pub public_url: String,
    /// Manual webhook requests waiting for a step's response, and recent responses to repeat.
    pub responses: Responses,
    /// Values the host gave the runtime for steps and plain tools, by type.
    pub state: crate::state::State,
    /// Sign-in callbacks being handled, so a duplicate never exchanges a code twice.
    pub callbacks: Callbacks,
    /// How to check a payload for each typed hook a body created in this process, by token
    /// hash: a delivery the hook's type cannot take is refused at once (see [`PayloadChecks`]).
    pub payload_checks: PayloadChecks,
    /// What a step may ask of the runtime these services belong to (which the implementation
    /// holds weakly): a step reaches it with `StepCtx::control`.
    pub control: std::sync::OnceLock<Arc<dyn RunControl>>,
    /// Who listens to the log messages of which run or call.
    pub logs: Arc<crate::logs::Listeners>,
}

/// A check that a payload decodes into a hook's type: `Err((message, field))` if not.
pub(crate) type PayloadCheck = fn(&serde_json::Value) -> Result<(), (String, Option<String>)>;

/// The payload checks of the typed hooks bodies created in this process, by token hash. The type
/// of a hook is known only to its body, so a hook is checked at delivery only once its run has
/// created it here (after a restart, from when the run is replayed); until then a payload is
/// accepted as before and a wrong one fails the body's `recv`. Best effort by design, so the map
/// is bounded: past [`PayloadChecks::LIMIT`] hooks it starts over.
///
/// A check names the hook it was made for, because the token may have moved on since: the hook
/// closed with its run, another run took the token after it, or a run asked for a token another
/// run held (the store refuses that hook, but its check was made first). So a payload a check
/// accepts goes on at once, and one it refuses is refused only once the store says that the
/// token's hook is still the one the check names.
#[derive(Default)]
pub(crate) struct PayloadChecks(Mutex<HashMap<String, HookCheck>>);

/// A hook's payload check, and the hook it was made for.
#[derive(Clone)]
pub(crate) struct HookCheck {
    /// The run whose body created the hook.
    pub run: RunId,
    /// The hook's operation in that run.
    pub op: Op,
    /// How to check a payload.
    pub check: PayloadCheck,
}

impl HookCheck {
    /// Whether this is the check of `run`'s hook at `op`.
    pub fn is_for(&self, run: &RunId, op: Op) -> bool {
        self.run == *run && self.op == op
    }
}

impl PayloadChecks {
    /// The most hooks whose checks are kept.
    pub const LIMIT: usize = 16_384;

    /// Remembers how to check the payloads of the hook with `token_hash`.
    pub fn insert(&self, token_hash: String, check: HookCheck) {
        let mut checks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if checks.len() >= Self::LIMIT {
            checks.clear();
        }
        checks.insert(token_hash, check);
    }

    /// The check of the hook with `token_hash`, if its type is known here.
    pub fn get(&self, token_hash: &str) -> Option<HookCheck> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(token_hash).cloned()
    }

    /// Forgets the check of the hook with `token_hash` if it is still the one made for `run`'s
    /// `op` (a newer hook's check is kept).
    pub fn remove(&self, token_hash: &str, run: &RunId, op: Op) {
        let mut checks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if checks.get(token_hash).is_some_and(|check| check.is_for(run, op)) {
            checks.remove(token_hash);
        }
    }
}

impl Services {
    pub fn new(
        clock: Arc<dyn Clock>,
        key: SecretKey,
        providers: HashMap<String, Arc<dyn AuthProvider>>,
        public_url: String,
        state: crate::state::State,
    ) -> Self {
        Services {
            clock,
            key,
            providers,
            public_url,
            responses: Default::default(),
            state,
            callbacks: Callbacks::default(),
            payload_checks: PayloadChecks::default(),
            control: std::sync::OnceLock::new(),
            logs: Arc::default(),
        }
    }

    /// The `state` of the sign-in callback a step at `op` waits for.
    pub fn auth_state(&self, run: &RunId, op: Op, nonce: &str) -> Token {
        self.key.derive_token(run, op, &format!("auth:{nonce}"))
    }

    /// Where a provider sends people back after they sign in.
    pub fn redirect_uri(&self, provider: &str) -> String {
        format!("{}{AUTH_CALLBACK_PATH}{provider}/callback", self.public_url)
    }

    /// The link `authorization.required` publishes for a sign-in with `provider`: the HTTP
    /// server's sign-in link, which ties the sign-in to the browser that opens it before sending
    /// it to the provider. The provider's URL is built first, so a misconfigured provider is
    /// reported when the sign-in is asked for.
    pub fn authorization_url(&self, provider: &str, principal: &Principal, state: &str) -> Result<String, AuthError> {
        self.provider_url(provider, principal, state)?;
        Ok(crate::auth::sign_in_link(&self.public_url, provider, state))
    }

    /// The provider's own URL that starts a sign-in with `provider` for `principal`.
    pub fn provider_url(&self, provider: &str, principal: &Principal, state: &str) -> Result<String, AuthError> {
        let Some(auth) = self.providers.get(provider) else {
            let reason = "no such provider is registered".to_owned();
            return Err(AuthError::Config { provider: provider.to_owned(), reason });
        };
        auth.authorization_url(principal, state, &self.redirect_uri(provider))
    }

    /// Registers a manual webhook request waiting for a step's response.
    pub fn expect_response(&self, delivery: String) -> oneshot::Receiver<WebhookResponse> {
        self.responses.expect(delivery)
    }

    /// Hands a step's response to the waiting request; false if none waits.
    pub fn respond(&self, delivery: &str, response: WebhookResponse) -> bool {
        self.responses.respond(delivery, response)
    }

    /// Forgets a request that stopped waiting.
    pub fn forget_response(&self, delivery: &str) {
        self.responses.forget(delivery);
    }
}

/// How many manual webhook requests sent with a delivery id (an `Idempotency-Key`) are
/// remembered, with their responses once written, so that a repeat gets the first's response.
const RECENT_RESPONSES: usize = 1024;

/// Manual webhook requests waiting for a step's response, by delivery, and the most recent ones
/// sent with a delivery id, with the response their step wrote (kept even if the request had
/// stopped waiting, so a retry gets it).
#[derive(Default)]
pub(crate) struct Responses(Mutex<ResponseBook>);

#[derive(Default)]
struct ResponseBook {
    waiting: HashMap<String, oneshot::Sender<WebhookResponse>>,
    /// Oldest first, at most [`RECENT_RESPONSES`].
    recent: VecDeque<Remembered>,
}

/// A manual webhook request sent with a delivery id.
struct Remembered {
    /// The scoped delivery id.
    key: String,
    /// The request's own delivery, which its step responds to.
    delivery: String,
    response: Option<WebhookResponse>,
}

impl Responses {
    /// Registers a request waiting for its step's response.
    pub fn expect(&self, delivery: String) -> oneshot::Receiver<WebhookResponse> {
        let (respond, response) = oneshot::channel();
        self.lock().waiting.insert(delivery, respond);
        response
    }

    /// Hands a step's response to the waiting request, and keeps it for repeats of the request's
    /// delivery id; false if no request waits.
    pub fn respond(&self, delivery: &str, response: WebhookResponse) -> bool {
        let mut book = self.lock();
        if let Some(remembered) = book.recent.iter_mut().find(|remembered| remembered.delivery == delivery) {
            remembered.response = Some(response.clone());
        }
        book.waiting.remove(delivery).is_some_and(|respond| respond.send(response).is_ok())
    }

    /// Forgets a request that stopped waiting.
    pub fn forget(&self, delivery: &str) {
        self.lock().waiting.remove(delivery);
    }

    /// Remembers that the request delivered under the scoped delivery id `key` is `delivery`.
    pub fn remember(&self, key: String, delivery: String) {
        let mut book = self.lock();
        if book.recent.len() == RECENT_RESPONSES {
            book.recent.pop_front();
        }
        book.recent.push_back(Remembered { key, delivery, response: None });
    }

    /// The response written to the request first delivered under `key`, if there is one yet.
    pub fn first_response(&self, key: &str) -> Option<WebhookResponse> {
        let book = self.lock();
        book.recent.iter().find(|remembered| remembered.key == key).and_then(|remembered| remembered.response.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ResponseBook> {
        self.0.lock().expect("the responses mutex is never poisoned: no code panics while holding it")
    }
}

/// Sign-in callbacks being handled or done, so a duplicate never exchanges a code twice.
#[derive(Debug, Default)]
pub(crate) struct Callbacks(Mutex<HashSet<String>>);

impl Callbacks {
    /// Claims the callback with this state hash; false if it was claimed before.
    pub(crate) fn claim(&self, state_hash: &str) -> bool {
        self.0.lock().expect("the callbacks mutex is never poisoned").insert(state_hash.to_owned())
    }

    /// How many callbacks are claimed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().expect("the callbacks mutex is never poisoned").len()
    }

    /// Releases a claim: its exchange failed (the person may try again), or the run journaled the
    /// sign-in (its callback hook is gone, so a duplicate is refused without the claim).
    pub(crate) fn release(&self, state_hash: &str) {
        self.0.lock().expect("the callbacks mutex is never poisoned").remove(state_hash);
    }
}
