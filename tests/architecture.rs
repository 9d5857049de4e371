//! The layers of the code, checked: each crate depends only on the crates it may (a list
//! here), within each crate no module imports a module that imports it back (a circle of any
//! length), no source file grows past 1,000 lines, and no crate past 6,000 lines outside its
//! tests. The Cargo graph keeps the crates in layers; this keeps the modules inside each crate
//! in layers too, and each crate small enough to have one job.
//!
//! A module is one file (`session/tick.rs` is `session::tick`, a `mod.rs` is its folder's
//! module). An arrow goes from a file to every module it names through `crate::` or `super::`
//! outside its tests. A parent that declares its children (`mod tick;`) does not point at them
//! by that; a parent that re-exports or uses a child does, so a child must not use what its
//! parent re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 1000;

/// Most lines a crate's `src` may hold outside its tests (comments and blank lines count).
const MAX_CRATE_LINES: usize = 6000;

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file relative to its crate's `src` (`session/tick.rs` -> `session::tick`;
/// `lib.rs` and `main.rs` -> the crate root, ``).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The text of a file without its `#[cfg(test)]` items and comments (tests may use anything
/// in the file graph; the graph of top-level modules counts them too).
fn code_of(text: &str) -> String {
    code_without(text, true)
}

/// The text of a file without its comments, and without its `#[cfg(test)]` items when
/// `skip_tests`.
fn code_without(text: &str, skip_tests: bool) -> String {
    strip(text, skip_tests, true)
}

/// The text of a file without its `#[cfg(test)]` items when `skip_tests`, and without its
/// comment lines when `skip_comments`.
fn strip(text: &str, skip_tests: bool, skip_comments: bool) -> String {
    let mut out = String::new();
    let mut skipping = false;
    let mut depth = 0i64;
    let mut pending_test = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if skipping {
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            if depth <= 0 && line.contains('}') {
                skipping = false;
            }
            continue;
        }
        if skip_tests && trimmed.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        if pending_test {
            pending_test = false;
            if trimmed.ends_with(';') {
                continue;
            }
            depth = line.matches('{').count() as i64 - line.matches('}').count() as i64;
            skipping = depth > 0;
            continue;
        }
        if skip_comments && trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module paths a file's code names: `crate::a::b::Item` gives `a`, `a::b` and
/// `a::b::Item` (the caller keeps those that are modules); `use crate::{a, b::c}` gives each
/// branch; `super::x` is resolved against the file's own module.
fn named_paths(code: &str, own: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < bytes.len() && (bytes[*i].is_ascii_alphanumeric() || bytes[*i] == b'_') {
            *i += 1;
        }
        code[start..*i].to_string()
    };
    // Reads `a::b::{c, d::e}` at `i`, pushing every full path under `prefix`.
    fn tree(code: &str, i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let bytes = code.as_bytes();
        let mut path = prefix;
        loop {
            while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
                *i += 1;
            }
            if *i < bytes.len() && bytes[*i] == b'{' {
                *i += 1;
                loop {
                    while *i < bytes.len() && (bytes[*i].is_ascii_whitespace() || bytes[*i] == b',')
                    {
                        *i += 1;
                    }
                    if *i >= bytes.len() || bytes[*i] == b'}' {
                        *i += 1;
                        return;
                    }
                    let before = *i;
                    tree(code, i, path.clone(), out);
                    if *i == before {
                        *i += 1;
                    }
                }
            }
            let start = *i;
            while *i < bytes.len() && (bytes[*i].is_ascii_alphanumeric() || bytes[*i] == b'_') {
                *i += 1;
            }
            if *i == start {
                out.push(path);
                return;
            }
            path.push(code[start..*i].to_string());
            if code[*i..].starts_with("::") {
                *i += 2;
                continue;
            }
            out.push(path);
            return;
        }
    }
    let own_parts: Vec<String> = own
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = code[i..].chars().next().unwrap_or(' ');
        if !(c.is_ascii_alphabetic() || c == '_') {
            i += c.len_utf8();
            continue;
        }
        let after_name_char =
            i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let word = ident(&mut i);
        if after_name_char || !code[i..].starts_with("::") {
            continue;
        }
        i += 2;
        // Where the path starts: the crate root, the parent module, this module, or a child
        // module of this one (kept only if it is one).
        let root = match word.as_str() {
            "crate" => Vec::new(),
            "super" => {
                let mut base = own_parts.clone();
                base.pop();
                base
            }
            "self" => own_parts.clone(),
            _ => {
                let mut base = own_parts.clone();
                base.push(word);
                base
            }
        };
        let mut paths = Vec::new();
        tree(code, &mut i, root, &mut paths);
        out.extend(paths.into_iter().map(|p| p.join("::")));
    }
    out
}

