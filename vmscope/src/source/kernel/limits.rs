//! Which memory limit an OOM kill answered: the memcg whose limit was hit,
//! or none (a system-wide OOM). Neither `oom:mark_victim` nor the task that
//! invoked the killer carries it, so it is read from the cgroups' own
//! counters of limit hits, on the path from the invoking task's cgroup to
//! the root:
//! - v2: `memory.events.local` `oom`, which the kernel counts in the memcg
//!   that ran out, just before it invokes the killer;
//! - v1: `memory.failcnt` (plus `memory.memsw.failcnt` with swap
//!   accounting), which counts charges that failed at that cgroup's limit.
//!   It also grows when reclaim then made room, so on v1 a memcg that was
//!   at its limit while the whole system ran out is named too.
//!
//! The kernel log names it exactly ([`super::kmsg`]); these counters are
//! what is left when the log cannot be read or printed no summary.
//!
//! The nearest cgroup on that path whose counter grew since two reads
//! before the last one (a kill can reach user space one read after its
//! count) is the one that hit its limit; that growth then counts as used
//! (on v2 one unit per kill, as `oom` counts one per OOM; on v1 all of
//! it). When every cgroup on the path was read before and none grew, the
//! OOM was system-wide.

use std::collections::HashMap;

use super::cgroupfs::{CgroupVersion, Hierarchy};

/// What a kill answered, as far as can be told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillCause {
    /// Cgroup `path` hit its limit.
    Memcg(String),
    /// The system ran out: no cgroup on the path hit a limit.
    Global,
}

/// The path to the root from cgroup `path`, itself first, the root (which
/// has no limit) left out.
pub fn lineage(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/');
    while !p.is_empty() {
        out.push(p.to_owned());
        p = p.rsplit_once('/').map_or("", |(parent, _)| parent);
    }
    out
}

/// The limit-hit counter of cgroup `path` now (see the module comment);
/// `None` when it cannot be read.
pub fn hits(h: &Hierarchy, path: &str) -> Option<u64> {
    let dir = h.dir(path);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    match h.kind {
        CgroupVersion::V2 => read("memory.events.local")?
            .lines()
            .find_map(|l| l.strip_prefix("oom ")?.trim().parse().ok()),
        CgroupVersion::V1Memory => {
            let num = |f: &str| read(f).and_then(|t| t.trim().parse::<u64>().ok());
            let mem = num("memory.failcnt")?;
            Some(mem + num("memory.memsw.failcnt").unwrap_or(0))
        }
    }
}

/// The counter of one cgroup at its last three reads.
#[derive(Clone, Copy, Debug, Default)]
struct Reads {
    old: Option<u64>,
    before: Option<u64>,
    last: Option<u64>,
    /// The value up to which growth was blamed for kills already.
    used: Option<u64>,
}

impl Reads {
    /// The value growth is measured from: two reads before the last, or
    /// the one before it when that is all there is.
    fn base(&self) -> Option<u64> {
        self.old.or(self.before)
    }
}

/// The most cgroups whose counters are kept.
const MAX_WATCHED: usize = 65536;

/// Limit-hit counters of the cgroups that processes were active in, and of
/// their ancestors, read at every sample.
#[derive(Debug, Default)]
pub struct LimitWatch {
    reads: HashMap<String, Reads>,
    /// Whether every cgroup there was at the start was read then: one
    /// first seen later was created since, its counter from 0.
    seeded: bool,
    /// Whether the counter grows by one per OOM (v2 `oom`), so that each
    /// kill uses one unit of growth and a burst of kills is blamed kill by
    /// kill; otherwise (v1 `failcnt`, many per OOM) a kill uses all of it.
    pub one_per_kill: bool,
}

