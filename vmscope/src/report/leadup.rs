//! The lead-up to an OOM kill: what the system, the victim's cgroup and
//! the victim did in the last [`WINDOW_NS`] before it (or since the
//! recording began, when that is shorter), from the recording's raw
//! samples replayed with [`Snapshot::apply`]. A figure the recording
//! cannot give is a reason, never 0.
//!
//! The window runs from the last sample at or before `kill - WINDOW_NS`
//! to the sample that holds the victim's final counters: the victim's
//! process is read once more after it dies, and listed as ended at the
//! sample after that. When the victim was not followed, the window ends
//! at the first sample after the kill. Either way it ends shortly after
//! the kill, when the victim could do nothing but die.

use crate::model::{
    catalogue::{probe, reclaim},
    cgroup::CgroupBooks,
    oom::OomKill,
    process::ProcSample,
    recording::Recording,
    snapshot::Snapshot,
};

/// How far back the lead-up looks.
pub const WINDOW_NS: u64 = 30_000_000_000;

/// One figure of one side.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// A growth over the window, in the row's unit.
    Value(u64),
    /// Pressure stall time over a window of `window_ns`.
    Stall { us: u64, window_ns: u64 },
    /// The recording cannot give it: why.
    Unavailable(String),
    /// A growth since `from_ns`, later than the window's start (the
    /// first reading of a cgroup's memory files).
    Since { value: u64, from_ns: u64 },
    /// A word rather than a figure (`unlimited`).
    Note(String),
    /// Not a figure of this side.
    Blank,
}

/// One figure: the system's, the cgroup's and the victim's.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub what: &'static str,
    /// `ns`, `pages`, `count` or `stall`.
    pub unit: &'static str,
    pub system: Cell,
    pub cgroup: Cell,
    pub victim: Cell,
}

/// The lead-up to one kill.
#[derive(Clone, Debug, PartialEq)]
pub struct LeadUp {
    /// The window, in ns since the recording began.
    pub from_ns: u64,
    pub to_ns: u64,
    /// The victim's cgroup, as the kill or the samples name it.
    pub cgroup: Option<String>,
    pub rows: Vec<Row>,
}

/// The sample indices the window is read at: its start and its end.
struct Span {
    start: usize,
    end: usize,
    /// The window reaches back to the recording's start: processes' and
    /// cgroups' counts, which start at zero there, are counted from zero
    /// (the first sample may already hold some).
    whole: bool,
}

fn span(rec: &Recording, kill: &OomKill) -> Option<Span> {
    let s = &rec.samples;
    let last = s.len().checked_sub(1)?;
    let from = kill.elapsed_ns.saturating_sub(WINDOW_NS);
    let start = s.iter().rposition(|x| x.elapsed_ns <= from).unwrap_or(0);
    let end = s
        .iter()
        .position(|x| x.elapsed_ns >= kill.elapsed_ns)
        .unwrap_or(last)
        .max(start);
    let seen = |pid| {
        s[start..]
            .iter()
            .any(|x| x.procs.iter().any(|p| p.pid == pid))
    };
    let end = match kill.pid {
        Some(pid) if seen(pid) => s
            .iter()
            .enumerate()
            .skip(end + 1)
            .find(|(_, x)| x.exited.contains(&pid))
            .map_or(last, |(k, _)| k - 1),
        _ => end,
    };
    let whole = s.first().is_some_and(|f| from <= f.elapsed_ns);
    Some(Span { start, end, whole })
}

/// The snapshots at the window's start and end.
fn replay(rec: &Recording, sp: &Span) -> [Snapshot; 2] {
    let mut snap = Snapshot::default();
    let mut start = Snapshot::default();
    for (i, s) in rec.samples.iter().enumerate().take(sp.end + 1) {
        snap.apply(s);
        if i == sp.start {
            start = snap.clone();
        }
    }
    [start, snap]
}

