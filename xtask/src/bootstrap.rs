//! `cargo xtask bootstrap`: makes sure that what vmscope/build.rs needs to
//! build the eBPF programs is installed:
//!
//! 1. `rust-src` for the nightly toolchain (for `-Z build-std=core`);
//! 2. LLVM's development files from Debian, of the same major version as
//!    the nightly's LLVM;
//! 3. bpf-linker, built against that LLVM.
//!
//! Each step prints one line. Where a step cannot be done here (not Debian,
//! not root), it prints the command to run instead and fails.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    process::{self, Exit, say},
    workspace::Workspace,
};

const NIGHTLY: &str = "nightly";
const BPF_LINKER: &str = "bpf-linker";
const BPF_LINKER_VERSION: &str = "0.13.0";

/// Installs what is missing, or with `check_only` just reports it (and
/// fails if anything is missing). On success, children started through `ws`
/// find bpf-linker on their PATH.
pub fn bootstrap(ws: &mut Workspace, check_only: bool) -> Result<()> {
    let mut boot = Bootstrap {
        check_only,
        missing: 0,
        apt_updated: false,
    };
    let llvm_major = nightly_llvm_major()?;
    boot.nightly_component("rust-src")?;
    let linker = BpfLinker::find();
    let linker_ok = linker.as_ref().is_some_and(|l| l.usable(llvm_major));
    boot.llvm_dev(llvm_major, linker_ok)?;
    boot.bpf_linker(ws, linker, llvm_major)?;
    if boot.missing > 0 {
        say!("bootstrap --check: {} item(s) missing", boot.missing);
        return Err(Exit(1).into());
    }
    Ok(())
}

/// Adds clippy to the nightly toolchain if it lacks it (for linting the
/// eBPF crate on its own target).
pub fn ensure_nightly_clippy() -> Result<()> {
    Bootstrap {
        check_only: false,
        missing: 0,
        apt_updated: false,
    }
    .nightly_component("clippy")
}

/// `rustup run nightly cargo <args>` in the workspace, with the variables
/// that would pin another toolchain's compiler removed.
pub fn nightly_cargo<I, S>(ws: &Workspace, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = ws.command("rustup");
    cmd.args(["run", NIGHTLY, "cargo"])
        .args(args)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    cmd
}

/// Installs Debian packages (after `apt-get update`), saying so as `step`.
pub fn apt_install(step: &str, what: &str, packages: &[String]) -> Result<()> {
    Bootstrap {
        check_only: false,
        missing: 0,
        apt_updated: false,
    }
    .apt_install(step, what, packages)
}

struct Bootstrap {
    check_only: bool,
    /// Items found missing in check-only mode.
    missing: usize,
    /// Whether `apt-get update` ran in this invocation.
    apt_updated: bool,
}

impl Bootstrap {
    /// Adds rustup component `name` (rust-src, clippy) to the nightly
    /// toolchain if it lacks it.
    fn nightly_component(&mut self, name: &str) -> Result<()> {
        let step = format!("{name} for {NIGHTLY}");
        let installed = process::stdout(Command::new("rustup").args([
            "component",
            "list",
            "--toolchain",
            NIGHTLY,
            "--installed",
        ]))?;
        if has_component(&installed, name) {
            say!("{step}: present");
            return Ok(());
        }
        let mut add = Command::new("rustup");
        add.args(["component", "add", name, "--toolchain", NIGHTLY]);
        if self.would(&step, "missing", &process::show(&add)) {
            return Ok(());
        }
        say!("{step}: installing ({})", process::show(&add));
        process::run(&mut add)
    }