struct Crate {
    name: String,
    /// Module -> the modules it points at.
    arrows: BTreeMap<String, BTreeSet<String>>,
}

fn crate_graph(src: &Path, name: &str) -> Crate {
    graph_of(src, name, false)
}

/// The graph of a crate's top-level modules (`session::step` is `session`), every `crate::`
/// and `super::` path of their files counted, test modules included.
fn top_level_graph(src: &Path, name: &str) -> Crate {
    graph_of(src, name, true)
}

fn graph_of(src: &Path, name: &str, top_level: bool) -> Crate {
    let top = |m: &str| -> String {
        if top_level {
            m.split("::").next().unwrap_or("").to_string()
        } else {
            m.to_string()
        }
    };
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<String, PathBuf> = files
        .iter()
        .map(|f| (module_of(f.strip_prefix(src).unwrap()), f.clone()))
        .collect();
    let mut arrows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = fs::read_to_string(file).unwrap();
        let code = code_without(&text, !top_level);
        let mut targets = BTreeSet::new();
        for path in named_paths(&code, module) {
            // The longest prefix of the path that is a module.
            let parts: Vec<&str> = path.split("::").collect();
            let target = (1..=parts.len())
                .rev()
                .map(|n| parts[..n].join("::"))
                .find(|p| modules.contains_key(p));
            if let Some(t) = target.map(|t| top(&t))
                && t != top(module)
                && !t.is_empty()
            {
                targets.insert(t);
            }
        }
        if top(module).is_empty() {
            // The crate root declares and re-exports its modules: not an arrow.
            continue;
        }
        arrows.entry(top(module)).or_default().extend(targets);
    }
    Crate {
        name: name.to_string(),
        arrows,
    }
}

/// The circles of a graph: its strongly connected components of more than one module.
fn circles(arrows: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iteration order fixed by the BTreeMap.
    struct State<'a> {
        arrows: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.arrows.get(v) {
            for w in targets {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in arrows.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("warden".to_string(), root.join("src"))];
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        out.push((name, d.join("src")));
    }
    out
}

