//! Connecting: the URL, the connection settings every pooled connection gets, TLS, the pool, and
//! the typed errors a failed connect reports.
//!
//! Every connection is opened with `search_path` set to the store's schema (so the SQL names its
//! tables unqualified), the statement timeout, and `application_name=eve` unless the URL names
//! one, all through the startup packet's `options`, so a connection is ready the moment it opens.
//! Nothing here ever shows the URL's password: errors and `Debug` name the server by
//! [`describe_target`] (user, host, port, database and schema).

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;
#[cfg(not(feature = "tls"))]
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;

use super::PostgresOptions;
use super::codec::describe;
use eve_runtime::store::StoreError;

/// Why [`PostgresStore::connect`](super::PostgresStore::connect) failed. Each variant names the
/// cause and what to do; none shows the URL's password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL (or an option) cannot be used.
    #[error("the Postgres URL cannot be used: {reason}; write it as postgres://user:password@host:port/database")]
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// No server answered, or the connection broke while it was being opened.
    #[error("cannot reach Postgres at {target}: {reason}; check that the server runs and the host and port are right")]
    Unreachable {
        /// The server, as `user@host:port/database`.
        target: String,
        /// What happened.
        reason: String,
    },
    /// The server refused the login: a wrong password, an unknown user, or no `pg_hba.conf` entry.
    #[error("Postgres at {target} refused the login: {reason}; check the user and password in the URL")]
    LoginRefused {
        /// The server, as `user@host:port/database`.
        target: String,
        /// What the server said.
        reason: String,
    },
    /// The database named in the URL does not exist.
    #[error("Postgres at {target} has no such database: {reason}; create it or name another in the URL")]
    NoDatabase {
        /// The server, as `user@host:port/database`.
        target: String,
        /// What the server said.
        reason: String,
    },
    /// The user may not create the schema or its tables.
    #[error(
        "the Postgres user at {target} may not create eve's tables in schema {schema:?}: {reason}; grant it CREATE \
         on the database (to create the schema) or create the schema and grant it CREATE and USAGE on it"
    )]
    Privileges {
        /// The server, as `user@host:port/database`.
        target: String,
        /// The schema.
        schema: String,
        /// What the server said.
        reason: String,
    },
    /// The schema was written by a newer eve; nothing was changed.
    #[error(
        "the eve schema {schema:?} at {target} has version {found}, newer than the {supported} this build \
         understands; upgrade eve or use another schema (nothing was changed)"
    )]
    NewerSchema {
        /// The server, as `user@host:port/database`.
        target: String,
        /// The schema.
        schema: String,
        /// The version found in the schema.
        found: i32,
        /// The newest version this build understands.
        supported: i32,
    },
    /// TLS was asked for but cannot be had.
    #[error("cannot use TLS with Postgres at {target}: {reason}")]
    Tls {
        /// The server, as `user@host:port/database`.
        target: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// Postgres failed in another way while the store was being prepared.
    #[error("Postgres at {target} failed while eve prepared its store: {reason}")]
    Backend {
        /// The server, as `user@host:port/database`.
        target: String,
        /// What happened.
        reason: String,
    },
}

impl ConnectError {
    /// The error for a failure while the schema is being prepared.
    pub(super) fn from_prepare(error: &tokio_postgres::Error, schema: &str, target: &str) -> Self {
        let (target, reason) = (target.to_owned(), describe(error));
        match error.code() {
            Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => {
                ConnectError::Privileges { target, schema: schema.to_owned(), reason }
            }
            _ if super::codec::is_connection_loss(error) => ConnectError::Unreachable { target, reason },
            _ => ConnectError::Backend { target, reason },
        }
    }

    /// The error for a connection that could not be opened.
    fn from_open(error: &tokio_postgres::Error, target: &str) -> Self {
        let (target, reason) = (target.to_owned(), describe(error));
        let code = error.code();
        if code.is_some_and(|code| {
            [SqlState::INVALID_PASSWORD, SqlState::INVALID_AUTHORIZATION_SPECIFICATION].contains(code)
        }) || error.to_string().starts_with("authentication error")
        {
            return ConnectError::LoginRefused { target, reason };
        }
        if code == Some(&SqlState::INVALID_CATALOG_NAME) {
            return ConnectError::NoDatabase { target, reason };
        }
        if error.to_string().starts_with("error performing TLS handshake") {
            return ConnectError::Tls { target, reason };
        }
        if code.is_some() && !super::codec::is_connection_loss(error) {
            return ConnectError::Backend { target, reason };
        }
        ConnectError::Unreachable { target, reason }
    }

    /// The error for a connection the pool could not hand out.
    pub(super) fn from_pool(error: PoolError, target: &str, timeout: Duration) -> Self {
        match error {
            PoolError::Backend(error) => ConnectError::from_open(&error, target),
            PoolError::Timeout(_) => ConnectError::Unreachable {
                target: target.to_owned(),
                reason: format!("no connection opened within {timeout:?} (PostgresOptions::connect_timeout)"),
            },
            other => ConnectError::Backend { target: target.to_owned(), reason: other.to_string() },
        }
    }
}