    /// `linker_ok`: a working bpf-linker for this LLVM is already there, so
    /// the development files are not needed to build one.
    fn llvm_dev(&mut self, major: u32, linker_ok: bool) -> Result<()> {
        let step = format!("LLVM {major} dev files");
        let prefix = llvm_prefix(major);
        let files = has_llvm_dev_files(&prefix);
        let debian = Path::new("/etc/debian_version").exists();
        if !debian {
            if files {
                say!("{step}: present ({})", prefix.display());
            } else if linker_ok {
                say!(
                    "{step}: not in {}, not needed: bpf-linker is already built",
                    prefix.display()
                );
            } else {
                say!(
                    "{step}: missing in {} and this is not Debian, so they cannot be installed here; \
                     install LLVM {major} (with llvm-config and libLLVM.so), then run: {}",
                    prefix.display(),
                    manual_linker_install(major, &format!("/path/to/llvm-{major}"))
                );
                return Err(Exit(1).into());
            }
            return Ok(());
        }
        let wanted = llvm_packages(major);
        let missing = missing_packages(&wanted)?;
        if files && missing.is_empty() {
            say!("{step}: present ({})", prefix.display());
            return Ok(());
        }
        // The files can be missing with the packages installed only if
        // someone deleted them; asking for llvm-NN-dev again cannot hurt.
        let (what, to_install) = if missing.is_empty() {
            let what = format!("{} lacks llvm-config or libLLVM.so", prefix.display());
            (what, vec![wanted[0].clone()])
        } else {
            (format!("{} not installed", missing.join(" ")), missing)
        };
        self.apt_install(&step, &what, &to_install)?;
        if !self.check_only && !has_llvm_dev_files(&prefix) {
            bail!(
                "installed {} but {} still lacks bin/llvm-config or lib/libLLVM.so",
                to_install.join(" "),
                prefix.display()
            );
        }
        Ok(())
    }

    fn bpf_linker(
        &mut self,
        ws: &mut Workspace,
        found: Option<BpfLinker>,
        major: u32,
    ) -> Result<()> {
        const STEP: &str = "bpf-linker";
        let why = match &found {
            Some(l) if l.usable(major) => {
                say!("{STEP}: present ({})", l.describe());
                self.use_linker(ws, &l.path);
                return Ok(());
            }
            Some(l) => match l.llvm_major {
                Some(theirs) if l.version.is_some() => format!(
                    "{} is built for LLVM {theirs}, nightly uses LLVM {major}",
                    l.path.display()
                ),
                _ => format!("{} does not run", l.path.display()),
            },
            None => "not found".to_owned(),
        };
        let mut install = linker_install_command(ws, major, found.is_some());
        if self.would(STEP, &why, &process::show(&install)) {
            return Ok(());
        }
        let verb = if found.is_some() {
            "reinstalling"
        } else {
            "installing"
        };
        say!(
            "{STEP}: {why}; {verb} {BPF_LINKER_VERSION} for LLVM {major} (about a minute): {}",
            process::show(&install)
        );
        process::run(&mut install)?;
        // Look where cargo put it first: a stale one earlier on PATH (the
        // reason for reinstalling, maybe) must not hide it.
        let installed = cargo_bin_dirs()
            .into_iter()
            .map(|d| d.join(BPF_LINKER))
            .find(|p| process::is_executable(p))
            .map(BpfLinker::inspect)
            .or_else(BpfLinker::find);
        match installed {
            Some(l) if l.usable(major) => {
                self.use_linker(ws, &l.path);
                Ok(())
            }
            Some(l) => bail!(
                "bpf-linker was installed, but {} still does not work",
                l.describe()
            ),
            None => bail!(
                "bpf-linker was installed, but is neither on PATH nor in cargo's bin directory"
            ),
        }
    }

    /// Makes the directory of `path` searched first by our children, unless
    /// it is already the first bpf-linker on PATH.
    fn use_linker(&self, ws: &mut Workspace, path: &Path) {
        if process::find_in_path(BPF_LINKER).as_deref() != Some(path)
            && let Some(dir) = path.parent()
        {
            ws.prepend_path(dir.to_path_buf());
        }
    }

