//! The registry of tools and steps the macros compile into a binary, and the manifest built from it.
//!
//! Each `#[tool]`, `#[workflow_tool]` and `#[task]` registers its [`ToolDescriptor`], and each
//! `#[step]` its [`StepDef`], when the program starts ([`register!`](crate::register)).
//! The [`Manifest`] lists them sorted by name, so it is the same on every run of the same binary.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::Serialize;
use serde_json::Value;

use crate::context::{Receive, ServeCtx, TaskCtx, ToolCtx, WorkflowCtx};
use crate::error::ToolError;
use crate::run_core::{RetryPolicy, StepDef};

/// The future a tool body becomes once its input is decoded and its output encoded.
pub type BodyFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// Does the call end with the model step, or outlive it as a task?
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    /// The call ends within the model step (the turn may park on it).
    Step,
    /// The call returns a receipt and its result arrives later.
    Task,
}

/// Can the body park without holding compute?
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Suspend {
    /// No: it runs to completion inside the step.
    None,
    /// Yes: it is a durable workflow.
    Workflow,
}

/// A tool's cell: lifetime × suspendability, fixed at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Shape {
    /// The lifetime axis.
    pub lifetime: Lifetime,
    /// The suspendability axis.
    pub suspend: Suspend,
}

impl Shape {
    /// `#[tool]`: step / none.
    pub const TOOL: Shape = Shape { lifetime: Lifetime::Step, suspend: Suspend::None };
    /// `#[workflow_tool]`: step / workflow.
    pub const WORKFLOW_TOOL: Shape = Shape { lifetime: Lifetime::Step, suspend: Suspend::Workflow };
    /// `#[task]` and `#[task(serve)]`: task / workflow.
    pub const TASK: Shape = Shape { lifetime: Lifetime::Task, suspend: Suspend::Workflow };
}

/// How the runtime enters a tool's body.
#[derive(Clone, Copy)]
pub enum EntryPoint {
    /// A plain `#[tool]`.
    Plain(fn(Value, ToolCtx) -> BodyFuture),
    /// A `#[workflow_tool]`.
    Workflow(fn(Value, WorkflowCtx) -> BodyFuture),
    /// A `#[task]`.
    Task(fn(Value, TaskCtx) -> BodyFuture),
    /// A `#[task(serve)]`.
    Serve(fn(Receive, ServeCtx) -> BodyFuture),
}

impl fmt::Debug for EntryPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            EntryPoint::Plain(_) => "Plain",
            EntryPoint::Workflow(_) => "Workflow",
            EntryPoint::Task(_) => "Task",
            EntryPoint::Serve(_) => "Serve",
        };
        f.write_str(kind)
    }
}

/// Everything the runtime knows about one tool. `#[tool]`, `#[workflow_tool]` and `#[task]` each
/// emit one.
#[derive(Debug)]
pub struct ToolDescriptor {
    /// The model-facing name.
    pub name: &'static str,
    /// The description the model reads (the fn's doc comment).
    pub description: &'static str,
    /// The module path and fn name, stable across rebuilds.
    pub workflow_id: &'static str,
    /// The tool's cell.
    pub shape: Shape,
    /// The JSON Schema of the input.
    pub input_schema: fn() -> Value,
    /// Checks that a JSON value decodes into the input type, saying what is wrong if not
    /// ([`check_decodes`] of the input type).
    pub validate_input: fn(&Value) -> Result<(), InputRefusal>,
    /// The JSON Schema of the output, when the output type has one and it describes an object
    /// (what MCP's `outputSchema` allows); `None` otherwise.
    pub output_schema: fn() -> Option<Value>,
    /// How to enter the body.
    pub entry: EntryPoint,
    /// The fingerprint of the body: 16 hex digits of a hash of its tokens, so comments and
    /// formatting do not change it. Runs record it when they start.
    pub fingerprint: &'static str,
    /// The build's version, recorded by runs with the fingerprint: `EVE_BUILD_VERSION` when the
    /// crate was compiled, else the crate's version.
    pub version: &'static str,
}

impl ToolDescriptor {
    /// The stamp runs of this tool started by this binary record: its body's fingerprint and the
    /// build's version.
    pub fn build(&self) -> crate::journal::BuildStamp {
        crate::journal::BuildStamp { fingerprint: self.fingerprint.to_owned(), version: self.version.to_owned() }
    }
}

