//! [`FileTokenStore`]: tokens sealed in files, so a sign-in survives a restart.
//!
//! Each principal's [`TokenSet`] is one file in the store's folder. The file's name is a keyed
//! hash of the principal's id (so a listing reveals no identities), and its contents are the
//! tokens sealed with XChaCha20-Poly1305 under a key derived from the runtime's [`SecretKey`],
//! with the provider's and the principal's ids as associated data: a file copied to another
//! principal's name or another provider's folder, edited, or read with another key does not open. Plain tokens exist only in memory, and the buffers that
//! held them are zeroed when dropped. Writes go to a temporary file that is synced and renamed
//! over the old one, so a crash leaves either the old tokens or the new ones, never a torn file.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chacha20poly1305::aead::{Aead, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use eve_runtime::auth::{AccessToken, Principal};
use eve_runtime::auth::{TokenSet, TokenStore, TokenStoreError};
use eve_runtime::secret::{SecretKey, fill_random, sync_parent, write_private};
use eve_runtime::time::Timestamp;

/// The first bytes of every sealed file: the format and its version. Version 2 seals the
/// provider's id with the principal's.
const MAGIC: &[u8; 8] = b"evetok2\n";
/// The first bytes of a file sealed by version 1, under the principal's id alone.
const MAGIC_V1: &[u8; 8] = b"evetok1\n";
/// The length of an XChaCha20-Poly1305 nonce.
const NONCE_LEN: usize = 24;
/// What the file-name and sealing keys are derived for, so they differ from every other use of the key.
const NAME_PURPOSE: &str = "eve token store: file names v1";
const SEAL_PURPOSE: &str = "eve token store: sealing v1";

/// Tokens sealed in files, one per principal, in a folder of their own.
///
/// Give each provider its own folder and its id (the one it is registered under), and the same
/// [`SecretKey`] the runtime uses (by default `.eve/eve.key`, created on first use). Under another
/// key the stored tokens are not found, and people sign in again; nothing else is lost. A file
/// that was altered, or moved to another principal's name or another provider's folder, fails to
/// load with an error naming it. A file written before the provider was sealed in (format
/// version 1) is treated as absent: the person signs in again and the file is replaced.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use eve_tools::{AccessToken, FileTokenStore, Principal, TokenSet, TokenStore};
/// use eve_tools::secret::SecretKey;
///
/// # let data = tempfile::tempdir()?;
/// # let data = data.path();
/// let key = SecretKey::load_or_create(&data.join("eve.key"))?;
/// let store = FileTokenStore::open(data.join("tokens/github"), "github", &key)?;
/// let ada = Principal::new("ada");
/// store.save(&ada, TokenSet::new(AccessToken::new("s3cret"))).await?;
///
/// // Another process, after a restart, with the same key:
/// let reopened = FileTokenStore::open(data.join("tokens/github"), "github", &key)?;
/// let tokens = reopened.load(&ada).await?.expect("the sign-in survived");
/// assert_eq!(tokens.access_token().expose_secret(), "s3cret");
/// # Ok(())
/// # }
/// ```
///
/// With an [`OAuth2Provider`](super::OAuth2Provider):
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use eve_tools::{FileTokenStore, OAuth2Provider};
/// # use eve_tools::secret::SecretKey;
/// let key = SecretKey::load_or_create(".eve/eve.key".as_ref())?; // the runtime's key
/// let github = OAuth2Provider::builder("github")
///     .client_id("Iv1.0123")
///     .auth_url("https://github.com/login/oauth/authorize")
///     .token_url("https://github.com/login/oauth/access_token")
///     .token_store(FileTokenStore::open(".eve/tokens/github", "github", &key)?)
///     .build()?;
/// # Ok(())
/// # }
/// ```
pub struct FileTokenStore {
    dir: PathBuf,
    /// The id of the provider whose tokens these are, sealed in with each principal's.
    provider: String,
    /// The key file names are derived with.
    names: SecretKey,
    cipher: XChaCha20Poly1305,
}

