//! Who may reach the run API from a browser: the `Host` a request is addressed to and the
//! `Origin` of the page that sent it.
//!
//! A web page can make a browser send requests to any address, loopback included. Two ways reach
//! a run API served on loopback from a page elsewhere:
//!
//! - **DNS rebinding.** A page at `evil.example` makes its own name resolve to `127.0.0.1`. Its
//!   requests then go to the run API with `Host: evil.example`, and the browser, seeing one
//!   origin, lets the page read the answers (sign-in links in the event stream, say).
//! - **Cross-site requests.** A form post (a CORS "simple request") is sent without asking the
//!   server first, so a page can start, answer or cancel runs without reading the answer. The
//!   browser names the page in `Origin`.
//!
//! So, before the API key is checked:
//!
//! - without a key, a `/v1` request must be addressed to a loopback name: `Host` (and the
//!   request target, if absolute) is `localhost`, `127.0.0.1` or `[::1]`, with any port;
//! - key or not, a `/v1` request that carries `Origin` must come from the server's own origin:
//!   the origin of the runtime's public URL, `http://{Host}` when `Host` is a loopback name, or
//!   one given with [`Server::allow_origin`](super::Server::allow_origin). `Origin: null` (a
//!   sandboxed page, a file) is nobody's own.
//!
//! Requests without `Origin` (scripts, the CLI, a page reading its own server) are not affected,
//! and neither are the `/.well-known/workflow/v1/` routes, which outside systems reach by token.

use std::fmt;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};

use super::errors::{ApiError, shorten};

/// The names a keyless run API answers to.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// A web origin: scheme, host and port, compared exactly (the host lowercased, the port filled
/// in from the scheme when left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of a URL such as `https://agent.example/base` (its path is ignored); `None` if
    /// it is not an `http` or `https` URL with a host.
    pub fn of_url(url: &str) -> Option<Origin> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let (host, port) = split_authority(authority)?;
        Some(Origin { scheme, host, port: port.unwrap_or(default_port) })
    }

    /// An origin written exactly, as in an `Origin` header: `scheme://host[:port]`.
    pub fn exact(value: &str) -> Option<Origin> {
        let (_, rest) = value.split_once("://")?;
        if rest.contains(['/', '?', '#']) {
            return None;
        }
        Origin::of_url(value)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// The origins a server calls its own, besides `http://{Host}` for a loopback `Host`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Origins {
    /// The origin of the runtime's public URL, if it has one.
    pub public: Option<Origin>,
    /// Origins the server was told to allow.
    pub allowed: Vec<Origin>,
}

/// Refuses a run API request addressed to a foreign name (when the server has no key) or sent by
/// a page of a foreign origin, saying what to do instead.
pub(crate) fn check(origins: &Origins, keyed: bool, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    let host = loopback_host(headers, request.uri());
    if !keyed {
        host.clone().map_err(forbidden)?;
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let text = origin.to_str().unwrap_or_default();
    let own_page = host.ok().map(|(host, port)| Origin { scheme: "http".to_owned(), host, port });
    let mut own = origins.public.iter().chain(&origins.allowed).chain(own_page.as_ref());
    match Origin::exact(text) {
        Some(origin) if own.any(|own| *own == origin) => Ok(()),
        _ => Err(forbidden(format!(
            "the run API refuses requests from pages at `{}` (the `Origin` header): only the server's own \
             pages may use it; to let a page you trust use it, add its origin with `Server::allow_origin`",
            shorten(text, 64)
        ))),
    }
}

/// The loopback host and port a request is addressed to, or why it is not.
fn loopback_host(headers: &HeaderMap, uri: &axum::http::Uri) -> Result<(String, u16), String> {
    let Some(value) = headers.get(header::HOST) else {
        return Err("the request has no `Host` header; send one naming a loopback address, such as \
                    `Host: 127.0.0.1:7700`"
            .to_owned());
    };
    let text = value.to_str().unwrap_or_default();
    // An absolute request target (`POST http://name/v1/...`) names the host too; both must be loopback.
    let target = uri.authority().map(|authority| authority.as_str());
    for named in std::iter::once(text).chain(target) {
        if !split_authority(named).is_some_and(|(host, _)| LOOPBACK_NAMES.contains(&host.as_str())) {
            return Err(format!(
                "the run API has no key, so it only answers requests addressed to this machine (`Host` \
                 localhost, 127.0.0.1 or [::1]), not `{}`; reach it at a loopback address, or give the \
                 server an API key (`Server::api_key`, or `EVE_API_KEY` for `host serve`) to serve it under \
                 another name",
                shorten(named, 64)
            ));
        }
    }
    let (host, port) = split_authority(text).expect("checked to be a loopback authority");
    Ok((host, port.unwrap_or(80)))
}

/// Splits `host[:port]` (an IPv6 host in brackets), lowercasing the host; `None` if it is not
/// that shape (user info, a path, an empty host or a port that is not a number).
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            (format!("[{inside}]"), after)
        }
        None => match authority.rsplit_once(':') {
            Some((host, _)) => (host.to_owned(), &authority[host.len()..]),
            None => (authority.to_owned(), ""),
        },
    };
    let port = match port {
        "" => None,
        port => Some(port.strip_prefix(':')?.parse().ok()?),
    };
    let valid = !host.is_empty() && !host.contains(['@', '/', '\\', ' ', '[']) || host.starts_with('[');
    valid.then(|| (host.to_ascii_lowercase(), port))
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_by_scheme_host_and_port() {
        let origin = |text: &str| Origin::exact(text).map(|origin| origin.to_string());
        // (header value, the origin it names)
        let cases = [
            ("http://localhost", Some("http://localhost:80")),
            ("HTTP://LocalHost:7700", Some("http://localhost:7700")),
            ("https://agent.example", Some("https://agent.example:443")),
            ("http://[::1]:7700", Some("http://[::1]:7700")),
            ("null", None),
            ("", None),
            ("file://", None),
            ("ftp://agent.example", None),
            ("http://agent.example/path", None),
            ("http://user@agent.example", None),
            ("http://agent.example:port", None),
            ("http://:80", None),
        ];
        for (text, expected) in cases {
            assert_eq!(origin(text).as_deref(), expected, "{text:?}");
        }
        let public = Origin::of_url("https://agent.example/base/").unwrap();
        assert_eq!(public.to_string(), "https://agent.example:443", "a public URL's path is not part of its origin");
    }

    #[test]
    fn only_the_loopback_names_are_loopback_hosts() {
        let loopback = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().unwrap());
            loopback_host(&headers, &"/v1/events".parse().unwrap()).ok()
        };
        assert_eq!(loopback("localhost"), Some(("localhost".to_owned(), 80)));
        assert_eq!(loopback("127.0.0.1:7700"), Some(("127.0.0.1".to_owned(), 7700)));
        assert_eq!(loopback("[::1]:1"), Some(("[::1]".to_owned(), 1)));
        for foreign in
            ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "evil@localhost", "[::2]", "0.0.0.0"]
        {
            assert_eq!(loopback(foreign), None, "{foreign}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "localhost".parse().unwrap());
        let absolute = "http://evil.example/v1/events".parse().unwrap();
        assert!(loopback_host(&headers, &absolute).is_err(), "an absolute target names the host too");
        assert!(loopback_host(&HeaderMap::new(), &"/v1/events".parse().unwrap()).is_err(), "no Host at all");
    }
}
