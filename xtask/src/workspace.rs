//! Where the workspace is, which cargo to use, and how to start commands in it.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, anyhow};

use crate::process;

pub struct Workspace {
    /// The workspace root: the parent of xtask's own manifest directory.
    pub root: PathBuf,
    /// `$CARGO` (set when we run through `cargo xtask`), else `cargo`.
    pub cargo: OsString,
    /// A directory put in front of PATH for every child, set when bootstrap
    /// finds bpf-linker in cargo's bin directory but not on PATH.
    extra_path: Option<PathBuf>,
}

impl Workspace {
    pub fn new() -> Result<Self> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .ok_or_else(|| anyhow!("xtask's manifest directory has no parent"))?
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        Ok(Self {
            root,
            cargo,
            extra_path: None,
        })
    }

    /// A command that runs in the workspace root with the adjusted PATH.
    pub fn command(&self, program: impl Into<OsString>) -> Command {
        let mut cmd = Command::new(program.into());
        cmd.current_dir(&self.root);
        if let Some(dir) = &self.extra_path {
            let old = std::env::var_os("PATH").unwrap_or_default();
            let paths = std::iter::once(dir.clone()).chain(std::env::split_paths(&old));
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("PATH", joined);
            }
        }
        cmd
    }

    /// `cargo <args>` in the workspace root.
    pub fn cargo<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut cmd = self.command(self.cargo.clone());
        cmd.args(args.into_iter().map(Into::into));
        cmd
    }

    /// Puts `dir` in front of PATH for the commands started from now on.
    pub fn prepend_path(&mut self, dir: PathBuf) {
        self.extra_path = Some(dir);
    }

    /// cargo's target directory, as `cargo metadata` reports it (which
    /// accounts for CARGO_TARGET_DIR and cargo configuration).
    pub fn target_dir(&self) -> Result<PathBuf> {
        let json =
            process::stdout(&mut self.cargo(["metadata", "--format-version", "1", "--no-deps"]))?;
        let dir = json_string_field(&json, "target_directory")
            .context("`cargo metadata` printed no target_directory")?;
        Ok(PathBuf::from(dir))
    }

    /// The release build of the vmscope binary.
    pub fn vmscope_bin(&self) -> Result<PathBuf> {
        Ok(self.target_dir()?.join("release").join("vmscope"))
    }
}

/// The string value of the first `"key": "..."` member in a JSON document.
/// Inside a JSON string every `"` is escaped, so a match on `"key"` followed
/// by `:` is always a real member name. Enough for cargo metadata's
/// top-level `target_directory`; not a general JSON parser.
pub fn json_string_field(json: &str, key: &str) -> Option<String> {
    let needle = format!("\"{key}\"");
    let mut search = json;
    loop {
        let at = search.find(&needle)?;
        let rest = search[at + needle.len()..].trim_start();
        search = &search[at + needle.len()..];
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start().strip_prefix('"')?;
        return decode_json_string(rest);
    }
}

/// Decodes the body of a JSON string up to its closing quote.
fn decode_json_string(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hi = hex4(&mut chars)?;
                    let code = if (0xd800..0xdc00).contains(&hi) {
                        // A surrogate pair: the low half must follow as \uXXXX.
                        if chars.next()? != '\\' || chars.next()? != 'u' {
                            return None;
                        }
                        let lo = hex4(&mut chars)?.checked_sub(0xdc00)?;
                        0x10000 + ((hi - 0xd800) << 10) + lo
                    } else {
                        hi
                    };
                    out.push(char::from_u32(code)?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
}

fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let hex: String = chars.take(4).collect();
    if hex.len() != 4 {
        return None;
    }
    u32::from_str_radix(&hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_directory_from_metadata() {
        let json = r#"{"packages":[{"name":"x","description":"has \"target_directory\": \"no\""}],"workspace_members":[],"target_directory":"/work/main/target","version":1}"#;
        assert_eq!(
            json_string_field(json, "target_directory").as_deref(),
            Some("/work/main/target")
        );
    }

    #[test]
    fn escapes_in_json_strings() {
        let json = r#"{"target_directory" : "/a \"b\"\\c\u00e9\ud83d\ude00/d"}"#;
        assert_eq!(
            json_string_field(json, "target_directory").as_deref(),
            Some("/a \"b\"\\c\u{e9}\u{1f600}/d")
        );
        assert_eq!(json_string_field(r#"{"x":"y"}"#, "target_directory"), None);
        assert_eq!(
            json_string_field(r#"{"target_directory":"unterminated"#, "target_directory"),
            None
        );
    }
}
