//! OAuth 2.0 sign-in: [`OAuth2Provider`], the authorization-code flow with PKCE (RFC 6749, RFC 7636).
//!
//! # The flow
//!
//! 1. A step calls `get_token`. With no usable token for the run's principal, the run parks and
//!    `authorization.required` carries [`authorization_url`](AuthProvider::authorization_url): the
//!    authorize endpoint with `client_id`, the runtime's callback as `redirect_uri`, `scope`, the
//!    runtime's `state`, and a PKCE `S256` `code_challenge`.
//! 2. The person signs in and the server redirects to the callback with `code` and `state`. The
//!    runtime finds the waiting step by the hash of `state` and calls
//!    [`exchange_callback`](AuthProvider::exchange_callback): the code goes to the token endpoint
//!    with its `code_verifier`, and the tokens are saved in the [`TokenStore`] under the principal.
//! 3. The step is retried and `get_token` finds the token. An access token that has expired is
//!    refreshed first if the server gave a refresh token; a refused refresh forgets the tokens, so
//!    the person signs in again.
//!
//! # PKCE without per-sign-in state
//!
//! The runtime may emit a sign-in URL again (after a restart, the same `state` gives the same URL),
//! and the callback may reach another process than the one that built the URL. So the provider
//! keeps nothing per sign-in: the code verifier is `base64url(HMAC-SHA256(key, label ‖ state))`.
//! `state` is the runtime's 256-bit callback secret, fresh for every sign-in, so the verifier is
//! specific to one transaction, as RFC 9700 asks; without `key` it cannot be computed from the
//! `state` that travels in URLs. `key` comes from the configuration (by default the client secret),
//! so every process with the same configuration derives the same verifier.
//!
//! # Secrets
//!
//! The client secret, codes, verifiers and tokens appear in no `Debug` output, error message or log
//! line. An error from the token endpoint is reduced to its standard OAuth error code: servers'
//! descriptions and unreadable bodies are dropped, since they may echo what was sent.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::oauth2::basic::{BasicClient, BasicErrorResponse, BasicErrorResponseType, BasicTokenResponse};
use ::oauth2::url::{Host, Url};
use ::oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    HttpClientError, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    TokenResponse, TokenUrl,
};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use sha2::Sha256;

use eve_runtime::auth::{AccessToken, AuthError, AuthProvider, Principal};
use eve_runtime::auth::{MemoryTokenStore, TokenSet, TokenStore, TokenStoreError};
use eve_runtime::time::{Clock, SystemClock};

/// A client with an authorization and a token endpoint.
type Client = BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// What a request to the token endpoint can fail with.
type TokenError = RequestTokenError<HttpClientError<reqwest::Error>, BasicErrorResponse>;

/// Access tokens are treated as expired this long before the server says (at most half their
/// lifetime), so a token is not sent just as it lapses.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Separates PKCE verifiers from anything else computed with the same key.
const VERIFIER_LABEL: &[u8] = b"eve-rs/oauth2/pkce-code-verifier/v1\0";

/// How the client authenticates to the token endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// HTTP Basic authentication with the client id and secret (`client_secret_basic`).
    #[default]
    Basic,
    /// The client id and secret in the form body (`client_secret_post`).
    RequestBody,
}

