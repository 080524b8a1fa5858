//! The kernel's /proc files vmscope reads: /proc/vmstat, /proc/stat,
//! /proc/pressure/memory, /proc/meminfo and /proc/uptime. Only reading
//! here; the parsing and the types are `procstat`'s, pure.

use std::io;

use crate::procstat::{self, CpuTimes, Psi, Vmstat};

/// Reads and parses `/proc/vmstat`.
pub fn read_vmstat() -> io::Result<Vmstat> {
    std::fs::read_to_string(procstat::VMSTAT_PATH).map(|text| procstat::parse(&text))
}

/// `/proc/vmstat` read into `buf`, which the caller keeps (and has
/// touched), so that the read itself allocates nothing and takes no page
/// fault: a sampler that reads its own fault counters just before can set
/// them beside pgfault exactly.
pub fn read_vmstat_into(buf: &mut [u8]) -> io::Result<Vmstat> {
    use std::io::Read as _;
    let mut f = std::fs::File::open(procstat::VMSTAT_PATH)?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    if n == buf.len() {
        return Err(io::Error::other(format!(
            "{} is larger than {} bytes",
            procstat::VMSTAT_PATH,
            buf.len()
        )));
    }
    Ok(procstat::parse(&String::from_utf8_lossy(&buf[..n])))
}

/// All CPUs' time from `/proc/stat`, with the length of a tick.
pub fn read_stat() -> Option<CpuTimes> {
    let mut t = procstat::parse_stat(&std::fs::read_to_string(procstat::STAT_PATH).ok()?)?;
    let hz = rustix::param::clock_ticks_per_second();
    t.tick_ns = 1_000_000_000u64.checked_div(hz).unwrap_or(0);
    Some(t)
}

/// Reads and parses `/proc/pressure/memory`. The error says why the data is
/// unavailable, e.g.
/// `"/proc/pressure/memory: No such file or directory (os error 2) (kernel without CONFIG_PSI or booted with psi=0)"`.
pub fn read_psi() -> Result<Psi, String> {
    let path = procstat::PSI_MEMORY_PATH;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{path}: {e} ({})", procstat::psi_unavailable_hint(&e)))?;
    procstat::parse_psi(&text).map_err(|e| format!("{path}: unexpected format: {e}"))
}

/// /proc/meminfo in bytes, by field (empty when unreadable).
pub fn meminfo() -> std::collections::HashMap<String, u64> {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some((k.to_string(), kb * 1024))
        })
        .collect()
}

/// Whether `pid`'s task has begun to exit (or is gone: its stat file is
/// unreadable).
pub fn exiting(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| procstat::stat_flags(&t))
        .is_none_or(|f| f & procstat::PF_EXITING != 0)
}

/// Seconds since boot (0 when unreadable).
pub fn uptime_s() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split('.').next()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_from_this_machine() {
        // /proc may be restricted in some sandboxes; only check consistency.
        if let Ok(v) = read_vmstat() {
            assert!(
                v.0.keys()
                    .all(|k| procstat::VMSTAT_KEYS.contains(&k.as_str()))
            );
            assert!(v.get("pgfault").is_some());
        }
        match read_psi() {
            Ok(psi) => assert!(psi.some.avg10 >= 0.0),
            Err(e) => assert!(e.starts_with(procstat::PSI_MEMORY_PATH), "{e}"),
        }
        assert!(uptime_s() > 0);
        assert!(meminfo().contains_key("MemTotal"));
    }
}
