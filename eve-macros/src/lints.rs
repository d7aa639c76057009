//! The body scanner: finds calls a body must not make, in the raw tokens the user wrote.
//!
//! A workflow body is replayed from its journal, so it must take the same path every time: clocks,
//! randomness, threads, timers, the environment, files and the network belong in `#[step]`s.
//! Context capabilities are gated the same way: `ask` only in workflow bodies, `get_token` only
//! in steps. The scanner walks the token trees recursively, into blocks, closures and macro
//! invocations (which are still unexpanded tokens here), and matches a small table of patterns.
//! Adding a lint is one line in a table.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// A token pattern.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// A path such as `"SystemTime::now"`, or a prefix such as `"rand::"` (any path below it).
    Path(&'static str),
    /// A call of a free fn such as `random()`; method calls (`ctx.random()`) do not match.
    Call(&'static str),
    /// A macro whose input does not start with `biased;`, such as `select!`.
    Unbiased(&'static str),
    /// A method or field of a context parameter, such as `ctx.ask`.
    OnContext(&'static str),
}

/// One entry of a table: what to look for, and what to do instead.
#[derive(Debug)]
pub struct Lint {
    /// The pattern.
    pub pattern: Pattern,
    /// What to use instead, for the message.
    pub advice: &'static str,
}

const CLOCK: &str = "use `ctx.now()`, which is recorded in the journal";
const RANDOM: &str = "use `ctx.random()` or `ctx.uuid()`, which are recorded in the journal";
const SPAWN: &str = "call `#[step]` fns instead, and await them together with `futures::join!`";
const SLEEP: &str = "use `eve_tools::sleep`, a durable timer that survives restarts";
const ENV: &str = "read it in a `#[step]` and pass the value to the body";
const FS: &str = "do file I/O in a `#[step]`";
const NET: &str = "make network calls in a `#[step]`";
const SELECT: &str = "add `biased;` as its first line so replay picks the same branch";

/// What a workflow body must not do directly.
pub const NONDETERMINISM: &[Lint] = &[
    Lint { pattern: Pattern::Path("SystemTime::now"), advice: CLOCK },
    Lint { pattern: Pattern::Path("Instant::now"), advice: CLOCK },
    Lint { pattern: Pattern::Path("Utc::now"), advice: CLOCK },
    Lint { pattern: Pattern::Path("Local::now"), advice: CLOCK },
    Lint { pattern: Pattern::Path("OffsetDateTime::now_utc"), advice: CLOCK },
    Lint { pattern: Pattern::Path("rand::"), advice: RANDOM },
    Lint { pattern: Pattern::Path("fastrand::"), advice: RANDOM },
    Lint { pattern: Pattern::Path("thread_rng"), advice: RANDOM },
    Lint { pattern: Pattern::Call("random"), advice: RANDOM },
    Lint { pattern: Pattern::Path("Uuid::new_v4"), advice: RANDOM },
    Lint { pattern: Pattern::Path("tokio::spawn"), advice: SPAWN },
    Lint { pattern: Pattern::Path("task::spawn"), advice: SPAWN },
    Lint { pattern: Pattern::Path("task::spawn_blocking"), advice: SPAWN },
    Lint { pattern: Pattern::Path("thread::spawn"), advice: SPAWN },
    Lint { pattern: Pattern::Path("time::sleep"), advice: SLEEP },
    Lint { pattern: Pattern::Path("time::sleep_until"), advice: SLEEP },
    Lint { pattern: Pattern::Path("thread::sleep"), advice: SLEEP },
    Lint { pattern: Pattern::Path("std::env"), advice: ENV },
    Lint { pattern: Pattern::Path("env::"), advice: ENV },
    Lint { pattern: Pattern::Path("std::fs"), advice: FS },
    Lint { pattern: Pattern::Path("fs::"), advice: FS },
    Lint { pattern: Pattern::Path("File::open"), advice: FS },
    Lint { pattern: Pattern::Path("File::create"), advice: FS },
    Lint { pattern: Pattern::Path("reqwest::"), advice: NET },
    Lint { pattern: Pattern::Path("hyper::"), advice: NET },
    Lint { pattern: Pattern::Path("ureq::"), advice: NET },
    Lint { pattern: Pattern::Path("TcpStream"), advice: NET },
    Lint { pattern: Pattern::Path("TcpListener"), advice: NET },
    Lint { pattern: Pattern::Path("UdpSocket"), advice: NET },
    Lint { pattern: Pattern::Unbiased("select"), advice: SELECT },
];

/// Context capabilities that exist only in workflow bodies.
pub const WORKFLOW_ONLY: &[Lint] = &[
    Lint { pattern: Pattern::OnContext("ask"), advice: "" },
    Lint { pattern: Pattern::OnContext("agent"), advice: "" },
    Lint { pattern: Pattern::OnContext("agents"), advice: "" },
];

/// Context capabilities that belong in steps, so that tokens never enter the journal.
pub const STEP_ONLY: &[Lint] = &[
    Lint { pattern: Pattern::OnContext("get_token"), advice: "" },
    Lint { pattern: Pattern::OnContext("require_auth"), advice: "" },
];

/// Rust's `yield`, which is not how a body reports progress (that is `progress.report(…)`).
pub const YIELDS: &[Lint] = &[Lint { pattern: Pattern::Path("yield"), advice: "" }];

/// One match in a body.
pub struct Finding<'l> {
    /// The lint that matched.
    pub lint: &'l Lint,
    /// What matched, as the user wrote it without spaces: `std::thread::sleep`, `select!`, `ask`.
    pub text: String,
    /// The matched tokens, to span the error on.
    pub tokens: TokenStream,
}

/// A body's tokens, read once for every table the macro scans it with.
///
/// Each ident's text is asked of the compiler once: comparing a `proc_macro2::Ident` with a string
/// asks for it again at every comparison, and the scanner compares each token with every pattern.
pub struct Body {
    root: Level,
    /// The names of the context parameters, for `Pattern::OnContext`.
    contexts: Vec<String>,
}

impl Body {
    /// Reads `body`; `contexts` names the context parameters.
    pub fn new(body: TokenStream, contexts: Vec<String>) -> Self {
        Body { root: Level::new(body), contexts }
    }
}

/// The tokens of one group, or of the body itself.
struct Level {
    tokens: Vec<TokenTree>,
    /// Each ident's text; `None` for the other tokens.
    words: Vec<Option<String>>,
    /// Each group's contents; `None` for the other tokens.
    groups: Vec<Option<Level>>,
}

impl Level {
    fn new(stream: TokenStream) -> Self {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let words = tokens.iter().map(|token| matches!(token, TokenTree::Ident(_)).then(|| token.to_string()));
        let groups = tokens.iter().map(|token| match token {
            TokenTree::Group(group) => Some(Level::new(group.stream())),
            _ => None,
        });
        Level { words: words.collect(), groups: groups.collect(), tokens }
    }

    fn is_ident(&self, at: usize, name: &str) -> bool {
        self.words.get(at).and_then(Option::as_deref) == Some(name)
    }

    fn is_any_ident(&self, at: usize) -> bool {
        matches!(self.words.get(at), Some(Some(_)))
    }

    fn is_punct(&self, at: usize, char: char) -> bool {
        matches!(self.tokens.get(at), Some(TokenTree::Punct(punct)) if punct.as_char() == char)
    }

    fn is_group(&self, at: usize, delimiter: Delimiter) -> bool {
        matches!(self.tokens.get(at), Some(TokenTree::Group(group)) if group.delimiter() == delimiter)
    }

    /// The index after a `::` at `at`.
    fn path_separator(&self, at: usize) -> Option<usize> {
        match (self.tokens.get(at), self.tokens.get(at + 1)) {
            (Some(TokenTree::Punct(first)), Some(TokenTree::Punct(second)))
                if first.as_char() == ':' && first.spacing() == Spacing::Joint && second.as_char() == ':' =>
            {
                Some(at + 2)
            }
            _ => None,
        }
    }

    /// Whether the token at `at` is a group whose contents start with `biased;`.
    fn starts_biased(&self, at: usize) -> bool {
        matches!(self.groups.get(at), Some(Some(inner)) if inner.is_ident(0, "biased") && inner.is_punct(1, ';'))
    }
}

/// Every match of `lints` in `body`, in source order.
pub fn scan<'l>(body: &Body, lints: &'l [Lint]) -> Vec<Finding<'l>> {
    let mut findings = Vec::new();
    scan_into(&body.root, lints, &body.contexts, &mut findings);
    findings
}