/// An [`AuthProvider`] for the OAuth 2.0 authorization-code flow, with PKCE (`S256`) and
/// refresh tokens.
///
/// The sign-in URL carries the runtime's `state` and callback, the scopes and a PKCE challenge.
/// The callback's code is exchanged with its verifier and the tokens are kept in a [`TokenStore`]
/// under the run's principal (by default in memory). An expired access token is refreshed if the
/// server gave a refresh token; a refused refresh asks for a new sign-in.
///
/// The PKCE verifier is `HMAC-SHA256(key, state)`, not a random value kept in memory: a sign-in URL
/// published again after a restart is the same URL, and a callback that reaches another process
/// with the same configuration still completes. The key is the client secret, or
/// [`pkce_key`](OAuth2ProviderBuilder::pkce_key) for a public client.
///
/// ```
/// use eve_tools::OAuth2Provider;
/// use eve_tools::Runtime;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let github = OAuth2Provider::builder("github")
///     .client_id("Iv1.0123456789abcdef")
///     .client_secret("from the host's secret manager, never from code")
///     .auth_url("https://github.com/login/oauth/authorize")
///     .token_url("https://github.com/login/oauth/access_token")
///     .scopes(["repo"])
///     .build()?;
/// assert!(!format!("{github:?}").contains("secret manager"));
/// let runtime = Runtime::builder()
///     .store(eve_tools::store::MemoryStore::new())
///     .auth_provider("github", github)
///     .public_url("https://agent.example.com")
///     .build()?;
/// # drop(runtime);
/// # Ok(())
/// # }
/// ```
pub struct OAuth2Provider {
    name: String,
    client: Client,
    scopes: Vec<Scope>,
    pkce: Option<PkceKey>,
    store: Arc<dyn TokenStore>,
    clock: Arc<dyn Clock>,
    http: reqwest::Client,
    /// Held while refreshing, so concurrent steps do not spend one refresh token twice.
    refreshing: tokio::sync::Mutex<()>,
}

impl OAuth2Provider {
    /// A builder for the provider that errors call `name`; register it under the same id.
    pub fn builder(name: impl Into<String>) -> OAuth2ProviderBuilder {
        OAuth2ProviderBuilder {
            name: name.into(),
            client_id: None,
            client_secret: None,
            auth_url: None,
            token_url: None,
            scopes: Vec::new(),
            pkce: true,
            pkce_key: None,
            client_auth: ClientAuth::default(),
            store: None,
            clock: None,
            timeout: Duration::from_secs(30),
        }
    }

    /// Exchanges `code`, with the PKCE verifier when there is one, and saves the tokens.
    async fn redeem(
        &self,
        principal: &Principal,
        code: &str,
        redirect_uri: &str,
        verifier: Option<PkceCodeVerifier>,
    ) -> Result<(), AuthError> {
        let redirect = self.redirect_url(redirect_uri)?;
        let mut request =
            self.client.exchange_code(AuthorizationCode::new(code.to_owned())).set_redirect_uri(Cow::Owned(redirect));
        if let Some(verifier) = verifier {
            request = request.set_pkce_verifier(verifier);
        }
        let response = request.request_async(&self.http).await.map_err(|error| self.token_error(error))?;
        self.save(principal, self.token_set(&response, None)).await?;
        tracing::debug!(provider = %self.name, principal = principal.as_str(), "stored the token of a sign-in");
        Ok(())
    }

    /// Refreshes the expired tokens of `principal`; `None` when a new sign-in is needed.
    async fn refresh(&self, principal: &Principal) -> Result<Option<AccessToken>, AuthError> {
        let _refreshing = self.refreshing.lock().await;
        // Another step may have refreshed the tokens while this one waited for the lock.
        let Some(tokens) = self.load(principal).await? else { return Ok(None) };
        if self.is_fresh(&tokens) {
            return Ok(Some(tokens.access_token().clone()));
        }
        let Some(refresh) = tokens.expose_refresh_token().map(|token| RefreshToken::new(token.to_owned())) else {
            tracing::debug!(provider = %self.name, principal = principal.as_str(), "the token expired");
            self.remove(principal).await?;
            return Ok(None);
        };
        match self.client.exchange_refresh_token(&refresh).request_async(&self.http).await {
            Ok(response) => {
                let tokens = self.token_set(&response, Some(refresh.secret()));
                let access = tokens.access_token().clone();
                self.save(principal, tokens).await?;
                tracing::debug!(provider = %self.name, principal = principal.as_str(), "refreshed the token");
                Ok(Some(access))
            }
            Err(RequestTokenError::ServerResponse(response)) => {
                let error = error_code(response.error());
                tracing::debug!(provider = %self.name, principal = principal.as_str(), error, "refresh refused");
                self.remove(principal).await?;
                Ok(None)
            }
            Err(error) => Err(self.token_error(error)),
        }
    }

