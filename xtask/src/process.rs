//! Small helpers around `std::process` and the environment: running
//! commands, showing them to the user, finding programs, and who we are.

use std::{
    ffi::OsStr,
    fmt, fs,
    os::unix::{fs::PermissionsExt as _, process::ExitStatusExt as _},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
};

use anyhow::{Context as _, Result, bail};

/// An error that has already been explained on stderr; the process exits
/// with this code and prints nothing more.
#[derive(Debug)]
pub struct Exit(pub u8);

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// Prints one `xtask: ...` status line on stderr, where cargo's own progress
/// goes too, so the two stay in order.
macro_rules! say {
    ($($arg:tt)*) => { eprintln!("xtask: {}", format_args!($($arg)*)) };
}
pub(crate) use say;

/// Runs `cmd` with inherited stdio and returns its status.
pub fn status(cmd: &mut Command) -> Result<ExitStatus> {
    cmd.status()
        .with_context(|| format!("could not start `{}`", show(cmd)))
}

/// Runs `cmd` and fails unless it exits with status 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let st = status(cmd)?;
    if !st.success() {
        bail!("`{}` failed ({})", show(cmd), describe(st));
    }
    Ok(())
}

/// Runs `cmd` with its stdout captured; fails unless it exits with status 0.
/// Its stderr is captured too and included in the error.
pub fn stdout(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{}`", show(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            show(cmd),
            describe(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// "exit status 3" or "killed by signal 9".
pub fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => st.to_string(),
    }
}

/// `cmd` as a line the user could paste into a shell. Programs given by
/// absolute path are shown by file name, environment changes other than
/// PATH as `VAR=value` prefixes.
pub fn show(cmd: &Command) -> String {
    let mut words: Vec<String> = cmd
        .get_envs()
        .filter(|(k, _)| *k != "PATH")
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), quote(v?))))
        .collect();
    let program = Path::new(cmd.get_program());
    let program = match program.file_name() {
        Some(name) if program.is_absolute() => name,
        _ => program.as_os_str(),
    };
    words.push(quote(program));
    words.extend(cmd.get_args().map(quote));
    words.join(" ")
}

/// Quotes `word` for a POSIX shell when it needs quoting.
pub fn quote(word: impl AsRef<OsStr>) -> String {
    let word = word.as_ref().to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.into_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Whether `path` is a regular file with an execute bit set.
pub fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable called `name` in the directories of `PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// Exit status of a bench run without root.
pub const EXIT_NEED_ROOT: u8 = 77;

/// Fails with [`EXIT_NEED_ROOT`] and one line naming `cmd` (`bench soak`)
/// unless running as root: vmscope loads eBPF programs.
pub fn require_root(cmd: &str) -> Result<()> {
    if effective_uid()? != 0 {
        say!("{cmd}: vmscope loads eBPF programs; run `cargo xtask {cmd}` as root");
        return Err(Exit(EXIT_NEED_ROOT).into());
    }
    Ok(())
}

/// A bench's one optional argument, a positive number (`default` when
/// absent); `what` names it in the errors ("rounds", "seconds").
pub fn positive_arg<T>(cmd: &str, args: &[std::ffi::OsString], default: T, what: &str) -> Result<T>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    match args {
        [] => Ok(default),
        [n] => n
            .to_str()
            .and_then(|s| s.parse().ok())
            .filter(|n: &T| *n > T::default())
            .with_context(|| format!("{cmd}: {what} must be a positive number, not {n:?}")),
        _ => bail!("{cmd} takes at most one argument, the {what}"),
    }
}

/// The effective user id, from /proc/self/status or else `id -u`.
pub fn effective_uid() -> Result<u32> {
    if let Some(uid) = fs::read_to_string("/proc/self/status")
        .ok()
        .as_deref()
        .and_then(parse_status_euid)
    {
        return Ok(uid);
    }
    let out = stdout(Command::new("id").arg("-u"))?;
    out.trim()
        .parse()
        .with_context(|| format!("unexpected output from `id -u`: {out:?}"))
}

/// The effective uid from the `Uid:` line of /proc/<pid>/status, which lists
/// the real, effective, saved and filesystem ids.
pub fn parse_status_euid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euid_from_proc_status() {
        let status =
            "Name:\tcat\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(parse_status_euid(status), Some(0));
        assert_eq!(parse_status_euid("Name:\tcat\n"), None);
        assert_eq!(parse_status_euid("Uid:\t1000\n"), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("--features"), "--features");
        assert_eq!(quote("/usr/lib/llvm-22"), "/usr/lib/llvm-22");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn showing_commands() {
        let mut cmd = Command::new("/root/.cargo/bin/cargo");
        cmd.env("LLVM_PREFIX", "/usr/lib/llvm-22")
            .env("PATH", "/x")
            .args(["install", "bpf-linker", "a b"]);
        assert_eq!(
            show(&cmd),
            "LLVM_PREFIX=/usr/lib/llvm-22 cargo install bpf-linker 'a b'"
        );
    }
}
