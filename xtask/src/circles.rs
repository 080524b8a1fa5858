//! The folder part of `cargo xtask layers`: inside each folder of
//! vmscope's sources, the files (and subfolders, each as one) must not name
//! each other in a circle. A file names another when one of its paths
//! (`crate::a::b`, `super::b`, `self::b`, groups `{..}` included) resolves
//! to that file's module. A folder's `mod.rs` is its index and is no node
//! of its own folder's graph (declaring and re-exporting children is what
//! it is for); seen from the parent folder, it is part of its folder.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// A module path, as segments (`["model", "hist"]`); the crate root is
/// empty.
pub type ModPath = Vec<String>;

/// The module a file is (`model/mod.rs` is `model`; `lib.rs` and
/// `main.rs` are the root).
pub fn module_path(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        let root = parts.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !root {
            parts.push(stem);
        }
    }
    parts
}

/// Every path the code names from the crate root, from itself or from its
/// parent, each made absolute (`from` is the file's module; a folder's
/// index is its folder's module, so its `super` is the folder's parent).
pub fn paths_named(code: &str, from: &[String]) -> Vec<ModPath> {
    let parent: ModPath = from[..from.len().saturating_sub(1)].to_vec();
    paths_after(
        code,
        &[
            ("crate::", Vec::new()),
            ("super::", parent),
            ("self::", from.to_vec()),
        ],
    )
}

/// Every `crate::` path the code names.
pub fn crate_paths(code: &str) -> Vec<ModPath> {
    paths_after(code, &[("crate::", Vec::new())])
}

/// The paths after each `key`, each made absolute by its `base`.
fn paths_after(code: &str, keys: &[(&str, ModPath)]) -> Vec<ModPath> {
    let mut out = Vec::new();
    for (key, base) in keys {
        let mut rest = code;
        while let Some(i) = rest.find(key) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + key.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            expand(rest, base, &mut out);
        }
    }
    out
}

/// The paths a use-tree starting at `text` names, each after `base`.
fn expand(text: &str, base: &[String], out: &mut Vec<ModPath>) {
    let mut path = base.to_vec();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            for item in split_group(group) {
                expand(item, &path, out);
            }
            return;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name == "self" {
            out.push(path);
            return;
        }
        rest = &rest[name.len()..];
        path.push(name);
        match rest.trim_start().strip_prefix("::") {
            Some(r) => rest = r,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

/// The top-level items of a `{..}` group whose opening brace is already
/// consumed.
fn split_group(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (1, 0);
    for (j, ch) in group.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(&group[start..j]);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(&group[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    items.retain(|s| !s.trim().is_empty());
    items
}

/// The longest prefix of `p` that is a file's module.
fn resolve<'a>(p: &[String], modules: &'a BTreeSet<ModPath>) -> Option<&'a ModPath> {
    (0..=p.len())
        .rev()
        .find_map(|n| modules.get(&p[..n].to_vec()))
}

/// The node of folder `folder` that module `m` falls in: its next segment
/// below the folder, or none (the folder's own index, or outside it).
fn node_in<'a>(folder: &[String], m: &'a [String]) -> Option<&'a str> {
    (m.len() > folder.len() && m.starts_with(folder)).then(|| m[folder.len()].as_str())
}

/// Each folder's graph between its nodes: `files` holds each file's
/// module and the modules its paths name.
pub fn folder_graphs(
    files: &[(ModPath, Vec<ModPath>)],
) -> BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> {
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (m, named) in files {
        for depth in 0..m.len() {
            let folder = &m[..depth];
            let Some(from) = node_in(folder, m) else {
                continue;
            };
            let g = graphs.entry(folder.to_vec()).or_default();
            let deps = g.entry(from.to_string()).or_default();
            for t in named.iter().filter_map(|p| resolve(p, &modules)) {
                if let Some(to) = node_in(folder, t)
                    && to != from
                {
                    deps.insert(to.to_string());
                }
            }
        }
    }
    graphs
}

/// Every circle of files inside a folder, as "folder: a, b, c".
pub fn circles(
    graphs: &BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>,
    skip_root: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (folder, g) in graphs {
        if skip_root && folder.is_empty() {
            continue;
        }
        for c in crate::layers::cycles(g) {
            let name = if folder.is_empty() {
                "src".to_string()
            } else {
                folder.join("/")
            };
            let members: BTreeSet<&String> = c.iter().collect();
            let edges: Vec<String> = c
                .iter()
                .map(|a| {
                    let to: Vec<&str> = g[a]
                        .iter()
                        .filter(|b| members.contains(b))
                        .map(String::as_str)
                        .collect();
                    format!("{a} -> {}", to.join(" "))
                })
                .collect();
            out.push(format!("{name}/: {} ({})", c.join(", "), edges.join("; ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ModPath {
        s.split("::")
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn paths_of_groups_super_and_self_are_made_absolute() {
        let code = "use crate::{model::{hist, sample::Sample}, cli};\nuse super::view::Row;\nfn f() { self::inner::g(); crate::units::mib(1); x_crate::no(); }";
        let mut got = paths_named(code, &p("model::fold"));
        got.sort();
        let mut want = vec![
            p("cli"),
            p("model::hist"),
            p("model::sample::Sample"),
            p("model::view::Row"),
            p("model::fold::inner::g"),
            p("units::mib"),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn a_circle_of_siblings_is_found_and_an_index_is_no_node() {
        // a -> b -> a inside model/; model/mod.rs names both (an index);
        // c names mod.rs's items only.
        let files = vec![
            (p("model"), vec![p("model::a::X"), p("model::b::Y")]),
            (p("model::a"), vec![p("model::b::Y")]),
            (p("model::b"), vec![p("model::a::X"), p("model::Z")]),
            (p("model::c"), vec![p("model::Z")]),
            (p("top"), vec![p("model::a")]),
        ];
        let g = folder_graphs(&files);
        assert_eq!(
            circles(&g, false),
            vec!["model/: a, b (a -> b; b -> a)".to_string()]
        );
        let acyclic = vec![
            (p("model"), vec![p("model::a::X")]),
            (p("model::a"), vec![p("model::b::Y")]),
            (p("model::b"), vec![p("model::Z")]),
        ];
        assert!(circles(&folder_graphs(&acyclic), false).is_empty());
    }

    #[test]
    fn a_subfolder_is_one_node_of_its_parent() {
        let files = vec![
            (p("model::rmap"), vec![p("model::catalogue")]),
            (p("model::rmap::categorize"), vec![p("model::rmap")]),
            (p("model::catalogue"), vec![p("model::rmap::categorize::F")]),
        ];
        let g = folder_graphs(&files);
        assert_eq!(
            circles(&g, false),
            vec!["model/: catalogue, rmap (catalogue -> rmap; rmap -> catalogue)".to_string()]
        );
    }
}