fn scan_into<'l>(level: &Level, lints: &'l [Lint], contexts: &[String], findings: &mut Vec<Finding<'l>>) {
    let mut at = 0;
    while at < level.tokens.len() {
        let found = lints.iter().find_map(|lint| matches(level, at, lint.pattern, contexts).map(|span| (lint, span)));
        if let Some((lint, (start, end))) = found {
            findings.push(finding(lint, &level.tokens[start..end]));
            at = end;
            continue;
        }
        if let Some(inner) = &level.groups[at] {
            scan_into(inner, lints, contexts, findings);
        }
        at += 1;
    }
}

fn finding<'l>(lint: &'l Lint, tokens: &[TokenTree]) -> Finding<'l> {
    let text = tokens.iter().map(ToString::to_string).collect();
    Finding { lint, text, tokens: tokens.iter().cloned().collect() }
}

/// The token range `pattern` matches at `at`, extended to the whole path it is part of.
fn matches(level: &Level, at: usize, pattern: Pattern, contexts: &[String]) -> Option<(usize, usize)> {
    // Every pattern starts with an ident: most tokens are ruled out here, before any pattern.
    let word = level.words.get(at)?.as_deref()?;
    if at > 0 && level.is_punct(at - 1, '.') && !matches!(pattern, Pattern::OnContext(_)) {
        return None;
    }
    match pattern {
        Pattern::Path(path) => {
            let first = path.split_once("::").map_or(path, |(first, _)| first);
            (first == word).then(|| match_path(level, at, path))?.map(|end| extend_path(level, at, end))
        }
        Pattern::Call(name) => (level.is_ident(at, name)
            && level.is_group(at + 1, Delimiter::Parenthesis)
            && !(at > 0 && level.is_ident(at - 1, "fn")))
        .then(|| extend_path(level, at, at + 1)),
        Pattern::Unbiased(name) => (level.is_ident(at, name)
            && level.is_punct(at + 1, '!')
            && at + 2 < level.tokens.len()
            && !level.starts_biased(at + 2))
        .then(|| extend_path(level, at, at + 2)),
        Pattern::OnContext(name) => (contexts.iter().any(|context| level.is_ident(at, context))
            && level.is_punct(at + 1, '.')
            && level.is_ident(at + 2, name))
        .then_some((at + 2, at + 3)),
    }
}