/// Why the recording has no figure from a probe, if it has none.
fn missing(rec: &Recording, name: &str) -> Option<String> {
    match rec.header.probes.iter().find(|p| p.probe == name) {
        Some(p) if p.usable() => None,
        Some(p) => Some(format!(
            "{name} not attached: {}",
            p.reason.as_deref().unwrap_or("unknown")
        )),
        None => Some(format!("{name} not attached")),
    }
}

fn growth(then: u64, now: u64) -> Cell {
    now.checked_sub(then).map_or_else(
        || Cell::Unavailable("the counter went backwards".into()),
        Cell::Value,
    )
}

/// A process or cgroup counter: `now - then` (`then` absent: counted from
/// zero), unless `probe` is missing.
fn counted(
    rec: &Recording,
    probe: Option<&str>,
    then: Option<&ProcSample>,
    now: Result<&ProcSample, &String>,
    get: impl Fn(&ProcSample) -> u64,
) -> Cell {
    if let Some(why) = probe.and_then(|p| missing(rec, p)) {
        return Cell::Unavailable(why);
    }
    match now {
        Ok(now) => growth(then.map_or(0, &get), get(now)),
        Err(why) => Cell::Unavailable(why.clone()),
    }
}

/// The lead-up to `kill` in `rec`.
pub fn lead_up(rec: &Recording, kill: &OomKill) -> LeadUp {
    let Some(sp) = span(rec, kill) else {
        return LeadUp {
            from_ns: 0,
            to_ns: 0,
            cgroup: kill.cgroup.clone(),
            rows: Vec::new(),
        };
    };
    let [start, end] = replay(rec, &sp);
    let victim = victim(rec, kill, &sp, &end);
    let cg_id = victim
        .as_ref()
        .ok()
        .map(|p| p.cgroup)
        .filter(|&id| id != 0)
        .or_else(|| {
            let path = kill.cgroup.as_deref()?;
            let found = end
                .cgroups
                .iter()
                .find(|c| c.1.path.as_deref() == Some(path));
            found.map(|c| *c.0)
        });
    let cgroup = kill
        .cgroup
        .clone()
        .or_else(|| cg_id.and_then(|id| end.cgroups.get(&id)?.path.clone()));
    let cg_now: Result<&ProcSample, String> = match cg_id.and_then(|id| end.cgroups.get(&id)) {
        Some(c) => Ok(&c.counts),
        None if rec.header.cgroup_scheme.is_none() => {
            Err("no cgroup attribution in this recording".into())
        }
        None => Err("the victim's cgroup is unknown".into()),
    };
    let cg_then = cg_id
        .filter(|_| !sp.whole)
        .and_then(|id| start.cgroups.get(&id))
        .map(|c| &c.counts);
    // A victim first seen in the window counted from zero.
    let v_then = kill
        .pid
        .filter(|_| !sp.whole)
        .filter(|&pid| {
            !rec.samples[sp.start + 1..=sp.end]
                .iter()
                .any(|s| s.exited.contains(&pid))
        })
        .and_then(|pid| start.procs.get(&pid));
    let sides = Sides {
        rec,
        cg_then,
        cg_now: cg_now.as_ref().copied(),
        v_then,
        v_now: victim.as_ref(),
    };
    let books = books(rec, cg_id, &sp);
    let mut rows = system_rows(rec, &start, &end, &books, &sides);
    rows.extend(sides.counts());
    rows.extend(books_rows(&books));
    LeadUp {
        from_ns: rec.samples[sp.start].elapsed_ns,
        to_ns: rec.samples[sp.end].elapsed_ns,
        cgroup,
        rows,
    }
}

