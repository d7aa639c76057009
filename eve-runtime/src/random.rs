//! Randomness from the operating system, and the encodings of random bytes the runtime uses.
//!
//! At the bottom of the crate: run ids, nonces, tokens and recorded random values all come from
//! here.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Fills `bytes` from the operating system's random source.
///
/// # Panics
///
/// Panics if the operating system has no usable random source, which no supported platform lacks.
pub fn fill_random(bytes: &mut [u8]) {
    getrandom::fill(bytes).expect("the operating system random source is available on every supported platform");
}

/// A fresh 256-bit nonce, base64url-encoded.
pub fn nonce() -> String {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