/// Submits a workflow of a part built on the core (a session): started by that part, never
/// offered to a model, and absent from the manifest. [`workflow`] finds it by its workflow id.
#[derive(Debug)]
pub struct InternalWorkflow(pub &'static ToolDescriptor);

inventory::collect!(InternalWorkflow);

/// The tools and steps the macros registered when the program started.
static TOOLS: Mutex<Vec<&'static ToolDescriptor>> = Mutex::new(Vec::new());
static STEPS: Mutex<Vec<&'static StepDef>> = Mutex::new(Vec::new());

/// What the registry holds: tool descriptors and step definitions.
pub trait Submit: Sync + 'static {
    /// Adds this to the registry: what [`register!`](crate::register) calls when the program
    /// starts. Submitting the same value again changes nothing.
    fn submit(&'static self);
}

impl Submit for ToolDescriptor {
    fn submit(&'static self) {
        submit(&TOOLS, self);
    }
}

impl Submit for StepDef {
    fn submit(&'static self) {
        submit(&STEPS, self);
    }
}

fn submit<T>(list: &Mutex<Vec<&'static T>>, value: &'static T) {
    let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
    if !list.iter().any(|known| std::ptr::eq(*known, value)) {
        list.push(value);
    }
}

/// The first registered value of one kind that `pick` picks.
fn find<T>(list: &Mutex<Vec<&'static T>>, pick: impl Fn(&T) -> bool) -> Option<&'static T> {
    list.lock().unwrap_or_else(PoisonError::into_inner).iter().copied().find(|value| pick(value))
}

/// What is registered of one kind, copied out so no lock is held while it is read.
fn registered<T>(list: &Mutex<Vec<&'static T>>) -> Vec<&'static T> {
    list.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Registers a `static` tool descriptor or step definition when the program starts, from a constructor the platform's loader runs before `main`, as `inventory`
/// does: what the macros emit for each tool and step.
///
/// Not `inventory::submit!`, which compiles four items and three nested macro expansions for
/// each use: paid for every tool and step of a user's crate on every build, this is one
/// constructor.
///
/// ```ignore
/// static TOOL: ToolDescriptor = ToolDescriptor { … };
/// eve_runtime::register!(TOOL);
/// ```
///
/// It declares a `static` named `__EVE_SUBMIT` and a fn named `__eve_submit`, so two in one scope
/// need a block each (`const _: () = { register!(…); };`).
#[macro_export]
macro_rules! register {
    ($registered:path) => {
        extern "C" fn __eve_submit() {
            $crate::registry::Submit::submit(&$registered)
        }
        #[used]
        #[cfg_attr(
            any(
                target_os = "linux",
                target_os = "android",
                target_os = "dragonfly",
                target_os = "freebsd",
                target_os = "haiku",
                target_os = "illumos",
                target_os = "netbsd",
                target_os = "openbsd",
                target_os = "none",
            ),
            unsafe(link_section = ".init_array")
        )]
        #[cfg_attr(
            any(target_os = "macos", target_os = "ios"),
            unsafe(link_section = "__DATA,__mod_init_func,mod_init_funcs")
        )]
        #[cfg_attr(windows, unsafe(link_section = ".CRT$XCU"))]
        static __EVE_SUBMIT: extern "C" fn() = __eve_submit;
    };
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "dragonfly",
    target_os = "freebsd",
    target_os = "haiku",
    target_os = "illumos",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "none",
    target_os = "macos",
    target_os = "ios",
    windows,
)))]
compile_error!("eve registers tools and steps through start-up constructors, which this target has not got");

/// Every tool compiled into this binary, sorted by name.
pub fn tools() -> Vec<&'static ToolDescriptor> {
    let mut tools = registered(&TOOLS);
    tools.sort_by_key(|tool| (tool.name, tool.workflow_id));
    tools
}

/// The tool with this model-facing name.
pub fn tool(name: &str) -> Option<&'static ToolDescriptor> {
    find(&TOOLS, |tool| tool.name == name)
}

/// The tool (or runtime workflow) whose body has this workflow id.
pub fn workflow(workflow_id: &str) -> Option<&'static ToolDescriptor> {
    let internal = || inventory::iter::<InternalWorkflow>().map(|registration| registration.0);
    find(&TOOLS, |tool| tool.workflow_id == workflow_id)
        .or_else(|| internal().find(|tool| tool.workflow_id == workflow_id))
}

