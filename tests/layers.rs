//! The layers of each crate run one way: a module names only modules on lower rungs of its
//! crate's ladder (ARCHITECTURE.md draws them). Between crates, the crate graph keeps the parts
//! in order: a driver, sessions or the host sees the core's public API and nothing else.
//!
//! Every source file of each crate is parsed (with syn), and every path it
//! names that starts with `crate`, `self` or `super` is resolved to the module it reaches into.
//! Each module has a rung in the table below, found by its longest listed prefix; a reference
//! from one rung to another must go down. Modules on the same rung are one module split into
//! files (the executor's driver and its `attempts`, say) and may name each other. Two things are
//! not references: declaring a child module, and a `pub use` that re-exports a module's own
//! descendant (it composes a namespace, as `store` shows `IndexChanges`). `#[cfg(test)]` code is
//! left out: tests may reach anywhere.
//!
//! A module missing from the table fails the test: a new module takes a rung on purpose.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The ladder of `eve-runtime`, the durable core, bottom first. Rungs are listed as (module
/// prefix, rung).
const RUNTIME: &[(&str, u32)] = &[
    // The bottom: time, randomness, the host's state, crash points.
    ("time", 0),
    ("random", 0),
    ("state", 0),
    ("failpoint", 0),
    // What the runtime counts and times, and the switch the parts record by.
    ("metrics", 0),
    // Log messages a body sends, and who listens to them: not durable, beside the journal.
    ("logs", 0),
    // Decoding JSON with the path of what is wrong, and naming a value's kind.
    ("json", 0),
    // The journal and what it records.
    ("journal", 1),
    ("secret", 2),
    ("error", 2),
    // How a run's journaled trace context is read from and set on spans (an exporter's seam).
    ("trace", 2),
    // The store trait, its driver kit and the memory store; sign-in providers' trait and tokens.
    ("store", 3),
    ("auth", 3),
    // What the runtime reports, the timer service, following a run's journal and the view of it.
    ("events", 4),
    ("timers", 4),
    ("follow", 4),
    ("view", 4),
    // What a step may ask of the runtime: the seam the parts above the core use.
    ("control", 5),
    // The state a run's body shares with its executor.
    ("run_core", 6),
    // The primitives a body uses, each on its own rung.
    ("wait", 7),
    ("ask", 8),
    ("webhook", 9),
    ("step", 10),
    ("context", 11),
    // Progress a body reports, published through its context.
    ("progress", 12),
    ("registry", 12),
    // The executor, then the runtime on top of the core.
    ("executor", 13),
    ("runtime", 14),
    // The replay check over recorded journals.
    ("testing", 15),
    // The crate root re-exports everything.
    ("crate", 100),
];

/// The ladder of `eve-sessions`: the model seam and the strings at the bottom, the `eve.session`
/// workflow above them, the handle people use on top.
const SESSIONS: &[(&str, u32)] = &[
    ("error", 0),
    ("metrics", 0),
    ("strings", 0),
    ("model", 0),
    ("inbound", 0),
    ("openai", 1),
    ("agents", 1),
    ("feed", 1),
    ("tasks", 2),
    ("engine", 3),
    ("agent", 4),
    ("session", 5),
    ("crate", 100),
];

/// The ladder of `eve-host`: what the surfaces share, MCP, the HTTP server (its own ladder of
/// files), and the command line over both.
const HOST: &[(&str, u32)] = &[
    ("timeline", 0),
    ("without", 0),
    // The histograms' buckets, which the Prometheus recorder and the OTLP exporter share.
    ("buckets", 0),
    ("otel", 1),
    ("metrics", 1),
    ("mcp", 1),
    ("http::path", 10),
    ("http::cookie", 10),
    ("http::errors", 11),
    ("http::origin", 12),
    ("http::state", 13),
    ("http::body", 14),
    ("http::serve", 14),
    ("http::auth", 15),
    ("http::events", 15),
    ("http::runs", 15),
    ("http::sessions", 15),
    ("http::webhook", 15),
    ("http::ui", 15),
    ("http::health", 15),
    ("http::metrics", 15),
    ("http::routes", 16),
    ("http", 17),
    ("cli", 20),
    ("crate", 100),
];

/// A storage driver, a provider or the facade is one layer, one module split into files: its files
/// name each other (a read and its reader thread, a connection and its TLS; the facade's builtin
/// tools and its re-exports), and what keeps it in place is the crate graph: it sees the public
/// API of the crates below it and nothing else.
const ONE_LAYER: &[(&str, u32)] = &[("*", 0)];

