//! What the kernel log says of each OOM kill: the one source that names
//! the memcg whose limit was hit exactly. Neither `oom:mark_victim` nor
//! the task that invoked the killer carries it; the OOM killer prints it.
//!
//! For every kill, the killer prints (`mm/oom_kill.c`):
//! - `Memory cgroup out of memory: Killed process PID (COMM) ...`, or
//!   `Out of memory: Killed process ...` when the system (or a cpuset or
//!   mempolicy) ran out. Every kill; it tells memcg from global.
//! - Before it, `oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=PATH,
//!   task_memcg=PATH,task=COMM,pid=PID,uid=UID` (`global_oom` in place of
//!   `oom_memcg=` for a system-wide OOM). This one is part of the report
//!   the kernel rate-limits (10 per 5 s), so a burst of kills leaves some
//!   without it.
//!
//! `/dev/kmsg` is read from its end at the start, without blocking, at
//! each sample. Reading it needs CAP_SYSLOG while `kernel.dmesg_restrict`
//! is 1; without it (or past the rate limit) the limit is told from the
//! cgroups' limit-hit counters instead ([`super::limits`]).

use std::{
    collections::VecDeque,
    fs::File,
    io::{ErrorKind, Read, Seek, SeekFrom},
    os::unix::fs::OpenOptionsExt,
};

/// The kernel log's device.
pub const PATH: &str = "/dev/kmsg";

/// The most kills whose lines are kept while no record of them arrived.
const KEPT: usize = 1024;

/// What the log said of one kill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogKill {
    /// The victim's pid, as printed (init pid namespace: the kernel's
    /// `task->pid`, as the eBPF record has it).
    pub pid: u32,
    /// `memcg`, `global`, `cpuset` or `mempolicy`: from the summary line
    /// when it was printed, else `memcg` or `global` from the kill line.
    pub constraint: Option<String>,
    /// The memcg whose limit was hit (summary line, memcg OOM only), as
    /// a path under the memory controller's hierarchy.
    pub limit_cgroup: Option<String>,
    /// The victim's memcg (summary line), as a path under the memory
    /// controller's hierarchy: where it was charged when it was killed.
    pub task_cgroup: Option<String>,
    /// Whether the (rate-limited) summary line was seen.
    pub summary: bool,
}

/// One OOM line of the log, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OomLine {
    /// `oom-kill:constraint=...`: (pid, constraint, limit memcg, the
    /// victim's memcg).
    Summary {
        pid: u32,
        constraint: String,
        limit_cgroup: Option<String>,
        task_cgroup: Option<String>,
    },
    /// `... out of memory: Killed process PID`: (pid, whether a memcg's).
    Killed { pid: u32, memcg: bool },
}

/// The text of a `/dev/kmsg` record: `PRIO,SEQ,USEC,FLAGS;TEXT\n` then
/// optional ` KEY=VALUE` lines; `None` unless the kernel itself wrote it.
///
/// PRIO is `facility << 3 | level`. Anyone who may open `/dev/kmsg` for
/// writing can add a record, but the kernel gives every such record a
/// facility other than 0 (`devkmsg_write` turns a facility of 0, or
/// none, into LOG_USER), so facility 0 (PRIO below 8) is the kernel's
/// own: a line a process wrote cannot pose as the OOM killer's.
pub fn message(record: &str) -> Option<&str> {
    let (head, rest) = record.split_once(';')?;
    let prio: u32 = head.split(',').next()?.parse().ok()?;
    if prio >> 3 != 0 {
        return None;
    }
    Some(rest.split('\n').next().unwrap_or(rest))
}

/// An OOM line of the log, or `None` for any other.
pub fn parse(msg: &str) -> Option<OomLine> {
    if let Some(s) = msg.strip_prefix("oom-kill:") {
        return summary(s);
    }
    let (head, tail) = msg.split_once(": Killed process ")?;
    if !head.ends_with("out of memory") && !head.starts_with("Out of memory") {
        return None;
    }
    let pid = tail.split(' ').next()?.parse().ok()?;
    Some(OomLine::Killed {
        pid,
        memcg: head == "Memory cgroup out of memory",
    })
}

