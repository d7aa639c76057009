//! The journal: an append-only, densely numbered list of what happened in one run.
//!
//! A run's state is a pure function of its journal. Entry `0` is always
//! [`Entry::RunStarted`]; the last entry of a finished run is one of [`Entry::RunCompleted`],
//! [`Entry::RunFailed`] or [`Entry::RunCancelled`].
//!
//! Every durable operation the body performs (a step call, a sleep, a hook, a recorded clock
//! read) takes an [`Op`] number in the order the body *creates* it. Entries come in two groups:
//!
//! - **Records** describe an operation when it is created: [`Entry::Recorded`],
//!   [`Entry::TimerScheduled`], [`Entry::HookCreated`], [`Entry::StepRetrying`]. Replay looks them
//!   up by op number, so where they sit in the journal does not matter.
//! - **Deliveries** are things the body observes: [`Entry::StepCompleted`],
//!   [`Entry::TimerFired`], [`Entry::HookReceived`], [`Entry::HookTokenTaken`],
//!   [`Entry::AskResolved`], [`Entry::CancelRequested`]. Replay feeds them
//!   to the body one at a time in journal order, exactly as the live executor did, so a replay
//!   sees the interleaving the original run saw.
//!
//! [`Entry::RunUpgraded`] is neither: it says which build a history runs on from then on, for the
//! workers that decide whether they may advance the run; the body never sees it.
//!
//! The values a run journals (its input, a step's output, a recorded value) are [`Payload`]s: a
//! `Value` tree, or the JSON text the body serialized a value of its own type to, which costs one
//! allocation where a tree costs one for every map, key and string in it. Both are stored as the
//! same JSON, and a payload read back from a store is a tree.

pub mod ask;
pub(crate) mod canonical;
pub mod decode;
pub mod depth;
pub mod form;
mod payload;
mod position;
pub mod sample;
mod trace;
pub mod webhook;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Timestamp;

pub use payload::Payload;
pub(crate) use payload::string_bound;
pub use position::{Position, PositionError};
pub use trace::TraceParent;

/// The identifier of one run: one call of a workflow tool or task.
///
/// It deserializes only from a valid id (see [`InvalidRunId`]), as it parses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RunId(String);

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        if !RunId::is_valid(&id) {
            return Err(serde::de::Error::custom(InvalidRunId(id)));
        }
        Ok(RunId(id))
    }
}

impl RunId {
    /// A fresh run id such as `run_019ad1f3c2a84f0c2a9d81be`: 12 hex digits of the current time in
    /// milliseconds, then 48 random bits. Ids made later sort later, so a store that keys its
    /// journal by run id appends next to recent rows instead of all over its index.
    pub fn generate() -> Self {
        let millis = crate::time::Timestamp::from_system_time(std::time::SystemTime::now()).as_millis();
        let mut bytes = [0u8; 6];
        crate::random::fill_random(&mut bytes);
        let random = bytes.iter().fold(0u64, |acc, byte| acc << 8 | u64::from(*byte));
        RunId(format!("run_{:012x}{random:012x}", millis & 0xffff_ffff_ffff))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `id` is 1 to 128 ASCII letters, digits, `-`, `_` or `.`.
    fn is_valid(id: &str) -> bool {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        !id.is_empty() && id.len() <= 128 && id.chars().all(allowed)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A run id that is empty, longer than 128 bytes or has characters other than ASCII letters,
/// digits, `-`, `_` and `.`.
#[derive(Debug, thiserror::Error)]
#[error("invalid run id {0:?}: use 1 to 128 ASCII letters, digits, `-`, `_` or `.`")]
pub struct InvalidRunId(String);

impl FromStr for RunId {
    type Err = InvalidRunId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if !RunId::is_valid(s) {
            return Err(InvalidRunId(s.to_owned()));
        }
        Ok(RunId(s.to_owned()))
    }
}

/// The number of a durable operation within its run, in creation order starting at 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Op(pub u32);

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {}", self.0)
    }
}

/// A stable 64-bit hash of an operation's serialized input (xxh3), printed as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct InputHash(pub u64);