    /// The tokens in a token endpoint's response; `refresh` is kept if the server sent no new one.
    fn token_set(&self, response: &BasicTokenResponse, refresh: Option<&str>) -> TokenSet {
        let mut tokens = TokenSet::new(AccessToken::new(response.access_token().secret().as_str()));
        if let Some(refresh) = response.refresh_token().map(|token| token.secret().as_str()).or(refresh) {
            tokens = tokens.with_refresh_token(refresh);
        }
        if let Some(lifetime) = response.expires_in() {
            let usable = lifetime.saturating_sub(EXPIRY_MARGIN.min(lifetime / 2));
            tokens = tokens.with_expiry(self.clock.now().saturating_add(usable));
        }
        tokens
    }

    fn is_fresh(&self, tokens: &TokenSet) -> bool {
        tokens.expires_at().is_none_or(|expires_at| self.clock.now() < expires_at)
    }

    fn redirect_url(&self, redirect_uri: &str) -> Result<RedirectUrl, AuthError> {
        RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|error| self.config(format!("the callback URL `{redirect_uri}` is not a URL: {error}")))
    }

    async fn load(&self, principal: &Principal) -> Result<Option<TokenSet>, AuthError> {
        self.store.load(principal).await.map_err(|error| self.store_error(error))
    }

    async fn save(&self, principal: &Principal, tokens: TokenSet) -> Result<(), AuthError> {
        self.store.save(principal, tokens).await.map_err(|error| self.store_error(error))
    }

    async fn remove(&self, principal: &Principal) -> Result<(), AuthError> {
        self.store.remove(principal).await.map_err(|error| self.store_error(error))
    }

    /// The error for a failed request to the token endpoint, without anything the server said
    /// beyond its standard error code.
    fn token_error(&self, error: TokenError) -> AuthError {
        let provider = self.name.clone();
        match error {
            RequestTokenError::ServerResponse(response) => {
                let reason = format!("the token endpoint answered `{}`", error_code(response.error()));
                AuthError::Refused { provider, reason }
            }
            RequestTokenError::Request(error) => AuthError::Unreachable { provider, reason: request_failure(&error) },
            RequestTokenError::Parse(..) | RequestTokenError::Other(_) => {
                let reason = "the token endpoint's answer is not a token response".to_owned();
                AuthError::Refused { provider, reason }
            }
        }
    }

    fn store_error(&self, error: TokenStoreError) -> AuthError {
        AuthError::Unreachable { provider: self.name.clone(), reason: format!("the token store failed: {error}") }
    }

    fn config(&self, reason: String) -> AuthError {
        AuthError::Config { provider: self.name.clone(), reason }
    }
}

#[async_trait]
impl AuthProvider for OAuth2Provider {
    async fn token(&self, principal: &Principal) -> Result<Option<AccessToken>, AuthError> {
        match self.load(principal).await? {
            None => Ok(None),
            Some(tokens) if self.is_fresh(&tokens) => Ok(Some(tokens.access_token().clone())),
            Some(_) => self.refresh(principal).await,
        }
    }

    async fn forget(&self, principal: &Principal) -> Result<(), AuthError> {
        tracing::debug!(provider = %self.name, principal = principal.as_str(), "forgetting a rejected token");
        self.remove(principal).await
    }

