//! What the tools said about cgroups, read from their output: the
//! `cgroup` labels of a `/metrics` scrape, the per-cgroup faults a
//! `record --format jsonl` stream charges (folded the way vmscope folds
//! them), and the cgroup rows of `top --batch --cgroups`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

/// The family of OOM kills by victim cgroup has its own bound (64 labels
/// and `other`); the per-cgroup families are the other `vmscope_cgroup_*`.
const OOM_FAMILY: &str = "vmscope_cgroup_oom_kills_total";

/// The distinct `cgroup` label values of one scrape's per-cgroup families.
pub fn cgroup_labels(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter(|l| l.starts_with("vmscope_cgroup_"))
        .filter(|l| l.split('{').next() != Some(OOM_FAMILY))
        .filter_map(|l| label(l, "cgroup"))
        .collect()
}

/// The value of label `name` in one exposition line, unescaped.
fn label(line: &str, name: &str) -> Option<String> {
    let labels = line.split_once('{')?.1;
    let mut rest = labels;
    loop {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        if key.trim_start_matches(',').trim() == name {
            return Some(value);
        }
        rest = &after[end + 1..];
    }
}

/// Every `cgroup#ID` name (how vmscope names a cgroup it could not find)
/// in `text`.
pub fn names_by_id(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("cgroup#") {
        let after = &rest[i + "cgroup#".len()..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        out.insert(format!("cgroup#{digits}"));
        rest = after;
    }
    out
}

/// What a `record --format jsonl` stream says about cgroups.
#[derive(Debug, Default)]
pub struct RecordBooks {
    /// The header's `cgroup_scheme.mount`.
    pub mount: Option<String>,
    pub samples: usize,
    /// Each cgroup's path, as the samples named it.
    pub paths: HashMap<u64, String>,
    /// Cgroups listed in a sample or keyed by a process but never named.
    pub seen: BTreeSet<u64>,
    /// The faults charged to each cgroup: each process's growth, charged to
    /// the cgroup it was in at the sample.
    pub faults: HashMap<u64, u64>,
    /// Process rows without a cgroup, and with counters that went back.
    pub unkeyed_rows: u64,
    pub backwards: u64,
    /// The final line, when the stream has one.
    pub recording: Option<Value>,
}

impl RecordBooks {
    /// Reads the stream, folding the samples in order.
    pub fn read(text: &str) -> RecordBooks {
        let mut b = RecordBooks::default();
        let mut last: HashMap<u64, u64> = HashMap::new();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            match v["type"].as_str() {
                Some("header") => {
                    b.mount = v["cgroup_scheme"]["mount"].as_str().map(str::to_string)
                }
                Some("sample") => b.fold(&v, &mut last),
                Some("recording") => b.recording = Some(v),
                _ => {}
            }
        }
        b
    }

    fn fold(&mut self, sample: &Value, last: &mut HashMap<u64, u64>) {
        self.samples += 1;
        // Ended by the previous sample: a pid in `procs` now is a new process.
        for pid in sample["exited"].as_array().into_iter().flatten() {
            if let Some(pid) = pid.as_u64() {
                last.remove(&pid);
            }
        }
        for p in sample["procs"].as_array().into_iter().flatten() {
            let (Some(pid), total) = (p["pid"].as_u64(), faults(&p["faults"])) else {
                continue;
            };
            let was = last.insert(pid, total).unwrap_or(0);
            let Some(cg) = p["cgroup"].as_u64() else {
                self.unkeyed_rows += 1;
                continue;
            };
            self.seen.insert(cg);
            match total.checked_sub(was) {
                Some(d) => *self.faults.entry(cg).or_default() += d,
                None => self.backwards += 1,
            }
        }
        for c in sample["cgroups"].as_array().into_iter().flatten() {
            let Some(id) = c["id"].as_u64() else { continue };
            self.seen.insert(id);
            if let Some(path) = c["path"].as_str() {
                self.paths.insert(id, path.to_string());
            }
        }
    }

    /// The cgroups seen that were never named (a reader shows them as
    /// `cgroup#ID`).
    pub fn unnamed(&self) -> impl Iterator<Item = u64> + '_ {
        self.seen
            .iter()
            .copied()
            .filter(|id| !self.paths.contains_key(id))
    }

    /// Rows of the final line's `cgroups` without a path.
    pub fn unnamed_in_totals(&self) -> usize {
        self.recording
            .as_ref()
            .and_then(|r| r["cgroups"].as_array())
            .map_or(0, |a| a.iter().filter(|c| c["path"].is_null()).count())
    }
}

