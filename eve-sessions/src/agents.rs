//! The runtime's subagents: how they are defined and checked, and how a session offers them.
//! Calling one is [`super::agent`]'s.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::model::Model;
use eve_runtime::{Error, RuntimeBuilder};

/// The workflow id of an agent's resumable task ([`super::agent`]'s `eve.agent`).
pub(super) const AGENT_WORKFLOW: &str = "eve_runtime::agent";

/// A subagent: a name, what it is for, its instructions, the tools it may call, and optionally a
/// model of its own. Give it to the runtime with [`SessionBuilderExt::agent`](crate::SessionBuilderExt::agent).
#[derive(Clone)]
pub struct Agent {
    pub(super) name: String,
    description: String,
    pub(super) instructions: String,
    pub(super) tools: Option<Vec<String>>,
    model: Option<Arc<dyn Model>>,
    hidden: bool,
}

impl Agent {
    /// An agent called `name`: 1 to 64 ASCII letters, digits, `_` or `-`, the name the model
    /// calls it by. It offers every tool of the manifest and talks to the runtime's model until
    /// told otherwise.
    pub fn new(name: impl Into<String>) -> Self {
        Agent {
            name: name.into(),
            description: String::new(),
            instructions: String::new(),
            tools: None,
            model: None,
            hidden: false,
        }
    }

    /// What the agent is for: the description of its tool, and what [`WorkflowCtx::agents`](crate::AgentCtxExt::agents)
    /// lists. Required unless the agent is [hidden](Agent::hidden).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// The agent's system prompt.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = text.into();
        self
    }

    /// Offers the agent only these tools of the manifest.
    pub fn tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The model the agent talks to, instead of the runtime's.
    pub fn model(mut self, model: impl Model) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// Keeps the agent out of the sessions' tool lists: only a workflow body calls it, with
    /// [`WorkflowCtx::agent`](crate::AgentCtxExt::agent) (a router that picks the specialist, say).
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("tools", &self.tools)
            .field("own_model", &self.model.is_some())
            .field("hidden", &self.hidden)
            .finish_non_exhaustive()
    }
}

/// The runtime's agents, by name: kept in its state, so steps read them.
#[derive(Clone, Default)]
pub(crate) struct Agents(pub(super) BTreeMap<String, Arc<Agent>>);

impl Agents {
    /// The agents a session offers as tools (all but the hidden ones), named as the model sees them.
    pub(super) fn offered(&self) -> Vec<AgentTool> {
        let offered = self.0.values().filter(|agent| !agent.hidden);
        offered.map(|agent| AgentTool { name: agent.name.clone(), description: agent.description.clone() }).collect()
    }

    /// The model of the agent `name`, if it has its own.
    pub(super) fn model(&self, name: &str) -> Option<Arc<dyn Model>> {
        self.0.get(name).and_then(|agent| agent.model.clone())
    }

    pub(super) fn describe(&self) -> BTreeMap<String, String> {
        self.0.values().map(|agent| (agent.name.clone(), agent.description.clone())).collect()
    }
}

/// Adds `agent` to the builder's subagents (see [`SessionBuilderExt::agent`](crate::SessionBuilderExt::agent)).
pub(super) fn add(builder: RuntimeBuilder, agent: Agent) -> RuntimeBuilder {
    let mut agents = builder.state_value::<Agents>().map(|agents| Agents::clone(&agents)).unwrap_or_default();
    agents.0.insert(agent.name.clone(), Arc::new(agent));
    builder.state(agents).check_state(check_agents)
}

/// What [`RuntimeBuilder::build`] checks of the agents.
fn check_agents(state: &eve_runtime::state::State) -> Result<(), Error> {
    let Ok(agents) = state.get::<Agents>() else { return Ok(()) };
    let invalid = |reason: String| Err(Error::InvalidConfig { setting: "agent", reason });
    for agent in agents.0.values() {
        let name = &agent.name;
        let callable = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
        if name.is_empty() || name.len() > 64 || !name.chars().all(callable) {
            return invalid(format!(
                "the agent name {name:?} is not one a model can call; use 1 to 64 ASCII letters, digits, `_` or `-`"
            ));
        }
        if eve_runtime::registry::tool(name).is_some() || super::strings::is_session_tool(name) {
            return invalid(format!("the agent `{name}` has the name of a tool; give one of them another name"));
        }
        if !agent.hidden && agent.description.trim().is_empty() {
            return invalid(format!(
                "the agent `{name}` has no description, which the model needs to know when to call it; add one with Agent::description, or hide it with Agent::hidden"
            ));
        }
        for tool in agent.tools.iter().flatten() {
            if eve_runtime::registry::tool(tool).is_none() {
                return invalid(format!("the agent `{name}` names the tool `{tool}`, which is not in the manifest"));
            }
        }
    }
    Ok(())
}

/// An agent as a session offers it: recorded in the session's input, so replay offers the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AgentTool {
    pub name: String,
    pub description: String,
}

/// The model-facing name of an agent, kept for the life of the process (sessions name their
/// tools by `&'static str`; there are as many names as agents ever configured).
pub(super) fn intern(name: &str) -> &'static str {
    static NAMES: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);
    let mut names = NAMES.lock().expect("the name table is never poisoned");
    match names.get(name) {
        Some(known) => known,
        None => {
            let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.insert(leaked);
            leaked
        }
    }
}

/// The input schema of an agent's tool (`taskId` is added as for every resumable task).
pub(super) fn tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "description": "What to ask the agent, with everything it needs to know: it does not see this conversation."
            }
        },
        "required": ["message"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_interned_once() {
        assert!(std::ptr::eq(intern("researcher"), intern(&String::from("researcher"))));
    }
}