impl From<ConnectError> for StoreError {
    fn from(error: ConnectError) -> Self {
        let reason = error.to_string();
        let path = match error {
            ConnectError::InvalidUrl { .. } => "the configured Postgres URL".to_owned(),
            ConnectError::Unreachable { target, .. }
            | ConnectError::LoginRefused { target, .. }
            | ConnectError::NoDatabase { target, .. }
            | ConnectError::Privileges { target, .. }
            | ConnectError::NewerSchema { target, .. }
            | ConnectError::Tls { target, .. }
            | ConnectError::Backend { target, .. } => target,
        };
        StoreError::Open { path, reason }
    }
}

/// The connection settings for `url` with the store's own (see the module documentation), and the
/// server as errors name it.
pub(super) fn config(url: &str, options: &PostgresOptions) -> Result<(tokio_postgres::Config, String), ConnectError> {
    check_schema_name(&options.schema)?;
    if let Some((scheme, _)) = url.split_once("://")
        && !matches!(scheme, "postgres" | "postgresql")
    {
        // Only the scheme is quoted: the rest of the URL may hold a password.
        let reason = format!("it is a `{scheme}://` URL, and eve's shared store is PostgreSQL");
        return Err(ConnectError::InvalidUrl { reason });
    }
    let mut config: tokio_postgres::Config = url.parse().map_err(|error: tokio_postgres::Error| {
        // The parser's messages name the offending key or value, never the password.
        ConnectError::InvalidUrl { reason: describe(&error) }
    })?;
    if config.get_hosts().is_empty() {
        return Err(ConnectError::InvalidUrl { reason: "it names no host".into() });
    }
    let timeout = options.statement_timeout.as_millis();
    let ours = format!("-c search_path={} -c statement_timeout={timeout}", options.schema);
    let combined = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(combined);
    if config.get_application_name().is_none() {
        config.application_name("eve");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    let target = describe_target(&config);
    Ok((config, target))
}

/// A schema name eve may put in SQL unquoted: a lowercase letter or `_`, then lowercase letters,
/// digits or `_`, at most 63 bytes (Postgres' limit), and not a `pg_` name.
fn check_schema_name(schema: &str) -> Result<(), ConnectError> {
    let mut chars = schema.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && schema.len() <= 63 && !schema.starts_with("pg_") {
        return Ok(());
    }
    Err(ConnectError::InvalidUrl {
        reason: format!(
            "the schema name {schema:?} (PostgresOptions::schema) is not usable: use 1 to 63 lowercase letters, \
             digits and `_`, starting with a letter or `_`, and not starting with `pg_`"
        ),
    })
}

/// `user@host:port/database`: the server as errors and `Debug` show it, without the password.
pub(super) fn describe_target(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("(default user)");
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(index, host)| {
            let port = ports.get(index).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let database = config.get_dbname().unwrap_or(user);
    format!("{user}@{}/{database}", hosts.join(","))
}

/// How connections are secured: plain text, or rustls with the feature `postgres-tls`.
#[cfg(not(feature = "tls"))]
pub(super) type Tls = tokio_postgres::NoTls;
/// How connections are secured: plain text, or rustls with the feature `postgres-tls`.
#[cfg(feature = "tls")]
pub(super) type Tls = tokio_postgres_rustls::MakeRustlsConnect;

/// Another connector with the same settings, for one more connection (the listening one).
#[allow(clippy::clone_on_copy, reason = "`Tls` is `Copy` only without the `postgres-tls` feature")]
pub(super) fn same(tls: &Tls) -> Tls {
    tls.clone()
}

/// The pool every request takes its connection from.
pub(super) fn pool(
    config: tokio_postgres::Config,
    tls: Tls,
    options: &PostgresOptions,
    target: &str,
) -> Result<Pool, ConnectError> {
    let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
    let manager = Manager::from_config(config, tls, manager_config);
    Pool::builder(manager)
        .max_size(options.pool_size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(options.connect_timeout))
        .create_timeout(Some(options.connect_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .build()
        .map_err(|error| ConnectError::Backend { target: target.to_owned(), reason: error.to_string() })
}

#[cfg(not(feature = "tls"))]
pub(super) fn tls(
    config: &tokio_postgres::Config,
    options: &PostgresOptions,
    target: &str,
) -> Result<Tls, ConnectError> {
    if config.get_ssl_mode() == SslMode::Require || options.ca_certificate.is_some() {
        return Err(ConnectError::Tls {
            target: target.to_owned(),
            reason: "the URL (sslmode=require) or PostgresOptions::ca_certificate asks for it, but eve was built \
                     without TLS; enable the `postgres-tls` feature"
                .into(),
        });
    }
    Ok(tokio_postgres::NoTls)
}

#[cfg(feature = "tls")]
pub(super) fn tls(
    _config: &tokio_postgres::Config,
    options: &PostgresOptions,
    target: &str,
) -> Result<Tls, ConnectError> {
    // `sslmode=prefer` (the default) tries TLS and falls back to plain text; `require` insists.
    super::tls::connector(options, target)
}
