//! Helpers for vmscope's end-to-end tests: finding the binary, deciding
//! whether a root-only test may run, and running vmscope with a timeout.
//!
//! Tests panic with context rather than returning errors, so a failure points
//! at its line.
#![allow(clippy::unwrap_used, reason = "test helpers fail loudly by design")]

pub mod pressure;
pub mod privilege;
pub mod serve_fixture;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

/// The vmscope binary under test: `$VMSCOPE_BIN`, else the workspace's
/// release build.
pub fn vmscope_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("VMSCOPE_BIN") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let p = root.join("target/release/vmscope");
    assert!(
        p.exists(),
        "{} not built; run `cargo xtask test` (or set VMSCOPE_BIN)",
        p.display()
    );
    p
}

/// The helper workload binary built with this crate: cargo puts it next to
/// the `deps/` directory that holds the test executables.
pub fn testchild() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("vmscope-testchild");
    assert!(p.exists(), "{} not built", p.display());
    p
}

pub fn is_root() -> bool {
    // SAFETY: no arguments, no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a root-only test can run. Outside CI, when not root, it prints a
/// one-line reason and the test returns early; with VMSCOPE_REQUIRE_BPF=1 a
/// skip is a failure.
pub fn root_or_skip(test: &str) -> bool {
    skip_unless(
        test,
        is_root(),
        "needs root to load eBPF programs",
        "run the suite with sudo to include it",
    )
}

/// The first of `names` found on PATH as an executable file.
pub fn on_path(names: &[&str]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// Whether a test (or a part of it) that needs a tool can run: `present`
/// says whether the tool is here. When not, one line says what is missing
/// (`missing`) and how to get it (`install`), and the test skips it;
/// with VMSCOPE_REQUIRE_BPF=1 (CI, which installs every tool) that is a
/// failure.
pub fn skip_unless(test: &str, present: bool, missing: &str, install: &str) -> bool {
    if present {
        return true;
    }
    let required = std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: {missing}, and VMSCOPE_REQUIRE_BPF=1 forbids skipping; {install}"
    );
    eprintln!("skipped {test}: {missing}; {install}");
    false
}

/// Runs `cmd`, killing it after `limit`, and returns its output.
pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawning vmscope");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("collecting output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting output");
            panic!(
                "timed out after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `vmscope ARGS` with a generous timeout.
pub fn vmscope(args: &[&str]) -> Output {
    vmscope_within(args, Duration::from_secs(120))
}

/// `vmscope ARGS`, killed after `limit` (for benches and labs).
pub fn vmscope_within(args: &[&str], limit: Duration) -> Output {
    let mut c = Command::new(vmscope_bin());
    c.args(args);
    run_with_timeout(c, limit)
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts the command succeeded, showing its stderr if not.
pub fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {:?}: {}{}",
        o.status,
        text(&o.stderr),
        if o.stdout.is_empty() {
            String::new()
        } else {
            format!("\nstdout:\n{}", text(&o.stdout))
        }
    );
}

/// A path as an argument.
pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `vmscope record -i 250ms -o DIR/NAME.json -- ARGV` with `env` added to
/// the environment, within `limit`: its output, and the recording (the
/// test fails when none was written).
pub fn record_to<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    name: &str,
    argv: &[S],
    env: &[(&str, &str)],
    limit: Duration,
) -> (Output, serde_json::Value) {
    let out = dir.join(format!("{name}.json"));
    let mut c = Command::new(vmscope_bin());
    c.args(["record", "-i", "250ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(argv)
        .envs(env.iter().copied());
    let o = run_with_timeout(c, limit);
    assert!(
        out.exists(),
        "{name}: no recording; {:?}: {}",
        o.status,
        text(&o.stderr)
    );
    let rec = read_json(&out);
    (o, rec)
}

/// Writes `bytes` (a multiple of 1 MiB) to a new file at `path` on the
/// disk, syncs it and drops it from the page cache
/// (`POSIX_FADV_DONTNEED`), checking with `mincore` that under 1% of it
/// stayed cached.
pub fn write_cold_file(path: &Path, bytes: u64) {
    use std::{io::Write as _, os::fd::AsRawFd as _};
    const MIB: u64 = 1 << 20;
    let mut f = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..bytes / MIB {
        f.write_all(&chunk)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    f.sync_all()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: a plain syscall on an open descriptor.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let cached = resident_pages(path, bytes as usize);
    assert!(
        cached < bytes / page / 100,
        "{} stayed cached after POSIX_FADV_DONTNEED: {cached} pages",
        path.display()
    );
}

/// Pages of the first `len` bytes of the file at `path` in the page cache,
/// by the kernel's own count (`mincore` on a shared mapping of them).
pub fn resident_pages(path: &Path, len: usize) -> u64 {
    use std::os::fd::AsRawFd as _;
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: a fresh read-only shared mapping of `len` bytes of the file,
    // unmapped below; mincore fills one byte per page of `vec`.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap {}", path.display());
        let mut vec = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0, "mincore");
        libc::munmap(p, len);
        vec.iter().filter(|b| **b & 1 != 0).count() as u64
    }
}

/// `bytes` in pages of this machine, as a decimal argument.
pub fn pages(bytes: u64) -> String {
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    (bytes / ps).to_string()
}

/// A recording's entry for `probe` in its `probes` list.
pub fn probe<'a>(rec: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rec["probes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["probe"] == name))
        .unwrap_or_else(|| panic!("no probe {name} in {:#}", rec["probes"]))
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The last line of `stdout` that is a JSON object (a workload's figures).
pub fn last_json_line(stdout: &[u8]) -> serde_json::Value {
    let out = text(stdout);
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in {out}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// The recording's row of its wrapped command's process (`child.pid`).
pub fn child_row(rec: &serde_json::Value) -> &serde_json::Value {
    let pid = u64_at(rec, "/child/pid");
    rec["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["pid"].as_u64() == Some(pid)))
        .unwrap_or_else(|| panic!("no row for the child {pid}"))
}

/// A JSON value at a `/`-separated pointer, as u64, with a helpful panic.
pub fn u64_at(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing or not an integer in {v:#}"))
}

/// Asserts `got` is within `pct` percent of `want`.
pub fn assert_within_pct(what: &str, got: u64, want: u64, pct: f64) {
    let diff = got.abs_diff(want) as f64;
    assert!(
        diff <= want as f64 * pct / 100.0,
        "{what}: {got} is not within {pct}% of {want} (diff {diff})"
    );
}

/// A validator for one of the published schemas in `vmscope/schema/`.
pub fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../vmscope/schema")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let doc = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    jsonschema::validator_for(&doc)
        .unwrap_or_else(|e| panic!("{} is not a valid schema: {e}", path.display()))
}

/// Asserts `doc` matches the schema, listing the first mismatches.
pub fn assert_valid(v: &jsonschema::Validator, doc: &serde_json::Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .take(5)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match the schema: {errors:#?}"
    );
}

/// Starts the command with SIGINT's disposition set to `how` (SIG_DFL or
/// SIG_IGN), whatever the test itself inherited.
pub fn with_sigint(c: &mut Command, how: libc::sighandler_t) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: signal(2) is async-signal-safe; nothing else runs in pre_exec.
    unsafe {
        c.pre_exec(move || {
            if libc::signal(libc::SIGINT, how) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The `expr` of every target of every panel of a Grafana dashboard, rows'
/// nested panels too.
pub fn dashboard_exprs(d: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                        _ => walk(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}