/// Every fault a process row counts (the same sum as vmscope's
/// `FaultCounters::total`): exception-path faults by class, unclassified
/// ones, and those taken through get_user_pages. Zeroes are left out of
/// the stream.
pub fn faults(f: &Value) -> u64 {
    let sum = |k: &str| {
        f[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .sum::<u64>()
    };
    sum("user")
        + sum("kernel")
        + f["unclassified"].as_u64().unwrap_or(0)
        + f["gup"].as_u64().unwrap_or(0)
}

/// What `top --batch --cgroups` printed.
#[derive(Debug, Default)]
pub struct TopBooks {
    pub snapshots: usize,
    /// Distinct cgroup rows below `prefix`.
    pub soak_rows: BTreeSet<String>,
    /// Cgroup rows shown by id.
    pub by_id: BTreeSet<String>,
}

impl TopBooks {
    pub fn read(text: &str, prefix: &str) -> TopBooks {
        let mut b = TopBooks::default();
        for l in text.lines() {
            if l.starts_with("vmscope top ") {
                b.snapshots += 1;
            }
            let first = l.split_whitespace().next().unwrap_or_default();
            if first.starts_with(prefix) {
                b.soak_rows.insert(first.to_string());
            }
            b.by_id.extend(names_by_id(l));
        }
        b
    }
}

/// Totals of the soak's cgroups as the recording charged them, per group
/// of cgroups (e.g. by how their process was placed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub cgroups: u64,
    /// Named by the right path.
    pub named: u64,
    /// Seen (a process keyed by it, or listed) but never named.
    pub unnamed: u64,
    /// Named by another path.
    pub misnamed: u64,
    /// Not in the recording at all.
    pub absent: u64,
    /// Charged within the tolerance of what its process did.
    pub agree: u64,
    pub recorded_faults: u64,
    pub faults: u64,
    pub before_move: u64,
}

/// How far the recorded faults may be from the kernel's books, as a share.
pub const FAULT_TOLERANCE: f64 = 0.02;

/// Whether `recorded` is what the cgroup's process did: from its faults in
/// the cgroup (`faults - before_move`) to all of them (vmscope charges the
/// interval a process moves in to its new cgroup), give or take
/// [`FAULT_TOLERANCE`].
pub fn agrees(recorded: u64, faults: u64, before_move: u64) -> bool {
    let lo = faults.saturating_sub(before_move) as f64 * (1.0 - FAULT_TOLERANCE);
    let hi = faults as f64 * (1.0 + FAULT_TOLERANCE);
    (lo..=hi).contains(&(recorded as f64))
}

impl Tally {
    /// Adds one soak cgroup: its id and path, what its process did, and
    /// what the recording said.
    pub fn add(&mut self, id: u64, path: &str, faults: u64, before_move: u64, rec: &RecordBooks) {
        self.cgroups += 1;
        match rec.paths.get(&id) {
            Some(p) if p == path => self.named += 1,
            Some(_) => self.misnamed += 1,
            None if rec.seen.contains(&id) => self.unnamed += 1,
            None => self.absent += 1,
        }
        let recorded = rec.faults.get(&id).copied().unwrap_or(0);
        self.agree += u64::from(agrees(recorded, faults, before_move));
        self.recorded_faults += recorded;
        self.faults += faults;
        self.before_move += before_move;
    }

    /// Whether the sum agrees (see [`agrees`]).
    pub fn sum_agrees(&self) -> bool {
        agrees(self.recorded_faults, self.faults, self.before_move)
    }
}