/// Every step compiled into this binary, sorted by id.
pub fn steps() -> Vec<&'static StepDef> {
    let mut steps = registered(&STEPS);
    steps.sort_by_key(|step| step.id());
    steps
}

/// The model-facing task id of a `#[task]` run: the tool name and six characters derived from the
/// run id (`deploy-4hd8sa`).
pub fn task_id(tool: &str, run: &crate::journal::RunId) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut hash = crate::journal::InputHash::of(run.as_str().as_bytes()).0;
    let mut suffix = String::with_capacity(6);
    for _ in 0..6 {
        suffix.push(ALPHABET[(hash % 36) as usize] as char);
        hash /= 36;
    }
    format!("{tool}-{suffix}")
}

/// Tells the journal's decoder the names of the steps compiled into this binary, so entries and
/// replay borrow them (see [`crate::journal::decode::entry`]).
pub(crate) fn learn_step_names() {
    let names = || registered(&STEPS).into_iter().map(StepDef::name).collect();
    crate::journal::decode::learn_step_names(names);
}

pub use crate::json::kind as json_kind;

/// The manifest: every tool with its compiled shape, and every step with its policy. It is public
/// JSON, so its keys are camelCase, as the HTTP API's and the event stream's are.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The tools, sorted by name.
    pub tools: Vec<ToolEntry>,
    /// The steps, sorted by id.
    pub steps: Vec<StepEntry>,
}

/// One tool in the [`Manifest`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    /// The model-facing name.
    pub name: String,
    /// The description: the fn's doc comment, its paragraphs kept and hard-wrapped lines unwrapped.
    pub description: String,
    /// The input's JSON Schema (`inputSchema`).
    pub input_schema: Value,
    /// The output's JSON Schema, when the output type describes an object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The compiled shape.
    pub shape: Shape,
    /// How a call enters the body, which is what the caller waits for: `execute` (`#[tool]` and
    /// `#[workflow_tool]`: the call returns the result, and the turn waits until it settles), `task`
    /// (`#[task]`: a receipt now, the result later) or `serve` (`#[task(serve)]`: a resumable task
    /// fed a stream of calls, a receipt per call).
    pub entry: &'static str,
    /// The workflow id (`workflowId`): the module path and fn name runs are journaled under.
    pub workflow_id: String,
    /// The body's fingerprint and the build's version, as runs started by this binary record
    /// them.
    pub build: crate::journal::BuildStamp,
}

/// One step in the [`Manifest`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepEntry {
    /// The module path and fn name.
    pub id: String,
    /// The journaled name.
    pub name: String,
    /// Attempts in all (`maxAttempts`).
    pub max_attempts: u32,
    /// The delays between attempts.
    pub backoff: BackoffEntry,
}

/// A step's backoff in the [`Manifest`]: the delay after the `n`th failure is
/// `initialMs × factor^(n-1)` (capped at a day).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffEntry {
    /// The delay after the first failure, in milliseconds (`initialMs`).
    pub initial_ms: u64,
    /// What each delay is multiplied by for the next: 2 for exponential, 1 for fixed.
    pub factor: u32,
}

/// Builds the manifest of this binary.
pub fn manifest() -> Manifest {
    let tools = tools().into_iter().map(|tool| ToolEntry {
        name: tool.name.to_owned(),
        description: unwrap_lines(tool.description),
        input_schema: (tool.input_schema)(),
        output_schema: (tool.output_schema)(),
        shape: tool.shape,
        entry: match tool.entry {
            EntryPoint::Plain(_) | EntryPoint::Workflow(_) => "execute",
            EntryPoint::Task(_) => "task",
            EntryPoint::Serve(_) => "serve",
        },
        workflow_id: tool.workflow_id.to_owned(),
        build: tool.build(),
    });
    let steps = steps().into_iter().map(|step| {
        let RetryPolicy { max_attempts, backoff } = step.policy();
        let backoff = BackoffEntry { initial_ms: backoff.initial_millis(), factor: backoff.factor() };
        StepEntry { id: step.id().to_owned(), name: step.name().to_owned(), max_attempts, backoff }
    });
    Manifest { tools: tools.collect(), steps: steps.collect() }
}