impl FileTokenStore {
    /// Opens the store of `provider`'s tokens in `dir`, creating the folder (readable by its
    /// owner only) if needed.
    ///
    /// # Errors
    ///
    /// The folder cannot be created.
    pub fn open(dir: impl AsRef<Path>, provider: impl Into<String>, key: &SecretKey) -> io::Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        create_private_dir(&dir)?;
        let cipher = XChaCha20Poly1305::new(key.derive(SEAL_PURPOSE).expose_bytes().into());
        Ok(FileTokenStore { dir, provider: provider.into(), names: key.derive(NAME_PURPOSE), cipher })
    }

    /// The associated data a principal's tokens are sealed with: the provider's id, length
    /// first so that no two (provider, principal) pairs give the same bytes, then the principal's.
    fn associated_data(&self, principal: &Principal) -> Vec<u8> {
        let provider = self.provider.as_bytes();
        [&(provider.len() as u64).to_be_bytes(), provider, principal.as_str().as_bytes()].concat()
    }

    /// The file holding `principal`'s tokens.
    fn path(&self, principal: &Principal) -> PathBuf {
        self.dir.join(format!("{}.tokens", self.names.mac_hex(principal.as_str().as_bytes())))
    }

    fn seal(&self, principal: &Principal, tokens: &TokenSet) -> Result<Vec<u8>, TokenStoreError> {
        let plain = Sealed {
            access: tokens.access_token().expose_secret(),
            refresh: tokens.expose_refresh_token(),
            expires_at: tokens.expires_at().map(Timestamp::as_millis),
        };
        let plain = Zeroizing::new(serde_json::to_vec(&plain).expect("a map of strings and numbers serializes"));
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);
        let aad = self.associated_data(principal);
        let payload = Payload { msg: plain.as_slice(), aad: &aad };
        let sealed = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), payload)
            .map_err(|_| TokenStoreError("cannot seal the tokens (the plaintext is too long)".to_owned()))?;
        Ok([MAGIC.as_slice(), &nonce, &sealed].concat())
    }

    /// Opens a file's tokens; `None` for a file of format version 1, which is read as absent.
    fn open_sealed(
        &self,
        principal: &Principal,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Option<TokenSet>, TokenStoreError> {
        let unreadable = |why: &str| {
            TokenStoreError(format!(
                "the tokens in {} {why}; delete the file and the person signs in again",
                path.display()
            ))
        };
        if bytes.starts_with(MAGIC_V1) {
            tracing::warn!(
                path = %path.display(),
                "a token file of an older format (without its provider sealed in) is ignored; the person signs in again"
            );
            return Ok(None);
        }
        let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(|| unreadable("are not an eve token file"))?;
        if rest.len() < NONCE_LEN {
            return Err(unreadable("are cut short"));
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let aad = self.associated_data(principal);
        let payload = Payload { msg: sealed, aad: &aad };
        let plain = self.cipher.decrypt(XNonce::from_slice(nonce), payload).map_err(|_| {
            unreadable(
                "do not open with this secret key and provider (the key changed, or the file was altered or moved \
                 from another principal or provider)",
            )
        })?;
        let plain = Zeroizing::new(plain);
        let opened: Opened = serde_json::from_slice(&plain).map_err(|_| unreadable("are not in the expected form"))?;
        let mut tokens = TokenSet::new(AccessToken::new(opened.access.as_str()));
        if let Some(refresh) = &opened.refresh {
            tokens = tokens.with_refresh_token(refresh.as_str());
        }
        if let Some(at) = opened.expires_at {
            tokens = tokens.with_expiry(Timestamp::from_millis(at));
        }
        Ok(Some(tokens))
    }
}

impl fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("dir", &self.dir)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

/// The tokens as they are sealed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Sealed<'a> {
    access: &'a str,
    refresh: Option<&'a str>,
    expires_at: Option<u64>,
}

/// The tokens as they are opened; zeroed when dropped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Opened {
    access: String,
    refresh: Option<String>,
    expires_at: Option<u64>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.access.zeroize();
        self.refresh.zeroize();
    }
}

#[async_trait]
impl TokenStore for FileTokenStore {
    async fn load(&self, principal: &Principal) -> Result<Option<TokenSet>, TokenStoreError> {
        let path = self.path(principal);
        let read = path.clone();
        let bytes = match tokio::task::spawn_blocking(move || fs::read(read)).await.map_err(join_error)? {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error("read", &path, &error)),
        };
        self.open_sealed(principal, &path, &bytes)
    }

    async fn save(&self, principal: &Principal, tokens: TokenSet) -> Result<(), TokenStoreError> {
        let sealed = self.seal(principal, &tokens)?;
        let path = self.path(principal);
        let target = path.clone();
        let written = tokio::task::spawn_blocking(move || write_atomically(&target, &sealed));
        written.await.map_err(join_error)?.map_err(|error| io_error("write", &path, &error))
    }

    async fn remove(&self, principal: &Principal) -> Result<(), TokenStoreError> {
        let path = self.path(principal);
        let target = path.clone();
        match tokio::task::spawn_blocking(move || fs::remove_file(target)).await.map_err(join_error)? {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(io_error("remove", &path, &error)),
        }
    }
}

