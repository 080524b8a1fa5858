//! Privileges needed to load and attach eBPF programs.

use crate::exit;

const CAP_SYSLOG: u32 = 34;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Privileges {
    pub euid: u32,
    pub root: bool,
    pub cap_bpf: bool,
    pub cap_perfmon: bool,
    pub cap_sys_admin: bool,
    /// Needed to see kernel addresses in /proc/kallsyms (rmap symbols).
    pub cap_syslog: bool,
}

/// The variable naming a file to dump the stack sampler's stacks into
/// (`rmap::sampler::DUMP_ENV`); here, below the sampler, because whether it
/// may be honoured is a question of privileges.
pub const DUMP_STACKS_ENV: &str = "VMSCOPE_DUMP_STACKS";

/// Why `VMSCOPE_DUMP_STACKS=path` must be ignored, if it must. Without
/// CAP_SYSLOG /proc/kallsyms shows no addresses, so every kernel frame of
/// the dump would be a raw address (KASLR's secret, in a file whoever runs
/// vmscope, a setcap binary, may read). A symbolic link already at `path`
/// is not written through.
pub fn stack_dump_refusal(p: &Privileges, path: &std::path::Path) -> Option<String> {
    let env = DUMP_STACKS_ENV;
    if !p.cap_syslog {
        return Some(format!(
            "{env} ignored: dumping kernel stacks needs CAP_SYSLOG (without it they would be \
             raw kernel addresses)"
        ));
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Some(format!(
            "{env} ignored: {} is a symbolic link; give a new file",
            path.display()
        ));
    }
    None
}

impl Privileges {
    pub fn current() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Self::from_status(&status, rustix::process::geteuid().as_raw())
    }

    /// Derives privileges from the text of /proc/self/status.
    pub fn from_status(status: &str, euid: u32) -> Self {
        let eff = status_caps(status, "CapEff:").unwrap_or(0);
        let has = |bit: u32| eff & (1u64 << bit) != 0;
        Self {
            euid,
            root: euid == 0,
            cap_bpf: has(CAP_BPF),
            cap_perfmon: has(CAP_PERFMON),
            cap_sys_admin: has(CAP_SYS_ADMIN),
            cap_syslog: has(CAP_SYSLOG),
        }
    }

    /// Whether tracing programs can be loaded and attached at all.
    pub fn can_load_bpf(&self) -> bool {
        self.cap_sys_admin || (self.cap_bpf && self.cap_perfmon)
    }

    /// One line saying what is missing, for the exit-77 message.
    pub fn missing(&self) -> String {
        let mut missing = Vec::new();
        if !self.cap_bpf {
            missing.push("CAP_BPF");
        }
        if !self.cap_perfmon {
            missing.push("CAP_PERFMON");
        }
        let who = if self.root {
            "root without"
        } else {
            "not root:"
        };
        format!(
            "{who} {} — needs root or CAP_BPF+CAP_PERFMON; run it with sudo",
            if self.root {
                missing.join("+")
            } else {
                format!("missing {}", missing.join("+"))
            }
        )
    }

    /// Fails with exit code 77 and a one-line reason when eBPF is out of reach.
    pub fn require_bpf(&self) -> anyhow::Result<()> {
        if self.can_load_bpf() {
            Ok(())
        } else {
            Err(exit::failure(exit::NO_PRIVILEGE, self.missing()))
        }
    }
}

/// A capability set of a `/proc/.../status` file, by its field name
/// (`CapEff:`, `CapPrm:` ...).
pub(crate) fn status_caps(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_dumped_only_with_cap_syslog_and_never_through_a_link() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("stacks.txt");
        let with = |eff: u64| Privileges::from_status(&format!("CapEff:\t{eff:016x}\n"), 1000);
        let setcap = with((1 << CAP_BPF) | (1 << CAP_PERFMON));
        let e = stack_dump_refusal(&setcap, &file).expect("refused without CAP_SYSLOG");
        assert!(e.contains("needs CAP_SYSLOG") && !e.contains('\n'), "{e}");
        let syslog = with((1 << CAP_BPF) | (1 << CAP_PERFMON) | (1 << CAP_SYSLOG));
        assert_eq!(stack_dump_refusal(&syslog, &file), None);
        std::os::unix::fs::symlink("/etc/passwd", &file).expect("symlink");
        let e = stack_dump_refusal(&syslog, &file).expect("a link is refused");
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn full_root_can_load() {
        let p = Privileges::from_status("Name:\tx\nCapEff:\t000001ffffffffff\n", 0);
        assert!(p.can_load_bpf() && p.cap_bpf && p.cap_perfmon && p.root);
    }

    #[test]
    fn bpf_and_perfmon_suffice_without_root() {
        let eff = (1u64 << CAP_BPF) | (1u64 << CAP_PERFMON);
        let p = Privileges::from_status(&format!("CapEff:\t{eff:016x}\n"), 1000);
        assert!(p.can_load_bpf());
    }

    #[test]
    fn unprivileged_user_is_told_what_is_missing() {
        let p = Privileges::from_status("CapEff:\t0000000000000000\n", 1000);
        assert!(!p.can_load_bpf());
        let msg = p.missing();
        assert!(msg.starts_with("not root"), "{msg}");
        assert!(msg.contains("CAP_BPF+CAP_PERFMON"), "{msg}");
        let e = p.require_bpf().expect_err("refused");
        assert_eq!(exit::code_of(&e, 0), exit::NO_PRIVILEGE);
    }

    #[test]
    fn missing_capeff_line_means_no_capabilities() {
        assert!(!Privileges::from_status("garbage", 1000).can_load_bpf());
    }
}
