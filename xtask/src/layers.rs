//! `cargo xtask layers`: vmscope's module graph, read from the sources'
//! `crate::` paths. Fails when the pure model (`vmscope/src/model/`)
//! reaches the kernel-facing side (aya, or anything in `source/`: the
//! loader, the collector, the kernel probes), when the graph between
//! top-level modules (which it prints) has a cycle, when files inside a
//! folder name each other in a circle (see [`crate::circles`]), on a file
//! over [`FILE_LIMIT`] lines, on a function over 100 lines (see
//! [`crate::fn_length`]), and when two types of the crate share a name.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

use crate::{
    process::{Exit, say},
    workspace::Workspace,
};

/// The most lines a file of vmscope's sources may have: past it, a file
/// holds more than one room's worth.
pub const FILE_LIMIT: usize = 1000;

/// What `model/` may not name.
const FORBIDDEN_IN_MODEL: &[&str] = &["aya", "crate::source", "source::"];

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The source without comments (line comments and doc comments) and
/// without its unit tests, so a comment that mentions a module, or a test
/// that reads a fixture through another layer, is not a dependency.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Top-level modules named by `crate::` paths, including the first names
/// of `use crate::{a::.., b, ..}` groups.
fn crate_refs(code: &str) -> BTreeSet<String> {
    crate::circles::crate_paths(code)
        .into_iter()
        .filter_map(|p| p.into_iter().next())
        .collect()
}

/// The top-level module a file belongs to (`model/hist.rs` is `model`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    first.trim_end_matches(".rs").to_string()
}

/// Strongly connected components with more than one module (Tarjan).
pub(crate) fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

pub fn layers(ws: &Workspace) -> Result<()> {
    let src = ws.root.join("vmscope/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    files.sort();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut named = Vec::new();
    let mut long = Vec::new();
    let mut types: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let lines = text.lines().count();
        if lines > FILE_LIMIT {
            long.push(format!(
                "{} ({lines})",
                f.strip_prefix(&ws.root).unwrap_or(f).display()
            ));
        }
        let code = code_of(&text);
        for t in type_names(&code) {
            types
                .entry(t)
                .or_default()
                .push(f.strip_prefix(&src).unwrap_or(f).display().to_string());
        }
        let module = crate::circles::module_path(&src, f);
        named.push((module.clone(), crate::circles::paths_named(&code, &module)));
        let m = module_of(&src, f);
        if m == "model" {
            for bad in FORBIDDEN_IN_MODEL {
                let hit = if *bad == "aya" {
                    code.contains("aya::") || code.contains("use aya")
                } else {
                    code.contains(bad)
                };
                if hit {
                    broken.push(format!(
                        "{} names {bad}",
                        f.strip_prefix(&ws.root).unwrap_or(f).display()
                    ));
                }
            }
        }
        let refs = crate_refs(&code);
        let entry = graph.entry(m.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != m));
    }
    for (m, deps) in &graph {
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        say!("layers: {m} -> {}", deps.join(", "));
    }
    let cyc = cycles(&graph);
    if cyc.is_empty() {
        say!("layers: no cycles between top-level modules");
    }
    for c in &cyc {
        say!(
            "layers: cycle among {}: a lower layer must not name a higher one",
            c.join(", ")
        );
    }
    let circles = crate::circles::circles(&crate::circles::folder_graphs(&named), true);
    if circles.is_empty() {
        say!("layers: no circles of files inside a folder");
    }
    for c in &circles {
        say!(
            "layers: circle of files in {c}: one of them must not name the others (move the shared part down)"
        );
    }
    if long.is_empty() {
        say!("layers: no file over {FILE_LIMIT} lines");
    }
    for l in &long {
        say!("layers: {l} is over {FILE_LIMIT} lines: split it along what it holds");
    }
    types.retain(|_, at| at.len() > 1);
    if types.is_empty() {
        say!("layers: no two types share a name");
    }
    for (t, at) in &types {
        say!(
            "layers: type {t} is declared in {}: one name, one type (rename one for what it holds)",
            at.join(" and ")
        );
    }
    let short = crate::fn_length::check(&ws.root, &["vmscope/src", "vmscope-ebpf/src"])?;
    if broken.is_empty() {
        say!("layers: model/ names neither aya nor source/");
    }
    for b in &broken {
        say!("layers: {b}: the model must stay pure (move the code, or pass the data in)");
    }
    if broken.is_empty()
        && short
        && cyc.is_empty()
        && circles.is_empty()
        && long.is_empty()
        && types.is_empty()
    {
        Ok(())
    } else {
        Err(Exit(1).into())
    }
}

/// The structs and enums a file declares at its top level (unit tests
/// already cut by [`code_of`]).
fn type_names(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .or_else(|| l.strip_prefix("pub(super) "))
                .unwrap_or(l);
            let rest = l
                .strip_prefix("struct ")
                .or_else(|| l.strip_prefix("enum "))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_types_are_read() {
        let code = "pub struct A {\n}\nenum B { X }\npub(crate) struct C<'a>(&'a u8);\n    struct Inner;\n";
        assert_eq!(type_names(code), ["A", "B", "C"]);
    }

    #[test]
    fn crate_paths_and_groups_are_read() {
        let code = "use crate::{\n    catalogue::{self, Need},\n    cli::TopArgs,\n    model::{hist, sample::Sample},\n};\nfn f() { crate::loader::load(); }";
        let r = crate_refs(code);
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            ["catalogue", "cli", "loader", "model"]
        );
    }

    #[test]
    fn a_source_path_in_the_model_is_found() {
        let code = code_of("use crate::{\n    source::loader::ProbeStatus,\n};\n");
        assert!(FORBIDDEN_IN_MODEL.iter().any(|b| code.contains(b)));
    }

    #[test]
    fn comments_are_not_dependencies() {
        assert!(crate_refs(&code_of("// see crate::loader\nfn f() {}")).is_empty());
    }

    #[test]
    fn cycles_are_found() {
        let g: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("d", vec!["a"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    }
}