/// The victim's counters at the window's end, or why there are none.
fn victim(
    rec: &Recording,
    kill: &OomKill,
    sp: &Span,
    end: &Snapshot,
) -> Result<ProcSample, String> {
    let Some(pid) = kill.pid else {
        return Err("the kernel's record names no pid".into());
    };
    if let Some(p) = end.procs.get(&pid) {
        return Ok(p.clone());
    }
    let seen = rec.samples[..=sp.end]
        .iter()
        .any(|s| s.procs.iter().any(|p| p.pid == pid));
    Err(if seen {
        format!("pid {pid} had ended before the kill")
    } else {
        format!("pid {pid} was not followed (outside the recording's scope)")
    })
}

/// The cgroup's and the victim's counters, before and after.
struct Sides<'a> {
    rec: &'a Recording,
    cg_then: Option<&'a ProcSample>,
    cg_now: Result<&'a ProcSample, &'a String>,
    v_then: Option<&'a ProcSample>,
    v_now: Result<&'a ProcSample, &'a String>,
}

impl Sides<'_> {
    /// The cgroup's and the victim's growth of `get`.
    fn pair(&self, probe: Option<&str>, get: impl Fn(&ProcSample) -> u64) -> (Cell, Cell) {
        (
            counted(self.rec, probe, self.cg_then, self.cg_now, &get),
            counted(self.rec, probe, self.v_then, self.v_now, get),
        )
    }

    /// Rows of counts only the cgroup and the victim have.
    fn counts(&self) -> Vec<Row> {
        let (cgroup, victim) = self.pair(None, |p| p.faults.total());
        vec![Row {
            what: "page faults (vmscope's count)",
            unit: "count",
            system: Cell::Blank,
            cgroup,
            victim,
        }]
    }
}

/// The cgroup's books at the last reading at or before the window's start
/// and at or before its end, with when each was read.
struct Books<'a> {
    then: Option<(u64, &'a CgroupBooks)>,
    now: Option<(u64, &'a CgroupBooks)>,
    /// Their first reading.
    first: Option<(u64, &'a CgroupBooks)>,
    /// Why there are none at all.
    none: Option<String>,
}

fn books<'a>(rec: &'a Recording, id: Option<u64>, sp: &Span) -> Books<'a> {
    let mut b = Books {
        then: None,
        now: None,
        first: None,
        none: None,
    };
    let Some(id) = id else {
        b.none = Some("the victim's cgroup is unknown".into());
        return b;
    };
    for (i, s) in rec.samples.iter().enumerate().take(sp.end + 1) {
        let found = s.cgroups.iter().find(|c| c.id == id);
        if let Some(books) = found.and_then(|c| c.books.as_ref()) {
            if i <= sp.start {
                b.then = Some((s.elapsed_ns, books));
            }
            b.now = Some((s.elapsed_ns, books));
            b.first.get_or_insert((s.elapsed_ns, books));
        }
    }
    if b.now.is_none() {
        b.none = Some("its memory files were never read".into());
    }
    b
}

impl Books<'_> {
    /// The growth of a counter in the books, or why it is unknown.
    fn growth(&self, what: &str, get: impl Fn(&CgroupBooks) -> Option<u64>) -> Cell {
        if let Some(why) = &self.none {
            return Cell::Unavailable(why.clone());
        }
        let Some((now_ns, now)) = self.now else {
            return Cell::Unavailable("its memory files were never read".into());
        };
        // Read first within the window: growth since that reading.
        let (then, since) = match (self.then, self.first) {
            (Some((_, t)), _) => (t, None),
            (None, Some((ns, f))) if ns < now_ns => (f, Some(ns)),
            (None, _) => {
                return Cell::Unavailable(format!(
                    "its memory files were read only once in the window, at {:.3} s",
                    now_ns as f64 / 1e9
                ));
            }
        };
        match (get(then), get(now), since) {
            (Some(a), Some(b), None) => growth(a, b),
            (Some(a), Some(b), Some(from_ns)) => match growth(a, b) {
                Cell::Value(value) => Cell::Since { value, from_ns },
                c => c,
            },
            _ => Cell::Unavailable(format!("{what} not in its memory files")),
        }
    }

    /// A figure of the last reading, or why there is none.
    fn last(&self, get: impl Fn(&CgroupBooks) -> Cell) -> Cell {
        match (&self.none, self.now) {
            (Some(why), _) => Cell::Unavailable(why.clone()),
            (None, Some((_, n))) => get(n),
            (None, None) => Cell::Unavailable("its memory files were never read".into()),
        }
    }
}

