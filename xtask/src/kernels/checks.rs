//! Reading the guest's console back and judging each output against its
//! ground truth: the child's rusage, the exact madvise calls it made, the
//! guest's /proc/vmstat, and doctor's own verdicts.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::guest;

/// The outputs a boot printed, by section name.
#[derive(Debug, Default)]
pub struct Console {
    /// `uname -r` of the guest, once it started.
    pub release: Option<String>,
    /// name -> (text, exit status).
    pub sections: BTreeMap<String, (String, i32)>,
    /// The script ran to its end.
    pub done: bool,
}

pub fn parse(text: &str) -> Console {
    let mut c = Console::default();
    let mut open: Option<(String, String)> = None;
    for raw in text.split('\n') {
        let mut line = raw.trim_end_matches('\r');
        // The firmware's screen-clearing escapes can share a marker's line.
        if let Some(at) = line.find("@@vmscope:") {
            line = &line[at..];
        }
        if let Some(rest) = line.strip_prefix("@@vmscope:start ") {
            c.release = Some(rest.trim().to_string());
        } else if let Some(name) = line.strip_prefix("@@vmscope:begin ") {
            open = Some((name.trim().to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix("@@vmscope:end ") {
            let mut f = rest.split_whitespace();
            let (name, rc) = (f.next().unwrap_or_default(), f.next().unwrap_or("-1"));
            if let Some((open_name, body)) = open.take()
                && open_name == name
            {
                c.sections
                    .insert(open_name, (body, rc.parse().unwrap_or(-1)));
            }
        } else if line == "@@vmscope:done" {
            c.done = true;
        } else if let Some((_, body)) = open.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    c
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub figure: String,
}

/// What one kernel showed.
#[derive(Debug)]
pub struct KernelResult {
    pub kernel: String,
    pub cgroup: String,
    pub attach_kinds: BTreeMap<String, String>,
    pub rmap_method: String,
    pub checks: Vec<Check>,
}

impl KernelResult {
    pub fn ok(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.ok)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "kernel": self.kernel,
            "cgroup": self.cgroup,
            "attach_kinds": self.attach_kinds,
            "rmap_method": self.rmap_method,
            "checks": self.checks.iter().map(|c| json!({
                "name": c.name, "ok": c.ok, "figure": c.figure,
            })).collect::<Vec<_>>(),
        })
    }
}

fn check(name: &'static str, ok: bool, figure: impl Into<String>) -> Check {
    Check {
        name,
        ok,
        figure: figure.into(),
    }
}

fn within(got: u64, want: u64, pct: f64) -> bool {
    want > 0 && (got as f64 - want as f64).abs() <= want as f64 * pct / 100.0
}

/// A recording's entry for `name` in its probe list.
fn probe_entry<'a>(rec: &'a Value, name: &str) -> Option<&'a Value> {
    rec["probes"]
        .as_array()?
        .iter()
        .find(|p| p["probe"] == name)
}

