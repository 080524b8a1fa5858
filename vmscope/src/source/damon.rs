//! DAMON as a working-set method (see `model::damon` for the rule): one
//! kdamond per measured process, driven through DAMON's sysfs
//! (`/sys/kernel/mm/damon/admin/kdamonds`). Each kdamond has one context
//! (`vaddr` operations, the process as its one target) and one scheme whose
//! action is `stat` and whose access pattern matches every region found
//! accessed, so that `update_schemes_tried_regions` lists those regions.
//!
//! vmscope uses DAMON's sysfs only when no kdamond is set up there
//! (`nr_kdamonds` is 0), and leaves it so: every kdamond it made is turned
//! off and `nr_kdamonds` put back to 0 when it stops, on any exit path
//! that runs destructors (the end of the run, an error, Ctrl-C).

use std::{
    fs,
    path::{Path, PathBuf},
};

use crate::model::{
    damon::Region,
    wss::{MethodStatus, WssMethod},
};

pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";
const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";
/// A symbol only the `vaddr` operations set has; DAMON's sysfs lists the
/// operations it supports only inside a context, which would have to be
/// made to ask.
const VADDR_SYMBOL: &str = "damon_va_check_accesses";

/// DAMON's intervals and region bounds, as vmscope sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    pub sample_us: u64,
    pub aggr_us: u64,
    pub update_us: u64,
    pub min_regions: u64,
    pub max_regions: u64,
}

/// Sampling every 100 ms, aggregating every second, regions no larger than
/// a hundredth of the watched address space: vmscope reads the regions
/// once per aggregation interval. In the 6.12 guest (a 64 MiB hot set
/// touched every 200 ms in 256 MiB), sampling every 5 ms found hot regions
/// accessed 0 to 3 times in 20 checks, too few to tell from idle ones, so
/// DAMON kept merging them (0 to 218 MiB marked); every 100 ms it found
/// them accessed 6 or 7 times in 10. Of the settings then compared on one
/// running hot set (5 s windows, 30 s to settle, each region counted whole),
/// this one came closest: 65.1, 75.2 and 68.7 MiB, against 74 to 77 MiB
/// with at least 10 regions and 78 to 91 MiB sampling every 50 ms
/// (docs/working-set.md).
pub const ATTRS: Attrs = Attrs {
    sample_us: 100_000,
    aggr_us: 1_000_000,
    update_us: 1_000_000,
    min_regions: 100,
    max_regions: 1_000,
};

/// How long DAMON's regions take to settle on what is touched, from its
/// start (or a change of the access pattern). The first window starts
/// this long after the kdamonds do. In the 6.12 guest's region dump (64
/// MiB hot in 256 MiB), the regions found accessed, each at its share,
/// came within 10% of the hot set 9 s after the kdamond started (5 s
/// windows), and 6 s after the hot set grew to 128 MiB; in the matrix's
/// run, `lab wss` still read 75.3 MiB in the window from 10 to 15 s.
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(20);

/// The intervals, region bounds and settling time in use: [`ATTRS`] and
/// [`SETTLE`], or `VMSCOPE_DAMON_ATTRS=SAMPLE_US,AGGR_US,MIN,MAX,SETTLE_S`
/// (for trying other settings against a known hot set).
pub fn attrs() -> (Attrs, std::time::Duration) {
    let custom = std::env::var("VMSCOPE_DAMON_ATTRS").ok().and_then(|v| {
        let n: Vec<u64> = v
            .split(',')
            .map(|x| x.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [sample_us, aggr_us, min_regions, max_regions, settle] = n[..] else {
            return None;
        };
        (sample_us > 0 && aggr_us >= sample_us && min_regions >= 3 && max_regions >= min_regions)
            .then_some((
                Attrs {
                    sample_us,
                    aggr_us,
                    update_us: ATTRS.update_us,
                    min_regions,
                    max_regions,
                },
                std::time::Duration::from_secs(settle),
            ))
    });
    custom.unwrap_or((ATTRS, SETTLE))
}

/// The most processes measured at once (one kdamond each).
pub const MAX_TARGETS: usize = 32;

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("writing `{value}` to {}: {e}", path.display()))
}