/// A PSI line's total stall time, `full` or `some`.
fn stall_us(p: Option<crate::procstat::Psi>, full: bool) -> Option<u64> {
    let p = p?;
    if full {
        p.full.map(|l| l.total_us)
    } else {
        Some(p.some.total_us)
    }
}

/// PSI memory `some` and `full`: the system's and the cgroup's.
fn psi_rows(rec: &Recording, start: &Snapshot, end: &Snapshot, books: &Books) -> Vec<Row> {
    let window_ns = end.elapsed_ns.saturating_sub(start.elapsed_ns);
    let v1 = rec
        .header
        .cgroup_scheme
        .as_ref()
        .is_some_and(|s| s.hierarchy.starts_with("v1"));
    let system = |full: bool| match (stall_us(start.psi, full), stall_us(end.psi, full)) {
        (Some(a), Some(b)) => match b.checked_sub(a) {
            Some(us) => Cell::Stall { us, window_ns },
            None => Cell::Unavailable("the counter went backwards".into()),
        },
        _ => Cell::Unavailable(
            rec.totals
                .vm
                .unavailable
                .get("psi")
                .cloned()
                .unwrap_or_else(|| "/proc/pressure/memory has no such line".into()),
        ),
    };
    let cgroup = |full: bool| {
        if v1 {
            return Cell::Unavailable("cgroup v1 has no memory.pressure".into());
        }
        match books.growth("memory.pressure", |b| stall_us(b.psi, full)) {
            Cell::Value(us) => Cell::Stall {
                us,
                window_ns: books_window(books),
            },
            Cell::Since { value, from_ns } => Cell::Stall {
                us: value,
                window_ns: books.now.map_or(0, |n| n.0.saturating_sub(from_ns)),
            },
            c => c,
        }
    };
    [("PSI memory some", false), ("PSI memory full", true)]
        .into_iter()
        .map(|(what, full)| Row {
            what,
            unit: "stall",
            system: system(full),
            cgroup: cgroup(full),
            victim: Cell::Blank,
        })
        .collect()
}

/// The figures the system has besides PSI, with the cgroup's and the
/// victim's.
fn system_rows(
    rec: &Recording,
    start: &Snapshot,
    end: &Snapshot,
    books: &Books,
    sides: &Sides,
) -> Vec<Row> {
    let hist = |name: &str| -> Cell {
        if let Some(why) = rec.totals.vm.unavailable.get(&format!("histogram {name}")) {
            return Cell::Unavailable(why.clone());
        }
        let sum = |s: &Snapshot| s.hists.get(name).map_or(0, |h| h.sum_ns);
        growth(sum(start), sum(end))
    };
    let vm = |key: &str| -> Cell {
        match (start.vmstat.get(key), end.vmstat.get(key)) {
            (Some(a), Some(b)) => growth(a, b),
            _ => Cell::Unavailable(format!("/proc/vmstat has no {key}")),
        }
    };
    let stat = |key: &'static str| books.growth(key, move |b| b.stat.get(key).copied());
    let (cg_major, v_major) = sides.pair(Some(probe::MAJOR_FAULTS), |p| p.major_faults);
    let (cg_out, v_out) = sides.pair(Some(probe::SWAP), |p| p.swap_out_pages);
    let (cg_in, v_in) = sides.pair(Some(probe::SWAP), |p| p.swap_in_pages);
    let row = |what, unit, system, cgroup, victim| Row {
        what,
        unit,
        system,
        cgroup,
        victim,
    };
    let mut rows = psi_rows(rec, start, end, books);
    rows.extend(reclaim::STALLS.iter().map(|k| {
        let (cgroup, victim) = sides.pair(None, |p| k.ns.get(p));
        row(k.what, "ns", hist(k.hist), cgroup, victim)
    }));
    rows.extend([
        row(
            "anon refaults",
            "pages",
            vm("workingset_refault_anon"),
            stat("workingset_refault_anon"),
            Cell::Blank,
        ),
        row(
            "file refaults",
            "pages",
            vm("workingset_refault_file"),
            stat("workingset_refault_file"),
            Cell::Blank,
        ),
        row("swap-out", "pages", vm("pswpout"), cg_out, v_out),
        row("swap-in", "pages", vm("pswpin"), cg_in, v_in),
        row("major faults", "count", vm("pgmajfault"), cg_major, v_major),
    ]);
    rows
}