impl InputHash {
    /// The hash of `bytes`, the same on every platform and build.
    pub fn of(bytes: &[u8]) -> Self {
        InputHash(xxhash_rust::xxh3::xxh3_64(bytes))
    }
}

impl fmt::Display for InputHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Serialize for InputHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InputHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A visitor rather than `String::deserialize`: the hex is parsed from the input in place.
        struct Hex;

        impl serde::de::Visitor<'_> for Hex {
            type Value = InputHash;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("16 hex digits")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<InputHash, E> {
                match hex16(text) {
                    Some(hash) => Ok(InputHash(hash)),
                    // Any other form: as `from_str_radix` reads it, or its error.
                    None => u64::from_str_radix(text, 16).map(InputHash).map_err(E::custom),
                }
            }
        }

        deserializer.deserialize_str(Hex)
    }
}

/// `text` as a hash if it is 16 hex digits, as [`InputHash`] prints one. Replay reads one from
/// every step entry, and `u64::from_str_radix` spent about 300 instructions on each.
fn hex16(text: &str) -> Option<u64> {
    let digits: &[u8; 16] = text.as_bytes().try_into().ok()?;
    digits.iter().try_fold(0u64, |hash, &digit| {
        let value = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            b'A'..=b'F' => digit - b'A' + 10,
            _ => return None,
        };
        Some(hash << 4 | u64::from(value))
    })
}

/// The kind of a durable operation, as divergence errors name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// A `#[step]` call.
    Step,
    /// A durable `sleep`.
    Sleep,
    /// A hook or webhook.
    Hook,
    /// `ctx.now()`.
    Now,
    /// `ctx.random()`.
    Random,
    /// `ctx.uuid()`.
    Uuid,
    /// `ctx.ask()`.
    Ask,
    /// A published value.
    Published,
    /// A value recorded under a name (`ctx.record`).
    Value,
    /// A child run started (a session's task or workflow tool call).
    Started,
    /// The marker of a patch the run took (`ctx.patched`), named by the patch's id.
    Patch,
}

impl OpKind {
    /// The kind's name, as signatures and messages give it: `step`, `sleep`, `hook`, ….
    pub const fn name(self) -> &'static str {
        match self {
            OpKind::Step => "step",
            OpKind::Sleep => "sleep",
            OpKind::Hook => "hook",
            OpKind::Now => "now",
            OpKind::Random => "random",
            OpKind::Uuid => "uuid",
            OpKind::Ask => "ask",
            OpKind::Published => "published",
            OpKind::Value => "value",
            OpKind::Started => "started",
            OpKind::Patch => "patch",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What identifies an operation for the divergence check: its kind, name and input hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpSignature {
    /// The kind of operation.
    pub kind: OpKind,
    /// The step name, or the kind's name for other operations.
    pub name: Cow<'static, str>,
    /// The hash of the serialized input.
    pub input_hash: InputHash,
}

impl fmt::Display for OpSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            OpKind::Step => write!(f, "step `{}` (input hash {})", self.name, self.input_hash),
            OpKind::Patch => write!(f, "patch `{}`", self.name),
            kind => write!(f, "{kind} (input hash {})", self.input_hash),
        }
    }
}

/// How a step ended for good: `{"ok": {"value": ...}}` or `{"err": {"fatal": ..., "message": ...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// The step returned a value.
    Ok {
        /// The serialized output.
        value: Payload,
    },
    /// The step failed with a fatal error, or its last permitted attempt failed.
    Err {
        /// Whether the error was fatal (no retry was attempted).
        fatal: bool,
        /// The error message.
        message: String,
    },
}

/// Where in a workflow's source it asked for an operation: the call of a step, `sleep`, a hook,
/// a question or a recorded value, as `#[track_caller]` sees it. Known for the operations eve
/// provides when the body calls them directly; a call through a helper of the user's own names
/// the helper's call site, and none is given when the call was made from inside eve itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLocation {
    /// The source file, as the compiler names it.
    pub file: String,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
}

