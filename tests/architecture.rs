//! The layout's two rules, read from the source of every crate of weir
//! (`core/src`, `actors/src`, `src`):
//!
//! 1. **No import cycle.** A file depends on another when it names a module
//!    of the other file through a path: `use crate::…`, `super::…`,
//!    `self::…` or a child module's name, in a `use` or inline (macro
//!    bodies included). A name brought in by a `use` (a re-export, or a
//!    private import a child reaches through `super::`) is followed to the
//!    file that defines it, so a `mod.rs` that only re-exports is no hub.
//!    The dependency graph of each crate's files must have no cycle; a
//!    cycle is reported with every file in it.
//! 2. **No file over [`CODE_LINES_MAX`] lines of code** before its
//!    `#[cfg(test)]` module: lines that are neither blank nor comments.
//!
//! Tests may reach anywhere: items under `#[cfg(test)]` are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// The most lines of code a file may hold before its tests.
const CODE_LINES_MAX: usize = 900;

/// How many re-exports a path may be followed through (a loop of `use`
/// statements would otherwise never end).
const REEXPORT_HOPS_MAX: usize = 16;

type ModPath = Vec<String>;

#[derive(Debug, Clone)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
    Group(Delimiter, Vec<Tok>),
    Literal,
}

fn flatten(stream: TokenStream) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut iter = stream.into_iter().peekable();
    while let Some(tree) = iter.next() {
        match tree {
            TokenTree::Ident(ident) => out.push(Tok::Ident(ident.to_string())),
            TokenTree::Punct(p) => {
                if p.as_char() == ':' && p.spacing() == Spacing::Joint {
                    if let Some(TokenTree::Punct(next)) = iter.peek() {
                        if next.as_char() == ':' {
                            iter.next();
                            out.push(Tok::PathSep);
                            continue;
                        }
                    }
                }
                out.push(Tok::Punct(p.as_char()));
            }
            TokenTree::Group(g) => out.push(Tok::Group(g.delimiter(), flatten(g.stream()))),
            TokenTree::Literal(_) => out.push(Tok::Literal),
        }
    }
    out
}

/// Whether `toks[i..]` starts with the attribute `#[cfg(test)]`.
fn is_cfg_test(toks: &[Tok], i: usize) -> bool {
    let (Some(Tok::Punct('#')), Some(Tok::Group(Delimiter::Bracket, inner))) =
        (toks.get(i), toks.get(i + 1))
    else {
        return false;
    };
    match inner.as_slice() {
        [Tok::Ident(cfg), Tok::Group(Delimiter::Parenthesis, args)] if cfg == "cfg" => {
            matches!(args.as_slice(), [Tok::Ident(t)] if t == "test")
        }
        _ => false,
    }
}

