//! Running vmscope the least-privileged way: a copy of the release binary
//! given CAP_BPF+CAP_PERFMON as file capabilities, or as ambient ones the
//! way a systemd unit's `AmbientCapabilities=` gives them, run as uid 65534
//! with no supplementary groups.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use crate::{testchild, vmscope_bin};

/// `nobody`: an ordinary uid with nothing of its own on the system.
pub const NOBODY: u32 = 65534;

/// Copies of vmscope and the test child where uid 65534 can run them, and a
/// directory it can write to. Removed when dropped.
pub struct Unprivileged {
    dir: tempfile::TempDir,
    /// vmscope with `cap_bpf,cap_perfmon+ep`.
    pub capped: PathBuf,
    /// vmscope without file capabilities.
    pub plain: PathBuf,
    pub testchild: PathBuf,
}

impl Unprivileged {
    pub fn new() -> Unprivileged {
        let dir = tempfile::Builder::new()
            .prefix("vmscope-unprivileged")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = |from: &Path, name: &str| {
            let to = dir.path().join(name);
            std::fs::copy(from, &to)
                .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
            to
        };
        let capped = copy(&vmscope_bin(), "vmscope-capped");
        let plain = copy(&vmscope_bin(), "vmscope");
        let testchild = copy(&testchild(), "vmscope-testchild");
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::chown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
        let o = Command::new(setcap())
            .arg("cap_bpf,cap_perfmon+ep")
            .arg(&capped)
            .output()
            .expect("running setcap");
        assert!(
            o.status.success(),
            "setcap cap_bpf,cap_perfmon+ep {}: {}",
            capped.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Unprivileged {
            dir,
            capped,
            plain,
            testchild,
        }
    }

    /// A directory uid 65534 owns.
    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// `PROGRAM` run as uid/gid 65534 with no groups, holding whatever
    /// capabilities its file gives.
    pub fn as_nobody(&self, program: &Path) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .arg("--clear-groups")
            .arg("--")
            .arg(program)
            .current_dir(self.out());
        c
    }

    /// `PROGRAM` run as uid/gid 65534 with CAP_BPF+CAP_PERFMON as inherited
    /// and ambient capabilities and nothing else in its bounding set: what
    /// a unit with `AmbientCapabilities=CAP_BPF CAP_PERFMON` and
    /// `CapabilityBoundingSet=` the same and `NoNewPrivileges=yes` gives.
    pub fn with_ambient(&self, program: &Path) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .arg("--clear-groups")
            .arg("--inh-caps=-all,+bpf,+perfmon")
            .arg("--ambient-caps=-all,+bpf,+perfmon")
            .arg("--bounding-set=-all,+bpf,+perfmon")
            .arg("--no-new-privs")
            .arg("--")
            .arg(program)
            .current_dir(self.out());
        c
    }
}

impl Default for Unprivileged {
    fn default() -> Self {
        Self::new()
    }
}

/// setcap, from libcap2-bin (often in /sbin, off a user's PATH).
fn setcap() -> PathBuf {
    ["/usr/sbin/setcap", "/sbin/setcap"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("setcap"))
}

/// Whether setcap and setpriv are installed; a skip fails under
/// VMSCOPE_REQUIRE_BPF=1.
pub fn tools_or_skip(test: &str) -> bool {
    let have = |p: &Path| {
        Command::new(p)
            .arg("--help")
            .output()
            .is_ok_and(|o| o.status.code().is_some())
    };
    if have(&setcap()) && have(Path::new("setpriv")) {
        return true;
    }
    let required = std::env::var("VMSCOPE_REQUIRE_BPF").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: needs setcap (Debian package libcap2-bin) and setpriv (util-linux)"
    );
    eprintln!("skipped {test}: setcap (libcap2-bin) or setpriv (util-linux) is not installed");
    false
}