fn io_error(verb: &str, path: &Path, error: &io::Error) -> TokenStoreError {
    TokenStoreError(format!("cannot {verb} the tokens at {}: {error}", path.display()))
}

fn join_error(error: tokio::task::JoinError) -> TokenStoreError {
    TokenStoreError(format!("the token file task did not finish: {error}"))
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Writes `bytes` to a fresh temporary file beside `path` (owner-only), syncs it, renames it over
/// `path` and syncs the folder, so readers see the old file or the new one, even after a crash.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut suffix = [0u8; 8];
    fill_random(&mut suffix);
    let temporary = path.with_extension(format!("{}.tmp", u64::from_le_bytes(suffix)));
    let result =
        write_private(&temporary, bytes).and_then(|()| fs::rename(&temporary, path)).and_then(|()| sync_parent(path));
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path, key: &SecretKey) -> FileTokenStore {
        FileTokenStore::open(dir, "github", key).expect("the folder can be created")
    }

    fn tokens() -> TokenSet {
        TokenSet::new(AccessToken::new("CANARY-access"))
            .with_refresh_token("CANARY-refresh")
            .with_expiry(Timestamp::from_millis(1_700_000_000_000))
    }

    #[tokio::test]
    async fn tokens_round_trip_and_no_file_holds_them_in_the_clear() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate();
        let ada = Principal::new("ada@example.com");
        store(dir.path(), &key).save(&ada, tokens()).await.unwrap();

        let loaded = store(dir.path(), &key).load(&ada).await.unwrap().expect("saved tokens load");
        assert_eq!(loaded.access_token().expose_secret(), "CANARY-access");
        assert_eq!(loaded.expose_refresh_token(), Some("CANARY-refresh"));
        assert_eq!(loaded.expires_at(), Some(Timestamp::from_millis(1_700_000_000_000)));
        assert!(store(dir.path(), &key).load(&Principal::new("grace")).await.unwrap().is_none());

        let files: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "one file, no temporary left behind: {files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        // (The name is hex, so it may contain "ada" by chance; it never contains the principal.)
        assert!(!name.contains("ada@example.com"), "the file name does not reveal the principal: {name}");
        let bytes = fs::read(&files[0]).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in ["CANARY", "ada@example.com"] {
            assert!(!text.contains(secret), "{secret} is sealed");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[tokio::test]
    async fn a_save_replaces_and_a_remove_forgets() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path(), &SecretKey::generate());
        let ada = Principal::new("ada");
        store.save(&ada, tokens()).await.unwrap();
        store.save(&ada, TokenSet::new(AccessToken::new("second"))).await.unwrap();
        let loaded = store.load(&ada).await.unwrap().unwrap();
        assert_eq!(loaded.access_token().expose_secret(), "second");
        assert_eq!(loaded.expose_refresh_token(), None);
        store.remove(&ada).await.unwrap();
        assert!(store.load(&ada).await.unwrap().is_none());
        store.remove(&ada).await.unwrap();
    }

    #[tokio::test]
    async fn another_key_an_altered_file_or_another_principal_does_not_open_the_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate();
        let (ada, grace) = (Principal::new("ada"), Principal::new("grace"));
        let first = store(dir.path(), &key);
        first.save(&ada, tokens()).await.unwrap();
        let path = first.path(&ada);

        let other_key = store(dir.path(), &SecretKey::generate());
        assert!(other_key.load(&ada).await.unwrap().is_none(), "under another key, ada has not signed in");
        fs::copy(&path, other_key.path(&ada)).unwrap();
        let message = other_key.load(&ada).await.expect_err("another key cannot open the tokens").0;
        assert!(message.contains("do not open with this secret key and provider"), "{message}");
        assert!(message.contains("delete the file and the person signs in again"), "{message}");
        assert!(!message.contains("CANARY"));

        fs::copy(&path, first.path(&grace)).unwrap();
        assert!(first.load(&grace).await.is_err(), "ada's tokens do not open as grace's");

        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(first.load(&ada).await.unwrap_err().0.contains("altered"));

        fs::write(&path, b"evetok2\nshort").unwrap();
        assert!(first.load(&ada).await.unwrap_err().0.contains("cut short"));
        fs::write(&path, b"{\"access\":\"plain\"}").unwrap();
        assert!(first.load(&ada).await.unwrap_err().0.contains("not an eve token file"));
        fs::write(&path, b"evetok1\nsealed by an older version").unwrap();
        assert!(first.load(&ada).await.unwrap().is_none(), "an old file is read as absent: the person signs in again");
        first.save(&ada, tokens()).await.unwrap();
        assert!(first.load(&ada).await.unwrap().is_some(), "and is replaced by the next sign-in");
    }
}
