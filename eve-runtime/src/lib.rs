//! The durable execution engine behind [eve-tools](https://docs.rs/eve-tools).
//!
//! Users depend on `eve-tools`, which re-exports what they need from here together with the
//! macros. This crate holds the machinery: the [`journal`], the [`store`]s, the executor that
//! replays a run from its journal, durable timers and hooks, and the [`Runtime`] that ties them
//! together. See `ARCHITECTURE.md` at the repository root for the map and the invariants.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod ask;
pub mod auth;
pub mod context;
pub mod control;
pub mod error;
pub mod events;
mod executor;
pub mod failpoint;
pub mod follow;
pub mod journal;
pub mod json;
pub mod logs;
pub mod metrics;
pub mod progress;
pub mod random;
pub mod registry;
mod run_core;
mod runtime;
pub mod secret;
pub mod state;
pub mod step;
pub mod store;
pub mod testing;
pub mod time;
mod timers;
pub mod trace;
pub mod view;
pub mod wait;
pub mod webhook;

pub use ask::{Answer, Ask, AskOutcome};
pub use auth::{AccessToken, AuthProvider, Principal, Provider};
pub use context::{Receive, ServeCtx, StepCtxSource, TaskCtx, ToolCtx, WorkflowCtx};
pub use error::{FatalError, ForkError, NonDeterminismError, RetryableError, StepError, StoreError, ToolError};
pub use events::RunEvent;
pub use journal::{Entry, Op, RunId, RunStatus};
pub use logs::LogLevel;
pub use registry::{Manifest, Shape, manifest};
pub use runtime::{AuthorizationStart, OpenQuestion, PendingResponse, WebhookReply};
pub use runtime::{DATABASE_URL_VARIABLE, DefaultStore, Opening};
pub use runtime::{Error, HookDelivery, Phase, RunHandle, RunOutcome, Runtime, RuntimeBuilder, StartOptions};
pub use runtime::{RefusedRun, Upgrade, UpgradedRun};
pub use step::{Backoff, RetryPolicy, StepCall, StepCtx, StepDef};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use wait::{AbortSignal, Cancelled, Hook, HookError, create_hook, create_hook_with_token, sleep, sleep_until};
pub use webhook::{
    Respond, Webhook, WebhookOptions, WebhookRequest, WebhookResponse, create_webhook, create_webhook_with,
};