    /// Installs Debian packages, running `apt-get update` first (once).
    fn apt_install(&mut self, step: &str, what: &str, packages: &[String]) -> Result<()> {
        let list = packages.join(" ");
        let mut install = Command::new("apt-get");
        install
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["-q", "install", "-y"])
            .args(packages)
            .stdin(Stdio::null());
        let shown = format!("apt-get update && {}", process::show(&install));
        if self.would(step, what, &shown) {
            return Ok(());
        }
        if process::effective_uid()? != 0 {
            say!(
                "{step}: {what}, and installing needs root; run: \
                 sudo apt-get update && sudo apt-get install -y {list}"
            );
            return Err(Exit(1).into());
        }
        say!("{step}: {what}; installing {list} with apt-get");
        if !self.apt_updated {
            let mut update = Command::new("apt-get");
            update
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(["-q", "update"])
                .stdin(Stdio::null());
            process::run(&mut update)?;
            self.apt_updated = true;
        }
        process::run(&mut install)
    }

    /// In check-only mode, reports `what` is wrong and that `shown` would
    /// run, and returns true.
    fn would(&mut self, step: &str, what: &str, shown: &str) -> bool {
        if self.check_only {
            say!("{step}: {what} (would run: {shown})");
            self.missing += 1;
        }
        self.check_only
    }
}

/// The major version of the nightly toolchain's LLVM.
fn nightly_llvm_major() -> Result<u32> {
    // Look before running anything with +nightly: rustup may be set to
    // install a missing toolchain on first use, and a newer nightly can
    // bring an LLVM that Debian does not package.
    let toolchains = match process::stdout(Command::new("rustup").args(["toolchain", "list"])) {
        Ok(list) => list,
        Err(e) => {
            say!(
                "nightly toolchain: cannot list rustup's toolchains ({e:#}); \
                 install rustup, then run: rustup toolchain install {NIGHTLY} --component rust-src"
            );
            return Err(Exit(1).into());
        }
    };
    if !toolchains
        .lines()
        .any(|l| l.starts_with(&format!("{NIGHTLY}-")) || l.trim() == NIGHTLY)
    {
        say!(
            "nightly toolchain: not installed; run: rustup toolchain install {NIGHTLY} --component rust-src"
        );
        return Err(Exit(1).into());
    }
    let vv = process::stdout(Command::new("rustup").args(["run", NIGHTLY, "rustc", "-vV"]))?;
    parse_rustc_llvm_major(&vv)
        .with_context(|| format!("no `LLVM version:` line in `rustc +{NIGHTLY} -vV`:\n{vv}"))
}

/// `22` from the `LLVM version: 22.1.4` line of `rustc -vV`.
pub fn parse_rustc_llvm_major(vv: &str) -> Option<u32> {
    let version = vv
        .lines()
        .find_map(|l| l.trim().strip_prefix("LLVM version:"))?;
    leading_number(version.trim())
}

/// Whether `rustup component list --installed` lists `name` (rust-src is
/// listed bare, others with a target suffix such as `-x86_64-unknown-linux-gnu`).
pub fn has_component(list: &str, name: &str) -> bool {
    list.lines().map(str::trim).any(|l| {
        l == name
            || l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('-') && rest[1..].contains('-'))
    })
}

/// Where Debian puts LLVM `major`.
fn llvm_prefix(major: u32) -> PathBuf {
    PathBuf::from(format!("/usr/lib/llvm-{major}"))
}

/// The Debian packages that building bpf-linker against LLVM `major` needs.
/// llvm-NN-dev comes first.
fn llvm_packages(major: u32) -> Vec<String> {
    vec![
        format!("llvm-{major}-dev"),
        format!("libpolly-{major}-dev"),
        "libzstd-dev".to_owned(),
        "zlib1g-dev".to_owned(),
    ]
}

/// What bpf-linker's build looks for under LLVM_PREFIX: `bin/llvm-config`
/// and the library, `lib/libLLVM.so*`.
pub fn has_llvm_dev_files(prefix: &Path) -> bool {
    let lib = fs::read_dir(prefix.join("lib")).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("libLLVM.so"))
    });
    lib && process::is_executable(&prefix.join("bin").join("llvm-config"))
}

/// The packages of `wanted` that dpkg does not list as installed.
fn missing_packages(wanted: &[String]) -> Result<Vec<String>> {
    // dpkg-query exits 1 when some package is unknown, but still prints the
    // known ones: look at stdout whatever the status.
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${db:Status-Abbrev}\\n"])
        .args(wanted)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("could not start dpkg-query")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let installed = parse_dpkg_installed(&stdout);
    Ok(wanted
        .iter()
        .filter(|p| !installed.contains(p.as_str()))
        .cloned()
        .collect())
}

