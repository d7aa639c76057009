//! Cookies: reading them from a request, and the inspector's sign-ins.
//!
//! A person opens the inspector at `/ui` in a browser, which cannot send the API key as a header.
//! On a server with a key, the page asks for it once; a right key starts a sign-in: a random
//! token in an `HttpOnly`, `SameSite=Strict` cookie, of which the server keeps only the hash, for
//! [`SIGN_IN_LIFETIME`] or until the server stops. The cookie then stands in for the key on `/v1`,
//! under the rules `routes.rs` adds (a request that changes something must also carry
//! `X-Eve-UI`, which no page of another origin can send without the server's consent).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use tokio::time::Instant;

use crate::secret::TokenHash;

/// The name of the inspector's sign-in cookie.
pub(crate) const SIGN_IN_COOKIE: &str = "eve-inspector";

/// How long an inspector sign-in lasts: 12 hours.
pub(crate) const SIGN_IN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The most sign-ins kept at once; the oldest goes when a new one would pass it.
const MOST_SIGN_INS: usize = 1_000;

/// The values of the cookies named `name` that the request carries.
pub(crate) fn values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let cookies = headers.get_all(header::COOKIE).iter().filter_map(|value| value.to_str().ok());
    let pairs = cookies.flat_map(|value| value.split(';')).filter_map(|pair| pair.trim().split_once('='));
    pairs.filter(move |(key, _)| *key == name).map(|(_, value)| value)
}

/// The inspector's live sign-ins, by the hash of their token, with when each ends.
#[derive(Debug, Default)]
pub(crate) struct SignIns(Mutex<HashMap<TokenHash, Instant>>);

impl SignIns {
    /// Starts a sign-in and returns its token, for the cookie.
    pub(crate) fn start(&self) -> String {
        let token = crate::random::nonce();
        let now = Instant::now();
        let mut live = self.lock();
        live.retain(|_, ends| *ends > now);
        if live.len() >= MOST_SIGN_INS
            && let Some(oldest) = live.iter().min_by_key(|(_, ends)| **ends).map(|(hash, _)| hash.clone())
        {
            live.remove(&oldest);
        }
        live.insert(TokenHash::of(&token), now + SIGN_IN_LIFETIME);
        token
    }

    /// Whether the request carries the cookie of a live sign-in.
    pub(crate) fn signed_in(&self, headers: &HeaderMap) -> bool {
        let now = Instant::now();
        let live = self.lock();
        values(headers, SIGN_IN_COOKIE).any(|token| live.get(&TokenHash::of(token)).is_some_and(|ends| *ends > now))
    }

    /// Ends the sign-ins whose cookies the request carries.
    pub(crate) fn end(&self, headers: &HeaderMap) {
        let mut live = self.lock();
        for token in values(headers, SIGN_IN_COOKIE) {
            live.remove(&TokenHash::of(token));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TokenHash, Instant>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