/// One `use` tree: each leaf as (path, the name it binds, or None for a glob).
fn use_tree(toks: &[Tok], prefix: &[String], out: &mut Vec<(ModPath, Option<String>)>) {
    let mut path: Vec<String> = prefix.to_vec();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(name) if name == "as" => {
                if let Some(Tok::Ident(alias)) = toks.get(i + 1) {
                    let alias = (alias != "_").then(|| alias.clone());
                    out.push((path.clone(), alias));
                }
                return;
            }
            Tok::Ident(name) => path.push(name.clone()),
            Tok::PathSep => {}
            Tok::Punct('*') => {
                out.push((path.clone(), None));
                return;
            }
            Tok::Group(Delimiter::Brace, inner) => {
                for part in inner.split(|t| matches!(t, Tok::Punct(','))) {
                    if !part.is_empty() {
                        use_tree(part, &path, out);
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(last) = path.last() {
        // `use a::b::{self}` binds `b`.
        if last == "self" {
            path.pop();
        }
        let bound = path.last().cloned();
        out.push((path, bound));
    }
}

/// What one file says: its `use` leaves and every other path it writes.
#[derive(Default)]
struct Said {
    uses: Vec<(ModPath, Option<String>)>,
    paths: Vec<ModPath>,
}

fn read_tokens(toks: &[Tok], said: &mut Said) {
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(toks, i) {
            // Skip the attribute, any others after it, then the item: up to
            // its `;` or through its body.
            i += 2;
            while matches!(toks.get(i), Some(Tok::Punct('#'))) {
                i += 2;
            }
            while i < toks.len() {
                match &toks[i] {
                    Tok::Punct(';') => break,
                    Tok::Group(Delimiter::Brace, _) => break,
                    _ => i += 1,
                }
            }
            i += 1;
            continue;
        }
        match &toks[i] {
            Tok::Ident(kw) if kw == "use" => {
                let end = toks[i + 1..]
                    .iter()
                    .position(|t| matches!(t, Tok::Punct(';')))
                    .map_or(toks.len(), |p| i + 1 + p);
                let tree = &toks[i + 1..end];
                // A leading `::` names an extern crate.
                if !matches!(tree.first(), Some(Tok::PathSep)) {
                    use_tree(tree, &[], &mut said.uses);
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(first)
                if !matches!(i.checked_sub(1).map(|p| &toks[p]), Some(Tok::PathSep)) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Tok::PathSep), Some(Tok::Ident(next))) =
                    (toks.get(j), toks.get(j + 1))
                {
                    path.push(next.clone());
                    j += 2;
                }
                if path.len() > 1 {
                    said.paths.push(path);
                }
                i = j;
                continue;
            }
            Tok::Group(_, inner) => read_tokens(inner, said),
            _ => {}
        }
        i += 1;
    }
}

struct Module {
    file: PathBuf,
    said: Said,
    code_lines: usize,
}

/// Lines that are neither blank nor comments, up to the first
/// `#[cfg(test)]`.
fn code_lines(text: &str) -> usize {
    let mut count = 0;
    let mut in_block = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if in_block {
            if t.contains("*/") {
                in_block = false;
            }
            continue;
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        if t.starts_with("/*") {
            in_block = !t.contains("*/");
            continue;
        }
        count += 1;
    }
    count
}

/// Every module file of a crate, by module path (`[]` is the crate root).
fn read_crate(src: &Path) -> BTreeMap<ModPath, Module> {
    let mut modules = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let stream: TokenStream = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: does not tokenize: {e:?}", path.display()));
            let mut said = Said::default();
            read_tokens(&flatten(stream), &mut said);
            modules.insert(
                module,
                Module {
                    file: path.clone(),
                    said,
                    code_lines: code_lines(&text),
                },
            );
        }
    }
    modules
}