impl SourceLocation {
    /// The location of `caller`, or `None` when it lies inside eve's own crates, where it would
    /// tell the user nothing.
    pub fn of(caller: &std::panic::Location<'_>) -> Option<Self> {
        let file = caller.file();
        (!is_eves(file)).then(|| SourceLocation { file: file.to_owned(), line: caller.line(), column: caller.column() })
    }
}

/// Whether `file` is a source of eve's own crates: `eve-runtime/src/…` in this workspace,
/// `…/eve-runtime-0.1.0/src/…` from a registry.
fn is_eves(file: &str) -> bool {
    let path = file.replace('\\', "/");
    let own = |part: &str| {
        ["eve-runtime", "eve-tools"]
            .iter()
            .any(|name| part.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with('-')))
    };
    path.split('/').collect::<Vec<_>>().windows(2).any(|pair| own(pair[0]) && pair[1] == "src")
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunFailure {
    /// The body returned an error.
    Tool {
        /// The error message.
        message: String,
    },
    /// The body diverged from its journal on replay.
    NonDeterminism {
        /// The operation at which it diverged.
        op: Op,
        /// What the journal recorded there, or `None` if it recorded nothing.
        expected: Option<OpSignature>,
        /// What the body asked for there, or `None` if it asked for nothing more.
        found: Option<OpSignature>,
        /// Where in the source the body asked for it, when that is known (see [`SourceLocation`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<SourceLocation>,
    },
    /// The binary has no workflow with the run's workflow id.
    UnknownWorkflow {
        /// The workflow id recorded when the run started.
        workflow_id: String,
    },
    /// The body panicked.
    Panicked {
        /// The panic message.
        message: String,
    },
    /// The journal reached the runtime's history limit.
    HistoryLimit {
        /// The limit, in journal entries.
        limit: u64,
    },
}

impl fmt::Display for RunFailure {
    /// The failure in words, for a person: `the warehouse is closed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nothing = |signature: &Option<OpSignature>| match signature {
            Some(signature) => signature.to_string(),
            None => "nothing".to_owned(),
        };
        match self {
            RunFailure::Tool { message } => f.write_str(message),
            RunFailure::NonDeterminism { op, expected, found, at } => {
                write!(
                    f,
                    "the body diverged from its journal at {op}: the journal has {}, the body asked for {}",
                    nothing(expected),
                    nothing(found)
                )?;
                at.as_ref().map_or(Ok(()), |at| write!(f, " at {at}"))
            }
            RunFailure::UnknownWorkflow { workflow_id } => {
                write!(f, "this binary has no workflow `{workflow_id}`; run it with the binary that started it")
            }
            RunFailure::Panicked { message } => write!(f, "the body panicked: {message}"),
            RunFailure::HistoryLimit { limit } => write!(f, "the journal reached its limit of {limit} entries"),
        }
    }
}

/// The run a child run reports to, and the hook of that run that receives its reports: what the
/// child journals that its parent must know (a question, a sign-in, a published value, its end)
/// reaches that hook as a [`ChildReport`], in the same transaction as the child's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent run.
    pub run: RunId,
    /// The parent's hook that receives the reports.
    pub hook: Op,
}

/// What a child run tells its parent: one of its journal entries, and where it stands in the
/// child's journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    /// The child run.
    pub child: RunId,
    /// The entry's sequence number in the child's journal.
    pub seq: u64,
    /// The entry.
    pub entry: Entry,
}

impl ChildReport {
    /// Whether a child reports `entry` to its parent: questions and their resolution, sign-ins,
    /// values it published, and its end.
    pub fn reports(entry: &Entry) -> bool {
        matches!(
            entry,
            Entry::AskCreated { .. }
                | Entry::AskResolved { .. }
                | Entry::AuthRequired { .. }
                | Entry::AuthCompleted { .. }
                | Entry::Recorded { kind: RecordKind::Published, .. }
        ) || entry.is_terminal()
    }
}