impl LimitWatch {
    /// Reads the counter of every cgroup there is (`paths`: the whole
    /// hierarchy), once, at the start.
    pub fn seed<'a>(
        &mut self,
        paths: impl IntoIterator<Item = &'a str>,
        read: impl Fn(&str) -> Option<u64>,
    ) {
        for p in paths {
            if self.reads.len() < MAX_WATCHED && p != "/" {
                self.reads.insert(
                    p.to_owned(),
                    Reads {
                        last: read(p),
                        ..Reads::default()
                    },
                );
            }
        }
        self.seeded = self.reads.len() < MAX_WATCHED;
    }

    /// Reads the counters of `paths` and of their ancestors (each once),
    /// with `read` (the cgroup's counter now).
    pub fn read<'a>(
        &mut self,
        paths: impl IntoIterator<Item = &'a str>,
        read: impl Fn(&str) -> Option<u64>,
    ) {
        let mut done = std::collections::HashSet::new();
        for p in paths {
            for level in lineage(p) {
                if !done.insert(level.clone()) {
                    continue;
                }
                if self.reads.len() >= MAX_WATCHED && !self.reads.contains_key(&level) {
                    continue;
                }
                let seeded = self.seeded;
                let r = self.reads.entry(level.clone()).or_insert_with(|| Reads {
                    // Created since the start, so since its counter was 0.
                    last: seeded.then_some(0),
                    ..Reads::default()
                });
                (r.old, r.before, r.last) = (r.before, r.last, read(&level));
            }
        }
    }

    /// Cgroup `path` was removed: its counter goes (one created at the
    /// path later starts from 0, as one created since the start does).
    pub fn forget(&mut self, path: &str) {
        self.reads.remove(path);
    }

    /// A kill the kernel log blamed on cgroup `path`'s limit: on v2 it
    /// takes its unit of that counter's growth, which a later kill without
    /// a summary must not blame again. (On v1 the growth of a limit's
    /// episode is left to the kills after it, which answered the same
    /// limit unless the log's kill line says otherwise.)
    pub fn used_by_kill(&mut self, path: &str) {
        if !self.one_per_kill {
            return;
        }
        if let Some(r) = self.reads.get_mut(path)
            && let (Some(b), Some(l)) = (r.base(), r.last)
        {
            let from = r.used.map_or(b, |u| u.max(b));
            if l > from {
                r.used = Some(from + 1);
            }
        }
    }

    /// The verdict for a kill invoked from cgroup `trigger`, from the
    /// reads so far (the last one after the kill). The growth it is
    /// based on counts once: a later kill looks for new growth; on v1,
    /// with `keep` (the log's kill line tells memcg from global for each
    /// kill, so a later system-wide kill cannot be blamed on it), the
    /// growth is left to the next kills of the same episode.
    pub fn blame(&mut self, trigger: &str, keep: bool) -> Option<KillCause> {
        let levels = lineage(trigger);
        let mut known = true;
        for level in &levels {
            let r = self.reads.get(level).copied().unwrap_or_default();
            let from = r.base().map(|b| r.used.map_or(b, |u| u.max(b)));
            match (from, r.last) {
                (Some(from), Some(l)) if l > from => {
                    if let Some(r) = self.reads.get_mut(level) {
                        if self.one_per_kill {
                            r.used = Some(from + 1);
                        } else if !keep {
                            r.used = Some(l);
                        }
                    }
                    return Some(KillCause::Memcg(level.clone()));
                }
                (Some(_), Some(_)) => {}
                _ => known = false,
            }
        }
        known.then_some(KillCause::Global)
    }
}

/// What a kill answered, and where that was read (the model's
/// `constraint`, `limit_cgroup`, `limit_source`, `limit_note`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub constraint: Option<String>,
    pub limit_cgroup: Option<String>,
    pub source: Option<&'static str>,
    pub note: Option<String>,
}

/// The kernel log's path of the memcg whose limit was hit, in this view
/// of the hierarchy. The kernel prints it from the hierarchy's root, while
/// vmscope names cgroups from its own mount, which in a cgroup namespace
/// (a container's) is a subtree: `/pod/ctr/app` there is `/app` here. The
/// log's path is cut to the longest tail that is `trigger` or one of its
/// ancestors; when none is (the limit is on this view's root or above
/// it), it is kept as the kernel printed it, as the error. An unknown
/// trigger keeps it too.
pub fn in_view(logged: &str, trigger: Option<&str>) -> Result<String, String> {
    let Some(trigger) = trigger else {
        return Ok(logged.to_owned());
    };
    let lineage = lineage(trigger);
    let mut tail = logged.trim_end_matches('/');
    loop {
        if lineage.iter().any(|l| l == tail) {
            return Ok(tail.to_owned());
        }
        match tail.get(1..).and_then(|t| t.find('/')) {
            Some(i) => tail = &tail[i + 1..],
            None => return Err(logged.to_owned()),
        }
    }
}

