//! A real container: Podman runs an image imported offline (a busybox
//! root file system), the test child inside it faults 20,000 pages, and
//! vmscope's row for the container's cgroup carries its runtime, id and
//! name, with its faults within 2% of what the process's rusage says.
//!
//! Root, and Podman with runc (Debian's `podman`, `runc` and
//! `busybox-static`; `.ci/run` installs them). runc is asked for because it
//! runs on every cgroup layout, the hybrid v1/v2 one included. The test
//! removes its container and image whatever happens.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use vmscope_tests::{
    assert_within_pct, on_path, path_str, read_json, record_to, root_or_skip, skip_unless,
    testchild, text,
};

const PAGES: u64 = 20_000;

/// Whether Podman, runc and busybox are here (or the test skips).
fn tools_or_skip(test: &str) -> bool {
    let missing: Vec<&str> = ["podman", "runc", "busybox"]
        .into_iter()
        .filter(|t| on_path(&[t]).is_none())
        .collect();
    skip_unless(
        test,
        missing.is_empty(),
        &format!("{missing:?} not on PATH"),
        "apt-get install podman runc busybox-static",
    )
}

fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("podman runs")
}

/// Removes the container and the image when dropped.
struct Cleanup {
    container: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = podman(&["rm", "--force", "--ignore", &self.container]);
        let _ = podman(&["rmi", "--force", &self.image]);
    }
}

/// A root file system of busybox alone (its applets as links), as a tar.
fn busybox_rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("rootfs");
    for d in ["bin", "out", "t", "usr", "tmp", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let busybox = on_path(&["busybox"]).unwrap();
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    for applet in ["sh", "ls", "cat", "sleep"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    // The test child is the host's build, dynamically linked: the host's
    // /usr is mounted read-only into the container, reached by the
    // merged-/usr links a Debian root has.
    for (link, to) in [("lib", "usr/lib"), ("lib64", "usr/lib64")] {
        std::os::unix::fs::symlink(to, root.join(link)).unwrap();
    }
    let tar = dir.join("rootfs.tar");
    let o = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    assert!(o.status.success(), "tar: {}", text(&o.stderr));
    tar
}

#[test]
fn a_podman_container_is_named_and_charged_its_own_faults() {
    let test = "a_podman_container_is_named_and_charged_its_own_faults";
    if !root_or_skip(test) || !tools_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tag = std::process::id();
    let clean = Cleanup {
        container: format!("vmscope-test-{tag}"),
        image: format!("localhost/vmscope-test-busybox:{tag}"),
    };
    let tar = busybox_rootfs(dir.path());
    let o = podman(&["import", path_str(&tar), &clean.image]);
    assert!(o.status.success(), "podman import: {}", text(&o.stderr));

    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let child = testchild();
    let bin_dir = child.parent().unwrap();
    let cidfile = dir.path().join("cid");
    let nproc = nix_nproc_hard();
    let argv: Vec<String> = [
        "podman",
        "--runtime",
        "runc",
        "run",
        "--rm",
        "--name",
        &clean.container,
        "--cidfile",
        path_str(&cidfile),
        "--network",
        "none",
        // Podman's default limits can exceed what this process may set.
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        &format!("nproc={nproc}:{nproc}"),
        "-v",
        "/usr:/usr:ro",
        "-v",
        &format!("{}:/t:ro", bin_dir.display()),
        "-v",
        &format!("{}:/out", out.display()),
        &clean.image,
        &format!("/t/{}", child.file_name().unwrap().to_string_lossy()),
        "--report",
        "/out/ru.json",
        "touch",
        &PAGES.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (o, rec) = record_to(dir.path(), "podman", &argv, &[], Duration::from_secs(300));
    assert!(
        o.status.success(),
        "vmscope record -- podman run: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let id = std::fs::read_to_string(&cidfile)
        .expect("podman wrote the container's id")
        .trim()
        .to_string();
    let rusage = read_json(&out.join("ru.json"));
    let kernel = rusage["minflt"].as_u64().unwrap() + rusage["majflt"].as_u64().unwrap();

    let rows = rec["cgroups"].as_array().expect("a cgroups list");
    let row: &Value = rows
        .iter()
        .find(|c| c["workload"]["container"] == id.as_str())
        .unwrap_or_else(|| {
            let paths: Vec<&Value> = rows.iter().map(|c| &c["path"]).collect();
            panic!("no cgroup row names container {id}; rows: {paths:?}")
        });
    assert_eq!(row["workload"]["runtime"], "podman", "{row:#}");
    assert_eq!(
        row["workload"]["name"],
        clean.container.as_str(),
        "the name from Podman's state: {row:#}"
    );
    let path = row["path"].as_str().unwrap();
    assert!(path.contains(&format!("libpod-{id}")), "{path}");
    let faults = row["totals"]["faults"]["total"].as_u64().unwrap();
    eprintln!("container {path}: vmscope {faults} faults, its process's rusage {kernel}");
    assert!(
        kernel >= PAGES,
        "the child touched {PAGES} pages: rusage {kernel}"
    );
    assert_within_pct(
        "the container's faults vs its process's rusage",
        faults,
        kernel,
        2.0,
    );
}

/// This process's hard RLIMIT_NPROC (Podman sets the container's; it may
/// not raise it).
fn nix_nproc_hard() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `r`.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut r) } == 0;
    if ok && r.rlim_max != libc::RLIM_INFINITY {
        r.rlim_max.min(4096)
    } else {
        4096
    }
}