/// `constraint=C,nodemask=...,cpuset=...,mems_allowed=...,(oom_memcg=P|
/// global_oom),task_memcg=P,task=COMM,pid=N,uid=U`. The node lists and
/// the names may hold commas, so fields are found by their keys, the
/// pid from the end (after the task's name).
fn summary(s: &str) -> Option<OomLine> {
    let constraint = s.strip_prefix("constraint=")?.split(',').next()?;
    let constraint = match constraint {
        "CONSTRAINT_MEMCG" => "memcg",
        "CONSTRAINT_NONE" => "global",
        "CONSTRAINT_CPUSET" => "cpuset",
        "CONSTRAINT_MEMORY_POLICY" => "mempolicy",
        _ => return None,
    };
    let (before_pid, pid) = s.rsplit_once(",pid=")?;
    let pid = pid.split(',').next()?.parse().ok()?;
    let limit_cgroup = before_pid
        .split_once(",oom_memcg=")
        .map(|(_, rest)| rest.split_once(",task_memcg=").map_or(rest, |(p, _)| p));
    // The task's name may hold ",task=": its memcg ends at the first.
    let task_cgroup = before_pid
        .split_once(",task_memcg=")
        .and_then(|(_, rest)| rest.split_once(",task="))
        .map(|(p, _)| p);
    Some(OomLine::Summary {
        pid,
        constraint: constraint.to_owned(),
        limit_cgroup: limit_cgroup.map(str::to_owned),
        task_cgroup: task_cgroup.map(str::to_owned),
    })
}

/// The kernel log, read from where it stood when opened, and the kills it
/// has told of that no record has claimed yet.
#[derive(Debug)]
pub struct KernelLog {
    file: File,
    kills: VecDeque<LogKill>,
    buf: Vec<u8>,
}

impl KernelLog {
    /// Opens the log at its end; the reason, for the recording, when it
    /// cannot be read.
    pub fn open() -> Result<KernelLog, String> {
        let mut file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(PATH)
            .map_err(|e| {
                let hint = if e.kind() == ErrorKind::PermissionDenied {
                    " (reading it needs CAP_SYSLOG while kernel.dmesg_restrict is 1)"
                } else {
                    ""
                };
                format!("the kernel log ({PATH}) is unreadable: {e}{hint}")
            })?;
        file.seek(SeekFrom::End(0))
            .map_err(|e| format!("seeking to the end of {PATH}: {e}"))?;
        Ok(KernelLog {
            file,
            kills: VecDeque::new(),
            buf: vec![0; 16 << 10],
        })
    }

