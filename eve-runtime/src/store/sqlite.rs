//! The embedded SQLite store (being written).