/// The ladder of `eve-macros`: the macro pipeline, parse → model → check → expand.
const MACROS: &[(&str, u32)] = &[
    ("duration", 0),
    ("suggest", 0),
    ("lints", 0),
    ("args", 1),
    ("item", 2),
    ("model", 3),
    ("validate", 4),
    ("fallback", 5),
    ("expand", 6),
    ("crate", 100),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the tests crate sits in the workspace").to_path_buf()
}

#[test]
fn eve_runtime_layers_run_one_way() {
    assert_ladder("eve-runtime", RUNTIME);
}

#[test]
fn eve_sessions_layers_run_one_way() {
    assert_ladder("eve-sessions", SESSIONS);
}

#[test]
fn eve_host_layers_run_one_way() {
    assert_ladder("eve-host", HOST);
}

#[test]
fn every_crate_of_the_workspace_has_a_ladder() {
    let one_layer = ["eve-sqlite", "eve-postgres", "eve-auth", "eve-tools"];
    let laddered = ["eve-macros", "eve-runtime", "eve-sessions", "eve-host"];
    for driver in one_layer {
        assert_ladder(driver, ONE_LAYER);
    }
    let crates: BTreeSet<String> = std::fs::read_dir(workspace())
        .expect("the workspace reads")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("eve-"))
        .collect();
    let missing: Vec<&String> = crates
        .iter()
        .filter(|name| !laddered.contains(&name.as_str()) && !one_layer.contains(&name.as_str()))
        .collect();
    assert!(missing.is_empty(), "crates without a ladder in tests/layers.rs: {missing:?}");
}

#[test]
fn eve_macros_layers_run_one_way() {
    assert_ladder("eve-macros", MACROS);
}

/// A wrong import is caught: a journal that names the runtime breaks the ladder.
#[test]
fn a_lower_layer_naming_a_higher_one_is_reported() {
    let file: syn::File = syn::parse_quote! {
        use crate::runtime::Runtime;
        pub fn f() -> crate::step::StepCall<()> { todo!() }
        pub use self::child::Thing;
        #[cfg(test)]
        mod tests { use crate::cli::Host; }
    };
    let modules = ["journal", "journal::child", "runtime", "step", "cli"].map(module).into_iter().collect();
    let found = references(&module("journal"), &file, &modules);
    let names: BTreeSet<String> = found.iter().map(|reference| reference.to.join("::")).collect();
    assert_eq!(names, ["runtime", "step"].map(String::from).into_iter().collect());
    let breaks = violations("journal", &found, RUNTIME);
    assert_eq!(breaks.len(), 2, "{breaks:?}");
    assert!(breaks[0].contains("journal (rung 1) names runtime (rung 14)"), "{}", breaks[0]);
}

fn assert_ladder(krate: &str, ladder: &[(&str, u32)]) {
    let root = workspace().join(krate).join("src");
    let files = source_files(&root);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(module, _)| module.clone()).collect();
    let mut breaks = Vec::new();
    for (module, path) in &files {
        if module.last().is_some_and(|name| name == "tests") {
            // A `tests` module is compiled for tests only, and tests may reach anywhere.
            continue;
        }
        let text = std::fs::read_to_string(path).expect("a source file reads");
        let file = syn::parse_file(&text).unwrap_or_else(|error| panic!("{} parses: {error}", path.display()));
        let name = display(module);
        if rung(&name, ladder).is_none() {
            breaks.push(format!("{krate}: module {name} has no rung in the ladder; give it one in tests/layers.rs"));
            continue;
        }
        breaks.extend(violations(&name, &references(module, &file, &modules), ladder));
    }
    assert!(
        breaks.is_empty(),
        "{krate}'s layers must run one way (lower rungs never name higher ones):\n{}",
        breaks.join("\n")
    );
}

/// Every `.rs` file under `root` with its module path (`lib.rs` is `crate`, `a/mod.rs` is `a`).
fn source_files(root: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder reads") {
            let path = entry.expect("a folder entry reads").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(root).expect("under the root").with_extension("");
                let mut module: Vec<String> =
                    relative.components().map(|part| part.as_os_str().to_string_lossy().into_owned()).collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                files.push((module, path));
            }
        }
    }
    files.sort();
    files
}

fn module(name: &str) -> Vec<String> {
    name.split("::").map(String::from).collect()
}

