//! The cgroup filesystem: which hierarchy holds the memory controller (and
//! so how the eBPF programs key processes by cgroup), cgroup names by id,
//! and each cgroup's own memory books.
//!
//! A cgroup's id, as the programs read it (`kernfs_node.id`), is the inode
//! number of its directory: names are found by walking the hierarchy's
//! mount, and cached; a cgroup removed during the run keeps its last name.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    os::unix::fs::MetadataExt,
    path::PathBuf,
    time::{Duration, Instant},
};

use crate::model::cgroup::{CgroupBooks, CgroupScheme};

/// Where the memory controller lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// On a v1 hierarchy of its own (or shared): processes are keyed by
    /// their memory cgroup, read through BTF.
    V1Memory,
    /// cgroup v2: processes are keyed by their cgroup id.
    V2,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    pub kind: CgroupVersion,
    pub mount: PathBuf,
    /// The kernel's id for the hierarchy (`/proc/cgroups`' second column
    /// for v1; 0 for v2), as `cgroup:cgroup_attach_task` reports it.
    pub id: i32,
}

impl Hierarchy {
    pub fn scheme(&self) -> CgroupScheme {
        CgroupScheme {
            hierarchy: match self.kind {
                CgroupVersion::V1Memory => "v1-memory",
                CgroupVersion::V2 => "v2",
            }
            .into(),
            mount: self.mount.display().to_string(),
        }
    }

    /// The directory of cgroup `path` (`/` is the root).
    pub fn dir(&self, path: &str) -> PathBuf {
        self.mount.join(path.trim_start_matches('/'))
    }
}

/// The hierarchy this system's memory cgroups are on, from `/proc/cgroups`
/// and this process's mount table.
pub fn detect() -> Result<Hierarchy, String> {
    let cgroups = std::fs::read_to_string("/proc/cgroups")
        .map_err(|e| format!("/proc/cgroups: {e} (a kernel without cgroups)"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    pick(&cgroups, &mountinfo)
}

/// Whether the kernel has memory cgroups on (`/proc/cgroups`' `memory`
/// line, enabled): without them (no CONFIG_MEMCG, or `cgroup_disable=memory`)
/// the kernel counts no memory-cgroup events at all, mounted or not.
pub fn memory_controller_on(cgroups: &str) -> bool {
    memory_line(cgroups).is_some_and(|(_, enabled)| enabled)
}

/// `/proc/cgroups`' `memory` line: its hierarchy id (0 on v2) and whether
/// it is enabled.
fn memory_line(cgroups: &str) -> Option<(&str, bool)> {
    cgroups.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[0] == "memory").then(|| (f[1], f[3] == "1"))
    })
}

/// [`detect`] from the two files' text.
pub fn pick(cgroups: &str, mountinfo: &str) -> Result<Hierarchy, String> {
    let v1 = memory_line(cgroups)
        .filter(|&(hierarchy, enabled)| enabled && hierarchy != "0")
        .and_then(|(hierarchy, _)| hierarchy.parse::<i32>().ok());
    let mounts = mountinfo.lines().filter_map(|l| {
        // id parent major:minor root mount-point options [optional...] - type source super-options
        let (pre, post) = l.split_once(" - ")?;
        let point = pre.split_whitespace().nth(4)?;
        let mut post = post.split_whitespace();
        let fstype = post.next()?;
        let opts = post.nth(1).unwrap_or("");
        Some((unescape_octal(point), fstype.to_owned(), opts.to_owned()))
    });
    let mut v2 = None;
    for (point, fstype, opts) in mounts {
        if let Some(id) = v1
            && fstype == "cgroup"
            && opts.split(',').any(|o| o == "memory")
        {
            return Ok(Hierarchy {
                kind: CgroupVersion::V1Memory,
                mount: point.into(),
                id,
            });
        }
        if fstype == "cgroup2" && v2.is_none() {
            v2 = Some(point);
        }
    }
    if v1.is_some() {
        return Err("the memory controller is on a cgroup v1 hierarchy that is not mounted here; mount it (mount -t cgroup -o memory cgroup DIR)".into());
    }
    v2.map(|p| Hierarchy {
        kind: CgroupVersion::V2,
        mount: p.into(),
        id: 0,
    })
    .ok_or_else(|| {
        "no cgroup2 filesystem is mounted; mount one (mount -t cgroup2 none /sys/fs/cgroup)".into()
    })
}