/// The absolute form of `path` written in module `at`, if it names
/// something of this crate.
fn absolute(
    modules: &BTreeMap<ModPath, Module>,
    at: &[String],
    path: &[String],
) -> Option<ModPath> {
    let first = path.first()?;
    let mut base: ModPath;
    let mut rest = path;
    match first.as_str() {
        "crate" => {
            base = Vec::new();
            rest = &path[1..];
        }
        "self" | "super" => {
            base = at.to_vec();
            while let Some(seg) = rest.first() {
                match seg.as_str() {
                    "self" => {}
                    "super" => {
                        base.pop();
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        child => {
            let mut candidate = at.to_vec();
            candidate.push(child.to_string());
            if !modules.contains_key(&candidate) {
                return None;
            }
            base = at.to_vec();
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module file an absolute path lands in, following names bound by
/// `use` to where they come from.
fn resolve(
    modules: &BTreeMap<ModPath, Module>,
    bindings: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    mut path: ModPath,
) -> ModPath {
    for _ in 0..REEXPORT_HOPS_MAX {
        let depth = (0..=path.len())
            .rev()
            .find(|&k| modules.contains_key(&path[..k]))
            .unwrap_or(0);
        let module = path[..depth].to_vec();
        let Some(name) = path.get(depth) else {
            return module;
        };
        match bindings.get(&module).and_then(|b| b.get(name)) {
            Some(target) => {
                let mut next = target.clone();
                next.extend(path[depth + 1..].iter().cloned());
                path = next;
            }
            None => return module,
        }
    }
    panic!("re-exports loop at {path:?}")
}

fn edges(modules: &BTreeMap<ModPath, Module>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut bindings: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
    for (at, module) in modules {
        for (path, bound) in &module.said.uses {
            if let (Some(abs), Some(name)) = (absolute(modules, at, path), bound) {
                bindings
                    .entry(at.clone())
                    .or_default()
                    .insert(name.clone(), abs);
            }
        }
    }
    let mut graph = BTreeMap::new();
    for (at, module) in modules {
        let written = module
            .said
            .uses
            .iter()
            .map(|(p, _)| p)
            .chain(&module.said.paths);
        let targets: BTreeSet<ModPath> = written
            .filter_map(|p| absolute(modules, at, p))
            .map(|abs| resolve(modules, &bindings, abs))
            .filter(|target| target != at)
            .collect();
        graph.insert(at.clone(), targets);
    }
    graph
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

const CRATES: [&str; 3] = ["core/src", "actors/src", "src"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_import_cycle_among_the_files_of_a_crate() {
    let mut problems = Vec::new();
    for krate in CRATES {
        let modules = read_crate(&root().join(krate));
        let graph = edges(&modules);
        for cycle in cycles(&graph) {
            let inside: BTreeSet<&ModPath> = cycle.iter().collect();
            let files: Vec<String> = cycle.iter().map(|m| rel(&modules[m].file)).collect();
            let arrows: Vec<String> = cycle
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| inside.contains(to))
                        .map(move |to| format!("{} -> {}", from.join("::"), to.join("::")))
                })
                .collect();
            problems.push(format!(
                "import cycle of {} files: {}\n    arrows: {}",
                files.len(),
                files.join(", "),
                arrows.join("; ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_file_over_the_code_line_limit() {
    let mut problems = Vec::new();
    for krate in CRATES {
        for module in read_crate(&root().join(krate)).values() {
            if module.code_lines > CODE_LINES_MAX {
                problems.push(format!(
                    "{}: {} lines of code before its tests (at most {CODE_LINES_MAX})",
                    rel(&module.file),
                    module.code_lines
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checks themselves, on a tree made here: a cycle through a re-export
/// and `super::` is found; a `mod.rs` that only re-exports is not a hub;
/// test modules are not read; comment lines do not count.
#[test]
fn the_checks_find_what_they_should() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    // a/mod.rs re-exports a/x.rs's X; a/x.rs uses c; c uses a::X (→ a/x):
    // the cycle is x ↔ c, not through a/mod.rs.
    std::fs::write(src.join("a/mod.rs"), "mod x;\npub use x::X;\n").unwrap();
    std::fs::write(
        src.join("a/x.rs"),
        "pub struct X;\nfn f() { crate::c::g(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("c.rs"),
        "use crate::a::X;\npub fn g() {}\n#[cfg(test)]\nmod tests { use crate::b::B; }\n",
    )
    .unwrap();
    // b reaches c only from its tests, and c reaches b only from its tests.
    std::fs::write(
        src.join("b.rs"),
        "// one\n\n// two\npub struct B;\n#[cfg(test)]\nmod tests { fn t() { crate::c::g(); } }\n",
    )
    .unwrap();
    let modules = read_crate(src);
    let graph = edges(&modules);
    let found = cycles(&graph);
    let x: ModPath = vec!["a".into(), "x".into()];
    let c: ModPath = vec!["c".into()];
    assert_eq!(found, vec![vec![x.clone(), c.clone()]], "graph: {graph:?}");
    assert!(
        graph[&vec!["b".to_string()]].is_empty(),
        "tests are not read: {graph:?}"
    );
    assert_eq!(modules[&vec!["b".to_string()]].code_lines, 1);

    // Without c's use of X, no cycle is left.
    std::fs::write(src.join("c.rs"), "pub fn g() {}\n").unwrap();
    assert!(cycles(&edges(&read_crate(src))).is_empty());
}