/// A call of `ctx.patched(…)` or `ctx.deprecate_patch(…)` in a body.
pub struct PatchCall {
    /// `patched` or `deprecate_patch`.
    pub method: String,
    /// The id, when the argument is one string literal.
    pub id: Option<syn::LitStr>,
    /// The method and its arguments, to span an error on.
    pub tokens: TokenStream,
}

/// Every patch call on a context parameter in `body`, in source order: the macros check that each
/// id is a literal used once, as the journal tells patches apart by their ids.
pub fn patch_calls(body: &Body) -> Vec<PatchCall> {
    let mut calls = Vec::new();
    patch_calls_into(&body.root, &body.contexts, &mut calls);
    calls
}

fn patch_calls_into(level: &Level, contexts: &[String], calls: &mut Vec<PatchCall>) {
    for at in 0..level.tokens.len() {
        let on_context = ["patched", "deprecate_patch"]
            .into_iter()
            .find(|method| matches(level, at, Pattern::OnContext(method), contexts).is_some());
        if let (Some(method), Some(TokenTree::Group(args))) = (on_context, level.tokens.get(at + 3))
            && args.delimiter() == Delimiter::Parenthesis
        {
            calls.push(PatchCall {
                method: method.to_owned(),
                id: syn::parse2(args.stream()).ok(),
                tokens: level.tokens[at + 2..at + 4].iter().cloned().collect(),
            });
        }
        if let Some(inner) = &level.groups[at] {
            patch_calls_into(inner, contexts, calls);
        }
    }
}

/// Where the path `pattern` (`a::b`, or the prefix `a::`) ends if it starts at `at`.
fn match_path(level: &Level, at: usize, pattern: &str) -> Option<usize> {
    let mut end = at;
    let mut segments = pattern.split("::").peekable();
    while let Some(segment) = segments.next() {
        if segment.is_empty() {
            return Some(end);
        }
        if !level.is_ident(end, segment) {
            return None;
        }
        end += 1;
        if segments.peek().is_some() {
            end = level.path_separator(end)?;
        }
    }
    Some(end)
}