/// The names in `dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n'`
/// output whose status is "ii" (installed, no errors).
pub fn parse_dpkg_installed(out: &str) -> BTreeSet<&str> {
    out.lines()
        .filter_map(|l| {
            let (name, status) = l.split_once(' ')?;
            (status.trim_end() == "ii").then_some(name)
        })
        .collect()
}

fn linker_install_command(ws: &Workspace, major: u32, force: bool) -> Command {
    let mut cmd = Command::new(&ws.cargo);
    cmd.env("LLVM_PREFIX", llvm_prefix(major))
        .args(["install", BPF_LINKER, "--version", BPF_LINKER_VERSION])
        .args(["--no-default-features", "--features"])
        .arg(format!("llvm-{major}"));
    if force {
        cmd.arg("--force");
    }
    // Outside the workspace, so that its cargo configuration does not apply.
    cmd.current_dir(std::env::temp_dir());
    cmd
}

fn manual_linker_install(major: u32, prefix: &str) -> String {
    format!(
        "LLVM_PREFIX={prefix} cargo install {BPF_LINKER} --version {BPF_LINKER_VERSION} \
         --no-default-features --features llvm-{major} --force"
    )
}

/// An installed bpf-linker and what it says about itself.
struct BpfLinker {
    path: PathBuf,
    /// From `--version`; None if it does not run (e.g. its libLLVM is gone).
    version: Option<String>,
    /// The LLVM major it was built against, if that can be told.
    llvm_major: Option<u32>,
}

impl BpfLinker {
    /// The first bpf-linker on PATH, else the one in cargo's bin directory.
    fn find() -> Option<Self> {
        let path = process::find_in_path(BPF_LINKER).or_else(|| {
            cargo_bin_dirs()
                .into_iter()
                .map(|d| d.join(BPF_LINKER))
                .find(|p| process::is_executable(p))
        })?;
        Some(Self::inspect(path))
    }

    fn inspect(path: PathBuf) -> Self {
        let version_out = Command::new(&path)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        // `bpf-linker --version` (0.13) names no LLVM version. A binary
        // linked to a shared libLLVM names it among its needed libraries.
        let llvm_major = version_out
            .as_deref()
            .and_then(parse_linker_llvm_major)
            .or_else(|| fs::read(&path).ok().and_then(|b| needed_libllvm_major(&b)));
        Self {
            path,
            version: version_out,
            llvm_major,
        }
    }

    /// It runs and is not known to be built for another LLVM.
    fn usable(&self, major: u32) -> bool {
        self.version.is_some() && self.llvm_major.is_none_or(|m| m == major)
    }

    fn describe(&self) -> String {
        let mut s = self
            .version
            .clone()
            .unwrap_or_else(|| BPF_LINKER.to_owned());
        if let Some(m) = self.llvm_major {
            s.push_str(&format!(", LLVM {m}"));
        }
        s.push_str(&format!(", {}", self.path.display()));
        s
    }
}

/// `$CARGO_HOME/bin` and `~/.cargo/bin`, where `cargo install` puts binaries.
fn cargo_bin_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo").join("bin"));
    }
    dirs
}

/// The LLVM major in `bpf-linker --version` output, should it name one
/// ("LLVM 22.1.4", "LLVM version 22.1.4", "llvm-22").
pub fn parse_linker_llvm_major(version: &str) -> Option<u32> {
    let lower = version.to_ascii_lowercase();
    lower.match_indices("llvm").find_map(|(at, _)| {
        let rest = lower[at + 4..].trim_start_matches([' ', '-', ':']);
        let rest = rest.strip_prefix("version").unwrap_or(rest);
        leading_number(rest.trim_start_matches([' ', ':']))
    })
}

/// The major version in a shared libLLVM name inside a binary
/// (`libLLVM.so.22.1`, `libLLVM-22.so`), as listed in its dynamic section.
pub fn needed_libllvm_major(binary: &[u8]) -> Option<u32> {
    const NAME: &[u8] = b"libLLVM";
    binary
        .windows(NAME.len())
        .enumerate()
        .filter(|(_, w)| *w == NAME)
        .find_map(|(at, _)| {
            let rest = &binary[at + NAME.len()..];
            let rest = rest
                .strip_prefix(b".so.")
                .or_else(|| rest.strip_prefix(b"-"))?;
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
        })
}

