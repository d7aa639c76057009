//! The stores under the runtime, driven through their `Store` API: the in-memory and SQLite stores
//! against the conformance suite, and how the SQLite store fails without losing what it
//! acknowledged.

mod conformance;
mod follow;
mod sqlite_failures;
