//! The floors stay floors, held by the compiler where it can and by this
//! test where it cannot (docs/design.md, "Floors").
//!
//! - **The crate graph** (`cargo metadata`): the brain has no path to the
//!   application crate (`longhand-host`: cli, serve, mcp, dist, triggers,
//!   telemetry); hands and session reach neither the brain, the
//!   application nor each other. Once that holds, an upward `use` does not
//!   compile: the crate it names is not a dependency.
//! - **The floor order inside the brain** ([`BRAIN_FLOORS`]): every
//!   file-to-file import in `host/brain/src` points to a file on its own
//!   floor or below, never up.
//! - **No import cycle among the files of a room** ([`FOLDERS`]).
//!
//! What is an edge from file A to file B (B a file of the same room):
//! - a `use` of `super::…`, `self::…`, `crate::<room>::…`, or of one of A's
//!   own child modules (`use writer::X` in `sqlite.rs`, `pub use grants::…`
//!   in `mod.rs`);
//! - a path in code that starts with `super::`, `self::` or
//!   `crate::<room>::` (`super::run::open_store()`);
//! - B is the deepest file that path names: `super::x::Y` is an edge to
//!   `x.rs`, but `super::Y` (an item defined or re-exported in the parent's
//!   `mod.rs`) is an edge to the parent, so a child reaching the door for a
//!   sibling's item closes a cycle through the door's `pub use`.
//!
//! Not edges: `mod x;` (the tree itself), a visibility (`pub(in
//! crate::core)` says where an item may be used, not what it uses), a
//! parent calling into its own children in code (`run::start(..)` in
//! `cli/mod.rs`: the door dispatches), and `super::` inside an inline module
//! (`mod tests { use super::*; }`), which names its own file. Paths inside macro definitions are read as
//! written. Sources are tokenised with `proc-macro2`, so strings and
//! comments never count.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// The rooms checked for cycles: the folder (from `host/`) and the path by
/// which `crate::` code inside it names its root (a crate of its own is
/// `crate`; a folder of the application crate is `crate::<folder>`).
const FOLDERS: &[(&str, &str)] = &[
    ("brain/src", "crate"),
    ("src/cli", "crate::cli"),
    ("src/dist", "crate::dist"),
    ("hands/src", "crate"),
    ("session/src", "crate"),
];

/// The brain's floors, lowest first: a file is on the floor of the longest
/// prefix that names it (from `host/brain/src/`), and imports only files on
/// its own floor or below. Files on one floor may import each other (the
/// cycle check still holds them). A new file must be placed here.
const BRAIN_FLOORS: &[&[&str]] = &[
    // Leaves: the observer hook, the one HTTP client.
    &["watch.rs", "http_client.rs"],
    // Providers, retry, pairing, replay: the ground floor of the loop;
    // prices of its usage.
    &["model/"],
    &["pricing.rs"],
    &["memory/"],
    &["error.rs"],
    // The checks a task can name, then the work they belong to.
    &["checks/"],
    &["work/"],
    // What an agent is: config, frozen, bind, skills, triggers.
    &["agent/"],
    // The one tool registry, and components as a source of tools.
    &["tools/"],
    // The fold, what the model is told, the decision table.
    &["core/state/"],
    &["core/prompts.rs"],
    &["core/decide.rs"],
    // What one runner calls; the only writer; the ask cache.
    &["services.rs"],
    &["core/journal.rs"],
    &["core/ask_cache.rs"],
    // What an executor sees.
    &["core/ctx.rs"],
    // Tools the host serves, and the controls from outside the loop (the
    // approval gate asks the memory tool for its effect).
    &["host_tools/"],
    &["control/"],
    // The executors, the runner that calls them, the one launcher.
    &["core/act/"],
    &["core/runner.rs"],
    &["launch.rs"],
    // The doors: a door imports its children, never the other way.
    &["core/mod.rs", "lib.rs"],
];

/// The crates and what each must never reach, directly or through another
/// crate (normal, build and dev dependencies alike).
const CRATE_RULES: &[(&str, &[&str])] = &[
    ("longhand-brain", &["longhand-host"]),
    (
        "longhand-hands",
        &["longhand-host", "longhand-brain", "longhand-session"],
    ),
    (
        "longhand-session",
        &["longhand-host", "longhand-brain", "longhand-hands"],
    ),
    (
        "longhand-pgtls",
        &[
            "longhand-host",
            "longhand-brain",
            "longhand-hands",
            "longhand-session",
        ],
    ),
];