/// The number at the start of `s` ("22" of "22.1.4").
fn leading_number(s: &str) -> Option<u32> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUSTC_VV: &str = "rustc 1.97.0-nightly (e50aa6fba 2026-05-19)
binary: rustc
commit-hash: e50aa6fba4e63ab34c72bf9acfd2c307c1155d1a
commit-date: 2026-05-19
host: x86_64-unknown-linux-gnu
release: 1.97.0-nightly
LLVM version: 22.1.4
";

    #[test]
    fn llvm_major_from_rustc() {
        assert_eq!(parse_rustc_llvm_major(RUSTC_VV), Some(22));
        assert_eq!(parse_rustc_llvm_major("LLVM version: 9.0\n"), Some(9));
        assert_eq!(parse_rustc_llvm_major("rustc 1.0\nhost: x\n"), None);
        assert_eq!(parse_rustc_llvm_major("LLVM version: \n"), None);
    }

    #[test]
    fn llvm_major_from_linker_version() {
        // What 0.13.0 prints: no LLVM version, so it is accepted as is.
        assert_eq!(parse_linker_llvm_major("bpf-linker 0.13.0"), None);
        assert_eq!(
            parse_linker_llvm_major("bpf-linker 0.14.0 (LLVM 22.1.4)"),
            Some(22)
        );
        assert_eq!(
            parse_linker_llvm_major("bpf-linker 1.0\nLLVM version: 23.0.0"),
            Some(23)
        );
        assert_eq!(parse_linker_llvm_major("bpf-linker 1.0 llvm-21"), Some(21));
        assert_eq!(
            parse_linker_llvm_major("bpf-linker 1.0 (llvm unknown)"),
            None
        );
    }

    #[test]
    fn llvm_major_from_needed_library() {
        assert_eq!(
            needed_libllvm_major(b"\0libc.so.6\0libLLVM.so.22.1\0"),
            Some(22)
        );
        assert_eq!(needed_libllvm_major(b"\0libLLVM-21.so\0"), Some(21));
        // Mentions without a version are skipped.
        assert_eq!(needed_libllvm_major(b"libLLVM\0 libLLVM.so.20.1"), Some(20));
        assert_eq!(needed_libllvm_major(b"static build, no names"), None);
    }

    #[test]
    fn rustup_components() {
        let list = "cargo-x86_64-unknown-linux-gnu\nrust-src\nrustc-x86_64-unknown-linux-gnu\n";
        assert!(has_component(list, "rust-src"));
        assert!(has_component(list, "rustc"));
        assert!(!has_component(
            "rust-std-x86_64-unknown-linux-gnu\n",
            "rust-src"
        ));
        assert!(!has_component("rust-src-extra\n", "rust-src"));
        assert!(!has_component("", "rust-src"));
    }

    #[test]
    fn dpkg_status() {
        let out = "llvm-22-dev ii \nlibpolly-22-dev rc \nzlib1g-dev ii \n";
        let installed = parse_dpkg_installed(out);
        assert!(installed.contains("llvm-22-dev"));
        assert!(installed.contains("zlib1g-dev"));
        assert!(!installed.contains("libpolly-22-dev"));
        assert!(!installed.contains("libzstd-dev"));
    }

    #[test]
    fn llvm_dev_files() {
        let dir = std::env::temp_dir().join(format!("xtask-llvm-test-{}", std::process::id()));
        let bin = dir.join("bin");
        let lib = dir.join("lib");
        fs::create_dir_all(&bin).expect("mkdir bin");
        fs::create_dir_all(&lib).expect("mkdir lib");
        assert!(!has_llvm_dev_files(&dir));
        fs::write(lib.join("libLLVM.so.22.1"), b"").expect("write lib");
        assert!(!has_llvm_dev_files(&dir), "llvm-config is missing");
        let config = bin.join("llvm-config");
        fs::write(&config, b"#!/bin/sh\n").expect("write llvm-config");
        assert!(!has_llvm_dev_files(&dir), "llvm-config is not executable");
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&config, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        assert!(has_llvm_dev_files(&dir));
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
