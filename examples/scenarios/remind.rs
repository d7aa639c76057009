//! Remind me later (the seed's `remind`): a background task sleeps durably, then returns the
//! reminder for the agent to relay.
//!
//! The session parks between the receipt and the wake; no task is held while the timer runs. The
//! deadline is journaled when the sleep starts, so the reminder fires once, at that instant, even
//! if the process restarts (or is down when it falls due).

use std::fmt;
use std::time::Duration;

use eve_tools::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to remind the user of, and when.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemindInput {
    /// The reminder.
    pub note: String,
    /// How long from now, such as `90s`, `2h` or `1h 30m`.
    #[schemars(with = "String")]
    pub delay: Delay,
}

/// The reminder, once it is due.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Reminder {
    /// The note.
    pub reminder: String,
}

/// Remind the user about something after a delay.
#[task]
pub async fn remind(input: RemindInput) -> Result<Reminder, ToolError> {
    sleep(input.delay.0).await?;
    Ok(Reminder { reminder: input.note })
}

/// A positive delay written as people write them: `90s`, `2h`, `1h 30m`, `1day`.
///
/// It is checked when the input is decoded, so a call with a delay that does not parse is refused
/// before a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Delay(pub Duration);

impl TryFrom<String> for Delay {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match humantime::parse_duration(text.trim()) {
            Ok(duration) if !duration.is_zero() => Ok(Delay(duration)),
            Ok(_) => Err(format!("`delay` {text:?} is zero; give a positive duration such as 90s or 2h")),
            Err(error) => Err(format!("`delay` {text:?} is not a duration ({error}); write it like 90s, 2h or 1h 30m")),
        }
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}
