//! The function-length part of `cargo xtask layers`: every non-test
//! function in vmscope's sources longer than [`LIMIT`] lines, counted from
//! its `fn` line to its closing brace. A function that long no longer reads
//! in one sitting, so the check fails on it.

use std::{fs, path::Path};

use anyhow::{Context as _, Result};

use crate::process::say;

/// The most lines a function may span.
pub const LIMIT: usize = 100;

/// One function: its name, the line its `fn` keyword is on (1-based) and
/// how many lines it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// `text` with the contents of comments, string literals and character
/// literals blanked (newlines kept), so braces in them do not count.
fn code_only(text: &str) -> Vec<char> {
    let src: Vec<char> = text.chars().collect();
    let mut out = src.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(src.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let end = match src[i] {
            '/' if src.get(i + 1) == Some(&'/') => line_comment_end(&src, i),
            '/' if src.get(i + 1) == Some(&'*') => block_comment_end(&src, i),
            '"' => string_end(&src, i + 1),
            'r' | 'b' if !ident_char_at(&src, i.wrapping_sub(1)) => match raw_string_end(&src, i) {
                Some(end) => end,
                None => {
                    i += 1;
                    continue;
                }
            },
            '\'' => match char_literal_end(&src, i) {
                Some(end) => end,
                None => {
                    i += 1;
                    continue;
                }
            },
            _ => {
                i += 1;
                continue;
            }
        };
        blank(&mut out, i, end);
        i = end;
    }
    out
}

fn ident_char_at(src: &[char], i: usize) -> bool {
    src.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

fn line_comment_end(src: &[char], start: usize) -> usize {
    (start..src.len())
        .find(|&j| src[j] == '\n')
        .unwrap_or(src.len())
}

/// Block comments nest in Rust.
fn block_comment_end(src: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut j = start;
    while j + 1 < src.len() {
        match (src[j], src[j + 1]) {
            ('/', '*') => {
                depth += 1;
                j += 2;
            }
            ('*', '/') => {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return j;
                }
            }
            _ => j += 1,
        }
    }
    src.len()
}

/// The index after the closing quote of a string whose contents start at
/// `from`.
fn string_end(src: &[char], from: usize) -> usize {
    let mut j = from;
    while j < src.len() {
        match src[j] {
            '\\' => j += 2,
            '"' => return j + 1,
            _ => j += 1,
        }
    }
    src.len()
}