    fn authorization_url(&self, _principal: &Principal, state: &str, redirect_uri: &str) -> Result<String, AuthError> {
        let mut request = self
            .client
            .authorize_url(|| CsrfToken::new(state.to_owned()))
            .add_scopes(self.scopes.iter().cloned())
            .set_redirect_uri(Cow::Owned(self.redirect_url(redirect_uri)?));
        if let Some(key) = &self.pkce {
            request = request.set_pkce_challenge(PkceCodeChallenge::from_code_verifier_sha256(&key.verifier(state)));
        }
        Ok(request.url().0.into())
    }

    async fn exchange(&self, principal: &Principal, code: &str, redirect_uri: &str) -> Result<(), AuthError> {
        if self.pkce.is_some() {
            let reason = "with PKCE, a code is exchanged with the state of its callback (`exchange_callback`)";
            return Err(self.config(reason.to_owned()));
        }
        self.redeem(principal, code, redirect_uri, None).await
    }

    async fn exchange_callback(
        &self,
        principal: &Principal,
        state: &str,
        code: &str,
        redirect_uri: &str,
    ) -> Result<(), AuthError> {
        let verifier = self.pkce.as_ref().map(|key| key.verifier(state));
        self.redeem(principal, code, redirect_uri, verifier).await
    }
}

impl fmt::Debug for OAuth2Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Provider")
            .field("name", &self.name)
            .field("client_id", &self.client.client_id().as_str())
            .field("auth_url", &self.client.auth_uri().as_str())
            .field("token_url", &self.client.token_uri().as_str())
            .field("scopes", &self.scopes.iter().map(|scope| scope.as_str()).collect::<Vec<_>>())
            .field("pkce", &self.pkce.is_some())
            .finish_non_exhaustive()
    }
}

/// The standard error code of a refusal; a non-standard one is not repeated.
fn error_code(error: &BasicErrorResponseType) -> &'static str {
    match error {
        BasicErrorResponseType::InvalidClient => "invalid_client",
        BasicErrorResponseType::InvalidGrant => "invalid_grant",
        BasicErrorResponseType::InvalidRequest => "invalid_request",
        BasicErrorResponseType::InvalidScope => "invalid_scope",
        BasicErrorResponseType::UnauthorizedClient => "unauthorized_client",
        BasicErrorResponseType::UnsupportedGrantType => "unsupported_grant_type",
        BasicErrorResponseType::Extension(_) => "a non-standard error",
    }
}

/// Why a request did not get an answer, without the request itself.
fn request_failure(error: &HttpClientError<reqwest::Error>) -> String {
    let why = match error {
        HttpClientError::Reqwest(error) if error.is_timeout() => "the token endpoint did not answer in time",
        HttpClientError::Reqwest(error) if error.is_connect() => "cannot connect to the token endpoint",
        _ => "the request to the token endpoint failed",
    };
    why.to_owned()
}

/// The key PKCE verifiers are derived from.
struct PkceKey(SecretSlice<u8>);