/// `text` with its hard-wrapped lines joined: paragraphs (split by blank lines) stay, and so do
/// lines that start a list item and paragraphs holding a code block.
fn unwrap_lines(text: &str) -> String {
    let starts_item = |line: &str| {
        let line = line.trim_start();
        line.starts_with("- ")
            || line.starts_with("* ")
            || line.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok())
    };
    let paragraphs = text.split("\n\n").map(|paragraph| {
        if paragraph.contains("```") {
            return paragraph.to_owned();
        }
        let mut joined = String::new();
        for line in paragraph.lines() {
            if !joined.is_empty() {
                joined.push(if starts_item(line) { '\n' } else { ' ' });
            }
            joined.push_str(if starts_item(line) { line } else { line.trim() });
        }
        joined
    });
    paragraphs.collect::<Vec<_>>().join("\n\n")
}

/// Names that more than one tool claims, each with the workflow ids claiming it, sorted. A call
/// by such a name would be ambiguous, so the runtime refuses to build.
pub fn duplicate_names() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut claims: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
    for tool in tools() {
        claims.entry(tool.name).or_default().push(tool.workflow_id);
    }
    claims.into_iter().filter(|(_, ids)| ids.len() > 1).collect()
}

/// Why a tool's input was refused: what is wrong, and the field at fault by its JSON path
/// (`quantity`, `lines[0].sku`) when one is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputRefusal {
    /// What is wrong, naming the field: ``field `lines[0].sku`: 7 is not of type "string"``.
    pub message: String,
    /// The field at fault.
    pub field: Option<String>,
}

/// Checks `input` for fields the tool does not take, against the tool's JSON Schema (with the
/// `schema-validation` feature), then against its input type, so that a run starts only with an
/// input its body can take, and a refusal names the field. Every way in (a run's start, a plain
/// tool's call, MCP, a session's tool call) checks here.
pub fn check_input(tool: &'static ToolDescriptor, input: &Value) -> Result<(), InputRefusal> {
    check_fields(tool, input)?;
    #[cfg(feature = "schema-validation")]
    schema::check(tool, input)?;
    (tool.validate_input)(input)
}

/// Refuses the fields of `input` that the tool's schema does not take at its top (it says
/// `"additionalProperties": false` and does not list them). Decoding would drop such a field
/// silently, so this runs with or without `schema-validation`; that feature's check refuses one
/// in a nested object too.
fn check_fields(tool: &'static ToolDescriptor, input: &Value) -> Result<(), InputRefusal> {
    let (Some(takes), Value::Object(input)) = (closed_fields(tool), input) else { return Ok(()) };
    let unknown: Vec<&str> =
        input.keys().map(String::as_str).filter(|name| !takes.iter().any(|taken| taken == name)).collect();
    let Some(first) = unknown.first() else { return Ok(()) };
    let takes = match takes.is_empty() {
        true => "the tool takes no fields".to_owned(),
        false => format!("the tool takes {}", quoted(takes.iter().map(String::as_str))),
    };
    let message = format!("{} ({takes})", unknown_fields("the input", &unknown));
    Err(InputRefusal { message, field: Some((*first).to_owned()) })
}

/// ``{whose} has a field `extra` that the tool does not take; remove it``, and so for several.
fn unknown_fields(whose: &str, unknown: &[&str]) -> String {
    let (fields, them) = if unknown.len() == 1 { ("a field", "it") } else { ("fields", "them") };
    format!("{whose} has {fields} {} that the tool does not take; remove {them}", quoted(unknown.iter().copied()))
}

/// ``names`` as `` `a`, `b` ``.
fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

/// The fields `tool` takes when its schema takes no others at its top (`"additionalProperties":
/// false`, no `patternProperties`), from a cache keyed by workflow id: a schema is built once.
fn closed_fields(tool: &'static ToolDescriptor) -> Option<Arc<[String]>> {
    static CACHE: PerTool<Option<Arc<[String]>>> = OnceLock::new();
    per_tool(&CACHE, tool, || {
        let schema = (tool.input_schema)();
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false))
            && schema.get("patternProperties").is_none();
        let listed = schema.get("properties").and_then(Value::as_object).into_iter().flat_map(|fields| fields.keys());
        closed.then(|| listed.cloned().collect())
    })
}

/// A value made once per tool from its schema, keyed by workflow id (see [`per_tool`]).
type PerTool<T> = OnceLock<Mutex<BTreeMap<&'static str, T>>>;

