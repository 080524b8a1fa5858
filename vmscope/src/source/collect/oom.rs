//! OOM kills as the model has them: the eBPF records, put on the
//! recording's clocks, each victim's cgroup, and the limit each kill
//! answered (the kernel log first, the limit-hit counters else).

use std::{collections::HashMap, time::SystemTime};

use vmscope_common::{OomVictim, oom_field};

use super::{CgroupSample, Collector, comm_string, monotonic_ns};
use crate::{
    model::oom::{OomKill, memory_cgroup},
    source::{
        kernel::{cgroupfs, kmsg, limits},
        loader::Loaded,
        procfs,
    },
    timefmt,
};

impl Collector {
    pub(super) fn oom_kills(
        &mut self,
        probes: &mut Loaded,
        cgroup_of: &HashMap<u32, u64>,
    ) -> Vec<OomKill> {
        let Some(ring) = probes.oom_victims.as_mut() else {
            return Vec::new();
        };
        let mut raw = Vec::new();
        while let Some(item) = ring.next() {
            if item.len() >= std::mem::size_of::<OomVictim>() {
                // SAFETY: at least a whole record; `OomVictim` is plain
                // integers, any bit pattern valid, read unaligned.
                raw.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<OomVictim>()) });
            }
        }
        let clock = Clock {
            mono_ns: monotonic_ns(),
            wall: SystemTime::now(),
            elapsed_ns: u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX),
        };
        let v1 = self
            .names
            .as_ref()
            .is_some_and(|n| n.hierarchy().kind == cgroupfs::CgroupVersion::V1Memory);
        let mut kills: Vec<OomKill> = raw.iter().map(|v| oom_kill(v, &clock, v1)).collect();
        if let Some(names) = self.names.as_mut() {
            for (k, v) in kills.iter_mut().zip(&raw) {
                let victim = Some(&v.victim_cgroup)
                    .filter(|c| **c != 0)
                    .or_else(|| k.pid.and_then(|p| cgroup_of.get(&p)))
                    .filter(|c| **c != 0);
                if let Some(path) = victim.and_then(|c| names.path(*c)) {
                    k.cgroup = Some(path);
                }
                if v.trigger_cgroup != 0 {
                    k.trigger_cgroup = names.path(v.trigger_cgroup);
                }
            }
        }
        kills
    }

    /// Reads the kernel log's new lines, and the limit-hit counters of the
    /// cgroups active in this sample and of the kills' trigger cgroups
    /// (with their ancestors), then names for each kill the limit it
    /// answered: from the log's summary line, else from the counters (see
    /// [`limits`] and [`kmsg`]).
    pub(super) fn blame_limits(
        &mut self,
        kills: &mut [OomKill],
        cgroups: &[CgroupSample],
        log: &mut Result<kmsg::KernelLog, String>,
    ) {
        if let Ok(l) = log.as_mut() {
            l.drain();
        }
        if let Some(names) = self.names.as_ref() {
            let h = names.hierarchy();
            let paths = cgroups
                .iter()
                .filter_map(|c| c.path.as_deref())
                .chain(kills.iter().filter_map(|k| k.trigger_cgroup.as_deref()));
            self.limits.read(paths, |p| limits::hits(h, p));
        }
        for k in kills {
            let logged = match log.as_mut() {
                Ok(l) => Ok(k.pid.and_then(|p| l.take(p))),
                Err(why) => Err(why.as_str()),
            };
            if k.cgroup.is_none()
                && let (Ok(Some(l)), Some(names)) = (&logged, &self.names)
            {
                k.cgroup = logged_victim_cgroup(l, &names.hierarchy().mount);
            }
            let verdict = match (&logged, &self.names, k.trigger_cgroup.as_deref()) {
                // The log's summary names the limit: the counters are not
                // asked, only told.
                (Ok(Some(l)), _, _) if l.summary => {
                    if let Some(path) = &l.limit_cgroup {
                        self.limits.used_by_kill(path);
                    }
                    None
                }
                (_, Some(_), Some(trigger)) => {
                    self.limits.blame(trigger, matches!(logged, Ok(Some(_))))
                }
                _ => None,
            };
            let d = limits::decide(logged, verdict, k.trigger_cgroup.as_deref());
            k.constraint = d.constraint;
            k.limit_cgroup = d.limit_cgroup;
            k.limit_source = d.source.map(Into::into);
            k.limit_note = d.note;
        }
    }
}

/// One instant on the three clocks an OOM record's time is put on.
struct Clock {
    /// CLOCK_MONOTONIC (the eBPF side's `bpf_ktime_get_ns`).
    mono_ns: u64,
    wall: SystemTime,
    /// Since the recording started.
    elapsed_ns: u64,
}

