//! Agent sessions for eve-tools (its feature `sessions`, `eve_tools::session`): a model calls the
//! manifest's tools in turns, and tasks keep working while the conversation goes on.
//!
//! A session is a durable run of the runtime (the `eve.session` workflow): every
//! model call is a step, every tool call is journaled, and what the session tells the world is
//! its event feed, numbered and durable. So a session survives a restart mid-turn without calling
//! the model twice for one step or starting a tool twice.
//!
//! Sessions are a client of the runtime's public API: [`SessionBuilderExt`] gives the runtime a
//! model and subagents, [`SessionRuntimeExt`] starts and opens sessions, and [`AgentCtxExt`] lets a
//! workflow body call a subagent. The three are in the prelude of eve-tools.
//!
//! ```no_run
//! use eve_tools::prelude::*;
//! use eve_tools::session::{ModelResponse, ScriptedModel, SessionOptions};
//! use futures::StreamExt;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new(|request| ModelResponse::text(format!("You said: {}", request.last_user().unwrap_or(""))));
//! let runtime = Runtime::builder().model(model).build()?;
//! let session = runtime.session(SessionOptions::new().system("Be brief.")).await?;
//! session.send("hello").await?;
//! let mut events = session.events(0);
//! while let Some(event) = events.next().await {
//!     let event = event?;
//!     println!("{} {}", event.name, event.data);
//!     if event.name == "session.waiting" {
//!         break;
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The model-facing strings (receipts, `task_wait` and `task_cancel` answers, `<task_result>`
//! blocks, the `[Tasks]` note) are a contract kept in [`strings`].

#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent;
mod agents;
mod engine;
mod error;
mod feed;
mod inbound;
pub mod metrics;
pub mod model;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub mod openai;
mod session;
pub mod strings;
mod tasks;

pub use agent::{AgentCtxExt, AgentRef, AgentReply};
pub use agents::Agent;
pub use error::Error;
pub use feed::SessionEvent;
pub use inbound::{TurnPolicy, UserMessage};
pub use model::{
    FinishReason, Message, Model, ModelDelta, ModelError, ModelRequest, ModelResponse, ModelStream, ScriptedModel,
    ToolCall, ToolSpec,
};
pub use session::{Session, SessionBuilderExt, SessionOptions, SessionRuntimeExt};