/// The kind of a value recorded so the body sees the same value on replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// A clock read.
    Now,
    /// Random bits.
    Random,
    /// A random (version 4) UUID.
    Uuid,
    /// A value the body published (to its parent, or to a session's event feed): recorded so it
    /// is published once, and not again on replay.
    Published,
    /// A value the body recorded under a name with `WorkflowCtx::record` (the agents a
    /// session's `ctx.agents()` read, say), as `{"name": …, "value": …}`, so replay sees the value
    /// the run first saw and checks that it is asked for under the same name.
    Value,
    /// A child run the body started (a session's task or workflow tool call), as `{"run": id}`.
    /// The run is created in the same transaction that journals this record, so the record is
    /// the proof that it exists, and a replay does not start it again.
    Started,
    /// The marker of a patch the run took, with the patch's id as its value (`"id"`): a run that
    /// records it takes the patch's new branch on every replay, and one whose journal has other
    /// ops there took the old branch (see `WorkflowCtx::patched`).
    Patch,
}

impl RecordKind {
    /// The kind of operation this record answers.
    pub fn op_kind(self) -> OpKind {
        match self {
            RecordKind::Now => OpKind::Now,
            RecordKind::Random => OpKind::Random,
            RecordKind::Uuid => OpKind::Uuid,
            RecordKind::Published => OpKind::Published,
            RecordKind::Value => OpKind::Value,
            RecordKind::Started => OpKind::Started,
            RecordKind::Patch => OpKind::Patch,
        }
    }
}

/// The code a run's history was started by, as its [`Entry::RunStarted`] records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BuildStamp {
    /// The fingerprint of the workflow body (a hash of its tokens: comments and formatting do
    /// not count), as the tool macros compute it.
    pub fingerprint: String,
    /// The build's version: `EVE_BUILD_VERSION` when the tool was compiled, else its crate's version.
    pub version: String,
}

/// Where a forked run came from (see `Runtime::fork`): the run it was forked from, and the op it
/// was forked at. The fork's journal holds that run's entries of the ops before `op`; its body
/// ran live from `op` on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ForkedFrom {
    /// The run forked, which stays as it was.
    pub run: RunId,
    /// The first op the fork ran again rather than took from that run's journal.
    pub op: Op,
}

impl fmt::Display for ForkedFrom {
    /// `forked from run_… at op 5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "forked from {} at {}", self.run, self.op)
    }
}