    /// Reads every record written since the last call, keeping the OOM
    /// ones.
    pub fn drain(&mut self) {
        loop {
            match self.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&self.buf[..n]);
                    if let Some(line) = message(&text).and_then(parse) {
                        self.note(line);
                    }
                }
                // Records overwritten before they were read: the next
                // read goes on from the oldest one left.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: nothing more; anything else: try next time.
                Err(_) => break,
            }
        }
    }

    fn note(&mut self, line: OomLine) {
        let pid = match &line {
            OomLine::Summary { pid, .. } | OomLine::Killed { pid, .. } => *pid,
        };
        // The summary comes first; the kill line joins it.
        let i = match self.kills.iter().rposition(|k| k.pid == pid) {
            Some(i) => i,
            None => {
                if self.kills.len() >= KEPT {
                    self.kills.pop_front();
                }
                self.kills.push_back(LogKill {
                    pid,
                    ..LogKill::default()
                });
                self.kills.len() - 1
            }
        };
        let k = &mut self.kills[i];
        match line {
            OomLine::Summary {
                constraint,
                limit_cgroup,
                task_cgroup,
                ..
            } => {
                k.constraint = Some(constraint);
                k.limit_cgroup = limit_cgroup;
                k.task_cgroup = task_cgroup;
                k.summary = true;
            }
            OomLine::Killed { memcg, .. } => {
                if k.constraint.is_none() {
                    k.constraint = Some(if memcg { "memcg" } else { "global" }.into());
                }
            }
        }
    }

    /// What the log said of the kill of `pid`, taken (a later kill of a
    /// reused pid is another). The oldest such kill first.
    pub fn take(&mut self, pid: u32) -> Option<LogKill> {
        let i = self.kills.iter().position(|k| k.pid == pid)?;
        self.kills.remove(i)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    #[test]
    fn a_memcg_kill_names_the_limit_and_the_constraint() {
        let rec = "6,1234,28876539932,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),\
                   cpuset=/,mems_allowed=0,oom_memcg=/p,task_memcg=/p/c,task=vmscope-testchi,\
                   pid=28909,uid=0\n";
        assert_eq!(
            message(rec).and_then(parse),
            Some(OomLine::Summary {
                pid: 28909,
                constraint: "memcg".into(),
                limit_cgroup: Some("/p".into()),
                task_cgroup: Some("/p/c".into()),
            })
        );
        let killed = "3,1235,28876539969,-;Memory cgroup out of memory: Killed process 28909 \
                      (vmscope-testchi) total-vm:265144kB, anon-rss:65280kB, file-rss:1752kB, \
                      shmem-rss:0kB, UID:0 pgtables:176kB oom_score_adj:0\n";
        assert_eq!(
            message(killed).and_then(parse),
            Some(OomLine::Killed {
                pid: 28909,
                memcg: true
            })
        );
    }

    #[test]
    fn commas_in_node_lists_and_names_do_not_move_the_fields() {
        let s = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=0-1,3,cpuset=/a,b,\
                 mems_allowed=0,2,global_oom,task_memcg=/x,task=a,pid=9,pid=17,uid=1000";
        assert_eq!(
            parse(s),
            Some(OomLine::Summary {
                pid: 17,
                constraint: "global".into(),
                limit_cgroup: None,
                task_cgroup: Some("/x".into()),
            })
        );
        assert_eq!(
            parse("Out of memory (oom_kill_allocating_task): Killed process 5 (x) total-vm:1kB"),
            Some(OomLine::Killed {
                pid: 5,
                memcg: false
            })
        );
        assert_eq!(
            parse("Out of memory: Killed process 6 (y)"),
            Some(OomLine::Killed {
                pid: 6,
                memcg: false
            })
        );
    }

    #[test]
    fn other_lines_are_not_kills() {
        for s in [
            "oom_reaper: reaped process 28909 (vmscope-testchi), now anon-rss:0kB",
            "vmscope-testchi invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0",
            "oom-kill:constraint=CONSTRAINT_WHATEVER,pid=1",
            "Tasks state (memory values in pages):",
            "Killed process 5",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
        assert_eq!(message("no separator"), None);
    }

    /// What `echo 'oom-kill:...' > /dev/kmsg` leaves in the log: the
    /// kernel gives it LOG_USER (facility 1) whatever prefix was written,
    /// so it reads back as `12,...` (`<12>`, `<14>` with `<6>` written:
    /// `devkmsg_write` forces facility 0 to 1); it is never a kill.
    #[test]
    fn lines_written_by_processes_are_not_the_kernels() {
        let text = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,\
                    mems_allowed=0,oom_memcg=/victim,task_memcg=/victim,task=sshd,\
                    pid=1,uid=0";
        let killed = "Memory cgroup out of memory: Killed process 1 (sshd) total-vm:1kB";
        for prio in ["12", "14", "11", "8", "190", "x", ""] {
            for t in [text, killed] {
                let rec = format!("{prio},4711,28876539932,-;{t}\n");
                assert_eq!(message(&rec), None, "{rec}");
            }
        }
        // The same lines with the kernel's facility (0) and any level.
        for prio in ["0", "3", "4", "6", "7"] {
            let rec = format!("{prio},4711,28876539932,-;{text}\n");
            assert!(message(&rec).and_then(parse).is_some(), "{rec}");
            let rec = format!("{prio},4712,28876539969,c;{killed}\n SUBSYSTEM=x\n");
            assert!(message(&rec).and_then(parse).is_some(), "{rec}");
        }
    }

    fn log() -> KernelLog {
        KernelLog {
            file: File::open("/dev/null").unwrap(),
            kills: VecDeque::new(),
            buf: Vec::new(),
        }
    }

    #[test]
    fn the_kill_line_joins_its_summary_and_each_kill_is_taken_once() {
        let mut l = log();
        l.note(OomLine::Summary {
            pid: 7,
            constraint: "memcg".into(),
            limit_cgroup: Some("/p".into()),
            task_cgroup: Some("/p/c".into()),
        });
        l.note(OomLine::Killed {
            pid: 7,
            memcg: true,
        });
        // Past the rate limit: the kill line alone.
        l.note(OomLine::Killed {
            pid: 8,
            memcg: false,
        });
        let k = l.take(7).unwrap();
        assert_eq!(
            (
                k.constraint.as_deref(),
                k.limit_cgroup.as_deref(),
                k.task_cgroup.as_deref(),
                k.summary
            ),
            (Some("memcg"), Some("/p"), Some("/p/c"), true)
        );
        assert_eq!(l.take(7), None);
        let k = l.take(8).unwrap();
        assert_eq!(
            (k.constraint.as_deref(), k.limit_cgroup, k.summary),
            (Some("global"), None, false)
        );
    }

    #[test]
    fn kept_kills_are_bounded() {
        let mut l = log();
        for pid in 0..(KEPT as u32 + 10) {
            l.note(OomLine::Killed { pid, memcg: true });
        }
        assert_eq!(l.kills.len(), KEPT);
        assert_eq!(l.take(0), None);
        assert!(l.take(KEPT as u32 + 9).is_some());
    }
}
