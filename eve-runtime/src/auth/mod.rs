//! Sign-in inside steps: `StepCtx::get_token` and `StepCtx::require_auth`.
//!
//! A step that needs a user's token asks for it by provider handle:
//!
//! ```
//! use eve_tools::Provider;
//! use eve_tools::StepError;
//! use eve_tools::StepCtx;
//!
//! const GITHUB: Provider = Provider::new("github");
//!
//! // In a tool crate this fn carries `#[step]` (from `eve_tools`), which journals its result.
//! async fn read_repository(ctx: &StepCtx, repo: String) -> Result<String, StepError> {
//!     let token = ctx.get_token(&GITHUB).await?;           // parks the run on sign-in if needed
//!     let status = call_github(&repo, token.expose_secret()).await;
//!     if status == 401 {
//!         return Err(ctx.require_auth(&GITHUB).await);       // the token was refused: sign in again
//!     }
//!     Ok(repo)
//! }
//! # async fn call_github(_repo: &str, _token: &str) -> u16 { 200 }
//! ```
//!
//! The provider behind the handle (an [`AuthProvider`], such as OAuth 2.0) is registered with the
//! runtime, so secrets come from the host's configuration, not from code. Tokens resolve under the
//! identity (principal) that started the run. When there is no token, the step attempt ends
//! without counting as a failure, the run journals [`Entry::AuthRequired`] and parks on its own
//! callback, and `authorization.required` carries the sign-in link. The link (served by
//! `eve_tools::http`) sets a short-lived cookie that ties the sign-in to the browser that
//! opened it, then redirects to the provider; a callback from a browser without that cookie is
//! refused, so nobody can complete a sign-in meant for someone else (login CSRF, RFC 9700 §4.7;
//! see [`Runtime::begin_authorization`](crate::Runtime::begin_authorization) for hosts that serve
//! their own sign-in pages). The callback exchanges the
//! code in memory, stores the token with the provider, and journals only a marker
//! ([`Entry::AuthCompleted`]); then the whole interrupted step is retried, and earlier steps are
//! not rerun. A token rejected right after sign-in fails the step, with no second prompt.
//!
//! An [`AccessToken`] implements neither `Serialize` nor `Display`, so it cannot be returned from
//! a step (whose result is journaled) or printed by accident.
//!
//! `OAuth2Provider` (eve-auth, the feature `oauth2` of eve-tools) is the OAuth 2.0
//! authorization-code provider, with PKCE and refresh tokens; it keeps tokens in a [`TokenStore`]
//! (by default [`MemoryTokenStore`]).
//!
//! [`Entry::AuthRequired`]: crate::journal::Entry::AuthRequired
//! [`Entry::AuthCompleted`]: crate::journal::Entry::AuthCompleted

use std::fmt;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

mod tokens;

pub use self::tokens::{MemoryTokenStore, TokenSet, TokenStore, TokenStoreError};
pub use crate::error::AuthError;

/// The path prefix of sign-in links and callbacks: `{prefix}{provider}/start?state=…` and
/// `{prefix}{provider}/callback`.
pub const AUTH_CALLBACK_PATH: &str = "/.well-known/workflow/v1/auth/";

/// What a provider id or a `state` may hold unencoded in a sign-in link.
const LINK_SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The sign-in link `authorization.required` publishes: served by the HTTP server, it ties the
/// sign-in to the browser that opens it (a cookie) and sends that browser on to the provider.
pub fn sign_in_link(public_url: &str, provider: &str, state: &str) -> String {
    let encode = |text| percent_encoding::utf8_percent_encode(text, LINK_SEGMENT);
    format!("{public_url}{AUTH_CALLBACK_PATH}{}/start?state={}", encode(provider), encode(state))
}

/// A handle naming a provider registered with the runtime. Declare one as a `const`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Provider {
    id: &'static str,
}

impl Provider {
    /// The handle of the provider registered under `id`.
    pub const fn new(id: &'static str) -> Self {
        Provider { id }
    }

    /// The id.
    pub fn id(&self) -> &'static str {
        self.id
    }
}

/// Who a token belongs to: the identity that started the run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Principal(String);

impl Principal {
    /// The identity of callers that did not say who they are.
    pub fn anonymous() -> Self {
        Principal("anonymous".to_owned())
    }

    /// An identity.
    pub fn new(id: impl Into<String>) -> Self {
        Principal(id.into())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An access token. It cannot be serialized, displayed or compared: read it with
/// [`AccessToken::expose_secret`] only where it is used.
pub struct AccessToken(SecretString);

impl AccessToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        AccessToken(SecretString::from(token.into()))
    }

    /// The token text, to put in an `Authorization` header.
    pub fn expose_secret(&self) -> &str {
        self.0.expose_secret()
    }
}

impl Clone for AccessToken {
    fn clone(&self) -> Self {
        AccessToken::new(self.expose_secret().to_owned())
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// A source of user tokens with an interactive sign-in, such as OAuth 2.0.
///
/// Implementations keep the tokens they obtain (in memory, or durably if sign-ins must survive a
/// restart) and never log them.
#[async_trait]
pub trait AuthProvider: Send + Sync + 'static {
    /// The token stored for `principal`, if any.
    async fn token(&self, principal: &Principal) -> Result<Option<AccessToken>, AuthError>;

    /// Forgets the token stored for `principal` (it was rejected).
    async fn forget(&self, principal: &Principal) -> Result<(), AuthError>;

    /// The URL that starts a sign-in; it must carry `state` and `redirect_uri` to the callback.
    fn authorization_url(&self, principal: &Principal, state: &str, redirect_uri: &str) -> Result<String, AuthError>;

    /// Exchanges a callback's one-time `code` for a token and stores it for `principal`.
    async fn exchange(&self, principal: &Principal, code: &str, redirect_uri: &str) -> Result<(), AuthError>;

    /// Exchanges the `code` of the callback that carried `state` (the value
    /// [`authorization_url`](AuthProvider::authorization_url) put in the URL) and stores the token
    /// for `principal`. The runtime calls this one; by default it calls
    /// [`exchange`](AuthProvider::exchange). Providers whose exchange depends on the sign-in it
    /// completes, such as a PKCE code verifier, override it.
    async fn exchange_callback(
        &self,
        principal: &Principal,
        state: &str,
        code: &str,
        redirect_uri: &str,
    ) -> Result<(), AuthError> {
        let _ = state;
        self.exchange(principal, code, redirect_uri).await
    }
}