/// One journal entry. See the module documentation for the two groups of entries.
///
/// Entries are stored as JSON in serde's externally tagged form, `{"step_completed": {...}}`,
/// which decodes in one pass (replay decodes every entry of a journal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// The run was created with this input.
    RunStarted {
        /// The workflow id (module path and fn name) of the body. A boxed `str`, as `tool` is:
        /// the room it saves makes room for the fork's link below.
        workflow_id: Box<str>,
        /// The model-facing tool name. A boxed `str`, as `principal` is, to keep every entry small.
        tool: Box<str>,
        /// The tool input.
        input: Payload,
        /// When the run was created.
        at: Timestamp,
        /// The identity that started the run; tokens resolve under it. A boxed `str` rather than
        /// a `String`: the room it saves keeps the trace below from growing every entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Box<str>>,
        /// Whether someone can answer the run's asks (false for, say, a scheduled run).
        #[serde(default = "yes", skip_serializing_if = "is_yes")]
        interactive: bool,
        /// How many histories of this run came before this one (see `WorkflowCtx::continue_as_new`).
        #[serde(default, skip_serializing_if = "is_zero")]
        continued: u32,
        /// The run this one reports to, if another run started it (a session's task). Boxed,
        /// like a hook's `webhook`: few runs have one, and every entry is as large as the largest
        /// variant, so a journal of steps keeps no room for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<Box<ParentLink>>,
        /// The trace the run's spans join (see [`TraceParent`]); absent when no traces were
        /// exported as it started, and in journals written before traces were. Boxed, like the
        /// parent link, as few runs have one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<Box<TraceParent>>,
        /// The build that started this history: its workflow body's fingerprint and the build's
        /// version. Absent in journals written before runs recorded it. Boxed, as few entries
        /// are run starts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        build: Option<Box<BuildStamp>>,
        /// The run and op this run was forked from, for a run made by `Runtime::fork`; absent
        /// for every other run and in journals written before forks. Boxed, as few runs have one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forked_from: Option<Box<ForkedFrom>>,
    },
    /// The run's history moved to another build (`Runtime::upgrade_runs`, `host runs upgrade`),
    /// whose code replays it: from here on the run is this build's, as if it had started it. The
    /// body never sees it.
    RunUpgraded {
        /// The build the history runs on from here on.
        build: Box<BuildStamp>,
        /// The build it ran on before, if its journal recorded one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Box<BuildStamp>>,
        /// When it moved.
        at: Timestamp,
    },
    /// A deterministic value (clock, randomness) handed to the body.
    Recorded {
        /// The operation.
        op: Op,
        /// What was recorded.
        kind: RecordKind,
        /// The value.
        value: Payload,
    },
    /// A durable sleep was created with this absolute deadline.
    TimerScheduled {
        /// The operation.
        op: Op,
        /// When the timer fires.
        deadline: Timestamp,
    },
    /// A hook was created. Only the token's hash is journaled.
    HookCreated {
        /// The operation.
        op: Op,
        /// SHA-256 of the token, hex.
        token_hash: String,
        /// For generated tokens, the random nonce the token is derived from with the runtime's
        /// secret key; `None` for tokens the body chose.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
        /// Whether another run already held the chosen token, so the hook never receives anything.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        conflict: bool,
        /// For a webhook, how the runtime answers its HTTP requests and what it redacts from them
        /// (journaled as a bare `Respond` was when nothing beyond the defaults is redacted).
        /// Boxed: the options are five times the size of a completed step's entry, and every
        /// entry is as large as the largest variant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        webhook: Option<Box<self::webhook::WebhookOptions>>,
    },
    /// A question for a person was asked.
    AskCreated {
        /// The operation.
        op: Op,
        /// The id people answer it by.
        request_id: String,
        /// The question.
        request: self::ask::Ask,
    },
    /// A question resolved (delivery).
    AskResolved {
        /// The operation.
        op: Op,
        /// How.
        outcome: self::ask::AskOutcome,
    },
    /// A step attempt needs a sign-in; the run waits for the provider's callback. Only the hash of
    /// the callback's `state` is kept (in the store's hook index), never a token or code.
    AuthRequired {
        /// The step's operation.
        op: Op,
        /// The provider id.
        provider: String,
        /// The attempt that was interrupted (it is retried after sign-in, with the same number).
        attempt: u32,
        /// The nonce the callback's `state` is derived from with the runtime's secret key.
        nonce: String,
        /// SHA-256 of the `state`, hex.
        state_hash: String,
    },
    /// The sign-in a step waited for completed; the provider holds the token. A marker only.
    AuthCompleted {
        /// The step's operation.
        op: Op,
    },
    /// A step attempt failed and another attempt is due at `next_attempt_at`.
    StepRetrying {
        /// The operation.
        op: Op,
        /// The step name: borrowed from the step's definition when the entry is made, owned when
        /// it is read back.
        name: Cow<'static, str>,
        /// The hash of the serialized arguments.
        input_hash: InputHash,
        /// The attempt that failed, from 1.
        attempt: u32,
        /// Its error message.
        error: String,
        /// When the next attempt may start.
        next_attempt_at: Timestamp,
    },
    /// A step finished for good (delivery).
    StepCompleted {
        /// The operation.
        op: Op,
        /// The step name: borrowed from the step's definition when the entry is made, owned when
        /// it is read back.
        name: Cow<'static, str>,
        /// The hash of the serialized arguments.
        input_hash: InputHash,
        /// The attempt that finished, from 1.
        attempt: u32,
        /// The result.
        outcome: StepOutcome,
        /// How long the attempt that finished ran, in milliseconds of the machine's monotonic
        /// clock; absent for a step that ended without running (a cancellation) and in older
        /// journals.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        took_ms: Option<u64>,
    },
    /// A durable sleep reached its deadline (delivery).
    TimerFired {
        /// The operation.
        op: Op,
    },
    /// A hook received a payload (delivery).
    HookReceived {
        /// The operation.
        op: Op,
        /// The payload.
        payload: Value,
    },
    /// The hook's chosen token turned out to be held by another unfinished run, so the hook
    /// receives nothing (delivery). Journaled with its `HookCreated` when the store refuses the
    /// token, and delivered then, so a replay tells the body at the same point the live run did.
    HookTokenTaken {
        /// The hook's operation.
        op: Op,
    },
    /// The run's abort signal fired (delivery).
    CancelRequested {
        /// Why, for people reading the journal.
        reason: String,
        /// Whether the run ends with what its body returns (a call interrupted by a new message)
        /// rather than cancelled.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        keep_output: bool,
        /// When the grace for cleanup ends: a body still running then ends cancelled. Journaled so
        /// that a restart does not grant the cleanup a fresh grace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_until: Option<Timestamp>,
    },
    /// The body returned this output.
    RunCompleted {
        /// The serialized output.
        output: Value,
    },
    /// The run failed.
    RunFailed {
        /// Why.
        failure: RunFailure,
    },
    /// The run ended cancelled.
    RunCancelled {},
}