/// Each circle of `graph`, written with the arrows that close it.
fn circles_found(graph: &Crate) -> Vec<String> {
    circles(&graph.arrows)
        .iter()
        .map(|circle| {
            let detail: Vec<String> = circle
                .iter()
                .map(|m| {
                    let into: Vec<&str> = graph.arrows[m]
                        .iter()
                        .filter(|t| circle.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("    {m} -> {}", into.join(", "))
                })
                .collect();
            format!(
                "{}: {}\n{}",
                graph.name,
                circle.join(", "),
                detail.join("\n")
            )
        })
        .collect()
}

#[test]
fn no_module_imports_a_module_that_imports_it() {
    let found: Vec<String> = crates()
        .iter()
        .flat_map(|(name, src)| circles_found(&crate_graph(src, name)))
        .collect();
    assert!(
        found.is_empty(),
        "modules that import each other (directly or around a circle):\n{}",
        found.join("\n")
    );
}

/// Issue 30's guard: the top-level modules of each crate, with every path of their files
/// counted (test modules too), form no circle either.
#[test]
fn no_top_level_module_imports_one_that_imports_it() {
    let found: Vec<String> = crates()
        .iter()
        .flat_map(|(name, src)| circles_found(&top_level_graph(src, name)))
        .collect();
    assert!(
        found.is_empty(),
        "top-level modules that import each other (directly or around a circle):\n{}",
        found.join("\n")
    );
}

/// Which of Warden's crates each crate may depend on (normal, dev and build dependencies
/// alike). A dependency not listed here fails the test: adding one is a decision about the
/// layers, made here and in ARCHITECTURE.md, not a side effect of an import.
const ALLOWED: &[(&str, &[&str])] = &[
    ("warden-input", &[]),
    ("warden-lua", &[]),
    ("warden-shell", &[]),
    ("warden-store", &[]),
    ("warden-expr", &["warden-input"]),
    ("warden-knowledge", &["warden-input"]),
    ("warden-load", &["warden-input"]),
    (
        "warden-context",
        &[
            "warden-expr",
            "warden-input",
            "warden-load",
            "warden-lua",
            "warden-shell",
            "warden-store",
        ],
    ),
    (
        "warden-program",
        &[
            "warden-context",
            "warden-expr",
            "warden-input",
            "warden-knowledge",
            "warden-load",
            "warden-lua",
        ],
    ),
    (
        "warden-control",
        &[
            "warden-input",
            "warden-load",
            "warden-program",
            "warden-store",
        ],
    ),
    (
        "warden-session",
        &[
            "warden-context",
            "warden-control",
            "warden-expr",
            "warden-input",
            "warden-knowledge",
            "warden-load",
            "warden-lua",
            "warden-program",
            "warden-store",
        ],
    ),
    (
        "warden-core",
        &[
            "warden-context",
            "warden-control",
            "warden-input",
            "warden-knowledge",
            "warden-load",
            "warden-lua",
            "warden-program",
            "warden-session",
            "warden-store",
            // Its tests replay traces and write replay lines.
            "warden-trace",
            "warden-wire",
        ],
    ),
    (
        "warden-wire",
        &[
            "warden-context",
            "warden-control",
            "warden-input",
            "warden-knowledge",
            "warden-load",
            "warden-program",
            "warden-session",
            "warden-store",
        ],
    ),
    ("warden-trace", &["warden-wire"]),
    ("warden-agents", &["warden-core"]),
    (
        "warden-serve",
        &["warden-agents", "warden-core", "warden-wire"],
    ),
    (
        "warden-python",
        &["warden-core", "warden-load", "warden-wire"],
    ),
    (
        "warden-testing",
        &[
            "warden-agents",
            "warden-core",
            "warden-input",
            "warden-load",
            "warden-store",
            "warden-wire",
        ],
    ),
    (
        "warden-bench",
        &[
            "warden-agents",
            "warden-core",
            "warden-lua",
            "warden-shell",
            "warden-store",
            "warden-wire",
        ],
    ),
    (
        "warden-cli",
        &[
            "warden-bench",
            "warden-agents",
            "warden-core",
            "warden-input",
            "warden-load",
            "warden-serve",
            "warden-shell",
            "warden-store",
            "warden-testing",
            "warden-trace",
            "warden-wire",
        ],
    ),
];

/// The `warden-*` crates a `Cargo.toml` names in its `[dependencies]`, `[dev-dependencies]`
/// and `[build-dependencies]` tables.
fn warden_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = matches!(
                line,
                "[dependencies]" | "[dev-dependencies]" | "[build-dependencies]"
            );
            continue;
        }
        if in_dependencies
            && let Some(name) = line.split(['=', '.', ' ']).next()
            && name.starts_with("warden-")
        {
            out.insert(name.to_string());
        }
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_crates_it_may() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, src) in crates() {
        if name == "warden" {
            // The facade: it re-exports the library crates, and may name any.
            continue;
        }
        let manifest = fs::read_to_string(src.parent().unwrap().join("Cargo.toml")).unwrap();
        let Some((_, allowed)) = ALLOWED.iter().find(|(n, _)| *n == name) else {
            wrong.push(format!("{name}: not in the list of tests/architecture.rs; add it with the crates it may depend on"));
            continue;
        };
        seen.insert(name.clone());
        for dep in warden_dependencies(&manifest) {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("{name} depends on {dep}, which the list in tests/architecture.rs does not allow"));
            }
        }
    }
    for (name, _) in ALLOWED {
        if !seen.contains(*name) {
            wrong.push(format!(
                "{name} is in the list but is no crate under {}",
                root.join("crates").display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_dependency_reader_reads_every_table() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nwarden-core.workspace = true\nserde = \"1\"\n[dev-dependencies]\nwarden-serve = { workspace = true }\n[features]\nwarden-lua = []\n";
    let deps: Vec<String> = warden_dependencies(manifest).into_iter().collect();
    assert_eq!(deps, ["warden-core", "warden-serve"]);
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let mut long = Vec::new();
    for (_, src) in crates() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let lines = fs::read_to_string(&f).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", f.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files past {MAX_LINES} lines (split them by what they do):\n{}",
        long.join("\n")
    );
}

/// The lines of a file outside its `#[cfg(test)]` items, comments and blank lines included.
fn lines_outside_tests(text: &str) -> usize {
    strip(text, true, false).lines().count()
}

/// The modules a crate declares under `#[cfg(test)]` (`mod tests;`, `mod testdb;`), by path.
fn test_modules(src: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        let own = module_of(f.strip_prefix(src).unwrap());
        let text = fs::read_to_string(f).unwrap();
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line != "#[cfg(test)]" {
                continue;
            }
            let Some(next) = lines.next() else { break };
            let declared = next
                .strip_prefix("pub(crate) ")
                .or_else(|| next.strip_prefix("pub "))
                .unwrap_or(next);
            if let Some(name) = declared
                .strip_prefix("mod ")
                .and_then(|n| n.strip_suffix(';'))
            {
                out.insert(match own.as_str() {
                    "" => name.to_string(),
                    _ => format!("{own}::{name}"),
                });
            }
        }
    }
    out
}