/// Undoes the `\ooo` escapes the kernel uses for blanks in `/proc` paths.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.len() >= i + 4
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The most names kept of cgroups alive (a bound against a host that
/// creates cgroups without end).
const MAX_NAMES: usize = 65536;
/// The most names kept of cgroups removed while watched: a sample may
/// still list one whose last process's counts are read after it went.
const MAX_GONE: usize = 4096;
/// A walk for an unknown id happens at most this often.
const REWALK: Duration = Duration::from_secs(1);

/// Cgroup names by id: those alive as of the last walk (or as created
/// since, see [`Names::created`]), and the most recent of those removed
/// since. Nothing grows with the number of cgroups a host creates over
/// time, only with the number alive at once.
pub struct Names {
    hierarchy: Hierarchy,
    names: HashMap<u64, String>,
    /// Removed cgroups' names, and their ids oldest first.
    gone: HashMap<u64, String>,
    gone_order: VecDeque<u64>,
    /// Removed since the last [`Names::take_removed`].
    removed: Vec<(u64, String)>,
    walked: Option<Instant>,
}

impl Names {
    pub fn new(hierarchy: Hierarchy) -> Self {
        Self {
            hierarchy,
            names: HashMap::new(),
            gone: HashMap::new(),
            gone_order: VecDeque::new(),
            removed: Vec::new(),
            walked: None,
        }
    }

    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The path of cgroup `id`, walking the hierarchy again (at most once a
    /// second) when it is not known yet. A removed cgroup keeps its name
    /// (ids are not reused while the kernel runs).
    pub fn path(&mut self, id: u64) -> Option<String> {
        if let Some(p) = self.names.get(&id) {
            return Some(p.clone());
        }
        if self.walked.is_none_or(|t| t.elapsed() >= REWALK) {
            self.walk();
            if let Some(p) = self.names.get(&id) {
                return Some(p.clone());
            }
        }
        self.gone.get(&id).cloned()
    }

    /// Cgroup `id` was created at `path` (as the kernel reported it).
    pub fn created(&mut self, id: u64, path: String) {
        if self.names.len() < MAX_NAMES || self.names.contains_key(&id) {
            self.names.insert(id, path);
        }
    }

    /// Cgroup `id` was removed: its name is kept among the recently gone.
    pub fn removed(&mut self, id: u64) {
        if let Some(p) = self.names.remove(&id) {
            self.bury(id, p);
        }
    }

    /// How many names are kept (alive, gone).
    pub fn len(&self) -> (usize, usize) {
        (self.names.len(), self.gone.len())
    }

    /// Whether cgroup `id` is known to be gone: reported removed, or not
    /// found by a walk made at `since` or later.
    pub fn gone_since(&self, id: u64, since: Instant) -> bool {
        !self.names.contains_key(&id)
            && (self.gone.contains_key(&id) || self.walked.is_some_and(|t| t >= since))
    }

    /// The cgroups found removed since the last call, with their paths.
    pub fn take_removed(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.removed)
    }

    /// Walks the hierarchy if the last walk is older than `period`: the
    /// way removals are found where the kernel does not report them.
    pub fn refresh(&mut self, period: Duration) {
        if self.walked.is_none_or(|t| t.elapsed() >= period) {
            self.walk();
        }
    }

    fn bury(&mut self, id: u64, path: String) {
        self.removed.push((id, path.clone()));
        if self.gone.insert(id, path).is_none() {
            self.gone_order.push_back(id);
        }
        while self.gone_order.len() > MAX_GONE {
            if let Some(old) = self.gone_order.pop_front() {
                self.gone.remove(&old);
            }
        }
    }

    /// The names as the hierarchy is now; those no longer there are
    /// buried.
    fn walk(&mut self) {
        self.walked = Some(Instant::now());
        let now: HashMap<u64, String> = below(&self.hierarchy, "/").into_iter().collect();
        let old = std::mem::replace(&mut self.names, now);
        for (id, p) in old {
            if !self.names.contains_key(&id) {
                self.bury(id, p);
            }
        }
    }
}

/// Cgroup `path` and every cgroup below it, as (id, path), as they are now.
pub fn below(h: &Hierarchy, path: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let name = if path.is_empty() { "/" } else { path };
    let mut stack = vec![(h.dir(path), name.to_owned())];
    while let Some((dir, name)) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        out.push((meta.ino(), name.clone()));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) && out.len() + stack.len() < MAX_NAMES {
                let child = format!(
                    "{}/{}",
                    name.trim_end_matches('/'),
                    e.file_name().to_string_lossy()
                );
                stack.push((e.path(), child));
            }
        }
    }
    out
}