impl Entry {
    /// The operation this entry belongs to, if any.
    pub fn op(&self) -> Option<Op> {
        match self {
            Entry::Recorded { op, .. }
            | Entry::TimerScheduled { op, .. }
            | Entry::HookCreated { op, .. }
            | Entry::StepRetrying { op, .. }
            | Entry::StepCompleted { op, .. }
            | Entry::TimerFired { op }
            | Entry::HookReceived { op, .. }
            | Entry::HookTokenTaken { op }
            | Entry::AskCreated { op, .. }
            | Entry::AskResolved { op, .. }
            | Entry::AuthRequired { op, .. }
            | Entry::AuthCompleted { op } => Some(*op),
            _ => None,
        }
    }

    /// The entry's kind as it is journaled, such as `step_completed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::RunStarted { .. } => "run_started",
            Entry::RunUpgraded { .. } => "run_upgraded",
            Entry::Recorded { .. } => "recorded",
            Entry::TimerScheduled { .. } => "timer_scheduled",
            Entry::HookCreated { .. } => "hook_created",
            Entry::AskCreated { .. } => "ask_created",
            Entry::AskResolved { .. } => "ask_resolved",
            Entry::AuthRequired { .. } => "auth_required",
            Entry::AuthCompleted { .. } => "auth_completed",
            Entry::StepRetrying { .. } => "step_retrying",
            Entry::StepCompleted { .. } => "step_completed",
            Entry::TimerFired { .. } => "timer_fired",
            Entry::HookReceived { .. } => "hook_received",
            Entry::HookTokenTaken { .. } => "hook_token_taken",
            Entry::CancelRequested { .. } => "cancel_requested",
            Entry::RunCompleted { .. } => "run_completed",
            Entry::RunFailed { .. } => "run_failed",
            Entry::RunCancelled {} => "run_cancelled",
        }
    }

    /// Whether this entry ends the run.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Entry::RunCompleted { .. } | Entry::RunFailed { .. } | Entry::RunCancelled {})
    }

    /// Whether the body observes this entry, so replay delivers it in journal order.
    pub fn is_delivery(&self) -> bool {
        matches!(
            self,
            Entry::StepCompleted { .. }
                | Entry::TimerFired { .. }
                | Entry::HookReceived { .. }
                | Entry::HookTokenTaken { .. }
                | Entry::AskResolved { .. }
                | Entry::CancelRequested { .. }
        )
    }

    /// The signature of the operation this entry records, for the divergence check.
    pub fn signature(&self) -> Option<OpSignature> {
        // Every kind but a step is named after itself, so only a step's name is copied.
        let sig = |kind: OpKind, input_hash| OpSignature { kind, name: kind.name().into(), input_hash };
        match self {
            Entry::StepCompleted { name, input_hash, .. } | Entry::StepRetrying { name, input_hash, .. } => {
                Some(OpSignature { kind: OpKind::Step, name: name.clone(), input_hash: *input_hash })
            }
            Entry::TimerScheduled { .. } => Some(sig(OpKind::Sleep, InputHash::default())),
            Entry::HookCreated { .. } => Some(sig(OpKind::Hook, InputHash::default())),
            Entry::AskCreated { request, .. } => Some(sig(OpKind::Ask, self::ask::hash(request))),
            Entry::Recorded { kind: RecordKind::Value, value, .. } => {
                let name = value.to_value().get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                Some(OpSignature { kind: OpKind::Value, name: name.into(), input_hash: InputHash::default() })
            }
            Entry::Recorded { kind: RecordKind::Patch, value, .. } => {
                let id = value.to_value().as_str().unwrap_or_default().to_owned();
                Some(OpSignature { kind: OpKind::Patch, name: id.into(), input_hash: InputHash::default() })
            }
            Entry::Recorded { kind, .. } => Some(sig(kind.op_kind(), InputHash::default())),
            _ => None,
        }
    }
}