/// Why DAMON's sysfs cannot be used now, if it cannot.
fn unusable() -> Option<String> {
    if !Path::new(ADMIN).exists() {
        return Some(format!("no {ADMIN} (kernel without CONFIG_DAMON_SYSFS)"));
    }
    let syms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    if !syms.contains(VADDR_SYMBOL) {
        return Some(
            "DAMON's sysfs is there but without the vaddr operations (kernel without \
             CONFIG_DAMON_VADDR): it can watch physical memory only, not a process"
                .into(),
        );
    }
    let nr = Path::new(KDAMONDS).join("nr_kdamonds");
    match read(&nr) {
        Ok(n) if n == "0" => {}
        Ok(n) => {
            let state = read(&Path::new(KDAMONDS).join("0/state")).unwrap_or_default();
            return Some(format!(
                "DAMON's sysfs is in use: {n} kdamond(s) set up (kdamond 0 is {state}); vmscope \
                 drives DAMON only when {} is 0, and leaves others' alone (if they are nobody's: \
                 echo off > {KDAMONDS}/0/state; echo 0 > {})",
                nr.display(),
                nr.display()
            ));
        }
        Err(e) => return Some(format!("{e} (it needs root)")),
    }
    if let Err(e) = fs::OpenOptions::new().write(true).open(&nr) {
        return Some(format!("{}: {e} (it needs root)", nr.display()));
    }
    None
}

/// How this kernel stands with the method.
pub fn status() -> MethodStatus {
    match unusable() {
        Some(detail) => MethodStatus {
            method: WssMethod::Damon,
            offered: false,
            used: false,
            detail,
        },
        None => MethodStatus {
            method: WssMethod::Damon,
            offered: true,
            used: false,
            detail: format!(
                "one kdamond per process (vaddr, sampling every {} ms), its regions read every \
                 {} ms through {KDAMONDS}, the first window {} s after it starts; per process",
                attrs().0.sample_us / 1000,
                attrs().0.aggr_us / 1000,
                attrs().1.as_secs()
            ),
        },
    }
}

/// Parses one region's files' contents.
pub fn parse_region(start: &str, end: &str, nr: &str, age: &str) -> Option<Region> {
    Some(Region {
        start: start.trim().parse().ok()?,
        end: end.trim().parse().ok()?,
        nr_accesses: nr.trim().parse().ok()?,
        age: age.trim().parse().ok()?,
    })
}

/// The kdamonds vmscope set up, one per process, in `pids`' order. Dropping
/// it turns them off and puts `nr_kdamonds` back to 0.
pub struct Kdamonds {
    pids: Vec<u32>,
}

impl Kdamonds {
    /// Sets up and starts one kdamond per pid. Refused when DAMON's sysfs
    /// is in use or lacks vaddr; a failure part-way undoes what was done.
    pub fn start(pids: &[u32], attrs: Attrs) -> Result<Kdamonds, String> {
        if let Some(why) = unusable() {
            return Err(why);
        }
        let k = Path::new(KDAMONDS);
        write(&k.join("nr_kdamonds"), &pids.len().to_string())?;
        let me = Kdamonds {
            pids: pids.to_vec(),
        };
        for (i, &pid) in pids.iter().enumerate() {
            me.setup(i, pid, attrs)?;
        }
        for (i, pid) in pids.iter().enumerate() {
            let state = k.join(format!("{i}/state"));
            // A process that ended meanwhile cannot be watched: its
            // kdamond stays off and its reads fail, which leaves it out.
            if let Err(e) = write(&state, "on")
                && Path::new(&format!("/proc/{pid}")).exists()
            {
                return Err(e);
            }
        }
        Ok(me)
    }

    fn ctx(i: usize) -> PathBuf {
        Path::new(KDAMONDS).join(format!("{i}/contexts/0"))
    }

    fn scheme(i: usize) -> PathBuf {
        Self::ctx(i).join("schemes/0")
    }