/// A cgroup's books, as its files are now; `None` when its directory is
/// gone.
pub fn books(h: &Hierarchy, path: &str) -> Option<CgroupBooks> {
    let dir = h.dir(path);
    if !dir.is_dir() {
        return None;
    }
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let num = |f: &str| read(f).and_then(|t| t.trim().parse::<u64>().ok());
    Some(match h.kind {
        CgroupVersion::V2 => CgroupBooks {
            usage_bytes: num("memory.current"),
            limit_bytes: num("memory.max"),
            events: read("memory.events").map(|t| pairs(&t)).unwrap_or_default(),
            events_local: read("memory.events.local")
                .map(|t| pairs(&t))
                .unwrap_or_default(),
            stat: read("memory.stat").map(|t| pairs(&t)).unwrap_or_default(),
            psi: read("memory.pressure").and_then(|t| crate::procstat::parse_psi(&t).ok()),
        },
        CgroupVersion::V1Memory => {
            let mut events = BTreeMap::new();
            if let Some(f) = num("memory.failcnt") {
                events.insert("failcnt".into(), f);
            }
            if let Some(t) = read("memory.oom_control") {
                events.extend(
                    pairs(&t)
                        .into_iter()
                        .filter(|(k, _)| k == "oom_kill" || k == "under_oom"),
                );
            }
            CgroupBooks {
                usage_bytes: num("memory.usage_in_bytes"),
                // v1 reports "no limit" as the page counter's maximum.
                limit_bytes: num("memory.limit_in_bytes").filter(|l| *l < 1 << 62),
                events,
                events_local: BTreeMap::new(),
                stat: read("memory.stat")
                    .map(|t| pairs(&t))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| !k.starts_with("total_"))
                    .collect(),
                psi: None,
            }
        }
    })
}

/// `name value` lines; others skipped.
fn pairs(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let k = f.next()?;
            let v = f.next()?.parse().ok()?;
            Some((k.to_owned(), v))
        })
        .collect()
}

/// Whether `path` names an existing cgroup directory in `h`.
pub fn exists(h: &Hierarchy, path: &str) -> bool {
    h.dir(path).is_dir()
}