/// Grows `start..end` over the `a::` segments before it and the `::b` segments after it.
fn extend_path(level: &Level, mut start: usize, mut end: usize) -> (usize, usize) {
    while start >= 3 && level.path_separator(start - 2).is_some() && level.is_any_ident(start - 3) {
        start -= 3;
    }
    if start >= 2 && level.path_separator(start - 2).is_some() {
        start -= 2;
    }
    // A prefix pattern (`rand::`) ends after its `::`: take the name that follows.
    if end > 0 && level.is_punct(end - 1, ':') && level.is_any_ident(end) {
        end += 1;
    }
    while let Some(after) = level.path_separator(end).filter(|&after| level.is_any_ident(after)) {
        end = after + 1;
    }
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::{Body, NONDETERMINISM, STEP_ONLY, WORKFLOW_ONLY, YIELDS, scan};

    /// `(body, what the scanner reports)` for the determinism table.
    const NONDETERMINISM_CASES: &[(&str, &[&str])] = &[
        ("let t = std::time::SystemTime::now();", &["std::time::SystemTime::now"]),
        ("let t = Instant::now();", &["Instant::now"]),
        ("let t = chrono::Utc::now();", &["chrono::Utc::now"]),
        ("let t = ctx.now();", &[]),
        ("let n: u8 = rand::random();", &["rand::random"]),
        ("let mut rng = rand::thread_rng();", &["rand::thread_rng"]),
        ("let mut rng = thread_rng();", &["thread_rng"]),
        ("let n: u64 = random();", &["random"]),
        ("let n = ctx.random();", &[]),
        ("fn random() -> u8 { 4 }", &[]),
        ("let id = Uuid::new_v4();", &["Uuid::new_v4"]),
        ("tokio::spawn(async {});", &["tokio::spawn"]),
        ("tokio::task::spawn_blocking(|| ());", &["tokio::task::spawn_blocking"]),
        ("std::thread::spawn(|| ());", &["std::thread::spawn"]),
        ("tokio::time::sleep(d).await;", &["tokio::time::sleep"]),
        ("std::thread::sleep(d);", &["std::thread::sleep"]),
        ("eve_tools::sleep(d).await?;", &[]),
        ("let v = std::env::var(\"X\");", &["std::env::var"]),
        ("let v = env::var(\"X\");", &["env::var"]),
        ("let v = env!(\"CARGO_PKG_NAME\");", &[]),
        ("let s = std::fs::read_to_string(p)?;", &["std::fs::read_to_string"]),
        ("let s = tokio::fs::read(p).await?;", &["tokio::fs::read"]),
        ("let f = File::open(p)?;", &["File::open"]),
        ("let r = reqwest::get(url).await?;", &["reqwest::get"]),
        ("let s = TcpStream::connect(a)?;", &["TcpStream::connect"]),
        ("let s = \"SystemTime::now\";", &[]),
        ("tokio::select! { _ = a => {}, _ = b => {} }", &["tokio::select!"]),
        ("tokio::select! { biased; _ = a => {}, _ = b => {} }", &[]),
        ("if x { let v = vec![Instant::now()]; }", &["Instant::now"]),
        ("async move { format!(\"{:?}\", SystemTime::now()) }", &["SystemTime::now"]),
        ("select! { _ = a => tokio::spawn(f), }", &["select!", "tokio::spawn"]),
        ("let a = x.now(); let b = y.spawn();", &[]),
        ("Instant::now(); Instant::now();", &["Instant::now", "Instant::now"]),
    ];

    #[test]
    fn the_determinism_table_finds_what_replay_cannot_repeat() {
        for (body, expected) in NONDETERMINISM_CASES {
            let tokens = body.parse().expect("test bodies are valid tokens");
            let found: Vec<String> =
                scan(&Body::new(tokens, Vec::new()), NONDETERMINISM).into_iter().map(|f| f.text).collect();
            assert_eq!(&found, expected, "scanning `{body}`");
        }
    }

    #[test]
    fn only_the_yield_keyword_is_a_yield() {
        let cases: &[(&str, usize)] = &[
            ("yield 5;", 1),
            ("if done { yield json!({ \"stage\": 1 }); }", 1),
            ("progress.report(5).await?;", 0),
            ("co.yield_(5).await;", 0),
            ("let r#yield = 1;", 0),
        ];
        for (body, expected) in cases {
            let tokens = body.parse().expect("test bodies are valid tokens");
            assert_eq!(scan(&Body::new(tokens, Vec::new()), YIELDS).len(), *expected, "scanning `{body}`");
        }
    }

    #[test]
    fn capabilities_match_only_on_the_context() {
        let contexts = ["ctx".to_owned(), "step".to_owned()];
        let cases: &[(&str, &[&str])] = &[
            ("ctx.ask(question).await", &["ask"]),
            ("let a = step.agents;", &["agents"]),
            ("ctx.agent(\"x\", input).await", &["agent"]),
            ("llm.ask(prompt).await", &[]),
            ("let ask = 1; ask + 1", &[]),
        ];
        for (body, expected) in cases {
            let tokens = body.parse().expect("test bodies are valid tokens");
            let found: Vec<String> =
                scan(&Body::new(tokens, contexts.to_vec()), WORKFLOW_ONLY).into_iter().map(|f| f.text).collect();
            assert_eq!(&found, expected, "scanning `{body}`");
        }
        let tokens = "let token = ctx.get_token(&GITHUB).await?;".parse().expect("valid tokens");
        assert_eq!(scan(&Body::new(tokens, contexts.to_vec()), STEP_ONLY).len(), 1);
    }
}