/// A record as the model's [`OomKill`]: the fields the kernel's record
/// lacked null, kB as bytes, and the victim's memory cgroup if it is
/// still there (and still the same process: same name). On cgroup v1 a
/// process that is exiting (a victim not yet reaped by its parent) reads
/// `/` in `/proc/PID/cgroup` whatever its cgroup was (`proc_cgroup_show`):
/// that reading is no answer.
fn oom_kill(v: &OomVictim, clock: &Clock, v1: bool) -> OomKill {
    let has = |bit: u32| v.present & bit != 0;
    let kb = |bit, n: u64| has(bit).then(|| n.saturating_mul(1024));
    let ago = clock.mono_ns.saturating_sub(v.time_ns);
    let wall = clock
        .wall
        .checked_sub(std::time::Duration::from_nanos(ago))
        .unwrap_or(clock.wall);
    let comm = has(oom_field::COMM).then(|| comm_string(&v.comm));
    let pid = has(oom_field::PID).then_some(v.pid);
    let cgroup = pid.filter(|&p| p != 0).and_then(|p| {
        let now = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
        if comm
            .as_deref()
            .is_some_and(|c| c != now.trim_end_matches('\n'))
        {
            return None;
        }
        let path = memory_cgroup(&std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok()?)?;
        (!(v1 && procfs::exiting(p))).then_some(path)
    });
    OomKill {
        elapsed_ns: clock.elapsed_ns.saturating_sub(ago),
        timestamp: timefmt::rfc3339(wall),
        pid,
        comm,
        uid: has(oom_field::UID).then_some(v.uid),
        total_vm_bytes: kb(oom_field::TOTAL_VM, v.total_vm_kb),
        rss_anon_bytes: kb(oom_field::ANON_RSS, v.anon_rss_kb),
        rss_file_bytes: kb(oom_field::FILE_RSS, v.file_rss_kb),
        rss_shmem_bytes: kb(oom_field::SHMEM_RSS, v.shmem_rss_kb),
        pgtables_bytes: kb(oom_field::PGTABLES, v.pgtables_kb),
        oom_score_adj: has(oom_field::OOM_SCORE_ADJ).then_some(v.oom_score_adj),
        cgroup,
        // From the path, once the kernel log has had its say.
        workload: None,
        trigger_cgroup: None,
        constraint: None,
        limit_cgroup: None,
        limit_source: None,
        limit_note: None,
    }
}

/// The victim's memcg as the kernel log's summary printed it, when that
/// path is a cgroup under `mount`: the kernel prints paths from the
/// hierarchy's root, which in a cgroup namespace is not vmscope's view.
fn logged_victim_cgroup(l: &kmsg::LogKill, mount: &std::path::Path) -> Option<String> {
    let p = l.task_cgroup.as_deref()?;
    let rel = p.trim_start_matches('/');
    (p == "/" || mount.join(rel).is_dir()).then(|| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oom_record_is_put_on_the_recordings_clock_with_absent_fields_null() {
        let clock = Clock {
            mono_ns: 10_000_000_000,
            wall: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(100),
            elapsed_ns: 3_000_000_000,
        };
        let mut v = OomVictim {
            time_ns: 9_000_000_000,
            pid: 0,
            anon_rss_kb: 65_280,
            file_rss_kb: 7,
            present: oom_field::PID | oom_field::ANON_RSS | oom_field::COMM,
            ..Default::default()
        };
        v.comm[..3].copy_from_slice(b"abc");
        let k = oom_kill(&v, &clock, true);
        assert_eq!(k.elapsed_ns, 2_000_000_000);
        assert_eq!(k.timestamp, "1970-01-01T00:01:39.000000000Z");
        assert_eq!(k.rss_anon_bytes, Some(65_280 * 1024));
        assert_eq!(
            (k.rss_file_bytes, k.uid, k.oom_score_adj),
            (None, None, None)
        );
        assert_eq!(
            (k.pid, k.comm.as_deref(), k.cgroup),
            (Some(0), Some("abc"), None)
        );
    }

    /// The log's path of the victim's memcg names a cgroup only where
    /// that path is one in vmscope's view (in a cgroup namespace the
    /// kernel's paths start above it).
    #[test]
    fn the_logs_victim_memcg_is_taken_only_where_it_is_in_view() {
        let mount = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(mount.path().join("p/holder")).expect("a cgroup directory");
        let l = |p: Option<&str>| kmsg::LogKill {
            pid: 7,
            task_cgroup: p.map(Into::into),
            summary: true,
            ..Default::default()
        };
        let m = mount.path();
        assert_eq!(
            logged_victim_cgroup(&l(Some("/p/holder")), m).as_deref(),
            Some("/p/holder")
        );
        assert_eq!(logged_victim_cgroup(&l(Some("/")), m).as_deref(), Some("/"));
        assert_eq!(logged_victim_cgroup(&l(Some("/pod/ctr/p")), m), None);
        assert_eq!(logged_victim_cgroup(&l(None), m), None);
    }
}