fn host_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_room_has_an_import_cycle() {
    let mut failures = Vec::new();
    for (folder, root) in FOLDERS {
        let graph = Graph::of(&host_dir().join(folder), root);
        assert!(
            graph.files.len() > 1,
            "{folder}: found {} Rust file(s); is the folder list stale?",
            graph.files.len()
        );
        for cycle in graph.cycles() {
            failures.push(format!("{folder}: {}", cycle));
        }
    }
    assert!(
        failures.is_empty(),
        "import cycles (make the shared item its own file, or import the sibling that owns it):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_brains_imports_point_down() {
    let graph = Graph::of(&host_dir().join("brain/src"), "crate");
    assert!(graph.files.len() > 50, "the brain's files were not read");
    let ups = upward_edges(&graph, BRAIN_FLOORS);
    assert!(
        ups.is_empty(),
        "imports that point up the brain's floors (move the shared item down, or pass it in):\n{}",
        ups.join("\n")
    );
}

#[test]
fn the_crate_graph_keeps_its_floors() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(host_dir().join("../Cargo.toml"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deps = crate_graph(&out.stdout);
    // The check reads something: the application reaches all three.
    for below in ["longhand-brain", "longhand-hands", "longhand-session"] {
        assert!(
            path_between(&deps, "longhand-host", below).is_some(),
            "longhand-host should depend on {below}; did the metadata format change?"
        );
    }
    let mut failures = Vec::new();
    for (from, never) in CRATE_RULES {
        assert!(deps.contains_key(*from), "{from} is not in the workspace");
        for to in *never {
            if let Some(path) = path_between(&deps, from, to) {
                failures.push(path.join(" -> "));
            }
        }
    }
    // The brain is the loop, not a front end: none of the application's
    // command-line, HTTP-server or exporter crates.
    for name in [
        "clap",
        "axum",
        "opentelemetry",
        "opentelemetry_sdk",
        "opentelemetry-otlp",
    ] {
        if deps["longhand-brain"].contains(name) {
            failures.push(format!("longhand-brain -> {name} (the application's)"));
        }
    }
    assert!(
        failures.is_empty(),
        "crates that reach a floor above them:\n{}",
        failures.join("\n")
    );
}

/// The checks themselves can fail: an upward import in a synthetic brain
/// and a path up through a third crate are both reported.
#[test]
fn the_floor_checks_report_an_arrow_up() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod low;\nmod high;\npub use high::Top;\n");
    write("low/mod.rs", "pub struct Base;\n");
    write("high.rs", "use crate::low::Base;\npub struct Top(Base);\n");
    let floors: &[&[&str]] = &[&["low/"], &["high.rs"], &["lib.rs"]];
    let graph = Graph::of(dir.path(), "crate");
    assert_eq!(upward_edges(&graph, floors), Vec::<String>::new());

    write(
        "low/mod.rs",
        "pub struct Base;\npub fn peek() -> usize { std::mem::size_of::<crate::high::Top>() }\n",
    );
    let graph = Graph::of(dir.path(), "crate");
    let ups = upward_edges(&graph, floors);
    assert_eq!(ups.len(), 1, "{ups:?}");
    assert!(
        ups[0].contains("low/mod.rs -> high.rs") && ups[0].contains("crate::high::Top"),
        "{ups:?}"
    );

    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut edge = |a: &str, b: &str| {
        deps.entry(a.to_owned()).or_default().insert(b.to_owned());
    };
    edge("longhand-brain", "helper");
    edge("helper", "longhand-host");
    edge("longhand-host", "longhand-brain");
    assert_eq!(
        path_between(&deps, "longhand-brain", "longhand-host"),
        Some(vec![
            "longhand-brain".to_owned(),
            "helper".to_owned(),
            "longhand-host".to_owned()
        ])
    );
    assert_eq!(path_between(&deps, "helper", "missing"), None);
}

/// Every edge of `graph` from a file to a file on a higher floor, as
/// "from -> to (path) [floor a -> floor b]"; a file on no floor is an error.
fn upward_edges(graph: &Graph, floors: &[&[&str]]) -> Vec<String> {
    let floor_of = |file: &str| -> usize {
        floors
            .iter()
            .enumerate()
            .flat_map(|(i, prefixes)| prefixes.iter().map(move |p| (i, *p)))
            .filter(|(_, p)| file == *p || (p.ends_with('/') && file.starts_with(p)))
            .max_by_key(|(_, p)| p.len())
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("{file} is on no floor: place it in BRAIN_FLOORS"))
    };
    for file in graph.files.values() {
        floor_of(file);
    }
    graph
        .edges
        .iter()
        .filter_map(|((from, to), path)| {
            let (a, b) = (floor_of(from), floor_of(to));
            (b > a).then(|| format!("{from} -> {to} ({path}) [floor {a} -> floor {b}]"))
        })
        .collect()
}

