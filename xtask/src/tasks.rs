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
        let mut cmd = ws.cargo(["test", "--release"]);
        cmd.args(extra).env("VMSCOPE_BIN", &bin);
        step("test", cmd)?;
    }
    // The cgroup soak: 10,000 cgroups come and go under serve, top and
    // record (root: it creates cgroups and loads eBPF programs).
    if process::effective_uid()? == 0 {
        say!("test: soak: cargo xtask bench soak --ci");
        if let Err(e) = crate::bench_soak::bench_soak(ws, &["--ci".into()]) {
            if e.downcast_ref::<Exit>().is_none() {
                say!("test: soak: {e:#}");
            }
            say!("test: step `soak` failed");
            failed.push("soak");
        }
    } else if std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1") {
        say!(
            "test: step `soak` cannot run without root, and VMSCOPE_REQUIRE_BPF=1 forbids skipping"
        );
        failed.push("soak");
    } else {
        say!("test: soak: skipped (needs root); run `sudo cargo xtask bench soak --ci`");
    }
    // The kernel matrix: the core suite inside Debian's 6.1 and 6.12 under
    // qemu (root: it installs qemu and loads eBPF programs in the guests).
    if process::effective_uid()? == 0 {
        say!("test: kernels: cargo xtask kernels");
        if let Err(e) = crate::kernels::kernels(ws, &[], crate::kernels::Accel::Auto, false) {
            if e.downcast_ref::<Exit>().is_none() {
                say!("test: kernels: {e:#}");
            }
            say!("test: step `kernels` failed");
            failed.push("kernels");
        }
    } else if std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1") {
        say!(
            "test: step `kernels` cannot run without root, and VMSCOPE_REQUIRE_BPF=1 forbids skipping"
        );
        failed.push("kernels");
    } else {
        say!("test: kernels: skipped (needs root to install qemu); run `sudo cargo xtask kernels`");
    }
    if failed.is_empty() {
        say!("test: all steps passed");
        Ok(())
    } else {
        say!("test: failed step(s): {}", failed.join(", "));
        Err(Exit(1).into())
    }
}