impl PkceKey {
    /// The code verifier of the sign-in whose callback carries `state`: 43 base64url characters.
    fn verifier(&self, state: &str) -> PkceCodeVerifier {
        let mut mac =
            hmac::Hmac::<Sha256>::new_from_slice(self.0.expose_secret()).expect("HMAC accepts keys of any length");
        mac.update(VERIFIER_LABEL);
        mac.update(state.as_bytes());
        PkceCodeVerifier::new(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }
}

/// Configures an [`OAuth2Provider`]; see [`OAuth2Provider::builder`].
pub struct OAuth2ProviderBuilder {
    name: String,
    client_id: Option<String>,
    client_secret: Option<SecretString>,
    auth_url: Option<String>,
    token_url: Option<String>,
    scopes: Vec<String>,
    pkce: bool,
    pkce_key: Option<SecretString>,
    client_auth: ClientAuth,
    store: Option<Arc<dyn TokenStore>>,
    clock: Option<Arc<dyn Clock>>,
    timeout: Duration,
}

impl OAuth2ProviderBuilder {
    /// The client id the server issued (required).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The client secret the server issued; a public client has none.
    pub fn client_secret(mut self, secret: impl Into<SecretString>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// The authorization endpoint people sign in at (required; `https`, or `http` on loopback).
    pub fn auth_url(mut self, url: impl Into<String>) -> Self {
        self.auth_url = Some(url.into());
        self
    }

    /// The token endpoint codes are exchanged at (required; `https`, or `http` on loopback).
    pub fn token_url(mut self, url: impl Into<String>) -> Self {
        self.token_url = Some(url.into());
        self
    }

    /// The scopes to ask for.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether to use PKCE (default: yes). Turn it off only for a server that refuses it.
    pub fn pkce(mut self, enabled: bool) -> Self {
        self.pkce = enabled;
        self
    }

    /// The secret PKCE verifiers are derived from (default: the client secret). A public client
    /// sets one so that sign-in URLs stay valid across restarts and processes; without either, a
    /// random key lives as long as the provider.
    pub fn pkce_key(mut self, key: impl Into<SecretString>) -> Self {
        self.pkce_key = Some(key.into());
        self
    }

    /// How the client authenticates to the token endpoint (default HTTP Basic).
    pub fn client_auth(mut self, auth: ClientAuth) -> Self {
        self.client_auth = auth;
        self
    }

    /// Where tokens are kept (default: a [`MemoryTokenStore`], lost on restart; a
    /// [`FileTokenStore`](super::FileTokenStore) keeps them sealed across restarts).
    pub fn token_store(mut self, store: impl TokenStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The clock token expiry is read from (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// How long a request to the token endpoint may take (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Checks the configuration and builds the provider.
    pub fn build(self) -> Result<OAuth2Provider, AuthError> {
        let config = |reason: String| AuthError::Config { provider: self.name.clone(), reason };
        let client_id = self.client_id.clone().filter(|id| !id.is_empty());
        let client_id = client_id.ok_or_else(|| config("no `client_id` was given".to_owned()))?;
        let auth_url = AuthUrl::from_url(endpoint(&self.auth_url, "auth_url").map_err(config)?);
        let token_url = TokenUrl::from_url(endpoint(&self.token_url, "token_url").map_err(config)?);
        let mut client = BasicClient::new(ClientId::new(client_id)).set_auth_uri(auth_url).set_token_uri(token_url);
        if let Some(secret) = &self.client_secret {
            client = client.set_client_secret(ClientSecret::new(secret.expose_secret().to_owned()));
        }
        let client = client.set_auth_type(match self.client_auth {
            ClientAuth::Basic => AuthType::BasicAuth,
            ClientAuth::RequestBody => AuthType::RequestBody,
        });
        let http = reqwest::Client::builder()
            // Following redirects from the token endpoint could send the code elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.timeout)
            .build()
            .map_err(|_| config("cannot build its HTTPS client".to_owned()))?;
        Ok(OAuth2Provider {
            pkce: self.pkce.then(|| self.derive_pkce_key()),
            scopes: self.scopes.into_iter().map(Scope::new).collect(),
            store: self.store.unwrap_or_else(|| Arc::new(MemoryTokenStore::new())),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            refreshing: tokio::sync::Mutex::new(()),
            name: self.name,
            client,
            http,
        })
    }

    fn derive_pkce_key(&self) -> PkceKey {
        let configured = self.pkce_key.as_ref().or(self.client_secret.as_ref());
        let key = match configured {
            Some(secret) => secret.expose_secret().as_bytes().to_vec(),
            None => {
                let mut key = vec![0u8; 32];
                eve_runtime::secret::fill_random(&mut key);
                key
            }
        };
        PkceKey(SecretSlice::from(key))
    }
}

impl fmt::Debug for OAuth2ProviderBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2ProviderBuilder")
            .field("name", &self.name)
            .field("client_id", &self.client_id)
            .field("auth_url", &self.auth_url)
            .field("token_url", &self.token_url)
            .field("scopes", &self.scopes)
            .field("pkce", &self.pkce)
            .finish_non_exhaustive()
    }
}

/// The endpoint `field` names, which must be given and be `https` (or `http` on a loopback host,
/// for tests and local servers), so that codes and secrets never travel in the clear.
fn endpoint(url: &Option<String>, field: &str) -> Result<Url, String> {
    let url = url.as_deref().ok_or_else(|| format!("no `{field}` was given"))?;
    let parsed = Url::parse(url).map_err(|error| format!("`{field}` is not a URL: {error}"))?;
    let loopback = match parsed.host() {
        Some(Host::Domain(domain)) => domain == "localhost",
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if loopback => Ok(parsed),
        scheme => Err(format!("`{field}` uses `{scheme}`; it must be `https` (or `http` on a loopback address)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> OAuth2ProviderBuilder {
        OAuth2Provider::builder("example")
            .client_id("client")
            .client_secret("client-secret-CANARY")
            .auth_url("https://auth.example.com/authorize")
            .token_url("https://auth.example.com/token")
            .scopes(["read", "write"])
    }

    fn query(url: &str) -> Vec<(String, String)> {
        let url = Url::parse(url).unwrap();
        url.query_pairs().map(|(name, value)| (name.into_owned(), value.into_owned())).collect()
    }

    fn param(url: &str, name: &str) -> Option<String> {
        query(url).into_iter().find(|(key, _)| key == name).map(|(_, value)| value)
    }

    #[test]
    fn the_authorization_url_carries_state_redirect_scopes_and_an_s256_challenge() {
        let provider = provider().build().unwrap();
        let redirect = "https://agent.example.com/.well-known/workflow/v1/auth/example/callback";
        let url = provider.authorization_url(&Principal::new("ada"), "the-state", redirect).unwrap();
        assert!(url.starts_with("https://auth.example.com/authorize?"));
        assert_eq!(param(&url, "response_type").as_deref(), Some("code"));
        assert_eq!(param(&url, "client_id").as_deref(), Some("client"));
        assert_eq!(param(&url, "state").as_deref(), Some("the-state"));
        assert_eq!(param(&url, "redirect_uri").as_deref(), Some(redirect));
        assert_eq!(param(&url, "scope").as_deref(), Some("read write"));
        assert_eq!(param(&url, "code_challenge_method").as_deref(), Some("S256"));
        let challenge = param(&url, "code_challenge").unwrap();
        let verifier = provider.pkce.as_ref().unwrap().verifier("the-state");
        assert_eq!(challenge, *PkceCodeChallenge::from_code_verifier_sha256(&verifier).as_str());
        assert!(!url.contains("CANARY"), "the client secret is not in the URL");
    }

    #[test]
    fn a_reemitted_url_is_the_same_and_survives_a_new_provider_with_the_same_configuration() {
        let principal = Principal::new("ada");
        let first = provider().build().unwrap().authorization_url(&principal, "s1", "https://a.example/cb").unwrap();
        let again = provider().build().unwrap().authorization_url(&principal, "s1", "https://a.example/cb").unwrap();
        assert_eq!(first, again);
        let other = provider().build().unwrap().authorization_url(&principal, "s2", "https://a.example/cb").unwrap();
        assert_ne!(param(&first, "code_challenge"), param(&other, "code_challenge"), "one verifier per sign-in");
        let rekeyed = provider().pkce_key("another key").build().unwrap();
        let rekeyed = rekeyed.authorization_url(&principal, "s1", "https://a.example/cb").unwrap();
        assert_ne!(param(&first, "code_challenge"), param(&rekeyed, "code_challenge"), "the key matters");
    }

    #[test]
    fn verifiers_are_valid_rfc7636_verifiers() {
        let verifier = provider().build().unwrap().pkce.unwrap().verifier("state");
        let text = verifier.secret();
        assert_eq!(text.len(), 43);
        assert!(text.chars().all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c)));
    }

    #[test]
    fn without_pkce_there_is_no_challenge() {
        let provider = provider().pkce(false).build().unwrap();
        let url = provider.authorization_url(&Principal::anonymous(), "s", "https://a.example/cb").unwrap();
        assert_eq!(param(&url, "code_challenge"), None);
    }

    #[test]
    fn debug_output_shows_the_configuration_but_no_secret() {
        let builder = provider();
        assert!(!format!("{builder:?}").contains("CANARY"));
        let provider = builder.build().unwrap();
        let shown = format!("{provider:?}");
        assert!(shown.contains("auth.example.com/token") && shown.contains("client"));
        assert!(!shown.contains("CANARY"), "{shown}");
    }

    #[test]
    fn the_configuration_is_checked() {
        let error = |builder: OAuth2ProviderBuilder| builder.build().unwrap_err().to_string();
        assert_eq!(
            error(provider().token_url("http://auth.example.com/token")),
            "example is misconfigured: `token_url` uses `http`; it must be `https` (or `http` on a loopback address)"
        );
        assert!(error(provider().auth_url("not a url")).contains("`auth_url` is not a URL"));
        assert_eq!(error(provider().client_id("")), "example is misconfigured: no `client_id` was given");
        assert!(error(OAuth2Provider::builder("x").client_id("c")).contains("no `auth_url` was given"));
        for loopback in ["http://127.0.0.1:8080/token", "http://localhost/token", "http://[::1]:1/token"] {
            assert!(provider().token_url(loopback).build().is_ok(), "{loopback}");
        }
    }

    #[test]
    fn token_endpoint_errors_keep_only_the_standard_code() {
        let provider = provider().build().unwrap();
        let refusal = BasicErrorResponse::new(
            BasicErrorResponseType::InvalidGrant,
            Some("code code-CANARY is unknown".to_owned()),
            None,
        );
        let error = provider.token_error(RequestTokenError::ServerResponse(refusal));
        assert_eq!(error.to_string(), "example refused the sign-in: the token endpoint answered `invalid_grant`");
        let odd = BasicErrorResponse::new(BasicErrorResponseType::Extension("CANARY".to_owned()), None, None);
        let error = provider.token_error(RequestTokenError::ServerResponse(odd));
        assert!(!error.to_string().contains("CANARY"));
        let other = provider.token_error(RequestTokenError::Other("body: CANARY".to_owned()));
        assert!(!format!("{other} {other:?}").contains("CANARY"));
    }

    #[tokio::test]
    async fn tokens_expire_a_margin_early_and_are_kept_per_principal() {
        let clock = eve_runtime::time::ManualClock::new(eve_runtime::time::Timestamp::from_millis(1_000_000));
        let provider = provider().clock(clock.clone()).build().unwrap();
        let response: BasicTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": "access-CANARY", "token_type": "bearer", "expires_in": 3600,
        }))
        .unwrap();
        let ada = Principal::new("ada");
        provider.save(&ada, provider.token_set(&response, Some("refresh-CANARY"))).await.unwrap();
        let token = provider.token(&ada).await.unwrap().unwrap();
        assert_eq!(token.expose_secret(), "access-CANARY");
        assert!(provider.token(&Principal::new("grace")).await.unwrap().is_none());
        let stored = provider.load(&ada).await.unwrap().unwrap();
        assert_eq!(stored.expose_refresh_token(), Some("refresh-CANARY"), "a refresh token is kept");
        assert!(!format!("{stored:?}").contains("CANARY"));
        clock.advance(Duration::from_secs(3600 - 30) - Duration::from_millis(1));
        assert!(provider.is_fresh(&stored));
        clock.advance(Duration::from_millis(1));
        assert!(!provider.is_fresh(&stored), "30 s before the server's expiry");
        provider.forget(&ada).await.unwrap();
        assert!(provider.token(&ada).await.unwrap().is_none());
    }
}