/// The workspace's dependency graph by package name, from `cargo metadata
/// --no-deps` (every kind of dependency; crates from a registry never
/// depend on ours, so a path up can only run through the workspace).
fn crate_graph(metadata: &[u8]) -> BTreeMap<String, BTreeSet<String>> {
    let meta: serde_json::Value = serde_json::from_slice(metadata).expect("metadata is JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in packages {
        let from = package["name"].as_str().expect("a name").to_owned();
        let to = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .map(|d| d["name"].as_str().expect("a dependency name").to_owned());
        deps.entry(from).or_default().extend(to);
    }
    deps
}

/// A shortest path of package names from `from` to `to`, if one exists.
fn path_between(
    deps: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut path = vec![to.to_owned()];
            let mut cur = to;
            while cur != from {
                cur = came_from[cur];
                path.push(cur.to_owned());
            }
            path.reverse();
            return Some(path);
        }
        for next in deps.get(at).into_iter().flatten() {
            if next != from && !came_from.contains_key(next.as_str()) {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The check itself can fail: a synthetic room with a cycle through a
/// sibling and one through the door is reported, with its files; the
/// shapes that are not edges stay silent.
#[test]
fn the_check_reports_a_cycle_in_a_synthetic_room() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "mod.rs",
        "mod a;\nmod b;\nmod c;\nmod down;\npub use c::Thing;\npub struct Door;\n\
         pub fn main() { a::run(); down::run(); }\n",
    );
    // a <-> b through a sibling path in code and a use.
    write("a.rs", "use super::b::helper;\npub fn run() { helper() }\n");
    write(
        "b.rs",
        "// super::c::nothing (a comment is not an edge)\n\
         pub fn helper() { let _ = \"super::d::x\"; super::a::run() }\n",
    );
    // c -> mod.rs (the door's own item) and mod.rs -> c (its `pub use`).
    write("c.rs", "pub struct Thing(super::Door);\n");
    // down: an inline test module's `super::*` is down itself; down/e.rs is a child
    // whose `super::` is down; down calls e in code (not an edge).
    write(
        "down.rs",
        "mod e;\npub fn run() { e::go() }\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    write(
        "down/e.rs",
        "pub fn go() {}\npub fn back() { super::run() }\n",
    );

    let graph = Graph::of(dir.path(), "crate::room");
    let cycles = graph.cycles();
    let text = cycles.join("\n");
    assert_eq!(cycles.len(), 2, "{text}");
    assert!(
        cycles.iter().any(|c| c.starts_with("a.rs, b.rs:")),
        "the sibling cycle is named: {text}"
    );
    assert!(
        cycles.iter().any(|c| c.starts_with("c.rs, mod.rs:")),
        "the cycle through the door is named: {text}"
    );
    assert!(text.contains("super::b::helper"), "{text}");
    assert!(!text.contains("down"), "{text}");

    // The same room through `crate::room::` paths, and the fix: once b no
    // longer reaches back, only the door cycle is left.
    write("b.rs", "pub fn helper() { crate::room::down::run() }\n");
    let cycles = Graph::of(dir.path(), "crate::room").cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].starts_with("c.rs, mod.rs:"), "{cycles:?}");
    let edges = Graph::of(dir.path(), "crate::room").edges;
    assert!(
        edges.contains_key(&("b.rs".to_owned(), "down.rs".to_owned())),
        "crate::room::down is an edge to down.rs: {edges:?}"
    );
}