/// `r"..."`, `r#"..."#`, `br"..."` or `b"..."` starting at `start`, if
/// there is one.
fn raw_string_end(src: &[char], start: usize) -> Option<usize> {
    let mut j = start;
    if src.get(j) == Some(&'b') {
        j += 1;
        if src.get(j) == Some(&'"') {
            return Some(string_end(src, j + 1));
        }
    }
    if src.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = src[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if src.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < src.len() {
        if src[j] == '"'
            && src[j + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(src.len())
}

/// A character literal starting at `start` (`'x'`, `'\n'`, `'\u{7f}'`),
/// or `None` for a lifetime or label (`'a`, `'outer:`).
fn char_literal_end(src: &[char], start: usize) -> Option<usize> {
    match (src.get(start + 1), src.get(start + 2)) {
        (Some('\\'), _) => {
            let close = (start + 3..src.len()).find(|&j| src[j] == '\'')?;
            Some(close + 1)
        }
        (Some(_), Some('\'')) => Some(start + 3),
        _ => None,
    }
}

/// The index of the `}` matching the `{` at `open`.
fn matching_brace(code: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

/// The `{` opening the body of the item whose signature starts at `from`,
/// or `None` when a `;` ends it first (a declaration without a body).
/// Brackets are tracked so `[u8; 4]` in a signature does not end it.
fn body_start(code: &[char], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in code.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth == 0 => return Some(j),
            ';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The identifier starting at `at` after any whitespace, and where it ends.
fn ident_after(code: &[char], at: usize) -> Option<(String, usize)> {
    let start = (at..code.len()).find(|&j| !code[j].is_whitespace())?;
    let name: String = code[start..]
        .iter()
        .take_while(|c| c.is_alphanumeric() || **c == '_')
        .collect();
    let end = start + name.chars().count();
    (!name.is_empty()).then_some((name, end))
}

fn starts_with(code: &[char], at: usize, word: &str) -> bool {
    word.chars()
        .enumerate()
        .all(|(k, w)| code.get(at + k) == Some(&w))
}

/// Whether the keyword `word` stands at `at` (not part of a longer name).
fn keyword_at(code: &[char], at: usize, word: &str) -> bool {
    starts_with(code, at, word)
        && !ident_char_at(code, at.wrapping_sub(1))
        && code
            .get(at + word.chars().count())
            .is_some_and(|c| c.is_whitespace())
}

/// The end of the item a `#[cfg(test)]` at `at` guards, when that item has
/// a body (`mod tests { .. }`, a test-only function); `None` otherwise.
fn cfg_test_item_end(code: &[char], at: usize) -> Option<usize> {
    let open = body_start(code, at + "#[cfg(test)]".len())?;
    Some(matching_brace(code, open))
}

/// Every function in `text` outside `#[cfg(test)]` items, in source order.
pub fn functions(text: &str) -> Vec<Function> {
    let code = code_only(text);
    let line_of = |i: usize| 1 + code[..i].iter().filter(|c| **c == '\n').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if starts_with(&code, i, "#[cfg(test)]")
            && let Some(end) = cfg_test_item_end(&code, i)
        {
            i = end + 1;
            continue;
        }
        if keyword_at(&code, i, "fn")
            && let Some((name, after)) = ident_after(&code, i + 2)
            && let Some(open) = body_start(&code, after)
        {
            let close = matching_brace(&code, open);
            let line = line_of(i);
            out.push(Function {
                name,
                line,
                lines: line_of(close) - line + 1,
            });
        }
        i += 1;
    }
    out
}

/// A function past the limit, with where it is.
#[derive(Debug)]
struct Long {
    file: String,
    f: Function,
}

/// Checks every `.rs` file under `dirs` (relative to `root`); prints the
/// five longest functions and fails when one is past the limit.
pub fn check(root: &Path, dirs: &[&str]) -> Result<bool> {
    let mut all: Vec<Long> = Vec::new();
    for dir in dirs {
        let mut files = Vec::new();
        crate::layers::rust_files(&root.join(dir), &mut files)?;
        files.sort();
        for path in files {
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let file = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            all.extend(functions(&text).into_iter().map(|f| Long {
                file: file.clone(),
                f,
            }));
        }
    }
    all.sort_by_key(|l| std::cmp::Reverse(l.f.lines));
    let longest: Vec<String> = all
        .iter()
        .take(5)
        .map(|l| format!("{} {} ({})", l.file, l.f.name, l.f.lines))
        .collect();
    all.retain(|l| l.f.lines > LIMIT);
    say!(
        "layers: {} functions over {LIMIT} lines; longest: {}",
        all.len(),
        longest.join(", ")
    );
    for l in &all {
        say!(
            "layers: {}:{} {} is {} lines, over {LIMIT}: split it into helpers that each read in one sitting",
            l.file,
            l.f.line,
            l.f.name,
            l.f.lines
        );
    }
    Ok(all.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function spanning `lines` lines, its body padded with statements.
    fn synthetic(name: &str, lines: usize) -> String {
        let mut s = format!("fn {name}() {{\n");
        for k in 0..lines - 2 {
            s.push_str(&format!("    let _x{k} = {k};\n"));
        }
        s.push_str("}\n");
        s
    }

    fn long_ones(text: &str) -> Vec<Long> {
        functions(text)
            .into_iter()
            .filter(|f| f.lines > LIMIT)
            .map(|f| Long {
                file: "vmscope/src/x.rs".into(),
                f,
            })
            .collect()
    }

    #[test]
    fn a_function_of_101_lines_fails() {
        let long = long_ones(&synthetic("long", 101));
        assert_eq!(long.len(), 1);
        assert_eq!(long[0].f.lines, 101);
    }

    #[test]
    fn a_function_of_100_lines_passes() {
        let fs = functions(&synthetic("fits", 100));
        assert_eq!(fs[0].lines, 100);
        assert!(long_ones(&synthetic("fits", 100)).is_empty());
    }

    #[test]
    fn the_check_fails_on_a_function_over_the_limit() {
        let root = tempfile::tempdir().expect("temporary directory");
        let src = root.path().join("vmscope/src");
        fs::create_dir_all(&src).expect("mkdir vmscope/src");
        fs::write(src.join("fits.rs"), synthetic("fits", 100)).expect("write fits.rs");
        assert!(check(root.path(), &["vmscope/src"]).expect("check"));
        fs::write(src.join("long.rs"), synthetic("long", 101)).expect("write long.rs");
        assert!(!check(root.path(), &["vmscope/src"]).expect("check"));
    }

    #[test]
    fn braces_in_strings_chars_and_comments_are_not_counted() {
        let text = r####"fn a() {
    let s = "}}}";
    let r = r#"}"# ;
    let c = '}';
    let e = '\'';
    let b = b'{';
    // }
    /* } /* nested } */ } */
    let l: &'static str = "\"}";
}
fn b<'x>(v: &'x str) -> &'x str {
    'outer: loop { break 'outer; }
    v
}
"####;
        let fs = functions(text);
        let got: Vec<(&str, usize, usize)> = fs
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines))
            .collect();
        assert_eq!(got, [("a", 1, 10), ("b", 11, 4)]);
    }

    #[test]
    fn unit_tests_and_declarations_are_skipped() {
        let text = "trait T {\n    fn decl(&self, a: [u8; 4]);\n}\n\
                    fn real(f: fn(u32) -> u32) -> u32 {\n    f(1)\n}\n\
                    #[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        let names: Vec<String> = functions(text).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["real"]);
    }
}