    fn setup(&self, i: usize, pid: u32, a: Attrs) -> Result<(), String> {
        let kd = Path::new(KDAMONDS).join(i.to_string());
        write(&kd.join("contexts/nr_contexts"), "1")?;
        let c = Self::ctx(i);
        write(&c.join("operations"), "vaddr")?;
        let iv = c.join("monitoring_attrs/intervals");
        write(&iv.join("sample_us"), &a.sample_us.to_string())?;
        write(&iv.join("aggr_us"), &a.aggr_us.to_string())?;
        write(&iv.join("update_us"), &a.update_us.to_string())?;
        let nr = c.join("monitoring_attrs/nr_regions");
        // The maximum first: a minimum above the old maximum is refused.
        write(&nr.join("max"), &a.max_regions.to_string())?;
        write(&nr.join("min"), &a.min_regions.to_string())?;
        write(&c.join("targets/nr_targets"), "1")?;
        write(&c.join("targets/0/pid_target"), &pid.to_string())?;
        write(&c.join("schemes/nr_schemes"), "1")?;
        let s = Self::scheme(i);
        write(&s.join("action"), "stat")?;
        let p = s.join("access_pattern");
        // Only regions found accessed are listed: the rule needs no others,
        // and each listed region costs a directory and four reads.
        for (what, min, max) in [
            ("sz", 0, u64::MAX),
            ("nr_accesses", 1, u64::from(u32::MAX)),
            ("age", 0, u64::from(u32::MAX)),
        ] {
            write(&p.join(format!("{what}/max")), &max.to_string())?;
            write(&p.join(format!("{what}/min")), &min.to_string())?;
        }
        Ok(())
    }

    /// The kdamonds' CPU time so far (their threads' user and system
    /// time; a kdamond that stopped counts 0).
    pub fn cpu(&self) -> std::time::Duration {
        let hz = rustix::param::clock_ticks_per_second().max(1);
        let ticks: u64 = (0..self.pids.len())
            .filter_map(|i| {
                let pid = read(&Path::new(KDAMONDS).join(format!("{i}/pid"))).ok()?;
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // Fields after the command's closing parenthesis: utime and
                // stime are the 12th and 13th.
                let rest = stat.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .sum();
        std::time::Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz)
    }

    /// The processes, in kdamond order.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// The regions of kdamond `i` now. The write waits until the kdamond
    /// has applied its scheme once more (about one aggregation interval).
    pub fn regions(&self, i: usize) -> Result<Vec<Region>, String> {
        let state = Path::new(KDAMONDS).join(format!("{i}/state"));
        write(&state, "update_schemes_tried_regions")?;
        let dir = Self::scheme(i).join("tried_regions");
        let mut out = Vec::new();
        let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in entries.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            let f = |n: &str| fs::read_to_string(p.join(n)).unwrap_or_default();
            if let Some(r) = parse_region(&f("start"), &f("end"), &f("nr_accesses"), &f("age")) {
                out.push(r);
            }
        }
        out.sort_by_key(|r| r.start);
        Ok(out)
    }
}

impl Drop for Kdamonds {
    fn drop(&mut self) {
        let k = Path::new(KDAMONDS);
        for i in 0..self.pids.len() {
            let state = k.join(format!("{i}/state"));
            if read(&state).as_deref() == Ok("on") {
                let _ = write(&state, "off");
            }
        }
        if let Err(e) = write(&k.join("nr_kdamonds"), "0") {
            log::warn!("working set (damon): could not put nr_kdamonds back to 0: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_from_its_files() {
        assert_eq!(
            parse_region("4096\n", "8192\n", "3\n", "12\n"),
            Some(Region {
                start: 4096,
                end: 8192,
                nr_accesses: 3,
                age: 12
            })
        );
        assert_eq!(parse_region("", "8192", "3", "1"), None);
    }

    #[test]
    fn this_kernel_is_stated() {
        let s = status();
        assert_eq!(s.method, WssMethod::Damon);
        assert!(!s.detail.is_empty());
        // This machine's DAMON (if any) has no vaddr, or is in use: never
        // offered without saying why.
        if !s.offered {
            assert!(
                s.detail.contains("DAMON") || s.detail.contains("damon"),
                "{}",
                s.detail
            );
        }
    }
}
