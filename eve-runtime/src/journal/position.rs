//! Where an entry stands in a run's journal, across its histories.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where an entry stands in a run's journal: the history it belongs to (0 for the first; each
/// continue-as-new starts another) and its sequence number in that history.
///
/// Positions order as the entries were journaled. A position prints, and parses, as
/// `history.seq` (`0.17`), which suits an SSE event id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Position {
    /// How many histories came before the entry's (see `WorkflowCtx::continue_as_new`).
    pub history: u32,
    /// The entry's sequence number in its history, from 0.
    pub seq: u64,
}

impl Position {
    /// The first entry of the run: following from here reads the whole current journal.
    pub const START: Position = Position { history: 0, seq: 0 };

    /// The position `seq` of history `history`.
    pub const fn new(history: u32, seq: u64) -> Self {
        Position { history, seq }
    }

    /// The position after this one in the same history: where a follower that has seen this
    /// entry goes on.
    pub const fn next(self) -> Self {
        Position { history: self.history, seq: self.seq.saturating_add(1) }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.history, self.seq)
    }
}

/// Why a text is not a [`Position`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a journal position; a position is written `history.seq`, such as `0.17`")]
pub struct PositionError(String);

impl std::str::FromStr for Position {
    type Err = PositionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parsed = text
            .split_once('.')
            .and_then(|(history, seq)| Some(Position::new(history.parse().ok()?, seq.parse().ok()?)));
        parsed.ok_or_else(|| PositionError(text.to_owned()))
    }
}