/// Files of one room and the imports between them.
struct Graph {
    /// Each file by its module path inside the room (`[]` for `mod.rs`).
    files: BTreeMap<Vec<String>, String>,
    /// (from, to) file names, with one path that made the edge.
    edges: BTreeMap<(String, String), String>,
}

impl Graph {
    fn of(folder: &Path, root: &str) -> Self {
        let mut sources = Vec::new();
        collect(folder, folder, &mut sources);
        let files: BTreeMap<Vec<String>, String> = sources
            .iter()
            .map(|(module, name, _)| (module.clone(), name.clone()))
            .collect();
        let root: Vec<String> = root.split("::").map(str::to_owned).collect();
        let mut graph = Graph {
            files,
            edges: BTreeMap::new(),
        };
        for (module, name, text) in &sources {
            let tokens = TokenStream::from_str(text)
                .unwrap_or_else(|e| panic!("{name} does not tokenise: {e}"));
            let tokens: Vec<TokenTree> = tokens.into_iter().collect();
            let mut found = Vec::new();
            scan(&tokens, module, &root, &graph.files, &mut found);
            for (target, path) in found {
                let to = graph.file_of(&target);
                if &to != name {
                    graph.edges.entry((name.clone(), to)).or_insert(path);
                }
            }
        }
        graph
    }

    /// The file that owns a module path: the longest prefix that is a file.
    fn file_of(&self, path: &[String]) -> String {
        (0..=path.len())
            .rev()
            .find_map(|n| self.files.get(&path[..n]))
            .cloned()
            .unwrap_or_else(|| {
                self.files
                    .get(&[][..])
                    .cloned()
                    .unwrap_or_else(|| "mod.rs".to_owned())
            })
    }

    /// Every strongly connected component of more than one file, as
    /// "a.rs, b.rs: a.rs -> b.rs (path), b.rs -> a.rs (path)".
    fn cycles(&self) -> Vec<String> {
        let names: Vec<&String> = self.files.values().collect();
        let index: BTreeMap<&String, usize> =
            names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut next = vec![Vec::new(); names.len()];
        for (from, to) in self.edges.keys() {
            next[index[from]].push(index[to]);
        }
        let mut cycles = Vec::new();
        for component in tarjan(&next) {
            if component.len() < 2 {
                continue;
            }
            let members: BTreeSet<&String> = component.iter().map(|&i| names[i]).collect();
            let edges: Vec<String> = self
                .edges
                .iter()
                .filter(|((f, t), _)| members.contains(f) && members.contains(t))
                .map(|((f, t), path)| format!("{f} -> {t} ({path})"))
                .collect();
            let files: Vec<&str> = members.iter().map(|s| s.as_str()).collect();
            cycles.push(format!("{}: {}", files.join(", "), edges.join(", ")));
        }
        cycles.sort();
        cycles
    }
}