/// The value `cache` holds for `tool`, made by `make` the first time it is asked for.
fn per_tool<T: Clone>(cache: &PerTool<T>, tool: &'static ToolDescriptor, make: impl FnOnce() -> T) -> T {
    let mut cache = cache.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    cache.entry(tool.workflow_id).or_insert_with(make).clone()
}

/// Checks that `input` may start a run of `descriptor`: it fits the tool's input (a resumable
/// task's run starts with no input: each of its calls is checked as it is sent) and is not nested
/// too deeply to journal.
pub fn check_start_input(descriptor: &'static ToolDescriptor, input: &Value) -> Result<(), crate::error::Error> {
    let tool = descriptor.name;
    if !matches!(descriptor.entry, EntryPoint::Serve(_)) {
        check_input(descriptor, input).map_err(|refusal| invalid_input(tool, refusal))?;
    }
    crate::journal::depth::check(input, || format!("the input of tool `{tool}`"))?;
    Ok(())
}

/// The error for an input `tool` refused.
pub(crate) fn invalid_input(tool: &str, refusal: InputRefusal) -> crate::error::Error {
    crate::error::Error::InvalidInput { tool: tool.to_owned(), message: refusal.message, field: refusal.field }
}

/// The error for a call of a tool no tool of this binary is named: it lists the tools there are.
pub fn unknown_tool(name: &str) -> crate::error::Error {
    let known: Vec<&'static str> = tools().iter().map(|tool| tool.name).collect();
    let nearest = nearest(name, &known);
    crate::error::Error::UnknownTool { name: name.to_owned(), known, nearest }
}

