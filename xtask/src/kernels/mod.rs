//! `cargo xtask kernels`: vmscope on the kernels people run. Each kernel is
//! Debian's cloud kernel package (the newest point release of the series,
//! fetched once and cached under `target/kernels/`), booted under qemu with
//! an initramfs holding busybox, vmscope, the test child and zram's modules;
//! its `/init` runs the core suite (`guest.rs`) and the host judges the
//! outputs against their ground truth (`checks.rs`).

mod checks;
mod guest;

use std::{
    fs,
    io::{Read, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::{
    bootstrap::{self, bootstrap},
    process::{self, Exit, say},
    workspace::Workspace,
};

/// The kernels `cargo xtask kernels` runs by default (and CI).
pub const DEFAULT_KERNELS: &[&str] = &["6.1", "6.12"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Accel {
    /// KVM when a guest boots with it, else TCG.
    Auto,
    Kvm,
    Tcg,
}

/// A whole boot may take this long under TCG before it is given up (the
/// suite takes about 15 minutes on 6.1 on the development VM).
const TCG_LIMIT: Duration = Duration::from_secs(1500);
/// How long a KVM guest may take to start the suite before TCG is used.
const KVM_START_LIMIT: Duration = Duration::from_secs(20);

pub fn kernels(
    ws: &mut Workspace,
    series: &[String],
    accel: Accel,
    keep: bool,
    script: Option<&Path>,
) -> Result<()> {
    bootstrap(ws, false)?;
    ensure_tools()?;
    let mut build = ws.cargo([
        "build",
        "--release",
        "-p",
        "vmscope",
        "-p",
        "vmscope-tests",
        "--bin",
        "vmscope",
        "--bin",
        "vmscope-testchild",
    ]);
    say!("kernels: build: {}", process::show(&build));
    process::run(&mut build)?;
    let target = ws.target_dir()?;
    let dir = target.join("kernels");
    fs::create_dir_all(dir.join("cache"))?;
    let series: Vec<String> = if series.is_empty() {
        DEFAULT_KERNELS.iter().map(|s| s.to_string()).collect()
    } else {
        series.to_vec()
    };
    if let Some(script) = script {
        let text =
            fs::read_to_string(script).with_context(|| format!("reading {}", script.display()))?;
        for s in &series {
            let console = run_script(&target, &dir, s, accel, keep, &text)?;
            let from = console.find("@@vmscope:start").unwrap_or(0);
            println!("== {s}\n{}", console[from..].trim_end());
        }
        return Ok(());
    }
    let mut results = Vec::new();
    for s in &series {
        let started = Instant::now();
        let result = run_one(&target, &dir, s, accel, keep)
            .unwrap_or_else(|e| failed_kernel(s, &format!("{e:#}")));
        say!(
            "kernels: {s}: {} in {:.0} s",
            if result.ok() { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        results.push(result);
    }
    let matrix: Vec<serde_json::Value> = results.iter().map(|r| r.to_json()).collect();
    let out = dir.join("matrix.json");
    fs::write(&out, serde_json::to_string_pretty(&matrix)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    print!("{}", table(&results));
    say!("kernels: matrix written to {}", out.display());
    if results.iter().all(checks::KernelResult::ok) {
        Ok(())
    } else {
        Err(Exit(1).into())
    }
}

/// A kernel that could not be fetched or booted: one failed check saying why.
fn failed_kernel(series: &str, why: &str) -> checks::KernelResult {
    checks::KernelResult {
        kernel: series.to_string(),
        cgroup: "none".into(),
        attach_kinds: Default::default(),
        rmap_method: "unavailable".into(),
        checks: vec![checks::Check {
            name: "boot",
            ok: false,
            figure: why.to_string(),
        }],
    }
}

fn table(results: &[checks::KernelResult]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in results {
        let _ = writeln!(
            s,
            "\n{}  (cgroup {}, rmap {})",
            r.kernel, r.cgroup, r.rmap_method
        );
        let kinds: Vec<String> = r
            .attach_kinds
            .iter()
            .map(|(k, v)| {
                if v == "works" {
                    format!("{k} works")
                } else {
                    format!("{k} refused")
                }
            })
            .collect();
        let _ = writeln!(s, "  attach kinds: {}", kinds.join(", "));
        for c in &r.checks {
            let _ = writeln!(
                s,
                "  {:<4} {:<20} {}",
                if c.ok { "ok" } else { "FAIL" },
                c.name,
                c.figure
            );
        }
    }
    s
}

/// qemu, busybox, cpio and xz from Debian's packages.
fn ensure_tools() -> Result<()> {
    let wanted = [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("cpio", "cpio"),
        ("xz", "xz-utils"),
    ];
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(tool, _)| process::find_in_path(tool).is_none())
        .map(|(_, pkg)| pkg.to_string())
        .collect();
    if missing.is_empty() {
        say!("kernels: qemu, busybox, cpio and xz present");
        return Ok(());
    }
    bootstrap::apt_install("kernels", "tools to boot test kernels missing", &missing)
}

/// Which package provides the newest kernel of a series, e.g. "6.1" ->
/// `linux-image-6.1.0-57-cloud-amd64`.
fn resolve(series: &str) -> Result<String> {
    if !series.chars().all(|c| c.is_ascii_digit() || c == '.') {
        bail!("kernel series `{series}`: expected a version such as 6.1 or 6.12");
    }
    let search = |update: bool| -> Result<Vec<String>> {
        if update {
            let mut u = Command::new("apt-get");
            u.args(["-q", "update"]).stdin(Stdio::null());
            process::run(&mut u)?;
        }
        let pattern = format!(
            "^linux-image-{}[.-][0-9][^ ]*-cloud-amd64$",
            series.replace('.', "\\.")
        );
        let out =
            process::stdout(Command::new("apt-cache").args(["search", "--names-only", &pattern]))?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| !n.contains("unsigned") && !n.contains("dbg"))
            .map(str::to_string)
            .collect())
    };
    let mut names = search(false)?;
    if names.is_empty() {
        names = search(true)?;
    }
    names
        .into_iter()
        .max_by(|a, b| version_key(a).cmp(&version_key(b)))
        .ok_or_else(|| anyhow!("no Debian cloud kernel package for series {series}"))
}

/// The numbers in a package name, in order, for "newest" comparisons.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

fn run_one(
    target: &Path,
    dir: &Path,
    series: &str,
    accel: Accel,
    keep: bool,
) -> Result<checks::KernelResult> {
    let package = resolve(series)?;
    say!("kernels: {series}: {package}");
    let root = fetch(dir, &package)?;
    let initrd = initramfs(target, dir, &package, &root, keep, &guest::init_script())?;
    let vmlinuz = find_file(&root.join("boot"), "vmlinuz-")?;
    let log = dir.join(format!("{package}.console.log"));
    let crash_log = dir.join(format!("{package}.crashed.console.log"));
    let console = boot(&vmlinuz, &initrd, accel, &crash_log)?;
    fs::write(&log, &console)?;
    let parsed = checks::parse(&console);
    if parsed.release.is_none() {
        let tail: Vec<String> = console
            .lines()
            .rev()
            .take(5)
            .map(|l| l.chars().take(160).collect())
            .collect();
        bail!(
            "the guest never started the suite (console in {}): {}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(checks::judge(&parsed))
}

/// Boots `series` with `script` as the guest's work; its console.
fn run_script(
    target: &Path,
    dir: &Path,
    series: &str,
    accel: Accel,
    keep: bool,
    script: &str,
) -> Result<String> {
    let package = resolve(series)?;
    let root = fetch(dir, &package)?;
    let initrd = initramfs(
        target,
        dir,
        &package,
        &root,
        keep,
        &guest::script_init(script),
    )?;
    let vmlinuz = find_file(&root.join("boot"), "vmlinuz-")?;
    let console = boot(
        &vmlinuz,
        &initrd,
        accel,
        &dir.join(format!("{package}.crashed.console.log")),
    )?;
    fs::write(dir.join(format!("{package}.script.console.log")), &console)?;
    Ok(console)
}

/// The unpacked package (downloaded once).
fn fetch(dir: &Path, package: &str) -> Result<PathBuf> {
    let root = dir.join(package);
    if root.join("boot").is_dir() {
        return Ok(root);
    }
    let cache = dir.join("cache");
    let deb = match find_file(&cache, &format!("{package}_")) {
        Ok(d) => d,
        Err(_) => {
            say!("kernels: downloading {package}");
            let mut dl = Command::new("apt-get");
            dl.args(["-q", "download", package])
                .current_dir(&cache)
                .stdin(Stdio::null());
            process::run(&mut dl)?;
            find_file(&cache, &format!("{package}_"))?
        }
    };
    let tmp = dir.join(format!(".{package}.unpacking"));
    let _ = fs::remove_dir_all(&tmp);
    process::run(Command::new("dpkg").arg("-x").arg(&deb).arg(&tmp))?;
    fs::rename(&tmp, &root)?;
    Ok(root)
}

fn find_file(dir: &Path, prefix: &str) -> Result<PathBuf> {
    fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .ok_or_else(|| anyhow!("no {prefix}* in {}", dir.display()))
}

/// Builds the initramfs: busybox, vmscope and the test child with their
/// shared libraries, zram's modules, and `/init`.
fn initramfs(
    target: &Path,
    dir: &Path,
    package: &str,
    root: &Path,
    keep: bool,
    init_text: &str,
) -> Result<PathBuf> {
    let tree = dir.join(format!("{package}.initramfs"));
    let _ = fs::remove_dir_all(&tree);
    for d in ["bin", "proc", "sys", "dev", "tmp", "mods", "etc"] {
        fs::create_dir_all(tree.join(d))?;
    }
    let busybox = process::find_in_path("busybox").ok_or_else(|| anyhow!("busybox not found"))?;
    fs::copy(&busybox, tree.join("bin/busybox"))?;
    let bins = [
        target.join("release/vmscope"),
        target.join("release/vmscope-testchild"),
    ];
    for b in &bins {
        let name = b.file_name().ok_or_else(|| anyhow!("bad path"))?;
        fs::copy(b, tree.join("bin").join(name))
            .with_context(|| format!("copying {}", b.display()))?;
        for lib in shared_libraries(b)? {
            let dest = tree.join(lib.strip_prefix("/").unwrap_or(&lib));
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::copy(&lib, &dest).with_context(|| format!("copying {}", lib.display()))?;
        }
    }
    let modules = find_modules_dir(root)?;
    for (i, path) in module_load_order(&modules, guest::MODULE_ROOTS)?
        .iter()
        .enumerate()
    {
        fs::write(tree.join(format!("mods/{i:02}.ko")), module_bytes(path)?)?;
    }
    let init = tree.join("init");
    fs::write(&init, init_text)?;
    process::run(Command::new("chmod").arg("755").arg(&init))?;
    let out = dir.join(format!("{package}.initramfs.cpio.gz"));
    let script = format!(
        "cd {} && find . | cpio -o -H newc --quiet | gzip -1 > {}",
        process::quote(&tree),
        process::quote(&out)
    );
    process::run(Command::new("sh").args(["-c", &script]))?;
    if !keep {
        let _ = fs::remove_dir_all(&tree);
    }
    Ok(out)
}

/// A module's file, decompressed when it is `.ko.xz`.
fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    if path.extension().is_some_and(|e| e == "xz") {
        let out = Command::new("xz").arg("-dc").arg(path).output()?;
        if !out.status.success() {
            bail!("xz -dc {} failed", path.display());
        }
        Ok(out.stdout)
    } else {
        fs::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

/// A module's name as the kernel spells it (`lzo-rle.ko.xz` is `lzo_rle`).
fn module_name(file: &str) -> Option<String> {
    let stem = file
        .strip_suffix(".ko.xz")
        .or_else(|| file.strip_suffix(".ko"))?;
    Some(stem.replace('-', "_"))
}

/// The modules a module's `.modinfo` says it needs (`depends=a,b`).
fn module_depends(bytes: &[u8]) -> Vec<String> {
    let key = b"\0depends=";
    let Some(at) = bytes.windows(key.len()).position(|w| w == key) else {
        return Vec::new();
    };
    let value = &bytes[at + key.len()..];
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end])
        .split(',')
        .map(|d| d.trim().replace('-', "_"))
        .filter(|d| !d.is_empty())
        .collect()
}

/// The files to load, dependencies first, for `roots` and everything they
/// depend on; roots the kernel has no module for are skipped.
fn module_load_order(modules: &Path, roots: &[&str]) -> Result<Vec<PathBuf>> {
    let mut by_name = std::collections::HashMap::new();
    let mut dirs = vec![modules.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(module_name)
            {
                by_name.insert(name, p);
            }
        }
    }
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    fn visit(
        name: &str,
        by_name: &std::collections::HashMap<String, PathBuf>,
        seen: &mut std::collections::HashSet<String>,
        order: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let Some(path) = by_name.get(name) else {
            return Ok(()); // built in, or not built
        };
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        for dep in module_depends(&module_bytes(path)?) {
            visit(&dep, by_name, seen, order)?;
        }
        order.push(path.clone());
        Ok(())
    }
    for root in roots {
        visit(root, &by_name, &mut seen, &mut order)?;
    }
    Ok(order)
}

fn find_modules_dir(root: &Path) -> Result<PathBuf> {
    let base = root.join("lib/modules");
    let base = if base.is_dir() {
        base
    } else {
        root.join("usr/lib/modules")
    };
    fs::read_dir(&base)
        .with_context(|| format!("reading {}", base.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .ok_or_else(|| anyhow!("no modules in {}", base.display()))
}

/// The shared libraries `ldd` names for a binary (and the loader).
fn shared_libraries(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = process::stdout(Command::new("ldd").arg(bin))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// Boots the kernel and returns everything it printed. With `Auto`, KVM
/// is tried first and given up if the suite has not started in time.
/// A TCG guest that crashed leaves its console in `crash_log`.
fn boot(vmlinuz: &Path, initrd: &Path, accel: Accel, crash_log: &Path) -> Result<String> {
    let kvm_usable = Path::new("/dev/kvm").exists();
    if matches!(accel, Accel::Kvm | Accel::Auto) && kvm_usable {
        match qemu(vmlinuz, initrd, true, Some(KVM_START_LIMIT)) {
            Ok(out) => return Ok(out),
            Err(e) if accel == Accel::Auto => {
                say!("kernels: KVM guest did not start the suite ({e:#}); using TCG");
            }
            Err(e) => return Err(e),
        }
    } else if accel == Accel::Kvm {
        bail!("--accel kvm: /dev/kvm is not present");
    }
    // Up to two retries: now and then a TCG guest hits an emulation glitch
    // while the kernel patches its own text (an int3 oops, at boot or at a
    // fentry site); the last crash's console is kept.
    let mut attempt = 0;
    loop {
        attempt += 1;
        match qemu(vmlinuz, initrd, false, None) {
            Ok(out) if checks::parse(&out).done => return Ok(out),
            Ok(out) if !out.contains("Oops") => return Ok(out),
            result if attempt < TCG_ATTEMPTS => {
                if let Ok(out) = &result {
                    let _ = fs::write(crash_log, out);
                }
                say!(
                    "kernels: the TCG guest crashed (console in {}); booting it again",
                    crash_log.display()
                );
            }
            result => return result,
        }
    }
}

/// Boots of one kernel under TCG before a crash counts as the result.
const TCG_ATTEMPTS: u32 = 3;

/// One qemu run. `start_limit`: give up when the suite has not started by
/// then.
fn qemu(vmlinuz: &Path, initrd: &Path, kvm: bool, start_limit: Option<Duration>) -> Result<String> {
    let mut cmd = qemu_command(vmlinuz, initrd, kvm);
    say!(
        "kernels: booting {} ({})",
        vmlinuz.display(),
        if kvm { "KVM" } else { "TCG" }
    );
    let mut child = cmd.spawn().context("starting qemu-system-x86_64")?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let (buf, reader) = collect(stdout);
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let text = || {
        buf.lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let status = wait_guest(&mut child, start_limit, &text)?;
    let _ = reader.join();
    let errors = err_reader.join().unwrap_or_default();
    let out = text();
    match status {
        Some(st) if !st.success() && !out.contains("@@vmscope:start") => {
            bail!("qemu exited with {st}: {}", errors.trim())
        }
        None => {
            let _ = std::io::stderr().write_all(b"");
            say!(
                "kernels: the guest ran past {} s and was stopped",
                TCG_LIMIT.as_secs()
            );
            Ok(out)
        }
        _ => Ok(out),
    }
}

/// qemu booting `vmlinuz` with `initrd` on a serial console, its output
/// piped.
fn qemu_command(vmlinuz: &Path, initrd: &Path, kvm: bool) -> Command {
    let mut cmd = Command::new("qemu-system-x86_64");
    if kvm {
        cmd.args(["-accel", "kvm", "-cpu", "host,-arch-capabilities"]);
    } else {
        // One host thread for both vCPUs: with a thread per vCPU, the
        // kernel patching its own text (static keys, fentry sites) now and
        // then left the other vCPU executing a stale int3 (an oops).
        cmd.args(["-accel", "tcg,thread=single", "-cpu", "max"]);
    }
    cmd.args([
        "-smp",
        "2",
        "-m",
        "2G",
        "-nographic",
        "-no-reboot",
        "-kernel",
    ])
    .arg(vmlinuz)
    .arg("-initrd")
    .arg(initrd)
    .args([
        "-append",
        "console=ttyS0 panic=-1 edd=off quiet loglevel=1 mitigations=off",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// Reads `from` into a shared buffer on a thread of its own, so the guest's
/// output can be looked at while it runs.
fn collect(mut from: impl Read + Send + 'static) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let buf = Arc::clone(&buf);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = from.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let Ok(mut b) = buf.lock() {
                    b.extend_from_slice(&chunk[..n]);
                }
            }
        })
    };
    (buf, reader)
}

/// Waits for qemu to exit; `None` when it ran past [`TCG_LIMIT`] and was
/// killed. Fails (killing it) when the suite has not started within
/// `start_limit`.
fn wait_guest(
    child: &mut Child,
    start_limit: Option<Duration>,
    text: &dyn Fn() -> String,
) -> Result<Option<ExitStatus>> {
    let started = Instant::now();
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        let elapsed = started.elapsed();
        if let Some(limit) = start_limit
            && elapsed > limit
            && !text().contains("@@vmscope:start")
        {
            let _ = child.kill();
            let _ = child.wait();
            bail!("no sign of the suite after {} s", limit.as_secs());
        }
        if elapsed > TCG_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_package_wins_by_its_numbers() {
        let mut names = [
            "linux-image-6.1.0-9-cloud-amd64",
            "linux-image-6.1.0-57-cloud-amd64",
            "linux-image-6.1.0-56-cloud-amd64",
        ];
        names.sort_by_key(|n| version_key(n));
        assert_eq!(names[2], "linux-image-6.1.0-57-cloud-amd64");
        assert!(
            version_key("linux-image-6.12.117+deb12-cloud-amd64")
                > version_key("linux-image-6.12.73+deb12-cloud-amd64")
        );
    }

    #[test]
    fn module_dependencies_come_from_modinfo() {
        let info = b"\x7fELF...\0license=GPL\0depends=zsmalloc,lz4hc_compress,lz4-compress\0\
                     retpoline=Y\0name=zram\0";
        assert_eq!(
            module_depends(info),
            ["zsmalloc", "lz4hc_compress", "lz4_compress"]
        );
        assert!(module_depends(b"\0depends=\0name=zsmalloc\0").is_empty());
        assert_eq!(module_name("lzo-rle.ko.xz").as_deref(), Some("lzo_rle"));
        assert_eq!(module_name("zram.ko").as_deref(), Some("zram"));
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn modules_load_after_what_they_depend_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let put = |rel: &str, deps: &str| {
            let p = dir.path().join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, format!("\0depends={deps}\0")).expect("write");
        };
        put(
            "kernel/drivers/block/zram/zram.ko",
            "zsmalloc,lz4hc_compress",
        );
        put("kernel/mm/zsmalloc.ko", "");
        put("kernel/lib/lz4/lz4hc_compress.ko", "lz4_compress");
        put("kernel/lib/lz4/lz4_compress.ko", "");
        put("kernel/crypto/lzo-rle.ko", "");
        let order = module_load_order(dir.path(), &["lzo_rle", "lz4", "zram"]).expect("order");
        let names: Vec<String> = order
            .iter()
            .map(|p| {
                module_name(&p.file_name().unwrap_or_default().to_string_lossy())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(
            names,
            [
                "lzo_rle",
                "zsmalloc",
                "lz4_compress",
                "lz4hc_compress",
                "zram"
            ]
        );
    }

    #[test]
    fn a_bad_series_is_refused_before_anything_runs() {
        let e = resolve("6.1; rm -rf /").expect_err("refused");
        assert!(e.to_string().contains("expected a version"), "{e}");
    }
}
