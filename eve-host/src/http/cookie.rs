//! Cookies: reading them from a request, and the inspector's sign-ins.
//!
//! A person opens the inspector at `/ui` in a browser, which cannot send the API key as a header.
//! On a server with a key, the page asks for it once; a right key starts a sign-in: an `HttpOnly`,
//! `SameSite=Strict` cookie `{expires}.{nonce}.{mac}`, where the MAC (HMAC-SHA256 under a key
//! derived from the runtime's secret key) covers the expiry, the nonce and the hash of the API
//! key. Nothing is kept on the server, so the cookie works on every worker that shares the
//! runtime's secret key (as workers on one store must, for webhook tokens) and across restarts,
//! for [`SIGN_IN_LIFETIME`]; changing the API key ends every sign-in. Signing out clears the
//! cookie and refuses it on this server from then on.
//!
//! The cookie then stands in for the key on `/v1`, under the rules `routes.rs` adds (a request
//! that changes something must also carry `X-Eve-UI`, which no page of another origin can send
//! without the server's consent).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};

use eve_runtime::secret::{SecretKey, TokenHash};
use eve_runtime::time::Timestamp;

/// The name of the inspector's sign-in cookie.
pub(crate) const SIGN_IN_COOKIE: &str = "eve-inspector";

/// How long an inspector sign-in lasts: 12 hours.
pub(crate) const SIGN_IN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// What the key of the sign-ins' MACs is for, so that no other MAC of the runtime's key is a
/// sign-in: the server signs with `Runtime::derive_key(PURPOSE)`.
pub(crate) const PURPOSE: &str = "eve inspector sign-in";

/// The most signed-out cookies remembered at once; expired ones are forgotten first.
const MOST_SIGNED_OUT: usize = 10_000;

/// A `Set-Cookie` value for `name=value` on `path`: `HttpOnly`, `SameSite` as given (`Lax` or
/// `Strict`), for `max_age` seconds (0 clears it), and `Secure` when the runtime's `public_url`
/// is HTTPS.
pub(crate) fn set(name: &str, value: &str, path: &str, max_age: u64, same_site: &str, public_url: &str) -> HeaderValue {
    let secure = if public_url.starts_with("https://") { "; Secure" } else { "" };
    let cookie = format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}");
    HeaderValue::try_from(cookie).expect("a cookie of hex, base64url, digits, a percent-encoded path and attributes")
}

/// The values of the cookies named `name` that the request carries.
pub(crate) fn values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let cookies = headers.get_all(header::COOKIE).iter().filter_map(|value| value.to_str().ok());
    let pairs = cookies.flat_map(|value| value.split(';')).filter_map(|pair| pair.trim().split_once('='));
    pairs.filter(move |(key, _)| *key == name).map(|(_, value)| value)
}

/// The inspector's sign-ins: what a cookie must be, and the cookies signed out on this server
/// (by MAC, until they expire).
#[derive(Debug, Default)]
pub(crate) struct SignIns {
    signed_out: Mutex<HashMap<String, Timestamp>>,
}

impl SignIns {
    /// A new sign-in's cookie value, valid until `now` plus [`SIGN_IN_LIFETIME`].
    pub(crate) fn start(key: &SecretKey, api_key: &TokenHash, now: Timestamp) -> String {
        let payload = format!("{}.{}", now.saturating_add(SIGN_IN_LIFETIME).as_millis(), eve_runtime::random::nonce());
        format!("{payload}.{}", mac(key, api_key, &payload))
    }

    /// Whether the request carries the cookie of a sign-in that is valid at `now`.
    pub(crate) fn signed_in(&self, headers: &HeaderMap, key: &SecretKey, api_key: &TokenHash, now: Timestamp) -> bool {
        let signed_out = self.lock();
        values(headers, SIGN_IN_COOKIE).any(|value| {
            verify(value, key, api_key).is_some_and(|(expires, mac)| expires > now && !signed_out.contains_key(mac))
        })
    }

    /// Refuses, on this server, the sign-ins whose cookies the request carries.
    pub(crate) fn end(&self, headers: &HeaderMap, key: &SecretKey, api_key: &TokenHash, now: Timestamp) {
        let mut signed_out = self.lock();
        signed_out.retain(|_, expires| *expires > now);
        for value in values(headers, SIGN_IN_COOKIE) {
            if let Some((expires, mac)) = verify(value, key, api_key)
                && signed_out.len() < MOST_SIGNED_OUT
            {
                signed_out.insert(mac.to_owned(), expires);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Timestamp>> {
        self.signed_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The MAC of a sign-in's `payload` (`{expires}.{nonce}`) under the sign-ins' `key`, bound to the
/// API key's hash.
fn mac(key: &SecretKey, api_key: &TokenHash, payload: &str) -> String {
    key.mac_hex(format!("{}\n{payload}", api_key.as_str()).as_bytes())
}

/// The expiry and MAC of a cookie value whose MAC is right; `None` for anything else.
fn verify<'a>(value: &'a str, key: &SecretKey, api_key: &TokenHash) -> Option<(Timestamp, &'a str)> {
    let (payload, presented) = value.rsplit_once('.')?;
    let (expires, _nonce) = payload.split_once('.')?;
    let expires = Timestamp::from_millis(expires.parse().ok()?);
    let expected = TokenHash::from_hex(mac(key, api_key, payload));
    expected.matches(&TokenHash::from_hex(presented)).then_some((expires, presented))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn carrying(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::try_from(format!("other=1; {SIGN_IN_COOKIE}={value}")).unwrap());
        headers
    }

    #[test]
    fn a_sign_in_holds_until_it_expires_the_key_changes_or_it_is_signed_out() {
        let (key, api_key, now) = (SecretKey::generate(), TokenHash::of("sesame"), Timestamp::from_millis(1_000));
        let sign_ins = SignIns::default();
        let cookie = SignIns::start(&key, &api_key, now);
        let headers = carrying(&cookie);
        assert!(sign_ins.signed_in(&headers, &key, &api_key, now));
        assert!(SignIns::default().signed_in(&headers, &key, &api_key, now), "any server with the key accepts it");
        let later = now.saturating_add(SIGN_IN_LIFETIME);
        assert!(!sign_ins.signed_in(&headers, &key, &api_key, later), "expired");
        assert!(!sign_ins.signed_in(&headers, &key, &TokenHash::of("new key"), now), "the API key changed");
        assert!(!sign_ins.signed_in(&headers, &SecretKey::generate(), &api_key, now), "another runtime's key");
        let (payload, _) = cookie.rsplit_once('.').unwrap();
        let forged = format!("{}9.{}", payload, "0".repeat(64));
        assert!(!sign_ins.signed_in(&carrying(&forged), &key, &api_key, now), "a forged MAC");
        assert!(!sign_ins.signed_in(&carrying("garbage"), &key, &api_key, now));
        sign_ins.end(&headers, &key, &api_key, now);
        assert!(!sign_ins.signed_in(&headers, &key, &api_key, now), "signed out here");
    }
}