/// Asserts that `value`, what the journal keeps of a `T`, decodes to a `T` that encodes back to
/// `value`: a value handed over in process (a step's output, a session's state) must be what
/// replay will decode from the journal. Debug builds check it wherever a value is handed over.
#[cfg(debug_assertions)]
pub fn assert_survives_journal<T>(value: &Value, what: &str)
where
    T: Serialize + serde::de::DeserializeOwned,
{
    let decoded: T = serde_json::from_value(value.clone()).unwrap_or_else(|error| panic!("{what} decodes: {error}"));
    let again = serde_json::to_value(&decoded).unwrap_or_else(|error| panic!("{what} encodes: {error}"));
    assert_eq!(&again, value, "{what} must survive its journal unchanged");
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// The status of a run as stores index it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Running or parked on a durable wait.
    Active,
    /// Returned an output.
    Completed,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl RunStatus {
    /// The status a journal ending in `last` implies.
    pub fn after(last: &Entry) -> RunStatus {
        match last {
            Entry::RunCompleted { .. } => RunStatus::Completed,
            Entry::RunFailed { .. } => RunStatus::Failed,
            Entry::RunCancelled {} => RunStatus::Cancelled,
            _ => RunStatus::Active,
        }
    }

    /// Whether the run has ended.
    pub fn is_finished(self) -> bool {
        self != RunStatus::Active
    }

    /// Its name, as it is shown and stored: `active`, `completed`, `failed`, `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Active => "active",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status with this [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<RunStatus> {
        [RunStatus::Active, RunStatus::Completed, RunStatus::Failed, RunStatus::Cancelled]
            .into_iter()
            .find(|status| status.name() == name)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a run ended. Serializes as `{"status": "completed", "output": …}`,
/// `{"status": "failed", "failure": …}` or `{"status": "cancelled"}`.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    /// The body returned this output.
    Completed(Value),
    /// The run failed.
    Failed(RunFailure),
    /// The run was cancelled.
    Cancelled,
}

impl Serialize for RunOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        match self {
            RunOutcome::Completed(output) => {
                map.serialize_entry("status", "completed")?;
                map.serialize_entry("output", output)?;
            }
            RunOutcome::Failed(failure) => {
                map.serialize_entry("status", "failed")?;
                map.serialize_entry("failure", failure)?;
            }
            RunOutcome::Cancelled => map.serialize_entry("status", "cancelled")?,
        }
        map.end()
    }
}

impl RunOutcome {
    /// The outcome a terminal journal entry records, or `None` for any other entry.
    pub fn from_terminal(entry: &Entry) -> Option<RunOutcome> {
        match entry {
            Entry::RunCompleted { output } => Some(RunOutcome::Completed(output.clone())),
            Entry::RunFailed { failure } => Some(RunOutcome::Failed(failure.clone())),
            Entry::RunCancelled {} => Some(RunOutcome::Cancelled),
            _ => None,
        }
    }

    /// The status of a run that ended so: `completed`, `failed` or `cancelled`.
    pub fn status(&self) -> RunStatus {
        match self {
            RunOutcome::Completed(_) => RunStatus::Completed,
            RunOutcome::Failed(_) => RunStatus::Failed,
            RunOutcome::Cancelled => RunStatus::Cancelled,
        }
    }