/// The name among `known` nearest to `name`, if a few edits (a third of its length, at least two)
/// make one into the other: a mistyped tool name.
fn nearest(name: &str, known: &[&'static str]) -> Option<&'static str> {
    let within = (name.chars().count() / 3).max(2);
    let distances = known.iter().map(|candidate| (strsim::damerau_levenshtein(name, candidate), *candidate));
    distances.filter(|(distance, _)| *distance <= within).min().map(|(_, candidate)| candidate)
}

/// Checks that `input` is a JSON object that decodes into `T`, naming the field at fault: the
/// [`ToolDescriptor::validate_input`] of a tool whose input type is `T`. A tool's input is checked
/// and decoded by one fn, [`crate::json::decode`], so each input type's `Deserialize` is compiled
/// once, for one deserializer.
pub fn check_decodes<T: serde::de::DeserializeOwned>(input: &Value) -> Result<(), InputRefusal> {
    object(input)?;
    match crate::json::decode::<T>(input) {
        Ok(_) => Ok(()),
        Err(refusal) => Err(refusal.into()),
    }
}

/// Refuses an input that is not a JSON object.
fn object(input: &Value) -> Result<(), InputRefusal> {
    match input {
        Value::Object(_) => Ok(()),
        _ => Err(InputRefusal { message: format!("expected a JSON object, found {}", json_kind(input)), field: None }),
    }
}

impl From<crate::json::Refusal> for InputRefusal {
    fn from(crate::json::Refusal { error, field }: crate::json::Refusal) -> Self {
        InputRefusal { message: error.to_string(), field }
    }
}

/// Tool input checked against the tool's JSON Schema.
#[cfg(feature = "schema-validation")]
mod schema {
    use std::sync::{Arc, OnceLock};

    use serde_json::Value;

    use super::{InputRefusal, ToolDescriptor};

    /// Checks `input` against the schema of `tool`. The schema is compiled once per tool; one
    /// that does not compile leaves decoding as the only check.
    pub(super) fn check(tool: &'static ToolDescriptor, input: &Value) -> Result<(), InputRefusal> {
        match validator(tool).and_then(|validator| validator.iter_errors(input).next().map(|error| describe(&error))) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// The compiled schema of `tool`, from a cache keyed by workflow id.
    fn validator(tool: &'static ToolDescriptor) -> Option<Arc<jsonschema::Validator>> {
        static CACHE: super::PerTool<Option<Arc<jsonschema::Validator>>> = OnceLock::new();
        super::per_tool(&CACHE, tool, || {
            jsonschema::validator_for(&(tool.input_schema)())
                .inspect_err(|error| {
                    tracing::warn!(
                        tool = tool.name,
                        "cannot compile the input schema, so only decoding checks input: {error}"
                    )
                })
                .ok()
                .map(Arc::new)
        })
    }

    /// A schema violation in words, naming the field: ``field `items[2].name`: 3 is not of type "string"``.
    fn describe(error: &jsonschema::ValidationError<'_>) -> InputRefusal {
        let mut path = String::new();
        for segment in error.instance_path().segments() {
            match segment {
                jsonschema::paths::LocationSegment::Property(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&name);
                }
                jsonschema::paths::LocationSegment::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        let within = |field: &str| if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") };
        match error.kind() {
            jsonschema::error::ValidationErrorKind::Required { property } => {
                let field = within(&property.as_str().map_or_else(|| property.to_string(), str::to_owned));
                return InputRefusal { message: format!("field `{field}` is required"), field: Some(field) };
            }
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected }
            | jsonschema::error::ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                let whose = if path.is_empty() { "the input".to_owned() } else { format!("field `{path}`") };
                let unknown: Vec<&str> = unexpected.iter().map(String::as_str).collect();
                let field = unknown.first().map(|first| within(first));
                return InputRefusal { message: super::unknown_fields(&whose, &unknown), field };
            }
            _ => {}
        }
        match path.is_empty() {
            true => InputRefusal { message: format!("the input: {error}"), field: None },
            false => InputRefusal { message: format!("field `{path}`: {error}"), field: Some(path) },
        }
    }

    #[cfg(test)]
    mod tests {
        use serde_json::json;

        use super::*;

        #[test]
        fn schema_errors_name_the_field_by_its_json_path() {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
                },
                "required": ["name"]
            });
            let validator = jsonschema::validator_for(&schema).unwrap();
            let first = |value: Value| describe(&validator.iter_errors(&value).next().unwrap()).message;
            assert_eq!(first(json!({})), "field `name` is required");
            assert!(
                first(json!({"name": 3})).starts_with("field `name`: 3 is not of type"),
                "{}",
                first(json!({"name": 3}))
            );
            assert_eq!(first(json!({"name": "a", "items": [{"n": 1}, {}]})), "field `items[1].n` is required");
        }

        #[test]
        fn a_nested_field_the_schema_does_not_take_is_named_by_its_path() {
            let line =
                json!({"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false});
            let schema = json!({"type": "object", "properties": {"lines": {"type": "array", "items": line}}});
            let validator = jsonschema::validator_for(&schema).unwrap();
            let first = |value: Value| describe(&validator.iter_errors(&value).next().unwrap());
            let refusal = first(json!({"lines": [{"n": 1}, {"n": 2, "m": 3}]}));
            assert_eq!(refusal.field.as_deref(), Some("lines[1].m"));
            assert_eq!(refusal.message, "field `lines[1]` has a field `m` that the tool does not take; remove it");
            let refusal = first(json!({"lines": [{"m": 3, "o": 4}]}));
            assert_eq!(
                refusal.message,
                "field `lines[0]` has fields `m`, `o` that the tool does not take; remove them"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A tool whose schema takes `order_id` and `amount` and no other field; its body never runs.
    static CLOSED: ToolDescriptor = ToolDescriptor {
        name: "t.closed",
        description: "",
        workflow_id: "registry::tests::closed",
        shape: Shape::TOOL,
        input_schema: || json!({ "type": "object", "properties": { "order_id": {}, "amount": {} }, "additionalProperties": false }),
        validate_input: |_| Ok(()),
        output_schema: || None,
        entry: EntryPoint::Plain(|_, _| Box::pin(async { Ok(Value::Null) })),
        fingerprint: "0000000000000000",
        version: "0.0.0",
    };

    #[test]
    fn a_field_a_closed_schema_does_not_list_is_refused_with_or_without_schema_validation() {
        let refusal = check_input(&CLOSED, &json!({ "order_id": "A-1", "amount": 5, "extra": true })).unwrap_err();
        assert_eq!(refusal.field.as_deref(), Some("extra"));
        assert_eq!(
            refusal.message,
            "the input has a field `extra` that the tool does not take; remove it (the tool takes `amount`, `order_id`)"
        );
        let refusal = check_input(&CLOSED, &json!({ "a": 1, "b": 2 })).unwrap_err();
        assert!(refusal.message.starts_with("the input has fields `a`, `b` that the tool does not take; remove them"));
        assert_eq!(check_input(&CLOSED, &json!({ "order_id": "A-1" })), Ok(()));
    }
}