/// Reads every `.rs` file under `dir`: (module path, name from the room's
/// folder, text).
fn collect(room: &Path, dir: &Path, out: &mut Vec<(Vec<String>, String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(room, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let name = path
            .strip_prefix(room)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut module: Vec<String> = name
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        out.push((module, name, text));
    }
}

/// Finds the module paths named in `tokens`, read inside module `here`.
fn scan(
    tokens: &[TokenTree],
    here: &[String],
    root: &[String],
    files: &BTreeMap<Vec<String>, String>,
    found: &mut Vec<(Vec<String>, String)>,
) {
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            // `mod name { … }` (or `mod $name { … }` in a macro): inside,
            // `super` is this file again.
            TokenTree::Ident(id) if id == "mod" => {
                let mut j = i + 1;
                if matches!(tokens.get(j), Some(TokenTree::Punct(p)) if p.as_char() == '$') {
                    j += 1;
                }
                if let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(body))) =
                    (tokens.get(j), tokens.get(j + 1))
                    && body.delimiter() == Delimiter::Brace
                {
                    let mut inner = here.to_vec();
                    inner.push(name.to_string());
                    let body: Vec<TokenTree> = body.stream().into_iter().collect();
                    scan(&body, &inner, root, files, found);
                    i = j + 2;
                    continue;
                }
                i += 1;
            }
            TokenTree::Ident(id)
                if id == "use"
                    && !matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '<') =>
            {
                let end = (i + 1..tokens.len())
                    .find(|&k| matches!(&tokens[k], TokenTree::Punct(p) if p.as_char() == ';'))
                    .unwrap_or(tokens.len());
                let mut paths = Vec::new();
                use_tree(&tokens[i + 1..end], Vec::new(), &mut paths);
                for path in paths {
                    let text = path.join("::");
                    if let Some(target) = resolve(&path, here, root, files, true) {
                        found.push((target, text));
                    }
                }
                i = end + 1;
            }
            TokenTree::Ident(id)
                if (id == "super" || id == "self" || id == "crate") && is_colons(tokens, i + 1) =>
            {
                let (path, end) = path_at(tokens, i);
                let text = path.join("::");
                if let Some(target) = resolve(&path, here, root, files, false) {
                    found.push((target, text));
                }
                i = end;
            }
            // `pub(in crate::core)` says where an item may be used, not
            // what it uses.
            TokenTree::Ident(id)
                if id == "pub"
                    && matches!(tokens.get(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis) =>
            {
                i += 2;
            }
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                scan(&inner, here, root, files, found);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// Whether `tokens[at..]` starts with `::`.
fn is_colons(tokens: &[TokenTree], at: usize) -> bool {
    matches!(
        (tokens.get(at), tokens.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// The path of identifiers joined by `::` that starts at `tokens[at]`, and
/// the index after it.
fn path_at(tokens: &[TokenTree], at: usize) -> (Vec<String>, usize) {
    let mut path = Vec::new();
    let mut i = at;
    while let Some(TokenTree::Ident(id)) = tokens.get(i) {
        path.push(id.to_string());
        i += 1;
        if !is_colons(tokens, i) {
            break;
        }
        i += 2;
    }
    (path, i)
}

/// The paths a `use` tree names (`a::{b::C, self, d::*}` gives `a::b::C`,
/// `a`, `a::d`).
fn use_tree(tokens: &[TokenTree], prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    // Split on top-level commas (inside a brace group only).
    for part in tokens.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        let mut path = prefix.clone();
        let mut i = 0;
        if is_colons(part, 0) {
            i = 2;
        }
        let mut nested = false;
        while i < part.len() {
            match &part[i] {
                TokenTree::Ident(id) if id == "as" => break,
                TokenTree::Ident(id) if id == "self" && !path.is_empty() => {}
                TokenTree::Ident(id) => path.push(id.to_string()),
                TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                    let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                    use_tree(&inner, path.clone(), out);
                    nested = true;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        if !nested && !path.is_empty() {
            out.push(path);
        }
    }
}

/// The module path `path` names, read inside module `here`, when it is
/// inside the room; `None` for paths elsewhere (std, other crates, other
/// rooms of the host).
fn resolve(
    path: &[String],
    here: &[String],
    root: &[String],
    files: &BTreeMap<Vec<String>, String>,
    in_use: bool,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base = here.to_vec();
    let rest: &[String];
    if first == "super" {
        let ups = path.iter().take_while(|s| *s == "super").count();
        if ups > base.len() {
            return None;
        }
        base.truncate(base.len() - ups);
        rest = &path[ups..];
    } else if first == "self" {
        rest = &path[1..];
    } else if first == "crate" {
        if path.len() < root.len() || path[..root.len()] != *root {
            return None;
        }
        base.clear();
        rest = &path[root.len()..];
    } else if in_use {
        // A `use` of one of this module's own child files.
        let mut child = base.clone();
        child.push(first.clone());
        if !files.contains_key(&child) {
            return None;
        }
        rest = path;
    } else {
        return None;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Tarjan's strongly connected components of a graph given as adjacency
/// lists.
fn tarjan(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        next,
        index: vec![None; next.len()],
        low: vec![0; next.len()],
        on_stack: vec![false; next.len()],
        stack: Vec::new(),
        counter: 0,
        out: Vec::new(),
    };
    for v in 0..next.len() {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