#[test]
fn no_crate_is_larger_than_the_limit() {
    let mut large = Vec::new();
    for (name, src) in crates() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let tests = test_modules(&src, &files);
        let mut lines = 0;
        for f in &files {
            let module = module_of(f.strip_prefix(&src).unwrap());
            let is_test = tests
                .iter()
                .any(|t| module == *t || module.starts_with(&format!("{t}::")));
            if !is_test {
                lines += lines_outside_tests(&fs::read_to_string(f).unwrap());
            }
        }
        if lines > MAX_CRATE_LINES {
            large.push(format!("{name} ({lines} lines outside its tests)"));
        }
    }
    assert!(
        large.is_empty(),
        "crates past {MAX_CRATE_LINES} lines (split them by what they do):\n{}",
        large.join("\n")
    );
}

#[test]
fn a_crate_is_counted_without_its_tests() {
    let text = "fn a() {}\n// a comment\n\n#[cfg(test)]\nmod tests {\n    fn b() {}\n}\n#[cfg(test)]\nmod testdb;\nfn c() {}\n";
    assert_eq!(lines_outside_tests(text), 4);
}

#[test]
fn the_checker_sees_circles_and_paths() {
    let code = "use crate::{a::X, b::{c::Y, Z}};\nfn f() { crate::d::g(); super::e::h(); my_crate::q(); }\nuse r::S;\n";
    let mut named = named_paths(code, "p::q");
    named.sort();
    assert_eq!(
        named,
        [
            "a::X",
            "b::Z",
            "b::c::Y",
            "d::g",
            "p::e::h",
            "p::q::my_crate::q",
            "p::q::r::S"
        ]
    );
    let mut arrows = BTreeMap::new();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        arrows
            .entry(a.to_string())
            .or_insert_with(BTreeSet::new)
            .insert(b.to_string());
    }
    arrows.insert("w".into(), BTreeSet::new());
    assert_eq!(circles(&arrows), [["x", "y", "z"]]);
    assert_eq!(
        code_of("use a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nuse c;\n"),
        "use a;\nuse c;\n"
    );
}
