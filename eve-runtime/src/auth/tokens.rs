//! Where a provider keeps the tokens it obtained: a [`TokenStore`], keyed by [`Principal`].
//!
//! A [`TokenSet`] is what one sign-in yields: an access token, perhaps a refresh token, perhaps an
//! expiry. Like [`AccessToken`], it implements neither `Serialize` nor `Display`, and its `Debug`
//! shows no secret; a durable store reads the secrets with the `expose_*` methods and keeps them
//! encrypted or in a secret manager, never in the journal's database.
//!
//! [`MemoryTokenStore`] is the default: tokens live as long as the process, so a sign-in that
//! completed before a restart has to be done again after it. `FileTokenStore` (eve-auth) keeps
//! them sealed in files, so they outlive restarts.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use super::{AccessToken, Principal};
use crate::time::Timestamp;

/// What one sign-in (or refresh) yields: an access token, and perhaps a refresh token and expiry.
#[derive(Clone)]
pub struct TokenSet {
    access: AccessToken,
    refresh: Option<SecretString>,
    expires_at: Option<Timestamp>,
}

impl TokenSet {
    /// An access token with no refresh token and no known expiry.
    pub fn new(access: AccessToken) -> Self {
        TokenSet { access, refresh: None, expires_at: None }
    }

    /// The same tokens with this refresh token.
    pub fn with_refresh_token(mut self, refresh: impl Into<String>) -> Self {
        self.refresh = Some(SecretString::from(refresh.into()));
        self
    }

    /// The same tokens, with the access token no longer used from `at` on.
    pub fn with_expiry(mut self, at: Timestamp) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// The access token.
    pub fn access_token(&self) -> &AccessToken {
        &self.access
    }

    /// The refresh token's text, for a store to keep; `None` if the server gave none.
    pub fn expose_refresh_token(&self) -> Option<&str> {
        self.refresh.as_ref().map(ExposeSecret::expose_secret)
    }

    /// When to stop using the access token, if the server gave it a lifetime. `OAuth2Provider`
    /// sets it a little before the server's expiry, so a token is not sent just as it lapses.
    pub fn expires_at(&self) -> Option<Timestamp> {
        self.expires_at
    }
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("access", &self.access)
            .field("refresh", &self.refresh.as_ref().map(|_| ".."))
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Why a [`TokenStore`] failed. The message must not contain a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenStoreError(pub String);

/// Keeps the tokens of one provider, by the identity they belong to.
///
/// The default is [`MemoryTokenStore`]; `FileTokenStore` (eve-auth) keeps sign-ins across
/// restarts, or implement this over your secret manager. A store serves one provider: give each
/// provider its own.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// The tokens stored for `principal`, if any.
    async fn load(&self, principal: &Principal) -> Result<Option<TokenSet>, TokenStoreError>;

    /// Stores `tokens` for `principal`, replacing what was there.
    async fn save(&self, principal: &Principal, tokens: TokenSet) -> Result<(), TokenStoreError>;

    /// Forgets the tokens of `principal`; forgetting nothing is not an error.
    async fn remove(&self, principal: &Principal) -> Result<(), TokenStoreError>;
}

/// Tokens in memory, for as long as the process lives.
///
/// ```
/// # use eve_tools::{AccessToken, MemoryTokenStore, Principal, TokenSet, TokenStore};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryTokenStore::new();
/// let ada = Principal::new("ada");
/// store.save(&ada, TokenSet::new(AccessToken::new("s3cret"))).await?;
/// let tokens = store.load(&ada).await?.unwrap();
/// assert_eq!(tokens.access_token().expose_secret(), "s3cret");
/// assert!(!format!("{tokens:?}").contains("s3cret"));
/// assert!(store.load(&Principal::new("grace")).await?.is_none());
/// # Ok(())
/// # }
/// ```
#[derive(Default)]
pub struct MemoryTokenStore {
    tokens: Mutex<HashMap<Principal, TokenSet>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryTokenStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Principal, TokenSet>> {
        self.tokens.lock().expect("the token map's mutex is never poisoned: no code panics while holding it")
    }
}

impl fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTokenStore").field("principals", &self.lock().len()).finish()
    }
}

#[async_trait]
impl TokenStore for MemoryTokenStore {
    async fn load(&self, principal: &Principal) -> Result<Option<TokenSet>, TokenStoreError> {
        Ok(self.lock().get(principal).cloned())
    }

    async fn save(&self, principal: &Principal, tokens: TokenSet) -> Result<(), TokenStoreError> {
        self.lock().insert(principal.clone(), tokens);
        Ok(())
    }

    async fn remove(&self, principal: &Principal) -> Result<(), TokenStoreError> {
        self.lock().remove(principal);
        Ok(())
    }
}
