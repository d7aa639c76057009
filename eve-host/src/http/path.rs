//! Request paths: the hook resume prefix, and path segments read as opaque strings.

use axum::http::Uri;

/// The path prefix of hook resumes: `POST {HOOK_PATH}{token}` with a JSON body.
pub const HOOK_PATH: &str = "/.well-known/workflow/v1/hook/";

/// Path segments longer than this name nothing (tokens are 43 characters).
pub(crate) const MAX_SEGMENT: usize = 256;

/// The path segment at `index` (0 is the first after `/`), percent-decoded. `None` if it is
/// missing, longer than [`MAX_SEGMENT`] bytes, or not UTF-8 once decoded: such a segment names
/// nothing, whatever it holds.
pub(crate) fn segment(uri: &Uri, index: usize) -> Option<String> {
    let raw = uri.path().split('/').nth(index + 1)?;
    if raw.is_empty() || raw.len() > MAX_SEGMENT * 3 {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8().ok()?;
    (decoded.len() <= MAX_SEGMENT).then(|| decoded.into_owned())
}