fn display(module: &[String]) -> String {
    if module.is_empty() { "crate".to_owned() } else { module.join("::") }
}

/// The rung of `module` (its longest listed prefix), and that prefix.
fn rung<'a>(module: &str, ladder: &[(&'a str, u32)]) -> Option<(&'a str, u32)> {
    ladder
        .iter()
        .filter(|(prefix, _)| {
            *prefix == "*"
                || *prefix == "crate" && module == "crate"
                || module == *prefix
                || module.strip_prefix(prefix).is_some_and(|rest| rest.starts_with("::"))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .copied()
}

/// A path in module `from` that reaches into module `to`.
#[derive(Debug)]
struct Reference {
    to: Vec<String>,
    path: String,
}

fn violations(from: &str, references: &[Reference], ladder: &[(&str, u32)]) -> Vec<String> {
    let Some((from_prefix, from_rung)) = rung(from, ladder) else { return Vec::new() };
    let mut found = Vec::new();
    for reference in references {
        let to = display(&reference.to);
        let Some((to_prefix, to_rung)) = rung(&to, ladder) else { continue };
        if to_prefix != from_prefix && to_rung >= from_rung {
            found.push(format!("{from} (rung {from_rung}) names {to} (rung {to_rung}): `{}`", reference.path));
        }
    }
    found
}

/// The modules the paths in `file` (the module `here`) reach into.
fn references(here: &[String], file: &syn::File, modules: &BTreeSet<Vec<String>>) -> Vec<Reference> {
    let mut visitor = Paths { here: here.to_vec(), scope: here.to_vec(), modules, found: Vec::new() };
    for item in &file.items {
        visitor.visit_item(item);
    }
    visitor.found
}

struct Paths<'m> {
    /// The module of the file being read.
    here: Vec<String>,
    /// Where `self` and `super` start: `here`, inside any inline modules of the file.
    scope: Vec<String>,
    modules: &'m BTreeSet<Vec<String>>,
    found: Vec<Reference>,
}

impl Paths<'_> {
    /// Resolves `segments` (as written) to the module it names, if it starts at the crate: the
    /// longest prefix of the absolute path that is a module of the crate.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let mut absolute: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self" | "super") => self.scope.clone(),
            _ => return None,
        };
        for segment in segments.iter().skip(usize::from(segments[0] == "crate")) {
            match segment.as_str() {
                "self" => {}
                "super" => {
                    absolute.pop();
                }
                name => absolute.push(name.to_owned()),
            }
        }
        let known = (0..=absolute.len())
            .rev()
            .map(|len| &absolute[..len])
            .find(|prefix| prefix.is_empty() || self.modules.contains(*prefix));
        known.map(<[String]>::to_vec)
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(to) = self.resolve(&segments)
            && to != self.here
        {
            self.found.push(Reference { to, path: segments.join("::") });
        }
    }

    /// Whether `module` is a descendant of the module being read (re-exporting it is no use of it).
    fn is_descendant(&self, module: &[String]) -> bool {
        module.len() > self.here.len() && module.starts_with(&self.here)
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && attr.meta.require_list().is_ok_and(|list| list.tokens.to_string() == "test")
    })
}

/// Every path a use tree names, with its segments so far.
fn use_paths(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(path) => {
            let mut next = prefix;
            next.push(path.ident.to_string());
            use_paths(&path.tree, next, out);
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix;
            full.push(name.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix;
            full.push(rename.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                use_paths(tree, prefix.clone(), out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.scope.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.scope.pop();
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)` and `pub(super)` name who may see an item, not a module it uses.
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&item.tree, Vec::new(), &mut paths);
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        for path in paths {
            if public && self.resolve(&path).is_some_and(|to| self.is_descendant(&to)) {
                continue;
            }
            self.record(path);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
        self.record(segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls (`matches!`, `format!`) are tokens; a `crate::` path among
        // them still names a module.
        let tokens: Vec<String> = mac.tokens.clone().into_iter().map(|token| token.to_string()).collect();
        for (index, token) in tokens.iter().enumerate() {
            if token == "crate" && tokens.get(index + 1).is_some_and(|next| next == ":") {
                let segments = tokens[index..]
                    .iter()
                    .filter(|token| *token != ":")
                    .take_while(|token| token.chars().all(|c| c.is_alphanumeric() || c == '_'));
                self.record(segments.cloned().collect());
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}
