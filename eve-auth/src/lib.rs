//! Sign-in providers for the steps of eve-tools (its feature `oauth2`): [`OAuth2Provider`], the
//! OAuth 2.0 authorization-code flow with PKCE and refresh tokens, and [`FileTokenStore`], tokens
//! sealed in files so a sign-in survives a restart.
//!
//! A step asks for a token with `StepCtx::get_token`; the provider behind the handle is registered
//! with the runtime (`RuntimeBuilder::auth_provider`), so secrets come from the host's
//! configuration, not from code. See `eve_tools::auth` for the flow.

mod file_store;
mod oauth2;

pub use self::file_store::FileTokenStore;
pub use self::oauth2::{ClientAuth, OAuth2Provider, OAuth2ProviderBuilder};
