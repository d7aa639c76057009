//! What people send a session: messages, each with the policy that says whether it may steer the
//! open turn.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
/// [`ChildReport`](crate::journal::ChildReport)s).
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

impl SessionInbound {
    /// What the session's hook is delivered: the value serde makes of `self`, built with the
    /// message's text and caller moved in rather than copied.
    pub(crate) fn into_payload(self) -> Value {
        let mut payload = Map::new();
        let tag = match self {
            SessionInbound::Message(UserMessage { text, turn_policy, caller }) => {
                payload.insert("text".into(), Value::String(text));
                let policy = match turn_policy {
                    TurnPolicy::Steer => "steer",
                    TurnPolicy::Queue => "queue",
                };
                payload.insert("turnPolicy".into(), policy.into());
                if let Some(caller) = caller {
                    payload.insert("caller".into(), Value::String(caller));
                }
                "message"
            }
            SessionInbound::Cancel => "cancel",
            SessionInbound::Close => "close",
        };
        payload.insert("type".into(), tag.into());
        Value::Object(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload built by hand is the one serde makes, for every kind of inbound and message.
    #[test]
    fn a_payload_is_what_serde_makes_of_it() {
        let message = UserMessage::new("Is api healthy?");
        let inbounds = [
            SessionInbound::Message(message.clone()),
            SessionInbound::Message(message.clone().policy(TurnPolicy::Queue).caller("ops")),
            SessionInbound::Message(message.caller("")),
            SessionInbound::Cancel,
            SessionInbound::Close,
        ];
        for inbound in inbounds {
            let expected = serde_json::to_value(&inbound).expect("an inbound serializes");
            assert_eq!(inbound.into_payload(), expected);
        }
    }
}
