//! What a runtime uses unless told otherwise: the shared Postgres store at `EVE_DATABASE_URL` when
//! that variable is set, else the embedded SQLite store in `.eve/eve.db` when the `sqlite` feature
//! is on (it is by default), else a memory store.
//!
//! An outer layer of its own: the runtime core knows stores only through the `Store` trait, and
//! this module, above both, picks the default and gives the builder its `postgres` methods.

use crate::runtime::{Runtime, RuntimeBuilder};

/// The variable naming a Postgres database that `Runtime::builder()` uses when it is set.
pub(crate) const DATABASE_URL_VARIABLE: &str = "EVE_DATABASE_URL";

/// The variable naming the Postgres schema for eve's tables, with `EVE_DATABASE_URL` (default `eve`).
#[cfg(feature = "postgres")]
pub(crate) const DATABASE_SCHEMA_VARIABLE: &str = "EVE_DATABASE_SCHEMA";

impl Runtime {
    /// A builder with the defaults: the Postgres database at `EVE_DATABASE_URL` if that variable
    /// is set (which needs the `postgres` feature; its tables in the schema `EVE_DATABASE_SCHEMA`
    /// names, `eve` by default), else embedded SQLite in `.eve/eve.db` (with the
    /// `sqlite` feature, which is on by default; otherwise a memory store); the system clock.
    pub fn builder() -> RuntimeBuilder {
        if let Some(url) = std::env::var_os(DATABASE_URL_VARIABLE) {
            let url = url.into_string().map_err(|_| format!("{DATABASE_URL_VARIABLE} is not UTF-8"));
            return postgres::from_variable(RuntimeBuilder::new(), url);
        }
        #[cfg(feature = "sqlite")]
        return RuntimeBuilder::new().default_store(Box::new(sqlite::open));
        #[cfg(not(feature = "sqlite"))]
        return RuntimeBuilder::new();
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::Arc;

    use crate::store::{SqliteStore, Store, StoreError};

    /// The embedded store at `<data dir>/eve.db`.
    pub(super) fn open(opening: &crate::runtime::Opening<'_>) -> Result<Arc<dyn Store>, StoreError> {
        Ok(Arc::new(SqliteStore::open(opening.dir.join("eve.db"))?))
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::sync::Arc;

    use crate::runtime::RuntimeBuilder;
    use crate::store::{PostgresOptions, PostgresStore, StoreError};

    impl RuntimeBuilder {
        /// Uses the shared Postgres store at `url` (`postgres://user:password@host:port/database`),
        /// with default [`PostgresOptions`] (feature `postgres`). The URL is checked by
        /// [`build`](RuntimeBuilder::build); the database is first contacted, and eve's schema
        /// created or migrated, by the runtime's first request (usually
        /// [`Runtime::recover`](crate::Runtime::recover), which also makes the runtime a worker).
        ///
        /// ```no_run
        /// # async fn work() -> Result<(), eve_runtime::Error> {
        /// use std::time::Duration;
        /// use eve_runtime::Runtime;
        /// let runtime = Runtime::builder()
        ///     .postgres("postgres://eve:secret@db.internal:5432/app")
        ///     .worker_id("worker-1")
        ///     .lease(Duration::from_secs(30))
        ///     .heartbeat(Duration::from_secs(10))
        ///     .build()?;
        /// runtime.recover().await?; // now a worker: it takes runs as they need it
        /// # Ok(())
        /// # }
        /// ```
        pub fn postgres(self, url: impl Into<String>) -> Self {
            self.postgres_with(url, PostgresOptions::default())
        }

        /// Uses the shared Postgres store at `url` with `options` (see [`RuntimeBuilder::postgres`]).
        /// The creator of a run holds it for the runtime's [`lease`](RuntimeBuilder::lease), whatever
        /// `options.creation_lease` says.
        pub fn postgres_with(self, url: impl Into<String>, options: PostgresOptions) -> Self {
            let url = url.into();
            self.default_store(Box::new(move |opening| {
                let options = PostgresOptions { creation_lease: opening.lease, ..options };
                let store = PostgresStore::connect_lazy(&url, options).map_err(StoreError::from)?;
                Ok(Arc::new(store))
            }))
        }
    }

    /// The builder for the URL in `EVE_DATABASE_URL` (and the schema in `EVE_DATABASE_SCHEMA`).
    pub(super) fn from_variable(builder: RuntimeBuilder, url: Result<String, String>) -> RuntimeBuilder {
        let mut options = PostgresOptions::default();
        if let Ok(schema) = std::env::var(super::DATABASE_SCHEMA_VARIABLE) {
            options.schema = schema;
        }
        match url {
            Ok(url) => builder.postgres_with(url, options),
            Err(reason) => builder.default_store(Box::new(move |_| {
                Err(StoreError::Open { path: super::DATABASE_URL_VARIABLE.into(), reason })
            })),
        }
    }
}

#[cfg(not(feature = "postgres"))]
mod postgres {
    use crate::runtime::RuntimeBuilder;
    use crate::store::StoreError;

    /// `EVE_DATABASE_URL` is set, but this build has no Postgres store: refused at `build`.
    pub(super) fn from_variable(builder: RuntimeBuilder, _url: Result<String, String>) -> RuntimeBuilder {
        builder.default_store(Box::new(|_| {
            Err(StoreError::Open {
                path: super::DATABASE_URL_VARIABLE.into(),
                reason: format!(
                    "{} names a Postgres database, but this binary was built without the `postgres` feature of \
                     eve-tools; enable it, or unset the variable to use the embedded SQLite store",
                    super::DATABASE_URL_VARIABLE
                ),
            })
        }))
    }
}
