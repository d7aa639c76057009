//! What people send a session: messages, each with the policy that says whether it may steer the
//! open turn.

use serde::{Deserialize, Serialize};

/// What a message does when a turn is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnPolicy {
    /// From the turn's own caller: end a `task_wait`, abort the `#[workflow_tool]` calls the turn
    /// waits on (never a task), and have the model read the message next. From another caller it
    /// waits like [`TurnPolicy::Queue`].
    #[default]
    Steer,
    /// Wait for the open turn to end, then open the next turn.
    Queue,
}

/// A message for a session's model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// What the model reads.
    pub text: String,
    /// What the message does when a turn is open.
    #[serde(default)]
    pub turn_policy: TurnPolicy,
    /// Who sends it; only the open turn's own caller steers it. Anonymous callers (`None`) share
    /// one identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

impl UserMessage {
    /// A message from an anonymous caller that steers the open turn.
    pub fn new(text: impl Into<String>) -> Self {
        UserMessage { text: text.into(), turn_policy: TurnPolicy::Steer, caller: None }
    }

    /// The same message, sent with `policy`.
    pub fn policy(mut self, policy: TurnPolicy) -> Self {
        self.turn_policy = policy;
        self
    }

    /// The same message, from `caller`.
    pub fn caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }
}

/// What people and the runtime send a session (reports of child runs come as
/// [`ChildReport`](eve_runtime::journal::ChildReport)s).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum SessionInbound {
    /// A message for the model.
    Message(UserMessage),
    /// `session.cancel()`: cancel the open turn, the calls it waits on and every working task.
    Cancel,
    /// The end of the session: every task ends.
    Close,
}
