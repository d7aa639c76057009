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
    let mut text = String::new();
    push_nonce(&mut text);
    text
}

/// Appends a fresh nonce (see [`nonce`]) to `text`: an id that is a prefix and a nonce takes one
/// allocation, not two.
pub fn push_nonce(text: &mut String) {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes);
    URL_SAFE_NO_PAD.encode_string(bytes, text);
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // One allocation: formatting each byte would make a string per byte (a token's hash, 32).
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_per_byte_in_order() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff, 0x10]), "000fa5ff10");
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex(&every), expected);
    }
}
