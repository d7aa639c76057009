//! Hook tokens and the runtime's secret key.
//!
//! A hook token is 256 bits. Stores see only its SHA-256 hash. A generated token must come back
//! unchanged when the body replays (the body may have passed it to a step whose input hash is
//! journaled), yet the journal must not hold it. So the journal holds a fresh 256-bit nonce from
//! the operating system, and the token is `HMAC-SHA256(secret key, run id ‖ op ‖ nonce)`. The
//! secret key lives outside the store (by default in `eve.key` beside the SQLite file), so a copy
//! of the database alone cannot be used to forge a delivery.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::journal::{Op, RunId};

pub(crate) use crate::random::hex;
pub use crate::random::{fill_random, nonce};

/// The runtime's 256-bit secret key, from which generated hook tokens are derived.
#[derive(Clone)]
pub struct SecretKey([u8; 32]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        fill_random(&mut key);
        SecretKey(key)
    }

    /// Reads the key at `path`, creating it (readable by the owner only) if it does not exist. A
    /// new key's file and its folder are synced before it is returned, so a key that signed
    /// tokens or sealed files is never lost to a crash.
    pub fn load_or_create(path: &Path) -> std::io::Result<Self> {
        match fs::read(path) {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice()).map(SecretKey).map_err(|_| {
                std::io::Error::other(format!(
                    "{} is not a 32-byte eve secret key ({} bytes); restore it from backup, or delete it to \
                     generate a new one (hooks created before then will stop accepting deliveries)",
                    path.display(),
                    bytes.len()
                ))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let key = SecretKey::generate();
                write_private(path, &key.0)?;
                sync_parent(path)?;
                Ok(key)
            }
            Err(error) => Err(error),
        }
    }

    /// A key for one `purpose` (HMAC-SHA256 of the purpose), so that each use of the runtime's
    /// key (sealing token files, naming them, ...) has a key of its own.
    pub fn derive(&self, purpose: &str) -> SecretKey {
        let mut mac = self.mac();
        mac.update(purpose.as_bytes());
        SecretKey(mac.finalize().into_bytes().into())
    }

    /// HMAC-SHA256 of `data` under this key, as lowercase hex.
    pub fn mac_hex(&self, data: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(data);
        hex(&mac.finalize().into_bytes())
    }

    /// The key's bytes, for a cipher that takes them.
    pub fn expose_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The token for a generated hook: HMAC-SHA256 over the run id, op number and nonce.
    pub fn derive_token(&self, run: &RunId, op: Op, nonce: &str) -> Token {
        let mut mac = self.mac();
        mac.update(run.as_str().as_bytes());
        mac.update(&op.0.to_be_bytes());
        mac.update(nonce.as_bytes());
        Token(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    fn mac(&self) -> hmac::Hmac<Sha256> {
        hmac::Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts keys of any length")
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// Writes `bytes` to a new file at `path`, readable by its owner only, and syncs it; fails if the
/// file exists. Creates the parent folder if needed.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Syncs the folder holding `path`, so that a file just created there survives a crash.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::File::open(parent)?.sync_all()
}

/// A hook or webhook token. Its `Debug` output is redacted; only [`Token::expose`] shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token the body chose itself.
    pub fn chosen(token: impl Into<String>) -> Self {
        Token(token.into())
    }

    /// The token text, to put in a URL or hand to the system that will call back.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 hash of the token, hex, as stores index it.
    pub fn hash(&self) -> TokenHash {
        TokenHash::of(&self.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

/// The SHA-256 hash of a token as lowercase hex, the only form in which stores keep tokens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenHash(String);

impl TokenHash {
    /// Hashes `token`.
    pub fn of(token: &str) -> Self {
        let digest = Sha256::digest(token.as_bytes());
        TokenHash(hex(&digest))
    }

    /// A hash as stored (64 lowercase hex digits).
    pub fn from_hex(hex: impl Into<String>) -> Self {
        TokenHash(hex.into())
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares two hashes in constant time.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_tokens_are_stable_and_distinct() {
        let key = SecretKey::generate();
        let run = RunId::generate();
        let nonce = nonce();
        let a = key.derive_token(&run, Op(1), &nonce);
        assert_eq!(a, key.derive_token(&run, Op(1), &nonce));
        assert_ne!(a, key.derive_token(&run, Op(2), &nonce));
        assert_ne!(a, SecretKey::generate().derive_token(&run, Op(1), &nonce));
        assert_eq!(a.expose().len(), 43, "256 bits in base64url");
        assert_eq!(format!("{a:?}"), "Token(..)");
    }

    #[test]
    fn hashes_compare_in_constant_time() {
        let hash = TokenHash::of("abc");
        assert!(hash.matches(&TokenHash::of("abc")));
        assert!(!hash.matches(&TokenHash::of("abd")));
        assert_eq!(hash.as_str().len(), 64);
    }
}
