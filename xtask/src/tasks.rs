//! `build`, `run` and `test`: each bootstraps first.

use std::{ffi::OsString, os::unix::process::CommandExt as _, process::Command};

use anyhow::{Context as _, Result};

use crate::{
    bootstrap::{self, bootstrap},
    process::{self, Exit, say},
    workspace::Workspace,
};

/// Exit code of `run` when vmscope needs root and sudo is not there.
const EXIT_NEED_ROOT: u8 = 77;

pub fn build(ws: &mut Workspace) -> Result<()> {
    bootstrap(ws, false)?;
    build_vmscope(ws)
}

fn build_vmscope(ws: &Workspace) -> Result<()> {
    let mut cmd = ws.cargo(["build", "--release", "-p", "vmscope"]);
    say!("build: {}", process::show(&cmd));
    process::run(&mut cmd)
}

/// Runs step `name` (`shown` is its command line) when `root`; without
/// root it is skipped with a line, or fails under VMSCOPE_REQUIRE_BPF=1.
/// Whether it passed (or was skipped).
fn root_step(root: bool, name: &str, shown: &str, run: impl FnOnce() -> Result<()>) -> bool {
    if !root {
        if std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1") {
            say!(
                "test: step `{name}` cannot run without root, and VMSCOPE_REQUIRE_BPF=1 forbids skipping"
            );
            return false;
        }
        say!("test: {name}: skipped (needs root); run `sudo {shown}`");
        return true;
    }
    say!("test: {name}: {shown}");
    match run() {
        Ok(()) => true,
        Err(e) => {
            if e.downcast_ref::<Exit>().is_none() {
                say!("test: {name}: {e:#}");
            }
            say!("test: step `{name}` failed");
            false
        }
    }
}

/// Builds vmscope and replaces this process with it (through sudo when not
/// root). Replacing rather than waiting means the caller sees vmscope's own
/// exit status (a shell reports 128+N for death by signal N), and Ctrl-C
/// reaches vmscope without killing a parent that would then lose it.
pub fn run(ws: &mut Workspace, args: &[OsString]) -> Result<()> {
    bootstrap(ws, false)?;
    build_vmscope(ws)?;
    let bin = ws.vmscope_bin()?;
    let mut cmd = if process::effective_uid()? == 0 {
        let mut cmd = Command::new(&bin);
        cmd.args(args);
        cmd
    } else {
        let direct = std::iter::once(bin.as_os_str())
            .chain(args.iter().map(OsString::as_os_str))
            .map(process::quote)
            .collect::<Vec<_>>()
            .join(" ");
        if process::find_in_path("sudo").is_none() {
            say!("run: vmscope needs root and sudo is not installed; as root, run: {direct}");
            return Err(Exit(EXIT_NEED_ROOT).into());
        }
        say!("run: not root, so running vmscope through sudo: sudo {direct}");
        let mut cmd = Command::new("sudo");
        cmd.arg(&bin).args(args);
        cmd
    };
    let err = cmd.exec();
    Err(err).with_context(|| format!("could not start `{}`", process::show(&cmd)))
}

/// Bootstrap, then fmt, clippy (host, then the eBPF crate on the bpf
/// target), build and the tests. fmt and clippy failures do not stop the
/// later steps, so that one run reports them all; a failed build does, as
/// the tests need the binary.
pub fn test(ws: &mut Workspace, extra: &[OsString]) -> Result<()> {
    bootstrap(ws, false)?;
    let mut failed = Vec::new();
    say!("test: layers");
    if crate::layers::layers(ws).is_err() {
        say!("test: step `layers` failed");
        failed.push("layers");
    }
    let mut step = |name: &'static str, mut cmd: Command| -> Result<bool> {
        say!("test: {name}: {}", process::show(&cmd));
        let st = process::status(&mut cmd)?;
        if !st.success() {
            say!("test: step `{name}` failed ({})", process::describe(st));
            failed.push(name);
        }
        Ok(st.success())
    };
    step("fmt", ws.cargo(["fmt", "--all", "--", "--check"]))?;
    step(
        "clippy",
        ws.cargo([
            "clippy",
            "--workspace",
            "--all-targets",
            "--release",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // On the host, vmscope-ebpf is an empty program; lint the real one on
    // its own target, with the nightly toolchain that builds it.
    bootstrap::ensure_nightly_clippy()?;
    step(
        "clippy-ebpf",
        bootstrap::nightly_cargo(
            ws,
            [
                "clippy",
                "-p",
                "vmscope-ebpf",
                "--release",
                "--target",
                "bpfel-unknown-none",
                "-Z",
                "build-std=core",
                "--",
                "-D",
                "warnings",
            ],
        ),
    )?;
    if step("build", ws.cargo(["build", "--release", "-p", "vmscope"]))? {
        let bin = ws.vmscope_bin()?;
        // Every test binary runs even after one fails, so that one CI run
        // shows every failure.
        let mut cmd = ws.cargo(["test", "--release", "--no-fail-fast"]);
        cmd.args(extra).env("VMSCOPE_BIN", &bin);
        step("test", cmd)?;
    }
    // The cgroup soak: 10,000 cgroups come and go under serve, top and
    // record (root: it creates cgroups and loads eBPF programs).
    let root = process::effective_uid()? == 0;
    if !root_step(root, "soak", "cargo xtask bench soak --ci", || {
        crate::bench_soak::bench_soak(ws, &["--ci".into()])
    }) {
        failed.push("soak");
    }
    // The kernel matrix: the core suite inside Debian's 6.1 and 6.12 under
    // qemu (root: it installs qemu and loads eBPF programs in the guests).
    if !root_step(root, "kernels", "cargo xtask kernels", || {
        crate::kernels::kernels(ws, &[], crate::kernels::Accel::Auto, false, None)
    }) {
        failed.push("kernels");
    }
    if failed.is_empty() {
        say!("test: all steps passed");
        Ok(())
    } else {
        say!("test: failed step(s): {}", failed.join(", "));
        Err(Exit(1).into())
    }
}