/// The processes (tgids) in cgroup `path` now, not its descendants.
pub fn procs(h: &Hierarchy, path: &str) -> Vec<u32> {
    std::fs::read_to_string(h.dir(path).join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use std::path::Path;

    const MOUNTS_V1: &str = "\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw
31 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
34 25 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
40 25 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
    const CGROUPS_V1: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n\
cpu\t1\t1\t1\nmemory\t4\t47\t1\n";
    const CGROUPS_V2: &str = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n\
cpu\t0\t1\t1\nmemory\t0\t47\t1\n";

    #[test]
    fn v1_memory_wins_over_a_unified_mount() {
        let h = pick(CGROUPS_V1, MOUNTS_V1).unwrap();
        assert_eq!(h.kind, CgroupVersion::V1Memory);
        assert_eq!(h.mount, Path::new("/sys/fs/cgroup/memory"));
        assert_eq!(h.id, 4);
    }

    #[test]
    fn v2_when_memory_is_on_no_v1_hierarchy() {
        let m = "40 25 0:35 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = pick(CGROUPS_V2, m).unwrap();
        assert_eq!(h.kind, CgroupVersion::V2);
        assert_eq!(h.mount, Path::new("/sys/fs/cgroup"));
    }

    #[test]
    fn an_unmounted_v1_memory_hierarchy_is_an_error_that_says_so() {
        let m = "40 25 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let e = pick(CGROUPS_V1, m).unwrap_err();
        assert!(e.contains("not mounted"), "{e}");
        assert!(pick(CGROUPS_V2, "").unwrap_err().contains("cgroup2"));
    }

    #[test]
    fn names_come_from_inode_numbers_and_outlive_their_directory() {
        let tmp = std::env::temp_dir().join(format!("vmscope-cg-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("a/b")).unwrap();
        let ino = std::fs::metadata(tmp.join("a/b")).unwrap().ino();
        let mut names = Names::new(Hierarchy {
            kind: CgroupVersion::V2,
            mount: tmp.clone(),
            id: 0,
        });
        assert_eq!(names.path(ino).as_deref(), Some("/a/b"));
        let h = names.hierarchy().clone();
        assert_eq!(below(&h, "/a").len(), 2);
        assert_eq!(below(&h, "/a/b"), vec![(ino, "/a/b".to_owned())]);
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(names.path(ino).as_deref(), Some("/a/b"));
    }

    #[test]
    fn names_stay_bounded_by_what_is_alive_however_many_cgroups_come_and_go() {
        // tmpfs, like cgroupfs, does not hand a removed directory's inode
        // number to the next one (ext4 does).
        let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
        let mut names = Names::new(Hierarchy {
            kind: CgroupVersion::V2,
            mount: tmp.path().to_owned(),
            id: 0,
        });
        std::fs::create_dir(tmp.path().join("keep")).unwrap();
        let keep = std::fs::metadata(tmp.path().join("keep")).unwrap().ino();
        let mut last = None;
        // More cgroups than either bound, created and removed one by one,
        // each looked up while it lives (a walk per lookup, as a second
        // apart would do).
        for i in 0..(MAX_GONE as u64 + 500) {
            let dir = tmp.path().join(format!("c{i}"));
            std::fs::create_dir(&dir).unwrap();
            let ino = std::fs::metadata(&dir).unwrap().ino();
            names.walked = None;
            assert_eq!(names.path(ino), Some(format!("/c{i}")), "alive");
            std::fs::remove_dir(&dir).unwrap();
            last = Some((ino, i));
        }
        // An unknown id: a walk, which finds the last one gone.
        names.walked = None;
        assert_eq!(names.path(u64::MAX), None);
        let (ino, i) = last.unwrap();
        // The most recently removed is still named; the alive one too.
        assert_eq!(names.path(ino), Some(format!("/c{i}")));
        assert_eq!(names.path(keep).as_deref(), Some("/keep"));
        let (alive, gone) = names.len();
        assert_eq!(alive, 2, "the root and /keep");
        assert!(gone <= MAX_GONE, "{gone} removed names kept");
    }

    #[test]
    fn cgroups_reported_created_and_removed_are_named_without_a_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let mut names = Names::new(Hierarchy {
            kind: CgroupVersion::V2,
            mount: tmp.path().to_owned(),
            id: 0,
        });
        names.walked = Some(Instant::now());
        // Never on disk: only the kernel's report names it.
        names.created(77, "/short/lived".into());
        assert_eq!(names.path(77).as_deref(), Some("/short/lived"));
        names.removed(77);
        assert_eq!(names.path(77).as_deref(), Some("/short/lived"));
        assert_eq!(names.len(), (0, 1));
    }

    #[test]
    fn memory_cgroups_are_on_unless_disabled_or_absent() {
        let on = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t1\t1\nmemory\t0\t16\t1\n";
        assert!(memory_controller_on(on));
        assert!(!memory_controller_on(&on.replace("16\t1", "16\t0")));
        assert!(!memory_controller_on(
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t1\t1\n"
        ));
    }
}