/// Tallies by key, in key order, and all together.
pub fn tally_all<K: Ord>(rows: BTreeMap<K, Tally>) -> (BTreeMap<K, Tally>, Tally) {
    let mut all = Tally::default();
    for t in rows.values() {
        all.cgroups += t.cgroups;
        all.named += t.named;
        all.unnamed += t.unnamed;
        all.misnamed += t.misnamed;
        all.absent += t.absent;
        all.agree += t.agree;
        all.recorded_faults += t.recorded_faults;
        all.faults += t.faults;
        all.before_move += t.before_move;
    }
    (rows, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cgroup_labels_leave_out_the_oom_family_and_unescape() {
        let body = "# HELP vmscope_cgroup_page_faults_total x\n\
            vmscope_cgroup_page_faults_total{cgroup=\"/a\"} 5\n\
            vmscope_cgroup_madvise_calls_total{cgroup=\"/b\\\"q\",behavior=\"free\"} 1\n\
            vmscope_cgroup_reclaim_stall_seconds_total{kind=\"direct\",cgroup=\"/c\"} 0\n\
            vmscope_cgroup_oom_kills_total{cgroup=\"/d\"} 1\n\
            vmscope_process_page_faults_total{pid=\"1\",cgroup=\"/e\"} 3\n";
        let l = cgroup_labels(body);
        assert_eq!(
            l.into_iter().collect::<Vec<_>>(),
            ["/a", "/b\"q", "/c"].map(String::from)
        );
    }

    #[test]
    fn names_by_id_are_found_anywhere() {
        let t = "x{cgroup=\"cgroup#123\"} 1\ncgroup#7  2 0\n/cgroup#";
        assert_eq!(
            names_by_id(t).into_iter().collect::<Vec<_>>(),
            ["cgroup#", "cgroup#123", "cgroup#7"].map(String::from)
        );
    }

    /// A process moves from cgroup 1 to 2 between samples: its growth goes
    /// to where it is at each sample; a reused pid starts from zero after
    /// `exited`; a cgroup listed with a null path is seen but unnamed.
    #[test]
    fn the_stream_is_folded_as_vmscope_folds_it() {
        let text = [
            r#"{"type":"header","cgroup_scheme":{"hierarchy":"v2","mount":"/sys/fs/cgroup"}}"#,
            r#"{"type":"sample","procs":[{"pid":10,"cgroup":1,"faults":{"user":[3,1],"gup":1}}],"cgroups":[{"id":1,"path":"/a"}]}"#,
            r#"{"type":"sample","procs":[{"pid":10,"cgroup":2,"faults":{"user":[5,1],"kernel":[2],"gup":1}}],"cgroups":[{"id":2,"path":null}]}"#,
            r#"{"type":"sample","exited":[10],"procs":[{"pid":10,"cgroup":1,"faults":{"unclassified":4}}]}"#,
            r#"{"type":"recording","cgroups":[{"id":2,"path":null},{"id":1,"path":"/a"}]}"#,
        ]
        .join("\n");
        let b = RecordBooks::read(&text);
        assert_eq!(b.mount.as_deref(), Some("/sys/fs/cgroup"));
        assert_eq!(b.samples, 3);
        assert_eq!(b.faults[&1], 5 + 4);
        assert_eq!(b.faults[&2], 4);
        assert_eq!(b.unnamed().collect::<Vec<_>>(), [2]);
        assert_eq!(b.unnamed_in_totals(), 1);
        let mut t = Tally::default();
        t.add(1, "/a", 9, 0, &b);
        t.add(2, "/b", 4, 0, &b);
        t.add(3, "/c", 100, 2, &b);
        assert_eq!((t.named, t.unnamed, t.absent, t.agree), (1, 1, 1, 2));
        assert!(!t.sum_agrees(), "13 of 113 recorded");
    }

    #[test]
    fn faults_before_the_move_may_go_either_way() {
        assert!(agrees(1000, 1010, 10));
        assert!(agrees(1010, 1010, 10));
        assert!(agrees(980, 1010, 10), "2% below the faults in the cgroup");
        assert!(!agrees(970, 1010, 10));
        assert!(!agrees(1040, 1010, 10));
        assert!(!agrees(0, 1010, 10));
    }

    #[test]
    fn top_rows_below_the_prefix_and_by_id() {
        let t = "vmscope top  6.18\nCGROUP  PROCS\n/vmscope-soak/c00001  1  3\n\
                 cgroup#99  1  2\n/other  1 1\nvmscope top  6.18\n/vmscope-soak/c00001 0 0\n";
        let b = TopBooks::read(t, "/vmscope-soak/");
        assert_eq!(b.snapshots, 2);
        assert_eq!(b.soak_rows.len(), 1);
        assert_eq!(b.by_id.into_iter().collect::<Vec<_>>(), ["cgroup#99"]);
    }
}
