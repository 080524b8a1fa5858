//! Giving capabilities up once they are no longer needed: `serve` keeps
//! only what its remaining work asks for after it has attached its probes.
//!
//! Capabilities belong to a thread, not a process: these calls change the
//! calling thread's, so they are made while it is the only one
//! ([`other_threads_holding`] tells).

use ::caps::{CapSet, Capability, CapsHashSet};

/// What the calling thread holds.
#[derive(Clone, Debug, Default)]
pub struct Held {
    pub effective: CapsHashSet,
    pub permitted: CapsHashSet,
    pub inheritable: CapsHashSet,
    pub ambient: CapsHashSet,
}

impl Held {
    pub fn current() -> Result<Held, String> {
        let read = |set| ::caps::read(None, set).map_err(|e| format!("reading capabilities: {e}"));
        Ok(Held {
            effective: read(CapSet::Effective)?,
            permitted: read(CapSet::Permitted)?,
            inheritable: read(CapSet::Inheritable)?,
            // Absent before Linux 4.3: nothing ambient then.
            ambient: ::caps::read(None, CapSet::Ambient).unwrap_or_default(),
        })
    }
}

/// Runs `f` with only `keep` (of what is permitted) effective, then makes
/// every permitted capability effective again: a trial of whether `f`
/// needs more than `keep`, which gives nothing up.
pub fn trial<T>(keep: &[Capability], f: impl FnOnce() -> T) -> Result<T, String> {
    let permitted = ::caps::read(None, CapSet::Permitted).map_err(|e| e.to_string())?;
    let only: CapsHashSet = keep
        .iter()
        .copied()
        .filter(|c| permitted.contains(c))
        .collect();
    ::caps::set(None, CapSet::Effective, &only).map_err(|e| e.to_string())?;
    let out = f();
    ::caps::set(None, CapSet::Effective, &permitted)
        .map_err(|e| format!("raising the capabilities back after a trial: {e}"))?;
    Ok(out)
}

/// Keeps only `keep` (of what is held) in the calling thread's effective
/// and permitted sets, for good, and nothing inheritable or ambient. Sets
/// no_new_privs first, so that no later exec can give any back (not even
/// as uid 0, whose exec would otherwise get every capability in the
/// bounding set), and, while CAP_SETPCAP is still effective, drops the rest
/// from the bounding set too.
pub fn keep_only(keep: &[Capability]) -> Result<(), String> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "setting no_new_privs: {}",
            std::io::Error::last_os_error()
        ));
    }
    let keep: CapsHashSet = keep.iter().copied().collect();
    if ::caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        let bounding = ::caps::read(None, CapSet::Bounding).map_err(|e| e.to_string())?;
        for c in bounding.difference(&keep) {
            ::caps::drop(None, CapSet::Bounding, *c)
                .map_err(|e| format!("dropping {c} from the bounding set: {e}"))?;
        }
    }
    if ::caps::runtime::ambient_set_supported().is_ok() {
        ::caps::clear(None, CapSet::Ambient)
            .map_err(|e| format!("clearing the ambient set: {e}"))?;
    }
    let held = Held::current()?;
    let effective = held.effective.intersection(&keep).copied().collect();
    let permitted = held.permitted.intersection(&keep).copied().collect();
    // Effective first: it must stay within permitted at every step.
    ::caps::set(None, CapSet::Effective, &effective)
        .map_err(|e| format!("lowering the effective set: {e}"))?;
    ::caps::clear(None, CapSet::Inheritable)
        .map_err(|e| format!("clearing the inheritable set: {e}"))?;
    ::caps::set(None, CapSet::Permitted, &permitted)
        .map_err(|e| format!("lowering the permitted set: {e}"))?;
    Ok(())
}

/// The threads of this process other than the calling one that still hold
/// a permitted capability.
pub fn other_threads_holding() -> usize {
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) != Some(me))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("status"))
                .ok()
                .and_then(|s| super::caps::status_caps(&s, "CapPrm:"))
                .is_some_and(|prm| prm != 0)
        })
        .count()
}

/// `CAP_A+CAP_B`, sorted by name, or `none`.
pub fn names(set: &CapsHashSet) -> String {
    let mut v: Vec<String> = set.iter().map(|c| c.to_string()).collect();
    v.sort();
    if v.is_empty() {
        return "none".into();
    }
    v.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted() {
        let set: CapsHashSet = [Capability::CAP_PERFMON, Capability::CAP_BPF]
            .into_iter()
            .collect();
        assert_eq!(names(&set), "CAP_BPF+CAP_PERFMON");
        assert_eq!(names(&CapsHashSet::new()), "none");
    }

    #[test]
    fn a_trial_gives_nothing_up() {
        let before = Held::current().expect("reading capabilities");
        let inside = trial(&[], || Held::current().expect("inside")).expect("trial");
        assert!(inside.effective.is_empty(), "{inside:?}");
        let after = Held::current().expect("after");
        assert_eq!(after.effective, before.permitted);
        assert_eq!(after.permitted, before.permitted);
    }
}