/// The span between the cgroup's two readings.
fn books_window(b: &Books) -> u64 {
    match (b.then, b.now) {
        (Some(t), Some(n)) => n.0.saturating_sub(t.0),
        _ => 0,
    }
}

/// The cgroup's own OOM books: its OOM kills and limit hits over the
/// window and so far, and its usage against its limit at the last reading.
fn books_rows(b: &Books) -> Vec<Row> {
    let event = |key: &'static str| b.growth(key, move |x| x.events.get(key).copied());
    let row = |what, unit, cgroup| Row {
        what,
        unit,
        system: Cell::Blank,
        cgroup,
        victim: Cell::Blank,
    };
    // v1 counts limit hits in memory.failcnt, v2 in memory.events `max`.
    let hits = if b.now.is_some_and(|n| n.1.events.contains_key("failcnt")) {
        "failcnt"
    } else {
        "max"
    };
    let known = |v: Option<u64>, what: &str| {
        v.map_or_else(
            || Cell::Unavailable(format!("no {what} in its memory files")),
            Cell::Value,
        )
    };
    vec![
        row("OOM kills (the cgroup's books)", "count", event("oom_kill")),
        row(
            "OOM kills ever (the cgroup's books, last reading)",
            "count",
            b.last(|n| known(n.events.get("oom_kill").copied(), "oom_kill")),
        ),
        row("limit hits (v1 failcnt, v2 max)", "count", event(hits)),
        row(
            "usage (last reading)",
            "bytes",
            b.last(|n| known(n.usage_bytes, "usage")),
        ),
        row(
            "limit",
            "bytes",
            b.last(|n| {
                n.limit_bytes
                    .map_or_else(|| Cell::Note("unlimited".into()), Cell::Value)
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real recording (see `tests/tests/report_oom.rs`): a child in a
    /// 64 MiB memory cgroup that may not swap idles, then touches 256 MiB
    /// and is OOM-killed.
    fn fixture() -> Recording {
        let text = include_str!("../../../tests/fixtures/oom.recording.json");
        crate::record::from_str(text).expect("the fixture is a recording")
    }

    fn row<'a>(l: &'a LeadUp, what: &str) -> &'a Row {
        l.rows
            .iter()
            .find(|r| r.what == what)
            .unwrap_or_else(|| panic!("no row {what}: {l:#?}"))
    }

    /// The victim's last values, read from the raw samples directly.
    fn last_of(rec: &Recording, pid: u32) -> ProcSample {
        rec.samples
            .iter()
            .flat_map(|s| &s.procs)
            .rfind(|p| p.pid == pid)
            .cloned()
            .unwrap_or_else(|| panic!("pid {pid} never sampled"))
    }

    #[test]
    fn the_lead_up_adds_up_the_raw_samples_of_system_cgroup_and_victim() {
        let rec = fixture();
        let kill = &rec.oom_kills[0];
        let pid = kill.pid.expect("a pid");
        let l = lead_up(&rec, kill);
        let (first, last) = (&rec.samples[0], rec.samples.last().expect("samples"));
        // Shorter than the window: all of it, to the victim's final reading.
        assert_eq!((l.from_ns, l.to_ns), (first.elapsed_ns, last.elapsed_ns));
        assert_eq!(l.cgroup.as_deref(), Some("/vmscope-test-oom"));
        let victim = last_of(&rec, pid);
        let memcg_ns = reclaim::MEMCG.ns.get(&victim);
        assert!(memcg_ns > 0, "{victim:?}");
        let reclaim = row(&l, reclaim::MEMCG.what);
        assert_eq!(reclaim.victim, Cell::Value(memcg_ns));
        // The cgroup holds the victim and an idle child that ended earlier.
        let Cell::Value(cg) = reclaim.cgroup else {
            panic!("{reclaim:?}")
        };
        assert!(cg >= memcg_ns, "{cg}");
        let psi = |s: &crate::model::sample::Sample| s.psi.expect("PSI").some.total_us;
        assert_eq!(
            row(&l, "PSI memory some").system,
            Cell::Stall {
                us: psi(last) - psi(first),
                window_ns: last.elapsed_ns - first.elapsed_ns
            }
        );
        let refault = |s: &crate::model::sample::Sample| {
            s.vmstat.get("workingset_refault_file").expect("vmstat")
        };
        assert_eq!(
            row(&l, "file refaults").system,
            Cell::Value(refault(last) - refault(first))
        );
        // v1: no memory.pressure, said so.
        assert!(
            matches!(&row(&l, "PSI memory some").cgroup, Cell::Unavailable(w) if w.contains("v1")),
            "{l:#?}"
        );
        // The cgroup's books, first read inside the window: its OOM kill.
        assert!(
            matches!(
                row(&l, "OOM kills (the cgroup's books)").cgroup,
                Cell::Since { value: 1, .. }
            ),
            "{l:#?}"
        );
        assert_eq!(row(&l, "limit").cgroup, Cell::Value(64 << 20));
    }

    #[test]
    fn what_the_recording_lacks_is_unavailable_with_a_reason_never_zero() {
        let mut rec = fixture();
        for s in &mut rec.samples {
            s.psi = None;
        }
        rec.totals
            .vm
            .unavailable
            .insert("psi".into(), "PSI is off".into());
        for p in &mut rec.header.probes {
            if p.probe == probe::SWAP {
                p.attached = false;
                p.deferred = false;
                p.reason = Some("gone".into());
            }
        }
        let mut kill = rec.oom_kills[0].clone();
        let l = lead_up(&rec, &kill);
        assert_eq!(
            row(&l, "PSI memory full").system,
            Cell::Unavailable("PSI is off".into())
        );
        let swap = row(&l, "swap-out");
        for c in [&swap.cgroup, &swap.victim] {
            assert!(
                matches!(c, Cell::Unavailable(w) if w.contains("kmem:rss_stat")),
                "{c:?}"
            );
        }
        // A victim outside the scope: its figures are unavailable, and
        // its cgroup found by path.
        kill.pid = Some(u32::MAX);
        let l = lead_up(&rec, &kill);
        let r = row(&l, "memcg reclaim stall");
        assert!(
            matches!(&r.victim, Cell::Unavailable(w) if w.contains("not followed")),
            "{r:?}"
        );
        assert!(matches!(r.cgroup, Cell::Value(v) if v > 0), "{r:?}");
        kill.pid = None;
        kill.cgroup = None;
        let r = row(&lead_up(&rec, &kill), "memcg reclaim stall").clone();
        assert!(
            matches!(&r.victim, Cell::Unavailable(w) if w.contains("no pid")),
            "{r:?}"
        );
        assert!(
            matches!(&r.cgroup, Cell::Unavailable(w) if w.contains("unknown")),
            "{r:?}"
        );
    }
}