fn u(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

fn vmstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

impl Console {
    fn text(&self, name: &str) -> Option<&str> {
        self.sections.get(name).map(|(t, _)| t.as_str())
    }

    fn json(&self, name: &str) -> Option<Value> {
        serde_json::from_str(self.text(name)?.trim()).ok()
    }

    /// A recording, or why there is none (the record command's status and
    /// the tail of its stderr).
    fn recording(&self, name: &str) -> Result<Value, String> {
        match self.sections.get(name) {
            Some((_, 0)) => self
                .json(&format!("{name}.json"))
                .ok_or_else(|| format!("{name}.json missing or not JSON")),
            Some((_, rc)) => Err(format!(
                "record exited {rc}: {}",
                self.text(&format!("{name}.stderr"))
                    .unwrap_or_default()
                    .trim()
                    .replace('\n', " | ")
            )),
            None => Err(format!("{name} did not run (the guest stopped before it)")),
        }
    }

    fn delta(&self, before: &str, after: &str, key: &str) -> u64 {
        let get = |n: &str| vmstat(self.text(n).unwrap_or_default()).get(key).copied();
        match (get(before), get(after)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

/// Every check on one boot's console.
pub fn judge(c: &Console) -> KernelResult {
    let doctor = c.json("doctor").unwrap_or(Value::Null);
    let mut kinds = BTreeMap::new();
    for k in doctor["attach_kinds"].as_array().into_iter().flatten() {
        let name = k["kind"].as_str().unwrap_or("?").to_string();
        let verdict = if k["works"].as_bool() == Some(true) {
            "works".to_string()
        } else {
            format!("refused: {}", k["error"].as_str().unwrap_or("unknown"))
        };
        kinds.insert(name, verdict);
    }
    let mut checks = vec![check(
        "boot",
        c.release.is_some() && c.done,
        match (&c.release, c.done) {
            (Some(r), true) => format!("{r}: the suite ran to its end"),
            (Some(r), false) => format!("{r}: the guest stopped before the end of the suite"),
            (None, _) => "the guest never started the suite".into(),
        },
    )];
    checks.push(doctor_check(c, &doctor, &kinds));
    checks.push(faults_check(c));
    checks.push(gup_check(c));
    checks.push(fault_latency_check(c, &kinds));
    checks.push(madvise_check(c));
    checks.push(perf_check(c));
    checks.push(top_check(c));
    checks.push(serve_check(c));
    checks.push(swap_check(c));
    checks.push(short_lived_swap_check(c));
    checks.push(fork_check(c));
    checks.push(swap_tiers_check(c));
    checks.push(thp_sizes_check(c));
    checks.push(page_cache_check(c));
    checks.push(page_cache_evictions_check(c));
    checks.push(cgroup_faults_check(c));
    checks.push(cgroup_swap_check(c));
    checks.push(cgroup_subtree_check(c));
    checks.push(oom_check(
        c,
        "oom_memcg_v2",
        "oommemcg",
        "memcg",
        Some("/o"),
    ));
    checks.push(oom_check(c, "oom_global", "oomglobal", "global", None));
    checks.extend(rmap_checks(c, &kinds));
    checks.push(mmap_lock_check(c));
    checks.push(compaction_check(c));
    checks.push(working_set_check(c, &doctor));
    checks.push(working_set_mglru_check(c));
    checks.push(lab_wss_check(c, &doctor));
    checks.push(working_set_damon_check(c, &doctor));
    checks.push(working_set_two_cgroups_check(c));
    KernelResult {
        kernel: c.release.clone().unwrap_or_else(|| "unknown".into()),
        cgroup: doctor
            .pointer("/memory_cgroup/version")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_string(),
        attach_kinds: kinds,
        rmap_method: doctor
            .pointer("/rmap/method")
            .and_then(Value::as_str)
            .unwrap_or("unavailable")
            .to_string(),
        checks,
    }
}

/// The attach kind a probe's method needs.
fn kind_of(method: &str) -> &str {
    match method {
        "fentry" => "fentry",
        "tp_btf" => "tp_btf",
        "perf_event" => "perf_event",
        _ => "tracepoint",
    }
}

/// Doctor's verdicts hold: nothing is attached with a kind it calls
/// refused, and where it says tp_btf or fentry works, they are used.
fn doctor_check(c: &Console, doctor: &Value, kinds: &BTreeMap<String, String>) -> Check {
    if doctor.is_null() {
        return check("doctor", false, "doctor --json printed no JSON");
    }
    let works = |k: &str| kinds.get(k).is_some_and(|v| v == "works");
    let rec = match c.recording("faults") {
        Ok(r) => r,
        Err(e) => return check("doctor", false, e),
    };
    let mut wrong = Vec::new();
    for p in rec["probes"].as_array().into_iter().flatten() {
        let method = p["method"].as_str().unwrap_or_default();
        if p["attached"] == true && !works(kind_of(method)) {
            wrong.push(format!(
                "{} attached by {method}, which doctor calls refused",
                p["probe"]
            ));
        }
    }
    let method_of = |probe: &str| {
        probe_entry(&rec, probe)
            .filter(|p| p["attached"] == true)
            .and_then(|p| p["method"].as_str())
            .unwrap_or("none")
            .to_string()
    };
    let pf = method_of("exceptions:page_fault_user");
    if works("tp_btf") && pf != "tp_btf" {
        wrong.push(format!("tp_btf works but page faults came through {pf}"));
    }
    // Where tp_btf works, every hook but the syscall events is attached as
    // one (the swap probe is classic by design before 6.2).
    let mut tracepoint_hooks = 0;
    let mut classic = Vec::new();
    for p in rec["probes"].as_array().into_iter().flatten() {
        let (probe, method) = (
            p["probe"].as_str().unwrap_or_default(),
            p["method"].as_str().unwrap_or_default(),
        );
        if p["attached"] != true
            || probe.starts_with("syscalls:")
            || !matches!(method, "tp_btf" | "tracepoint")
        {
            continue;
        }
        tracepoint_hooks += 1;
        // The swap probe before 6.2, and hooks whose classic record
        // carries details the BTF program does not read (OOM victims).
        let by_design = p["reason"].as_str().is_some_and(|r| {
            (probe == "kmem:rss_stat" && r.contains("before 6.2")) || r.contains("by design")
        });
        if method == "tracepoint" && !by_design {
            classic.push(probe.to_string());
        }
    }
    if works("tp_btf") && !classic.is_empty() {
        wrong.push(format!(
            "tp_btf works but these came as classic tracepoints: {}",
            classic.join(", ")
        ));
    }
    let rmap = doctor.pointer("/rmap/method").and_then(Value::as_str);
    if works("fentry") && works("fexit") && rmap != Some("direct_timing") {
        wrong.push(format!("fentry works but the rmap method is {rmap:?}"));
    }
    if works("fentry") && works("fexit") && method_of("fentry:handle_mm_fault") != "fentry" {
        wrong.push("fentry works but page-fault timing did not attach".into());
    }
    let refused: Vec<&str> = kinds
        .iter()
        .filter(|(_, v)| *v != "works")
        .map(|(k, _)| k.as_str())
        .collect();
    check(
        "doctor",
        wrong.is_empty(),
        if wrong.is_empty() {
            format!(
                "verdicts hold; page faults by {pf}; {} of {tracepoint_hooks} \
                 non-syscall hooks by tp_btf; refused: {}",
                tracepoint_hooks - classic.len(),
                if refused.is_empty() {
                    "none".into()
                } else {
                    refused.join(", ")
                }
            )
        } else {
            wrong.join("; ")
        },
    )
}

/// The child's row in a recording.
fn child_row(rec: &Value, pid: u64) -> Option<&Value> {
    rec["processes"]
        .as_array()?
        .iter()
        .find(|p| p["pid"].as_u64() == Some(pid))
}

fn rusage(c: &Console, name: &str) -> Option<(u64, u64)> {
    let ru = c.json(&format!("{name}.ru"))?;
    Some((u(&ru, "/minflt") + u(&ru, "/majflt"), u(&ru, "/pid")))
}

fn faults_check(c: &Console) -> Check {
    let (rec, (books, pid)) = match (c.recording("faults"), rusage(c, "faults")) {
        (Ok(r), Some(b)) => (r, b),
        (Err(e), _) => return check("faults", false, e),
        (_, None) => return check("faults", false, "no rusage from the child"),
    };
    let Some(row) = child_row(&rec, pid) else {
        return check(
            "faults",
            false,
            format!("child {pid} not among the processes"),
        );
    };
    let total = u(row, "/faults/total");
    let class = u(row, "/faults/user/by_class/write_not_present");
    let ok = within(total, books, 2.0) && within(class, guest::FAULT_PAGES, 2.0);
    check(
        "faults",
        ok,
        format!(
            "{total} vs rusage {books}; write_not_present {class} of {} touched",
            guest::FAULT_PAGES
        ),
    )
}

fn gup_check(c: &Console) -> Check {
    let (rec, (books, pid)) = match (c.recording("gup"), rusage(c, "gup")) {
        (Ok(r), Some(b)) => (r, b),
        (Err(e), _) => return check("gup_faults", false, e),
        (_, None) => return check("gup_faults", false, "no rusage from the child"),
    };
    let Some(row) = child_row(&rec, pid) else {
        return check("gup_faults", false, format!("child {pid} not found"));
    };
    let (total, gup) = (u(row, "/faults/total"), u(row, "/faults/gup"));
    let want = 3 * guest::GUP_PAGES;
    check(
        "gup_faults",
        within(total, books, 2.0) && within(gup, want, 2.0),
        format!("{total} vs rusage {books}; gup part {gup} of {want}"),
    )
}

/// The page-fault timing histograms hold every fault taken.
fn fault_latency_check(c: &Console, kinds: &BTreeMap<String, String>) -> Check {
    let rec = match c.recording("faults") {
        Ok(r) => r,
        Err(e) => return check("fault_latency", false, e),
    };
    let fentry = kinds.get("fentry").is_some_and(|v| v == "works");
    let hists = &rec["totals"]["histograms"];
    let timed: u64 = ["minor_anon", "minor_file", "major_anon", "major_file"]
        .iter()
        .map(|k| u(hists, &format!("/fault_{k}/count")))
        .sum();
    // pgfault between the recording's first and last samples, the window
    // the counters below are read over (`system_faults` starts earlier).
    let taken = u(&rec, "/totals/vmstat/counters/pgfault");
    if !fentry {
        let why = rec
            .pointer("/totals/unavailable/histogram fault_minor_anon")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        return check(
            "fault_latency",
            timed == 0 && !why.is_empty(),
            format!("unavailable: {why}"),
        );
    }
    let p50 = hists
        .pointer("/fault_minor_anon/p50_ns")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    // vmscope counts each handle_mm_fault call it timed, each that
    // returned for a retry (VM_FAULT_RETRY, per-VMA-lock fallbacks), and
    // each whose start it never saw, read in the same instant as pgfault.
    // Older kernels (6.1) count pgfault on every call, retries included;
    // newer ones (6.12) count it in mm_account_fault, which skips retries.
    // Either way the kernel's count is matched exactly; the figure names
    // the rule that matched. The histograms, read a moment later, hold the
    // timed ones.
    let counters = &rec["totals"]["counters"];
    let (counted, retries, untimed) = (
        u(counters, "/fault_timed"),
        u(counters, "/fault_retries"),
        u(counters, "/fault_untimed"),
    );
    let (every, completed) = (counted + retries + untimed, counted + untimed);
    let rule = if every == taken {
        "every attempt"
    } else if completed == taken {
        "completed attempts"
    } else {
        "neither rule"
    };
    check(
        "fault_latency",
        taken > 0 && rule != "neither rule" && within(timed, counted, 0.5),
        format!(
            "{counted} timed + {retries} retried + {untimed} untimed vs {taken} faults taken \
             (pgfault, exact with {rule}); {timed} in the histograms; minor anon p50 <= {p50} ns"
        ),
    )
}

fn madvise_check(c: &Console) -> Check {
    let rec = match c.recording("madvise") {
        Ok(r) => r,
        Err(e) => return check("madvise", false, e),
    };
    let n = guest::MADVISE_CALLS;
    let page = 4096;
    let m = &rec["totals"]["madvise"];
    let got = [
        (u(m, "/free/calls"), u(m, "/free/bytes")),
        (u(m, "/dontneed/calls"), u(m, "/dontneed/bytes")),
        (u(m, "/cold/calls"), u(m, "/cold/bytes")),
    ];
    let want = [(n, n * page), (n, n * 2 * page), (n, n * 3 * page)];
    check(
        "madvise",
        got == want,
        format!("free/dontneed/cold calls and bytes {got:?}, made {want:?}"),
    )
}

fn perf_check(c: &Console) -> Check {
    let (rec, (books, pid)) = match (c.recording("perf"), rusage(c, "perf")) {
        (Ok(r), Some(b)) => (r, b),
        (Err(e), _) => return check("perf_fallback", false, e),
        (_, None) => return check("perf_fallback", false, "no rusage from the child"),
    };
    let source = rec["fault_source"].as_str().unwrap_or_default().to_string();
    let total = child_row(&rec, pid).map_or(0, |r| u(r, "/faults/total"));
    check(
        "perf_fallback",
        source == "perf_software" && within(total, books, 2.0),
        format!("source {source}; {total} vs rusage {books}"),
    )
}

fn top_check(c: &Console) -> Check {
    match c.sections.get("top") {
        Some((text, 0)) => check(
            "top_batch",
            text.contains("faults user") && text.contains("PID"),
            format!("{} lines", text.lines().count()),
        ),
        Some((_, rc)) => check("top_batch", false, format!("exit {rc}")),
        None => check("top_batch", false, "did not run"),
    }
}

fn serve_check(c: &Console) -> Check {
    match c.sections.get("serve") {
        Some((text, 0)) => {
            let faults = text
                .lines()
                .filter(|l| l.starts_with("vmscope_page_faults_total{"))
                .count();
            check(
                "serve_metrics",
                faults > 0 && text.contains("vmscope_build_info"),
                format!(
                    "/metrics: {} lines, {faults} fault series",
                    text.lines().count()
                ),
            )
        }
        Some((_, rc)) => check("serve_metrics", false, format!("wget exit {rc}")),
        None => check("serve_metrics", false, "did not run"),
    }
}

/// Per-process swap sums against the guest's pswpout/pswpin.
fn swap_sums(rec: &Value) -> (u64, u64) {
    let procs = rec["processes"].as_array().cloned().unwrap_or_default();
    let sum = |k: &str| procs.iter().map(|p| p[k].as_u64().unwrap_or(0)).sum();
    (sum("swap_out_pages"), sum("swap_in_pages"))
}

fn swap_figures(c: &Console, name: &str) -> Result<(u64, u64, u64, u64, String), String> {
    if c.sections.get("swapon").map(|s| s.1) != Some(0) {
        return Err("zram swap could not be set up in the guest".into());
    }
    let rec = c.recording(name)?;
    let (out, inn) = swap_sums(&rec);
    let method = probe_entry(&rec, "kmem:rss_stat")
        .and_then(|p| p["method"].as_str())
        .unwrap_or("none")
        .to_string();
    Ok((
        out,
        c.delta(
            &format!("{name}.before"),
            &format!("{name}.after"),
            "pswpout",
        ),
        inn,
        c.delta(
            &format!("{name}.before"),
            &format!("{name}.after"),
            "pswpin",
        ),
        method,
    ))
}

fn swap_check(c: &Console) -> Check {
    match swap_figures(c, "swap") {
        Ok((out, pswpout, inn, pswpin, method)) => check(
            "swap_cgroup_v2",
            pswpout > 1000 && within(out, pswpout, 10.0) && within(inn, pswpin, 10.0),
            format!(
                "out {out} vs pswpout {pswpout}; in {inn} vs pswpin {pswpin} (rss_stat by {method})"
            ),
        ),
        Err(e) => check("swap_cgroup_v2", false, e),
    }
}

/// Short-lived processes swapping one after another: the recording's
/// attributed swap-out and swap-in against pswpout/pswpin. A new mm often
/// takes the address of the one before, whose entry the swap probe's map
/// may still hold; the totals must count each page once.
fn short_lived_swap_check(c: &Console) -> Check {
    const NAME: &str = "swap_short_lived";
    if c.sections.get("swapon").map(|s| s.1) != Some(0) {
        return check(NAME, false, "zram swap could not be set up in the guest");
    }
    let rec = match c.recording("short") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let d = |k: &str| c.delta("short.before", "short.after", k);
    let (pswpout, pswpin) = (d("pswpout"), d("pswpin"));
    let (out, inn) = (
        u(&rec, "/totals/counters/swap_out_pages"),
        u(&rec, "/totals/counters/swap_in_pages"),
    );
    let method = probe_entry(&rec, "kmem:rss_stat")
        .and_then(|p| p["method"].as_str())
        .unwrap_or("none");
    check(
        NAME,
        pswpout > 1000 && pswpin > 1000 && within(out, pswpout, 3.0) && within(inn, pswpin, 3.0),
        format!(
            "{} processes: out {out} vs pswpout {pswpout}; in {inn} vs pswpin {pswpin} \
             (rss_stat by {method})",
            guest::SHORT_LIVED
        ),
    )
}

/// zswap in front of zram: the recording's zswap stores and loads and its
/// device writes and reads against the vmstat deltas around the run,
/// within 1% (or 16 pages near 0), and zram named compressed RAM. A kernel
/// built without zswap (Debian's cloud kernels) must say so: no pool, and
/// the zswap figures null with a reason, never 0.
fn swap_tiers_check(c: &Console) -> Check {
    const NAME: &str = "swap_tiers";
    let rec = match c.recording("tiers") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let t = &rec["swap_tiers"];
    let d = |k: &str| c.delta("tiers.before", "tiers.after", k);
    let agree = |got: u64, want: u64| got.abs_diff(want) as f64 <= (want as f64 * 0.01).max(16.0);
    let pairs = [
        ("/out/zswap_stores", "zswpout"),
        ("/out/device_writes", "pswpout"),
        ("/in/zswap_loads", "zswpin"),
        ("/in/device_reads", "pswpin"),
    ];
    let has_zswap = !t["end"]["zswap"].is_null();
    let mut ok = if has_zswap {
        d("zswpout") > 1000
    } else {
        d("pswpout") > 1000
    };
    let mut figures = Vec::new();
    for (pointer, key) in pairs {
        let got = t.pointer(pointer).and_then(Value::as_u64);
        let unavailable = t["unavailable"][pointer.trim_start_matches('/').replace('/', ".")]
            .as_str()
            .is_some_and(|r| r.contains(key));
        ok &= if !has_zswap && key.starts_with('z') {
            got.is_none() && unavailable
        } else {
            got.is_some_and(|g| agree(g, d(key)))
        };
        let kernel = if vmstat(c.text("tiers.after").unwrap_or_default()).contains_key(key) {
            d(key).to_string()
        } else {
            "absent".to_string()
        };
        figures.push(format!(
            "{} {} vs {key} {kernel}",
            pointer.trim_start_matches('/'),
            got.map_or("null".into(), |g| g.to_string()),
        ));
    }
    let zram = t["end"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|x| x["medium"] == "zram");
    ok &= zram;
    check(
        NAME,
        ok,
        format!(
            "{}; zram {}; {}",
            figures.join(", "),
            if zram { "named" } else { "not named" },
            if has_zswap {
                "zswap in front"
            } else {
                "no zswap in this kernel"
            }
        ),
    )
}

/// THP by size: where the kernel has per-size counts, the 2 MiB faults
/// equal vmstat's thp_fault_alloc over the same window (the recording's
/// first to last sample: with THP `always`, vmscope's own start-up faults
/// huge pages before its first sample); where it has not, the recording
/// says so (null, with the reason), never 0.
fn thp_sizes_check(c: &Console) -> Check {
    const NAME: &str = "thp_sizes";
    let rec = match c.recording("thp") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let t = &rec["thp_sizes"];
    let want = u(&rec, "/totals/vmstat/counters/thp_fault_alloc");
    let around = c.delta("thp.before", "thp.after", "thp_fault_alloc");
    if let Some(why) = t["unavailable"].as_str() {
        let empty = t["by_size"].as_object().is_none_or(|m| m.is_empty());
        return check(NAME, empty, format!("unavailable: {why}"));
    }
    let got = t
        .pointer("/by_size/2048kB/anon_fault_alloc")
        .and_then(Value::as_u64);
    check(
        NAME,
        got == Some(want) && want >= guest::THP_HUGE / 2 && around >= want,
        format!(
            "2048kB faults {} vs thp_fault_alloc {want} in the same window ({around} around \
             the run; {} huge pages touched)",
            got.map_or("null".into(), |g| g.to_string()),
            guest::THP_HUGE
        ),
    )
}

/// The page cache: a fresh zram device read twice from cgroup /p. Where
/// the kernel has `filemap:mm_filemap_get_pages` (6.11 on), the child's
/// reads are the device's pages each time (its exec reads nothing: the
/// guest's files are in RAM), and /p's read hit ratio is about 0 cold and
/// about 1 warm. Where it has not, the recording says so (null, with the
/// reason), and the pages added are still the device's on the cold pass
/// and about none on the warm one.
fn page_cache_check(c: &Console) -> Check {
    const NAME: &str = "page_cache";
    let n = guest::PAGE_CACHE_PAGES;
    let mut figures = Vec::new();
    let mut ok = true;
    for (name, cold) in [("pc1", true), ("pc2", false)] {
        let rec = match c.recording(name) {
            Ok(r) => r,
            Err(e) => return check(NAME, false, e),
        };
        let pc = &rec["page_cache"];
        let child = rec["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["comm"] == "vmscope-testchi");
        let added = child.and_then(|p| p["page_cache_added_pages"].as_u64());
        let added_ok = added.is_some_and(|a| if cold { a >= n && a <= n + 64 } else { a <= 64 });
        if let Some(why) = pc["unavailable"].as_str() {
            ok &= pc["scope"].is_null() && why.contains("mm_filemap_get_pages") && added_ok;
            figures.push(format!(
                "{name}: reads unavailable ({why}); added {}",
                added.map_or("null".into(), |a| a.to_string())
            ));
            continue;
        }
        let read = child.and_then(|p| p["page_cache_read_pages"].as_u64());
        let ratio = pc["cgroups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["path"] == "/p")
            .and_then(|g| g["read_hit_ratio"].as_f64());
        let ratio_ok = ratio.is_some_and(|r| if cold { r <= 0.02 } else { r >= 0.98 });
        ok &= added_ok && ratio_ok && read.is_some_and(|r| (n..=n + 64).contains(&r));
        figures.push(format!(
            "{name}: read {} of {n}, added {}, /p hit ratio {}",
            read.map_or("null".into(), |r| r.to_string()),
            added.map_or("null".into(), |a| a.to_string()),
            ratio.map_or("null".into(), |r| format!("{r:.4}"))
        ));
    }
    // The device's residency at the end of the warm pass by cachestat(2)
    // (6.5 on): all of it, within 5%; before 6.5, null with the reason.
    match c.recording("pc2") {
        Ok(rec) => {
            let f = &rec["cachestat"][0];
            let cached = f.pointer("/end/cached_pages").and_then(Value::as_u64);
            ok &= match cached {
                Some(p) => p.abs_diff(n) as f64 <= n as f64 * 0.05,
                None => f["unavailable"].as_str().is_some(),
            };
            figures.push(match cached {
                Some(p) => format!("cachestat {p} of {n} pages cached"),
                None => format!(
                    "cachestat: {}",
                    f["unavailable"].as_str().unwrap_or("missing")
                ),
            });
        }
        Err(e) => return check(NAME, false, e),
    }
    check(NAME, ok, figures.join("; "))
}

/// Page-cache evictions on cgroup v2: a fresh device read cold from /pe,
/// whose limit holds a quarter of it. /pe's evictions are most of the
/// device, and equal (2%) the file pages reclaim freed around the run
/// (vmstat `pgsteal_file` and the inode steals), as does the system-wide
/// count: nothing else reclaims in the guest meanwhile.
fn page_cache_evictions_check(c: &Console) -> Check {
    const NAME: &str = "page_cache_evictions";
    let n = guest::PAGE_CACHE_PAGES;
    let rec = match c.recording("pce") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let probe = probe_entry(&rec, "filemap:mm_filemap_delete_from_page_cache");
    if probe.is_none_or(|p| p["attached"] != true) {
        return check(
            NAME,
            false,
            format!(
                "the removal hook is not attached: {}",
                probe.map_or("not listed".into(), |p| p["reason"].to_string())
            ),
        );
    }
    let stolen: u64 = ["pgsteal_file", "pginodesteal", "kswapd_inodesteal"]
        .iter()
        .map(|k| c.delta("pce.before", "pce.after", k))
        .sum();
    let evicted = rec["page_cache"]["cgroups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["path"] == "/pe")
        .and_then(|g| g["evicted_pages"].as_u64());
    let system = u(&rec, "/totals/counters/page_cache_evicted_pages");
    let ok = evicted.is_some_and(|e| e >= n / 2 && within(e, stolen, 2.0))
        && evicted.is_some_and(|e| within(system, e, 2.0));
    check(
        NAME,
        ok,
        format!(
            "/pe evicted {} of {n} pages vs {stolen} file pages reclaim freed; system-wide {system}",
            evicted.map_or("null".into(), |e| e.to_string())
        ),
    )
}

fn fork_check(c: &Console) -> Check {
    match swap_figures(c, "fork") {
        Ok((out, pswpout, inn, pswpin, method)) => check(
            "fork_after_swap",
            pswpout > 1000 && within(out, pswpout, 10.0) && within(inn, pswpin, 10.0),
            format!(
                "out {out} vs pswpout {pswpout}; in {inn} vs pswpin {pswpin} (rss_stat by {method})"
            ),
        ),
        Err(e) => check("fork_after_swap", false, e),
    }
}

/// A recording's row for cgroup `path`.
fn cgroup_row<'a>(rec: &'a Value, path: &str) -> Option<&'a Value> {
    rec["cgroups"]
        .as_array()?
        .iter()
        .find(|c| c["path"] == path)
}

/// Per-cgroup attribution on cgroup v2: each of two cgroups is charged
/// its child's faults (rusage), within 2%.
fn cgroup_faults_check(c: &Console) -> Check {
    const NAME: &str = "cgroup_faults_v2";
    let rec = match c.recording("cgroups") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let mut ok = true;
    let mut figures = Vec::new();
    for (path, ru) in [("/a", "cga"), ("/b", "cgb")] {
        let Some((books, _)) = rusage(c, ru) else {
            return check(NAME, false, format!("no rusage from the child in {path}"));
        };
        let got = cgroup_row(&rec, path).map_or(0, |r| u(r, "/totals/faults/total"));
        ok &= within(got, books, 2.0);
        figures.push(format!("{path} {got} vs rusage {books}"));
    }
    let how = rec["cgroup_scheme"]["hierarchy"].as_str().unwrap_or("none");
    check(NAME, ok, format!("{} (keyed by {how})", figures.join("; ")))
}

/// `record --cgroup /s` while three cgroups are created below it, each
/// given one short-lived process and removed: each is followed, named by
/// its path and charged its child's faults (rusage) within 2%.
fn cgroup_subtree_check(c: &Console) -> Check {
    const NAME: &str = "record_cgroup_subtree_v2";
    let rec = match c.recording("subtree") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    // The move hook that follows by path must be the classic program: the
    // per-interval scan behind it misses a short-lived cgroup.
    let hook = probe_entry(&rec, "cgroup:cgroup_attach_task");
    let method = hook.and_then(|p| p["method"].as_str()).unwrap_or("absent");
    let mut ok = method == "tracepoint";
    let mut figures = Vec::new();
    if !ok {
        let why = hook.and_then(|p| p["reason"].as_str()).unwrap_or_default();
        figures.push(format!(
            "move hook by {method}, not the classic record: {why}"
        ));
    }
    for i in 1..=3 {
        let path = format!("/s/c{i}");
        let Some((books, _)) = rusage(c, &format!("sub{i}")) else {
            return check(NAME, false, format!("no rusage from the child in {path}"));
        };
        let got = cgroup_row(&rec, &path).map(|r| u(r, "/totals/faults/total"));
        ok &= got.is_some_and(|g| within(g, books, 2.0));
        figures.push(match got {
            Some(g) => format!("{path} {g} vs rusage {books}"),
            None => format!("{path} absent (rusage {books})"),
        });
    }
    check(NAME, ok, figures.join("; "))
}

/// The swapping cgroup's swap-out and swap-in against pswpout/pswpin (it
/// is the only one swapping).
fn cgroup_swap_check(c: &Console) -> Check {
    const NAME: &str = "cgroup_swap_v2";
    let (rec, pswpout, pswpin) = match (c.recording("swap"), swap_figures(c, "swap")) {
        (Ok(r), Ok((_, out, _, inn, _))) => (r, out, inn),
        (Err(e), _) | (_, Err(e)) => return check(NAME, false, e),
    };
    let Some(row) = cgroup_row(&rec, "/t") else {
        return check(NAME, false, "no row for cgroup /t");
    };
    let (out, inn) = (
        u(row, "/totals/swap_out_pages"),
        u(row, "/totals/swap_in_pages"),
    );
    check(
        NAME,
        pswpout > 1000 && within(out, pswpout, 10.0) && within(inn, pswpin, 10.0),
        format!("/t out {out} vs pswpout {pswpout}; in {inn} vs pswpin {pswpin}"),
    )
}

/// A run whose child the OOM killer killed: `record` exits 137 with the
/// recording written. The kill of the child names the limit it answered:
/// `constraint`, and for a memcg OOM the cgroup whose limit was hit, both
/// read from the kernel log's OOM summary.
fn oom_check(
    c: &Console,
    name: &'static str,
    run: &str,
    constraint: &str,
    limit: Option<&str>,
) -> Check {
    let rc = c.sections.get(run).map(|(_, rc)| *rc);
    let Some(rec) = c.json(&format!("{run}.json")) else {
        return check(name, false, format!("no recording (record exited {rc:?})"));
    };
    let pid = &rec["child"]["pid"];
    let Some(k) = rec["oom_kills"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| &k["pid"] == pid))
    else {
        return check(
            name,
            false,
            format!(
                "record exited {rc:?}; no kill of the child {pid}: {}",
                rec["oom_kills"]
            ),
        );
    };
    let got = (k["constraint"].as_str(), k["limit_cgroup"].as_str());
    check(
        name,
        rc == Some(137) && got == (Some(constraint), limit) && k["limit_source"] == "kernel_log",
        format!(
            "child killed in {}: {} OOM, limit of {} (want {constraint}, {}), from {}",
            k["cgroup"],
            k["constraint"],
            k["limit_cgroup"],
            limit.unwrap_or("none"),
            k["limit_source"]
        ),
    )
}

/// The last full window's working set against the workload's hot set
/// (the first window also saw the fill), and the methods doctor lists.
fn working_set_check(c: &Console, doctor: &Value) -> Check {
    let rec = match c.recording("wss") {
        Ok(r) => r,
        Err(e) => return check("working_set", false, e),
    };
    let Some(hot) = workload_line(c, "wss").map(|d| u(&d, "/hot_bytes")) else {
        return check("working_set", false, "no workload line in wss");
    };
    let windows: Vec<&Value> = rec["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["working_set"].as_array().into_iter().flatten())
        .collect();
    let methods: Vec<String> = doctor["working_set"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let state = match (m["used"].as_bool(), m["offered"].as_bool()) {
                (Some(true), _) => "used",
                (_, Some(true)) => "offered",
                _ => "unavailable",
            };
            format!("{} {state}", m["method"].as_str().unwrap_or("?"))
        })
        .collect();
    let Some(last) = windows.last() else {
        return check(
            "working_set",
            false,
            format!("no window finished; methods: {}", methods.join(", ")),
        );
    };
    let ws: u64 = last["procs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| u(p, "/working_set_bytes"))
        .sum();
    let rss: u64 = last["procs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| u(p, "/rss_bytes"))
        .sum();
    check(
        "working_set",
        windows.len() >= 2
            && within(ws, hot, 10.0)
            && rec["working_set"]["method"] == "referenced_scan",
        format!(
            "{} windows; the last {} MiB vs {} MiB hot ({} MiB resident); methods: {}",
            windows.len(),
            ws >> 20,
            hot >> 20,
            rss >> 20,
            methods.join(", ")
        ),
    )
}

/// `wssm`: record --cgroup /w with the working set, the method left to
/// choose. With the multi-generational LRU on (the guest turns it on), it
/// is chosen for a cgroup scope, and the last window's figure for /w is
/// the grown hot set. (Under TCG the workload's fill runs into the second
/// window, so the hot set before it grew is `lab_wss`'s to check: the lab
/// waits for the workload to say it is ready.) Where the kernel lacks it,
/// the scan measures and the check says so.
fn working_set_mglru_check(c: &Console) -> Check {
    const NAME: &str = "working_set_mglru";
    let rec = match c.recording("wssm") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let method = rec["working_set"]["method"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    if method != "mglru" {
        let why = rec["working_set"]["methods"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["method"] == "mglru")
            .and_then(|m| m["detail"].as_str())
            .unwrap_or("not listed")
            .to_string();
        return check(NAME, false, format!("measured by {method}; mglru: {why}"));
    }
    let figures: Vec<u64> = rec["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["working_set"].as_array().into_iter().flatten())
        .map(|w| {
            w["cgroups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|g| g["cgroup"] == "/w")
                .map(|g| u(g, "/working_set_bytes"))
                .sum()
        })
        .collect();
    let (_, hot, grown) = super::guest::WSS_M;
    let (hot, grown) = (hot << 20, grown << 20);
    let ok = figures.len() >= 3 && figures.last().is_some_and(|&f| within(f, grown, 10.0));
    check(
        NAME,
        ok,
        format!(
            "/w by window: {} MiB (hot {} then {} MiB)",
            mib_list(&figures),
            hot >> 20,
            grown >> 20
        ),
    )
}

/// `wss2`: a system-wide recording (the multi-generational LRU chosen for
/// it, every memory cgroup measured) while two workloads run in `/w1` and
/// `/w2`: the last window's figure of each is its hot set.
fn working_set_two_cgroups_check(c: &Console) -> Check {
    const NAME: &str = "working_set_cgroups";
    let rec = match c.recording("wss2") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let last = rec["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["working_set"].as_array().into_iter().flatten())
        .last()
        .cloned()
        .unwrap_or(Value::Null);
    let figure = |path: &str| -> u64 {
        last["cgroups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| g["cgroup"] == path)
            .map(|g| u(g, "/working_set_bytes"))
            .sum()
    };
    let [(_, h1), (_, h2)] = super::guest::WSS_TWO;
    let (f1, f2) = (figure("/w1"), figure("/w2"));
    let memcgs = last["cgroups"].as_array().map_or(0, Vec::len);
    let method = rec["working_set"]["method"].as_str().unwrap_or("?");
    check(
        NAME,
        method == "mglru"
            && rec["working_set"]["all_processes"] == true
            && within(f1, h1 << 20, 10.0)
            && within(f2, h2 << 20, 10.0),
        format!(
            "{method}, {memcgs} memory cgroups: /w1 {} MiB (hot {h1}), /w2 {} MiB (hot {h2})",
            f1 >> 20,
            f2 >> 20
        ),
    )
}

/// Whether doctor says the kernel offers `method`, and its detail.
fn offered(doctor: &Value, method: &str) -> (bool, String) {
    let m = doctor["working_set"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["method"] == method);
    (
        m.is_some_and(|m| m["offered"] == true),
        m.and_then(|m| m["detail"].as_str())
            .unwrap_or("not listed")
            .to_string(),
    )
}

/// `lab wss`: every method it checked was within 10% in both phases, the
/// multi-generational LRU was among them, and so was DAMON where doctor
/// says the kernel offers it.
fn lab_wss_check(c: &Console, doctor: &Value) -> Check {
    const NAME: &str = "lab_wss";
    let Some(text) = c.text("labwss") else {
        return check(NAME, false, "no labwss output");
    };
    let v: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => return check(NAME, false, format!("labwss is not JSON: {e}")),
    };
    let phases: Vec<&Value> = v["phases"].as_array().into_iter().flatten().collect();
    let line: Vec<String> = phases
        .iter()
        .map(|p| {
            format!(
                "{} {} {}/{} MiB",
                p["method"].as_str().unwrap_or("?"),
                p["phase"].as_str().unwrap_or("?"),
                u(p, "/measured_bytes") >> 20,
                u(p, "/hot_bytes") >> 20
            )
        })
        .collect();
    let damon = offered(doctor, "damon").0;
    let ok = phases.len() == if damon { 6 } else { 4 }
        && phases.iter().all(|p| p["ok"] == true)
        && phases.iter().any(|p| p["method"] == "mglru")
        && (!damon || phases.iter().any(|p| p["method"] == "damon"));
    check(NAME, ok, line.join(", "))
}

/// Byte figures as whole MiB, `64, 65, 128`.
fn mib_list(figures: &[u64]) -> String {
    figures
        .iter()
        .map(|f| (f >> 20).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `wssd`: record with `--wss-method damon`. Where doctor says the kernel
/// offers DAMON, the last window's figure is the hot set and vmscope left
/// `nr_kdamonds` at 0; where it does not, the record was refused with exit
/// 2 and one line naming the method.
fn working_set_damon_check(c: &Console, doctor: &Value) -> Check {
    const NAME: &str = "working_set_damon";
    let (damon, detail) = offered(doctor, "damon");
    if !damon {
        let rc = c.sections.get("wssd").map(|(_, rc)| *rc);
        let err = c.text("wssd.stderr").unwrap_or_default().trim();
        return check(
            NAME,
            rc == Some(2)
                && err.starts_with("vmscope: --wss-method damon: ")
                && err.lines().count() == 1,
            format!("unavailable: {detail}; record exited {rc:?}: {err}"),
        );
    }
    let rec = match c.recording("wssd") {
        Ok(r) => r,
        Err(e) => return check(NAME, false, e),
    };
    let figures: Vec<u64> = rec["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["working_set"].as_array().into_iter().flatten())
        // A window that ended after the workload exited lists no process
        // (under TCG a sixth window can begin before the 50 s are up).
        .filter(|w| w["procs"].as_array().is_some_and(|p| !p.is_empty()))
        .map(|w| {
            w["procs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| u(p, "/working_set_bytes"))
                .sum()
        })
        .collect();
    let hot = super::guest::WSS_M.1 << 20;
    let method = rec["working_set"]["method"].as_str().unwrap_or("?");
    let after = c.text("damon.after").unwrap_or("?").trim().to_string();
    check(
        NAME,
        method == "damon"
            && figures.len() >= 2
            && figures.last().is_some_and(|&f| within(f, hot, 10.0))
            && after == "0",
        format!(
            "{method} by window: {} MiB (hot {} MiB); nr_kdamonds afterwards {after}",
            mib_list(&figures),
            hot >> 20
        ),
    )
}

/// The workload's JSON line in a section's output.
fn workload_line(c: &Console, name: &str) -> Option<Value> {
    c.text(name)?
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
}

/// The storm's write-lock acquisitions are its calls: the process's write
/// acquisitions beyond the control run's equal them within 20.
fn mmap_lock_check(c: &Console) -> Check {
    let (none, storm) = match (c.recording("mmaplock0"), c.recording("mmaplock1")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return check("mmap_lock", false, e),
    };
    let Some(calls) = workload_line(c, "mmaplock1").map(|d| u(&d, "/storm_calls")) else {
        return check("mmap_lock", false, "no workload line in mmaplock1");
    };
    let writes =
        |rec: &Value| child_row(rec, u(rec, "/child/pid")).map_or(0, |r| u(r, "/mmap_write_waits"));
    let reads =
        |rec: &Value| child_row(rec, u(rec, "/child/pid")).map_or(0, |r| u(r, "/mmap_read_waits"));
    let extra = writes(&storm).saturating_sub(writes(&none));
    check(
        "mmap_lock",
        calls >= 100 && extra.abs_diff(calls) <= 20,
        format!(
            "storm write acquisitions {extra} vs {calls} storm calls; read waits {} with the \
             storm, {} without",
            reads(&storm),
            reads(&none)
        ),
    )
}

/// Direct compactions and migrated pages against the recording's vmstat.
fn compaction_check(c: &Console) -> Check {
    // The guest starts with an empty hugetlb pool; the workload must leave
    // it so, however it ended, or the next check has no memory.
    let pool = c.text("pool.after").unwrap_or("?").trim();
    let rec = match c.recording("compaction") {
        Ok(r) => r,
        Err(e) => return check("compaction", false, format!("{e} (pool after: {pool})")),
    };
    if pool != "0" {
        return check(
            "compaction",
            false,
            format!("the hugetlb pool was left at {pool} pages"),
        );
    }
    let counters = &rec["totals"]["counters"];
    let vm = &rec["totals"]["vmstat"]["counters"];
    let migrated: u64 = counters
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("migrated_"))
        .filter_map(|(_, v)| v.as_u64())
        .sum();
    let (direct, stall) = (u(counters, "/compact_direct"), u(vm, "/compact_stall"));
    let (success, vm_success) = (
        u(counters, "/compact_direct_success"),
        u(vm, "/compact_success"),
    );
    let pgmigrate = u(vm, "/pgmigrate_success");
    // Direct compaction must have run (`within` wants a count above 0);
    // its successes and the pages it migrated may be none, when every run
    // failed (a 6.1 guest once made 70 direct compactions, none of which
    // migrated a page): then vmscope's 0 must be the kernel's 0.
    let agree = |got: u64, want: u64| got == want || within(got, want, 5.0);
    check(
        "compaction",
        within(direct, stall, 5.0) && agree(success, vm_success) && agree(migrated, pgmigrate),
        format!(
            "direct {direct} vs compact_stall {stall}; success {success} vs {vm_success}; \
             migrated {migrated} vs pgmigrate_success {pgmigrate} (THP {})",
            c.text("thp.enabled").unwrap_or("?").trim()
        ),
    )
}

fn walk_seconds(rec: &Value) -> f64 {
    f(rec, "/totals/rmap/rmap_walk/cpu_seconds")
}

fn f(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Whether a corrected direct share and a sampled share agree: within
/// max(5 points, 25% of the sampled share). Judged here from the two
/// figures, not from the recording's own verdict.
pub fn methods_agree(direct: f64, sampled: f64) -> bool {
    (direct - sampled).abs() <= (0.25 * sampled).max(0.05)
}

/// Whether the lab's mean direct and sampled shares agree: the
/// single-run tolerance of [`methods_agree`] widened by two standard
/// errors of the difference of the two means, taken from the runs' own
/// scatter. With two runs of a 199 Hz sampler the sampled mean alone moves
/// by a few points from run to run; a gap inside that scatter says nothing
/// about the timing.
pub fn lab_methods_agree(direct: f64, sampled: f64, se_difference: f64) -> bool {
    (direct - sampled).abs() <= (0.25 * sampled).max(0.05) + 2.0 * se_difference
}

/// The standard error of (mean of `a`) - (mean of `b`) on one side of a
/// lab row pair, in the rows' unit: sqrt(sd_a²/n_a + sd_b²/n_b); 0 where a
/// side has one run.
fn spread_of_difference(a: &Value, b: &Value, side: &str) -> f64 {
    let var = |r: &Value| {
        let n = u(r, &format!("/{side}/n"));
        let sd = f(r, &format!("/{side}/stddev"));
        if n > 1 { sd * sd / n as f64 } else { 0.0 }
    };
    (var(a) + var(b)).sqrt()
}

/// Walk CPU time per page reclaimed (vmstat pgsteal), in microseconds.
fn walk_us_per_page(rec: &Value) -> f64 {
    let vm = &rec["totals"]["vmstat"]["counters"];
    let pages = u(vm, "/pgsteal_anon") + u(vm, "/pgsteal_file");
    if pages == 0 {
        return 0.0;
    }
    walk_seconds(rec) * 1e6 / pages as f64
}

/// Direct rmap timing attached for real: 64 sharers walk more than one,
/// and what stack sampling says of the same run.
fn rmap_checks(c: &Console, kinds: &BTreeMap<String, String>) -> Vec<Check> {
    let direct = kinds.get("fentry").is_some_and(|v| v == "works");
    let (many, one) = match (c.recording("rmap64"), c.recording("rmap1")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return vec![check("rmap", false, e)],
    };
    let method = many
        .pointer("/totals/rmap/method")
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_string();
    let (w64, w1) = (walk_seconds(&many), walk_seconds(&one));
    let calls = u(&many, "/totals/rmap/walk_calls");
    let mut out = vec![check(
        "rmap_direct",
        (!direct || method == "direct_timing") && w64 > w1 && w64 > 0.0,
        format!(
            "{method}: walk {w64:.4} CPU-s with {} sharers vs {w1:.4} with 1 \
             ({:.2} vs {:.2} us of walk per page reclaimed); {calls} walk calls",
            guest::RMAP_SHARERS,
            walk_us_per_page(&many),
            walk_us_per_page(&one),
        ),
    )];
    out.push(agreement_check(&many, c.recording("rmap64s").ok().as_ref()));
    out.push(lab_rmap_check(c));
    out.push(maintenance_check(c));
    out
}

/// `record --rmap-maintenance`: the maintenance functions timed too (on
/// every fault, fork and unmap, and 64 times inside each walk of a page
/// with 64 sharers, where they count as nested calls). The walks' agreement
/// with the sampler is shown, not required: the nested calls' cost is
/// taken out by the calibration's per-call figure, the least certain one.
fn maintenance_check(c: &Console) -> Check {
    let rec = match c.recording("rmap64m") {
        Ok(r) => r,
        Err(e) => return check("rmap_maintenance", false, e),
    };
    let r = &rec["totals"]["rmap"];
    let calls = u(r, "/maintenance_calls");
    let nested = u(r, "/nested_calls");
    let share = f(r, "/rmap_maintenance/share");
    let (d, s) = (f(r, "/rmap_walk/share"), f(r, "/sampled/inside_walk/share"));
    check(
        "rmap_maintenance",
        calls > 0 && nested > 0 && share > 0.0,
        format!(
            "{calls} maintenance calls timed, {:.1}% of CPU (corrected; {:.1}% sampled); \
             {nested} timed calls nested in others; walks {:.1}% timed vs {:.1}% sampled ({})",
            100.0 * share,
            100.0 * f(r, "/sampled/rmap_maintenance/share"),
            100.0 * d,
            100.0 * s,
            if methods_agree(d, s) {
                "agree"
            } else {
                "disagree"
            },
        ),
    )
}

/// `lab rmap`: 64 sharers against 1, two runs each, both methods in every
/// run: walks cost more per reclaimed page with 64 sharers, and on each
/// side the corrected direct share agrees with the sampled one.
fn lab_rmap_check(c: &Console) -> Check {
    let doc = match (c.sections.get("labrmap"), c.json("labrmap")) {
        (Some((_, 0)), Some(d)) => d,
        (Some((_, rc)), _) => {
            return check(
                "lab_rmap",
                false,
                format!(
                    "lab rmap exited {rc}: {}",
                    c.text("labrmap.stderr")
                        .unwrap_or_default()
                        .trim()
                        .replace('\n', " | ")
                ),
            );
        }
        (None, _) => return check("lab_rmap", false, "lab rmap did not run"),
    };
    let row = |metric: &str| {
        doc["rows"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["metric"] == metric))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mean = |r: &Value, side: &str| f(r, &format!("/{side}/mean"));
    let (direct, sampled, per_page) = (
        row("rmap_walk_share"),
        row("rmap_walk_share_sampled"),
        row("rmap/reclaim_per_page_ns"),
    );
    let agree = |side: &str| {
        lab_methods_agree(
            mean(&direct, side) / 100.0,
            mean(&sampled, side) / 100.0,
            spread_of_difference(&direct, &sampled, side) / 100.0,
        )
    };
    // The methods must agree where the walks carry the figure (64
    // sharers); with one sharer a walk lasts a few microseconds, about what
    // timing it costs under TCG, and the agreement is shown, not required.
    check(
        "lab_rmap",
        mean(&per_page, "new") > mean(&per_page, "base")
            && mean(&direct, "new") > mean(&direct, "base")
            && mean(&sampled, "new") > 0.0
            && agree("new"),
        format!(
            "reclaim {:.0} ns per page with 64 sharers vs {:.0} with 1; walks {:.1}% timed \
             (corrected) vs {:.1}% sampled with 64, {:.1}% vs {:.1}% with 1 ({})",
            mean(&per_page, "new"),
            mean(&per_page, "base"),
            mean(&direct, "new"),
            mean(&sampled, "new"),
            mean(&direct, "base"),
            mean(&sampled, "base"),
            if agree("base") { "agree" } else { "disagree" },
        ),
    )
}

/// Both methods in one run: the corrected direct share against the
/// sampler's, with the calibration, and how much the timed run was
/// slowed against a run with the sampler only.
fn agreement_check(timed: &Value, sampled_only: Option<&Value>) -> Check {
    let r = &timed["totals"]["rmap"];
    if r.get("method").and_then(Value::as_str) != Some("direct_timing") {
        return check(
            "rmap_methods_agree",
            false,
            "direct timing did not run, so there is nothing to agree",
        );
    }
    if r.get("sampled").is_none_or(Value::is_null) {
        return check(
            "rmap_methods_agree",
            false,
            "no stack samples beside direct timing",
        );
    }
    let d = f(r, "/rmap_walk/share");
    let measured = f(r, "/rmap_walk_measured/share");
    // Samples with a walk anywhere on the stack: what a timed span holds.
    let s = f(r, "/sampled/inside_walk/share");
    let se = f(r, "/sampled/inside_walk/share_stderr");
    let samples = u(r, "/sampled/samples");
    let cal = &r["calibration"];
    let secs = |r: &Value| u(r, "/duration_ns") as f64 / 1e9;
    let slowdown = match sampled_only {
        Some(o) if secs(o) > 0.0 => format!(
            "timed run {:.1} s vs {:.1} s with the sampler only: {:.2}x",
            secs(timed),
            secs(o),
            secs(timed) / secs(o)
        ),
        _ => "no sampler-only run to compare".into(),
    };
    check(
        "rmap_methods_agree",
        !cal.is_null() && samples > 0 && methods_agree(d, s),
        format!(
            "same run: rmap walks {:.1}% of CPU timed directly, corrected ({:.1}% as measured, \
             {:.2} s off CPU in walks left out), \
             {:.1}% ± {:.1} sampled inside walks ({samples} samples; tolerance {:.1} points); calibration \
             {:.0} ns inside a span ({:.0}-{:.0}), {:.0} ns per call ({:.0}-{:.0}) on {}; {slowdown}",
            100.0 * d,
            100.0 * measured,
            f(r, "/walk_off_cpu_seconds"),
            100.0 * s,
            100.0 * se,
            100.0 * (0.25 * s).max(0.05),
            f(cal, "/inside_ns"),
            f(cal, "/inside_ns_min"),
            f(cal, "/inside_ns_max"),
            f(cal, "/call_ns"),
            f(cal, "/call_ns_min"),
            f(cal, "/call_ns_max"),
            cal.get("function").and_then(Value::as_str).unwrap_or("?"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_sections_survive_carriage_returns_and_noise() {
        let text = "SeaBIOS\r\n\x1bc\x1b[?7l\x1b[2J@@vmscope:start 6.1.0-57-cloud-amd64\r\n\
                    @@vmscope:begin faults.ru\r\n{\"minflt\":5}\r\n\r\n@@vmscope:end faults.ru 0\r\n\
                    @@vmscope:begin top\r\nrates\r\n@@vmscope:end top 3\r\n\
                    @@vmscope:begin half\r\n[  9.1] reboot: Power down\r\n";
        let c = parse(text);
        assert_eq!(c.release.as_deref(), Some("6.1.0-57-cloud-amd64"));
        assert_eq!(c.sections["faults.ru"], ("{\"minflt\":5}\n\n".into(), 0));
        assert_eq!(c.sections["top"].1, 3);
        assert!(
            !c.sections.contains_key("half"),
            "an unterminated section is not an output"
        );
        assert!(!c.done);
    }

    #[test]
    fn an_empty_console_fails_every_check_with_a_reason() {
        let r = judge(&parse(""));
        assert!(!r.ok());
        assert!(
            r.checks.iter().all(|c| !c.ok && !c.figure.is_empty()),
            "{:?}",
            r.checks
        );
        assert_eq!(r.kernel, "unknown");
    }

    #[test]
    fn the_rmap_methods_disagree_at_91_against_24_percent() {
        // 6.1 before the correction: 91% timed directly, 24% sampled.
        assert!(!methods_agree(0.91, 0.24));
        // 6.12 before: 38% against 15%.
        assert!(!methods_agree(0.38, 0.15));
        // Within 5 points when the sampled share is small, within a
        // quarter of it when large.
        assert!(methods_agree(0.28, 0.24));
        assert!(!methods_agree(0.31, 0.24));
        assert!(methods_agree(0.05, 0.01));
        assert!(methods_agree(0.70, 0.60));
        assert!(!methods_agree(0.80, 0.60));
    }

    #[test]
    fn the_lab_agreement_allows_for_the_runs_scatter_and_no_more() {
        let side = |values: &[f64]| {
            let n = values.len() as f64;
            let mean = values.iter().sum::<f64>() / n;
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
            serde_json::json!({"new": {"mean": mean, "stddev": var.sqrt(), "n": values.len()}})
        };
        let judge = |d: &[f64], s: &[f64]| {
            let (dr, sr) = (side(d), side(s));
            let (dm, sm) = (f(&dr, "/new/mean"), f(&sr, "/new/mean"));
            lab_methods_agree(
                dm / 100.0,
                sm / 100.0,
                spread_of_difference(&dr, &sr, "new") / 100.0,
            )
        };
        // The 6.1 guest run that failed the single-run tolerance: timed
        // 28.5 and 29.1, sampled 20.6 and 24.2. The gap (6.4 points) is
        // inside the sampler's own scatter.
        assert!(!methods_agree(0.288, 0.224));
        assert!(judge(&[28.5, 29.1], &[20.6, 24.2]));
        // Steady runs get no slack: the same means without scatter fail.
        assert!(!judge(&[28.8, 28.8], &[22.4, 22.4]));
        // The inflation this check exists for still fails, scatter or not.
        assert!(!judge(&[90.0, 92.0], &[20.6, 27.4]));
    }

    #[test]
    fn the_agreement_check_fails_on_91_against_24_percent_and_passes_when_close() {
        let rec = |direct: f64, sampled: f64| {
            serde_json::json!({
                "duration_ns": 11_100_000_000u64,
                "totals": {"rmap": {
                    "method": "direct_timing",
                    "rmap_walk": {"share": direct},
                    "rmap_walk_measured": {"share": direct},
                    "calibration": {"function": "bpf_fentry_test1", "inside_ns": 900.0,
                                    "call_ns": 2500.0},
                    "sampled": {"samples": 4000, "inside_walk": {"share": sampled,
                                                                  "share_stderr": 0.011}},
                }},
            })
        };
        let c = agreement_check(&rec(0.91, 0.24), None);
        assert!(!c.ok, "{}", c.figure);
        assert!(
            c.figure.contains("91.0%") && c.figure.contains("24.0%"),
            "{}",
            c.figure
        );
        let c = agreement_check(&rec(0.26, 0.24), None);
        assert!(c.ok, "{}", c.figure);
        let mut sampler_only = rec(0.26, 0.24);
        sampler_only["totals"]["rmap"]["method"] = "stack_sampling".into();
        assert!(!agreement_check(&sampler_only, None).ok);
    }

    #[test]
    fn figures_are_judged_against_their_ground_truth() {
        assert!(within(19_900, 20_000, 2.0));
        assert!(!within(19_000, 20_000, 2.0));
        assert!(!within(0, 0, 2.0), "nothing measured is not a pass");
        let vm = vmstat("pswpin 10\npswpout 200\n");
        assert_eq!(vm["pswpout"], 200);
    }
}
