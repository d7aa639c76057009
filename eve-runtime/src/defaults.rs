//! What a runtime uses unless told otherwise: the embedded SQLite store in `.eve/eve.db` when the
//! `sqlite` feature is on (it is by default), a memory store otherwise.
//!
//! An outer layer of its own: the runtime core knows stores only through the `Store` trait, and
//! this module, above both, picks the default.

use crate::runtime::{Runtime, RuntimeBuilder};

impl Runtime {
    /// A builder with the defaults: embedded SQLite in `.eve/eve.db` (with the `sqlite` feature,
    /// which is on by default; otherwise a memory store), the system clock.
    pub fn builder() -> RuntimeBuilder {
        #[cfg(feature = "sqlite")]
        return RuntimeBuilder::new().default_store(sqlite::open);
        #[cfg(not(feature = "sqlite"))]
        return RuntimeBuilder::new();
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::Path;
    use std::sync::Arc;

    use crate::store::{SqliteStore, Store, StoreError};

    /// The embedded store at `<data dir>/eve.db`.
    pub(super) fn open(dir: &Path) -> Result<Arc<dyn Store>, StoreError> {
        Ok(Arc::new(SqliteStore::open(dir.join("eve.db"))?))
    }
}