    /// The output of a completed run.
    pub fn output(&self) -> Option<&Value> {
        match self {
            RunOutcome::Completed(output) => Some(output),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_inside_eve_is_not_the_users() {
        for eves in
            ["eve-runtime/src/step.rs", "/r/eve-runtime-0.1.0/src/wait.rs", "C:\\r\\eve-tools-2.3.1\\src\\lib.rs"]
        {
            assert!(is_eves(eves), "{eves}");
        }
        for users in
            ["src/main.rs", "tests/replay.rs", "/r/eve-runtime-fork-user/app/src/x.rs", "eve-runtimes/src/a.rs"]
        {
            assert!(!is_eves(users), "{users}");
        }
        assert!(SourceLocation::of(std::panic::Location::caller()).is_none(), "this file is eve's own");
    }

    #[test]
    fn entries_round_trip_through_json() {
        let entry = Entry::StepCompleted {
            op: Op(3),
            name: "charge".into(),
            input_hash: InputHash::of(b"[1]"),
            attempt: 2,
            outcome: StepOutcome::Ok { value: serde_json::json!({"ü": "✓"}).into() },
            took_ms: Some(1_500),
        };
        let text = serde_json::to_string(&entry).unwrap();
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), entry);
    }

    /// A run's first entry written before traces were journaled decodes without one, and one
    /// journaled with a trace reads it back.
    #[test]
    fn a_run_start_may_or_may_not_carry_its_trace() {
        let old = r#"{"run_started":{"workflow_id":"m::t","tool":"t","input":{},"at":1}}"#;
        let Entry::RunStarted { traceparent, .. } = serde_json::from_str::<Entry>(old).unwrap() else {
            panic!("a run start decodes as one")
        };
        assert_eq!(traceparent, None);
        let traced = old
            .replace(r#""at":1"#, r#""at":1,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01""#);
        let entry = serde_json::from_str::<Entry>(&traced).unwrap();
        assert!(
            matches!(&entry, Entry::RunStarted { traceparent: Some(parent), .. } if parent.as_str().starts_with("00-4bf9"))
        );
        assert_eq!(serde_json::to_string(&entry).unwrap(), traced);
    }

    /// A run start written before forks existed reads with no link, and a fork's link round-trips
    /// under `forked_from`.
    #[test]
    fn a_run_start_may_or_may_not_be_a_fork() {
        let old = r#"{"run_started":{"workflow_id":"m::t","tool":"t","input":{},"at":1}}"#;
        let Entry::RunStarted { forked_from, .. } = serde_json::from_str::<Entry>(old).unwrap() else {
            panic!("a run start decodes as one")
        };
        assert_eq!(forked_from, None);
        let forked = old.replace(r#""at":1"#, r#""at":1,"forked_from":{"run":"run_a","op":5}"#);
        let entry = serde_json::from_str::<Entry>(&forked).unwrap();
        let Entry::RunStarted { forked_from: Some(link), .. } = &entry else { panic!("the link reads back") };
        assert_eq!(link.to_string(), "forked from run_a at op 5");
        assert_eq!(serde_json::to_string(&entry).unwrap(), forked);
    }

    /// Every entry takes the room of the largest variant, and a journal is mostly completed
    /// steps: a store's copy of a journal, a replay's and a parked run's grow with that room, and a
    /// step's entry is moved several times on its way to the store. Rare, large fields are boxed
    /// (a hook's webhook options, a run's parent link and trace) so that the largest variant, `RunStarted`,
    /// stays near a completed step's size.
    #[test]
    fn an_entry_is_not_much_larger_than_a_completed_step() {
        let step = std::mem::size_of::<(Op, Cow<'static, str>, InputHash, u32, StepOutcome, Option<u64>)>();
        let entry = std::mem::size_of::<Entry>();
        assert!(
            entry <= 128,
            "an entry takes {entry} bytes (a completed step's fields {step}): box the new large field"
        );
    }

    #[test]
    fn run_ids_reject_unsafe_characters() {
        assert!("run_abc-1.2".parse::<RunId>().is_ok());
        assert!("".parse::<RunId>().is_err());
        assert!("a/b".parse::<RunId>().is_err());
        assert!(RunId::generate().as_str().parse::<RunId>().is_ok());
    }
}