/// Puts together the kernel log's word on a kill (`logged`; `Err`: why the
/// log could not be read) and the counters' verdict: the log's summary
/// line when there is one (its path put in this view, see [`in_view`],
/// from the kill's `trigger` cgroup), else the counters for the limit,
/// with the log's kill line still telling memcg from global.
pub fn decide(
    logged: Result<Option<super::kmsg::LogKill>, &str>,
    verdict: Option<KillCause>,
    trigger: Option<&str>,
) -> Decision {
    let (line, note) = match logged {
        Ok(Some(k)) if k.summary => {
            let (limit_cgroup, note) = match k.limit_cgroup.map(|l| in_view(&l, trigger)) {
                Some(Ok(path)) => (Some(path), None),
                Some(Err(printed)) => {
                    let note = format!(
                        "{printed} is the kernel's path from the hierarchy's root: this \
                         cgroup namespace's root or above it, outside vmscope's view"
                    );
                    (Some(printed), Some(note))
                }
                None => (None, None),
            };
            return Decision {
                constraint: k.constraint,
                limit_cgroup,
                source: Some("kernel_log"),
                note,
            };
        }
        Ok(Some(k)) => (
            k.constraint,
            "the kernel log printed no summary for this kill (the kernel rate-limits it: 10 per 5 s)"
                .to_owned(),
        ),
        Ok(None) => (None, "the kernel log had no line for this kill".to_owned()),
        Err(why) => (None, why.to_owned()),
    };
    let (mut constraint, mut limit) = match verdict {
        Some(KillCause::Memcg(p)) => (Some("memcg".to_owned()), Some(p)),
        Some(KillCause::Global) => (Some("global".to_owned()), None),
        None => (None, None),
    };
    if let Some(c) = line {
        // The log's kill line is exact on memcg against global.
        if c != "memcg" {
            limit = None;
        }
        constraint = Some(c);
    }
    let source = (constraint.is_some() || limit.is_some()).then_some("limit_counters");
    Decision {
        constraint,
        limit_cgroup: limit,
        source,
        note: Some(note),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::kernel::kmsg::LogKill;

    fn logged(constraint: &str, limit: Option<&str>, summary: bool) -> LogKill {
        LogKill {
            pid: 1,
            constraint: Some(constraint.into()),
            limit_cgroup: limit.map(Into::into),
            task_cgroup: None,
            summary,
        }
    }

    #[test]
    fn the_logs_path_is_put_in_this_view_of_the_hierarchy() {
        // Same view: as printed.
        let ok = |s: &str| Ok(s.to_owned());
        let kept = |s: &str| Err(s.to_owned());
        assert_eq!(in_view("/p", Some("/p/c")), ok("/p"));
        assert_eq!(in_view("/p/c", Some("/p/c")), ok("/p/c"));
        // A cgroup namespace rooted at /pod/ctr.
        assert_eq!(in_view("/pod/ctr/app", Some("/app/w")), ok("/app"));
        assert_eq!(in_view("/pod/ctr/app/w", Some("/app/w")), ok("/app/w"));
        // The limit is the view's root or above it: kept as printed.
        assert_eq!(in_view("/pod", Some("/app/w")), kept("/pod"));
        assert_eq!(in_view("/pod/ctr", Some("/app/w")), kept("/pod/ctr"));
        assert_eq!(in_view("/x", None), ok("/x"));
        // A path that only looks like a tail is not cut mid-name.
        assert_eq!(in_view("/a/bc", Some("/c")), kept("/a/bc"));
    }

    #[test]
    fn the_kernel_logs_summary_wins_over_the_counters() {
        let d = decide(
            Ok(Some(logged("memcg", Some("/p"), true))),
            Some(KillCause::Memcg("/p/c".into())),
            Some("/p/c"),
        );
        assert_eq!(
            d,
            Decision {
                constraint: Some("memcg".into()),
                limit_cgroup: Some("/p".into()),
                source: Some("kernel_log"),
                note: None,
            }
        );
    }

    #[test]
    fn a_limit_outside_this_view_keeps_the_kernels_path_and_says_so() {
        let d = decide(
            Ok(Some(logged("memcg", Some("/pod/ctr"), true))),
            None,
            Some("/app"),
        );
        assert_eq!(d.limit_cgroup.as_deref(), Some("/pod/ctr"));
        assert!(d.note.is_some_and(|n| n.contains("outside vmscope's view")));
        let d = decide(
            Ok(Some(logged("memcg", Some("/pod/ctr/app"), true))),
            None,
            Some("/app"),
        );
        assert_eq!((d.limit_cgroup.as_deref(), d.note), (Some("/app"), None));
    }

    #[test]
    fn without_a_summary_the_counters_name_the_limit() {
        let d = decide(
            Ok(Some(logged("memcg", None, false))),
            Some(KillCause::Memcg("/p".into())),
            Some("/p"),
        );
        assert_eq!(
            (d.constraint.as_deref(), d.limit_cgroup.as_deref(), d.source),
            (Some("memcg"), Some("/p"), Some("limit_counters"))
        );
        assert!(d.note.is_some_and(|n| n.contains("rate-limits")));
        // The kill line says global: a memcg at its limit meanwhile is not
        // the one the kill answered.
        let d = decide(
            Ok(Some(logged("global", None, false))),
            Some(KillCause::Memcg("/p".into())),
            Some("/p"),
        );
        assert_eq!(
            (d.constraint.as_deref(), d.limit_cgroup),
            (Some("global"), None)
        );
        let d = decide(Err("unreadable: EPERM"), Some(KillCause::Global), None);
        assert_eq!(
            (d.constraint.as_deref(), d.source, d.note.as_deref()),
            (
                Some("global"),
                Some("limit_counters"),
                Some("unreadable: EPERM")
            )
        );
        let d = decide(Ok(None), None, None);
        assert_eq!((d.constraint, d.source), (None, None));
        assert!(d.note.is_some());
    }

    impl LimitWatch {
        fn blame_used(&mut self, trigger: &str) -> Option<KillCause> {
            self.blame(trigger, false)
        }
    }

    #[test]
    fn on_v1_with_the_kill_line_read_a_burst_is_blamed_kill_by_kill() {
        let mut w = LimitWatch::default();
        w.read(["/a"], watch(&[("/a", 3)]));
        w.read(["/a"], watch(&[("/a", 900)]));
        assert_eq!(w.blame("/a", true), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame("/a", true), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame("/a", false), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame("/a", true), Some(KillCause::Global));
    }

    #[test]
    fn lineage_runs_from_the_cgroup_up_without_the_root() {
        assert_eq!(lineage("/a/b/c"), ["/a/b/c", "/a/b", "/a"]);
        assert_eq!(lineage("/a"), ["/a"]);
        assert!(lineage("/").is_empty());
    }

    fn watch<'a>(values: &'a [(&'a str, u64)]) -> impl Fn(&str) -> Option<u64> + 'a {
        |p| values.iter().find(|(n, _)| *n == p).map(|(_, v)| *v)
    }

    #[test]
    fn the_nearest_cgroup_whose_counter_grew_is_blamed_once() {
        let mut w = LimitWatch::default();
        w.read(["/p/c"], watch(&[("/p/c", 0), ("/p", 4)]));
        w.read(["/p/c"], watch(&[("/p/c", 0), ("/p", 4)]));
        assert_eq!(w.blame_used("/p/c"), Some(KillCause::Global));
        // The parent's limit was hit: its child's was not.
        w.read(["/p/c"], watch(&[("/p/c", 0), ("/p", 5)]));
        assert_eq!(w.blame_used("/p/c"), Some(KillCause::Memcg("/p".into())));
        // That growth counted once; no new hit: system-wide.
        assert_eq!(w.blame_used("/p/c"), Some(KillCause::Global));
        // Both grew: the nearer one caused the kill.
        w.read(["/p/c"], watch(&[("/p/c", 1), ("/p", 6)]));
        assert_eq!(w.blame_used("/p/c"), Some(KillCause::Memcg("/p/c".into())));
    }

    #[test]
    fn with_one_count_per_oom_each_kill_of_a_burst_uses_one() {
        let mut w = LimitWatch {
            one_per_kill: true,
            ..LimitWatch::default()
        };
        w.read(["/a"], watch(&[("/a", 3)]));
        w.read(["/a"], watch(&[("/a", 5)]));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Global));
        // What was used stays used as the reads move on.
        w.read(["/a"], watch(&[("/a", 5)]));
        w.read(["/a"], watch(&[("/a", 6)]));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Global));
        // A kill the log named takes its unit too.
        w.read(["/a"], watch(&[("/a", 8)]));
        w.used_by_kill("/a");
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Global));
    }

    #[test]
    fn on_v1_a_kill_the_log_named_leaves_the_growth_to_the_next() {
        let mut w = LimitWatch::default();
        w.read(["/a"], watch(&[("/a", 3)]));
        w.read(["/a"], watch(&[("/a", 900)]));
        w.used_by_kill("/a");
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
    }

    #[test]
    fn a_kill_counted_one_read_early_is_still_found() {
        let mut w = LimitWatch::default();
        w.read(["/a"], watch(&[("/a", 0)]));
        w.read(["/a"], watch(&[("/a", 1)]));
        // The kill reaches user space at the next read.
        w.read(["/a"], watch(&[("/a", 1)]));
        assert_eq!(w.blame_used("/a"), Some(KillCause::Memcg("/a".into())));
    }

    #[test]
    fn unknown_when_a_level_was_never_read_before() {
        let mut w = LimitWatch::default();
        w.read(["/a/b"], watch(&[("/a/b", 0), ("/a", 0)]));
        assert_eq!(w.blame_used("/a/b"), None);
        w.read(["/a/b"], watch(&[("/a/b", 0)]));
        assert_eq!(w.blame_used("/a/b"), None, "/a unreadable");
        assert_eq!(
            LimitWatch::default().blame_used("/"),
            Some(KillCause::Global)
        );
    }

    #[test]
    fn a_cgroup_created_after_the_start_counts_from_zero() {
        let mut w = LimitWatch::default();
        w.seed(["/", "/old"], watch(&[("/old", 7)]));
        // Both read for the first time after a kill.
        w.read(["/new", "/old"], watch(&[("/new", 1), ("/old", 7)]));
        assert_eq!(w.blame_used("/new"), Some(KillCause::Memcg("/new".into())));
        assert_eq!(w.blame_used("/old"), Some(KillCause::Global));
    }
}
