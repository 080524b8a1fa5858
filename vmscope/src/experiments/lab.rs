//! `vmscope lab lazyfree|rmap`: a classic VM experiment as one command.
//!
//! A lab runs one built-in workload in two variants (BASE and NEW), R runs
//! each, interleaved (BASE, NEW, BASE, NEW, ...) so that a drift of the
//! machine hits both alike, every run recorded as `bench` records it. It
//! writes both bench files, the comparison and its report page into a
//! directory, prints the
//! comparison, then the kernel-side evidence for the difference: the
//! figures that explain it, side by side.
//!
//! - `lazyfree`: `workload lazyfree --free dontneed` against `--free free`;
//!   evidence: madvise calls and latency per behaviour, faults per record,
//!   TLB shootdown IPIs, pglazyfree/pglazyfreed.
//! - `rmap`: `workload rmap --sharers 1` against `--sharers N`; evidence:
//!   time per reclaimed page, the rmap walk and maintenance CPU (from the
//!   rmap method in use), memcg reclaim latency, pages swapped out, fork and
//!   exit time per sharer. Needs swap: with `--setup-zram SIZE` the lab
//!   adds a zram swap device for its runs and removes it afterwards.
//!
//! SIGINT, SIGTERM and SIGHUP are held off while a lab runs: one is passed
//! on to the run under way (whose `record` passes it to the workload, which
//! removes its cgroup), then the lab removes its zram device, any cgroup a
//! killed workload left, and its temporary files, and exits 128+N. Every
//! error path does the same cleanup.

use std::{
    fmt::Write as _,
    io::IsTerminal as _,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI32, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;

use crate::{
    cli::{
        BenchArgs, CompareFormat, Lab, LabCommon, LazyfreeLabArgs, MmapLockLabArgs, RmapLabArgs,
        Storm,
    },
    compare::{self, Input, Report},
    document, exit,
    experiments::{
        bench,
        pressure::{self, ZramSwap},
    },
    source::kernel::caps::Privileges,
};

/// One side of a lab.
struct Variant {
    /// Short name, also the bench file's name (`dontneed.json`).
    name: String,
    /// vmscope arguments after `vmscope`.
    args: Vec<String>,
}

/// A row of the evidence table: a label and the metric that backs it.
struct Evidence {
    label: &'static str,
    metric: &'static str,
}

const fn ev(label: &'static str, metric: &'static str) -> Evidence {
    Evidence { label, metric }
}

/// `lab lazyfree`'s evidence.
const LAZYFREE_EVIDENCE: &[Evidence] = &[
    ev("lazyfree records/s", "lazyfree/records_per_sec"),
    ev("madvise(DONTNEED) calls", "madvise_dontneed_calls"),
    ev("madvise(FREE) calls", "madvise_free_calls"),
    ev("madvise(DONTNEED) p50", "madvise_dontneed.p50"),
    ev("madvise(DONTNEED) p99", "madvise_dontneed.p99"),
    ev("madvise(FREE) p50", "madvise_free.p50"),
    ev("madvise(FREE) p99", "madvise_free.p99"),
    ev("user faults per record", "user_faults_per_record"),
    ev("TLB shootdown IPIs", "tlb_shootdown_ipis"),
    ev("pglazyfree", "pglazyfree"),
    ev("pglazyfreed", "pglazyfreed"),
    ev("sys time", "sys"),
];

/// `lab mmap-lock`'s evidence.
const MMAP_LOCK_EVIDENCE: &[Evidence] = &[
    ev("faults/s", "mmap-lock/faults_per_sec"),
    ev("us per fault per thread", "mmap-lock/us_per_fault"),
    ev("storm calls", "mmap-lock/storm_calls"),
    ev("mmap_lock wait", "mmap_lock_wait"),
    ev("read wait p50", "mmap_lock_wait_read.p50"),
    ev("read wait p99", "mmap_lock_wait_read.p99"),
    ev("write wait p99", "mmap_lock_wait_write.p99"),
    ev("write hold p99", "mmap_lock_write_hold.p99"),
    ev("failed trylocks", "mmap_lock_failed"),
    ev("sys time", "sys"),
];

/// `lab rmap`'s evidence.
const RMAP_EVIDENCE: &[Evidence] = &[
    ev("reclaim time per page", "rmap/reclaim_per_page_ns"),
    ev("pages reclaimed", "rmap/reclaimed_pages"),
    ev("rmap walk CPU", "rmap_walk_cpu"),
    ev("rmap walk share of CPU", "rmap_walk_share"),
    ev("rmap walk share, sampled", "rmap_walk_share_sampled"),
    ev("rmap maintenance CPU", "rmap_maint_cpu"),
    ev("memcg reclaim p50", "reclaim_memcg.p50"),
    ev("memcg reclaim p99", "reclaim_memcg.p99"),
    ev("reclaim stall", "reclaim_stall"),
    ev("pages swapped out", "pswpout"),
    ev("TLB shootdown IPIs", "tlb_shootdown_ipis"),
    ev("fork per sharer", "rmap/fork_per_sharer_us"),
    ev("exit per sharer", "rmap/exit_per_sharer_us"),
    ev("sys time", "sys"),
];

/// The signals a lab holds off and turns into a clean exit.
const STOP: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The signal that asked the lab to stop (0: none yet).
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// The signal that asked the lab to stop, if one did.
fn stopped_by() -> Option<i32> {
    match STOPPED_BY.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The error that ends a lab stopped by `sig`: exit 128+N.
fn stopped(sig: i32) -> anyhow::Error {
    exit::failure(
        u8::try_from(128 + sig).unwrap_or(exit::FAILURE),
        format!(
            "lab stopped by {}; its runs were discarded and what it set up removed",
            signal_name(sig)
        ),
    )
}

/// SIGINT, SIGTERM and SIGHUP blocked in this thread (and every thread it
/// starts), and a thread that takes them with `sigtimedwait`: it records
/// the signal and passes it on to this process's children, so that the run
/// under way ends and the lab unwinds through its cleanup. Commands started
/// with `std::process::Command` begin with an empty signal mask. Dropping
/// it stops the thread and unblocks the signals.
struct SignalGuard {
    set: libc::sigset_t,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalGuard {
    fn install() -> anyhow::Result<Self> {
        // SAFETY: sigset operations on a local set, and pthread_sigmask on
        // the calling thread.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in STOP {
                libc::sigaddset(&mut set, s);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc)).context("blocking signals");
            }
            set
        };
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let me = std::process::id();
        let thread = std::thread::Builder::new()
            .name("lab-signals".into())
            .spawn(move || {
                let timeout = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 100_000_000,
                };
                while !flag.load(Ordering::SeqCst) {
                    // SAFETY: waits for a signal of the blocked set; no
                    // siginfo is asked for.
                    let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
                    if sig > 0 {
                        let _ =
                            STOPPED_BY.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                        for pid in children_of(me) {
                            // SAFETY: a plain syscall; a child gone
                            // meanwhile makes it fail with ESRCH.
                            unsafe { libc::kill(pid as libc::pid_t, sig) };
                        }
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(Self {
            set,
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // SAFETY: unblocks the set blocked in `install`, in the same thread.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.set, std::ptr::null_mut()) };
    }
}

/// The processes whose parent is `pid` (from `/proc/*/stat`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| parent_of(&stat))
                == Some(pid)
        })
        .collect()
}

/// The parent pid in a `/proc/PID/stat` line: the field after the state,
/// which follows the command name's closing parenthesis.
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The cgroups `workload rmap` makes are named `vmscope-rmap-PID-N`.
const RMAP_CGROUP: &str = "vmscope-rmap-";

/// Removes the memory cgroups `workload rmap` left behind when it was
/// killed before it could remove them itself: those whose process is gone
/// and that hold no task. Others (a live workload's) are left alone.
fn remove_stale_cgroups() {
    let Ok((root, _)) = pressure::memory_controller() else {
        return;
    };
    let Ok(dir) = std::fs::read_dir(&root) else {
        return;
    };
    for entry in dir.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RMAP_CGROUP))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        let empty =
            std::fs::read_to_string(path.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
        if !empty {
            continue;
        }
        // A cgroup whose last task just exited can be busy for a moment.
        for _ in 0..40 {
            match std::fs::remove_dir(&path) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    eprintln!("vmscope: removing cgroup {}: {e}", path.display());
                    break;
                }
                _ => break,
            }
        }
    }
}

pub fn run(lab: &Lab) -> anyhow::Result<u8> {
    match lab {
        // No eBPF, and no privilege beyond its own child's for the scan;
        // the multi-generational LRU's check (root only) makes a memory
        // cgroup, removed on Ctrl-C too.
        Lab::Wss(a) => held(|| super::lab_wss::run(a), false),
        Lab::Lazyfree(a) => guarded(|| lazyfree(a), false),
        Lab::Rmap(a) => guarded(|| rmap(a), true),
        Lab::MmapLock(a) => guarded(|| mmap_lock(a), false),
    }
}

/// Runs a two-variant lab with the signals held for its cleanup; with
/// `stale_cgroups`, the workload's own cgroup is removed afterwards too.
fn guarded(lab: impl FnOnce() -> anyhow::Result<u8>, stale_cgroups: bool) -> anyhow::Result<u8> {
    Privileges::current().require_bpf()?;
    held(lab, stale_cgroups)
}

/// [`guarded`] without asking for the privilege to load eBPF.
fn held(lab: impl FnOnce() -> anyhow::Result<u8>, stale_cgroups: bool) -> anyhow::Result<u8> {
    let guard = SignalGuard::install()?;
    let result = lab();
    // The zram device and the temporary runs are gone by now, whatever
    // happened; so is the workload's own cgroup, unless it was killed.
    if stale_cgroups {
        remove_stale_cgroups();
    }
    let sig = stopped_by();
    drop(guard);
    match sig {
        Some(sig) => Err(stopped(sig)),
        None => result,
    }
}

fn lazyfree(a: &LazyfreeLabArgs) -> anyhow::Result<u8> {
    // Bad sizes are refused now, not as a failed first run.
    crate::experiments::workload::lazyfree::check(&a.work)?;
    let common = [
        vec!["workload".to_string(), "lazyfree".into()],
        a.work.argv(),
    ]
    .concat();
    let variant = |free: &str| Variant {
        name: free.into(),
        args: [common.clone(), vec!["--free".into(), free.into()]].concat(),
    };
    experiment(
        "lazyfree",
        &a.common,
        variant("dontneed"),
        variant("free"),
        Needs::default(),
        LAZYFREE_EVIDENCE,
    )
}

fn mmap_lock(a: &MmapLockLabArgs) -> anyhow::Result<u8> {
    if a.storm == Storm::None {
        return Err(exit::failure(
            exit::USAGE,
            "--storm none leaves nothing to compare with the control; give mprotect or mmap",
        ));
    }
    crate::experiments::workload::mmap_lock::check(&a.work)?;
    let common = [
        vec!["workload".to_string(), "mmap-lock".into()],
        a.work.argv(),
    ]
    .concat();
    let variant = |storm: Storm| Variant {
        name: format!("storm-{}", storm.name()),
        args: [common.clone(), vec!["--storm".into(), storm.name().into()]].concat(),
    };
    experiment(
        "mmap-lock",
        &a.common,
        variant(Storm::None),
        variant(a.storm),
        Needs {
            root: false,
            mmap_lock: true,
        },
        MMAP_LOCK_EVIDENCE,
    )
}

fn rmap(a: &RmapLabArgs) -> anyhow::Result<u8> {
    if a.sharers < 2 {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--sharers {} leaves nothing to compare with 1 sharer; give 2 or more",
                a.sharers
            ),
        ));
    }
    crate::experiments::workload::rmap::check(a.sharers, &a.work)?;
    // Swap first: without it there is nothing to measure.
    let _zram = match a.setup_zram {
        Some(size) => {
            let z = ZramSwap::new(size).context("--setup-zram")?;
            eprintln!(
                "vmscope: swap on {} ({} MiB) for the runs; removed afterwards",
                z.device().display(),
                size >> 20
            );
            Some(z)
        }
        None if pressure::active_swaps()?.is_empty() => {
            return Err(exit::failure(
                exit::FAILURE,
                "lab rmap reclaims anonymous memory, which needs swap, and no swap device is \
                 active: add one (`swapon`), or give --setup-zram SIZE (e.g. 1G) to have a \
                 zram device set up for the runs",
            ));
        }
        None => None,
    };
    let common = [vec!["workload".to_string(), "rmap".into()], a.work.argv()].concat();
    let variant = |n: usize| Variant {
        name: format!("sharers-{n}"),
        args: [common.clone(), vec!["--sharers".into(), n.to_string()]].concat(),
    };
    experiment(
        "rmap",
        &a.common,
        variant(1),
        variant(a.sharers),
        Needs {
            root: true,
            mmap_lock: false,
        },
        RMAP_EVIDENCE,
    )
}

/// What a lab's runs need beyond a plain recording.
#[derive(Clone, Copy, Default)]
struct Needs {
    /// The workload runs as root (it creates a cgroup).
    root: bool,
    /// Recorded with the mmap_lock probes.
    mmap_lock: bool,
}

/// The recorded runs of both variants, interleaved; the comparison; the
/// evidence.
fn experiment(
    lab: &str,
    c: &LabCommon,
    base: Variant,
    new: Variant,
    needs: Needs,
    evidence: &[Evidence],
) -> anyhow::Result<u8> {
    let dir = c
        .output_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("vmscope-lab-{lab}")));
    let _made = MadeDir::create(&dir)?;
    let me = std::env::current_exe().context("finding vmscope's own binary")?;
    let sides = [&base, &new].map(|v| bench_args(c, &me, &dir, needs, v));
    let tmp = tempfile::tempdir().context("creating a temporary directory for the runs")?;
    let [(base_recs, base_codes), (new_recs, new_codes)] =
        run_interleaved(lab, c.runs, &sides, tmp.path())?;
    let files = [
        bench::assemble(&sides[0], base_recs, base_codes),
        bench::assemble(&sides[1], new_recs, new_codes),
    ];
    for (f, args) in files.iter().zip(&sides) {
        document::write_atomic(&args.output, |w| {
            serde_json::to_writer(&mut *w, f)?;
            Ok(())
        })?;
    }
    let [b, n] = files;
    let (bp, np) = (sides[0].output.clone(), sides[1].output.clone());
    let report = compare::build_report(
        (&bp, &Input::Bench(Box::new(b))),
        (&np, &Input::Bench(Box::new(n))),
        &[],
        c.threshold,
    )?;
    let json = write_comparison(&dir, &report, c.threshold)?;
    let mut text = match c.format {
        CompareFormat::Table => compare::table(&report),
        CompareFormat::Markdown => compare::markdown(&report),
        CompareFormat::Json => json,
    };
    if c.format != CompareFormat::Json {
        text.push('\n');
        text.push_str(&evidence_text(&report, evidence, c.format));
        let _ = writeln!(
            text,
            "\nbench files, the comparison and its page: {} ({}, {}, compare.json, report.html)",
            dir.display(),
            file_name(&bp),
            file_name(&np)
        );
    }
    print!("{text}");
    Ok(0)
}

/// How `bench` would run one variant: this vmscope with the variant's
/// arguments, its bench file in the lab's directory.
fn bench_args(c: &LabCommon, me: &Path, dir: &Path, needs: Needs, v: &Variant) -> BenchArgs {
    BenchArgs {
        runs: c.runs,
        warmup: 0,
        trim: 0,
        output: dir.join(format!("{}.json", v.name)),
        name: Some(v.name.clone()),
        prepare: None,
        ignore_failure: false,
        show_output: false,
        metric: Vec::new(),
        interval: Duration::from_secs(1),
        as_root: needs.root,
        mmap_lock: needs.mmap_lock,
        syscall_latency: false,
        command: std::iter::once(me.display().to_string())
            .chain(v.args.iter().cloned())
            .collect(),
    }
}

/// A progress bar over both variants' runs, when stderr is a terminal.
fn progress_bar(runs: u32) -> Option<indicatif::ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(u64::from(runs) * 2);
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    })
}

/// Each side's recordings and exit codes.
type SideRuns = (Vec<crate::model::recording::Recording>, Vec<i32>);

/// Runs the two sides `runs` times each, alternating so that a drift of
/// the machine hits both alike. Stops at the first failed run, or when a
/// signal asked the lab to stop.
fn run_interleaved(
    lab: &str,
    runs: u32,
    sides: &[BenchArgs; 2],
    tmp: &Path,
) -> anyhow::Result<[SideRuns; 2]> {
    let mut recs: [Vec<crate::model::recording::Recording>; 2] = [Vec::new(), Vec::new()];
    let mut codes: [Vec<i32>; 2] = [Vec::new(), Vec::new()];
    let bar = progress_bar(runs);
    let abandon = || {
        if let Some(b) = &bar {
            b.abandon();
        }
    };
    for i in 0..runs {
        for (k, args) in sides.iter().enumerate() {
            if let Some(sig) = stopped_by() {
                return Err(stopped(sig));
            }
            let name = args.name.as_deref().unwrap_or(lab);
            if let Some(b) = &bar {
                b.set_prefix(name.to_string());
            }
            let path = tmp.join(format!("{name}-{i}.json"));
            let run = bench::record_run(args, &path);
            // A run ended by the signal is no failure of its own.
            if let Some(sig) = stopped_by() {
                abandon();
                return Err(stopped(sig));
            }
            let (code, rec) = run?;
            if code != 0 {
                abandon();
                return Err(run_failed(i, name, args, code, &rec));
            }
            recs[k].push(rec);
            codes[k].push(code);
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(sig) = stopped_by() {
        return Err(stopped(sig));
    }
    let [base_recs, new_recs] = recs;
    let [base_codes, new_codes] = codes;
    Ok([(base_recs, base_codes), (new_recs, new_codes)])
}

/// The error for run `i` (from 0) of a side that exited with `code`,
/// ending with the tail of the workload's output.
fn run_failed(
    i: u32,
    name: &str,
    args: &BenchArgs,
    code: i32,
    rec: &crate::model::recording::Recording,
) -> anyhow::Error {
    let out = rec
        .child
        .as_ref()
        .and_then(|c| c.output.as_ref())
        .map(|o| o.tail.trim().to_string())
        .unwrap_or_default();
    exit::failure(
        exit::FAILURE,
        format!(
            "run {} of {name} (`vmscope {}`) exited with {code}{}{out}",
            i + 1,
            args.command[1..].join(" "),
            if out.is_empty() { "" } else { ": " }
        ),
    )
}

/// Writes `compare.json` and the report page made from it into `dir`;
/// returns the comparison's JSON.
fn write_comparison(dir: &Path, report: &Report, threshold: f64) -> anyhow::Result<String> {
    let compare_path = dir.join("compare.json");
    let json = compare::json(report)?;
    document::write_atomic(&compare_path, |w| {
        std::io::Write::write_all(w, json.as_bytes())?;
        Ok(())
    })?;
    // The page with the plots, made from the comparison just written.
    crate::report::run(&crate::cli::ReportArgs {
        file: compare_path.clone(),
        new: None,
        output: Some(dir.join("report.html")),
        svg: None,
        png: None,
        threshold,
    })?;
    Ok(json)
}

/// The output directory, removed again if the lab made it and leaves it
/// empty (a lab that failed or was stopped before writing anything).
struct MadeDir(Option<PathBuf>);

impl MadeDir {
    fn create(dir: &Path) -> anyhow::Result<Self> {
        let made = !dir.exists();
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "creating {} (choose another place with -o DIR)",
                dir.display()
            )
        })?;
        Ok(Self(made.then(|| dir.to_path_buf())))
    }
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            // Fails, as it should, when the lab wrote its files there.
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| p.display().to_string(), |f| f.to_string_lossy().into())
}

/// The evidence table: each figure's mean per run on both sides, taken from
/// the comparison's rows, or from one side's values when only that side has
/// it (a behaviour used on one side only).
fn evidence_text(r: &Report, evidence: &[Evidence], format: CompareFormat) -> String {
    let side_mean = |metric: &str, new: bool| -> Option<(f64, String)> {
        let row = r.rows.iter().find(|x| x.metric == metric)?;
        let s = if new { &row.new } else { &row.base };
        Some((s.mean, row.unit.clone()))
    };
    let cell = |metric: &str, new: bool| match side_mean(metric, new) {
        Some((v, unit)) => crate::units::fmt_value(v, &unit),
        None => r
            .one_sided
            .iter()
            .find(|x| x.metric == metric && x.new == new)
            .map_or_else(
                || "-".to_string(),
                |x| crate::units::fmt_value(x.mean, &x.unit),
            ),
    };
    let mut s = String::new();
    let (bn, nn) = (r.base.name.as_str(), r.new.name.as_str());
    let md = format == CompareFormat::Markdown;
    if md {
        let _ = writeln!(s, "| kernel evidence (mean per run) | {bn} | {nn} |");
        let _ = writeln!(s, "|---|---:|---:|");
    } else {
        let _ = writeln!(
            s,
            "kernel evidence (mean per run; - : not seen on that side)"
        );
        let _ = writeln!(s, "{:<28} {:>16} {:>16}", "", bn, nn);
    }
    for e in evidence {
        let (b, n) = (cell(e.metric, false), cell(e.metric, true));
        if md {
            let _ = writeln!(s, "| {} | {b} | {n} |", e.label);
        } else {
            let _ = writeln!(s, "{:<28} {b:>16} {n:>16}", e.label);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every evidence row names a figure the comparison has: a run row, a
    /// histogram's percentile, or the lab's workload's own figure. (A name
    /// it lacks shows as "-" on both sides, whatever the runs measured.)
    #[test]
    fn every_evidence_figure_is_one_the_comparison_makes() {
        use crate::model::catalogue;
        let hists: Vec<String> = (0..vmscope_common::hist::COUNT)
            .map(catalogue::hist_name)
            .collect();
        let known = |m: &str, lab: &str| {
            catalogue::RUN_ROWS.iter().any(|r| r.name == m)
                || m.strip_prefix(lab).is_some_and(|r| r.starts_with('/'))
                || m.rsplit_once('.').is_some_and(|(h, q)| {
                    catalogue::QUANTILES.contains(&q) && hists.iter().any(|n| n == h)
                })
        };
        for (lab, evidence) in [
            ("lazyfree", LAZYFREE_EVIDENCE),
            ("mmap-lock", MMAP_LOCK_EVIDENCE),
            ("rmap", RMAP_EVIDENCE),
        ] {
            for e in evidence {
                assert!(
                    known(e.metric, lab),
                    "lab {lab}: {} ({})",
                    e.label,
                    e.metric
                );
            }
        }
    }

    #[test]
    fn the_parent_is_read_past_the_command_name() {
        assert_eq!(parent_of("42 (sh) S 7 42 42 0 -1"), Some(7));
        // A name with spaces and parentheses of its own.
        assert_eq!(parent_of("42 (a) b (c) R 9 42 42 0 -1"), Some(9));
        assert_eq!(parent_of("42 (sh"), None);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let found = children_of(std::process::id()).contains(&child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "sleep {} not found among the children", child.id());
    }

    #[test]
    fn a_stop_is_128_plus_the_signal() {
        for (sig, code) in [
            (libc::SIGINT, 130),
            (libc::SIGTERM, 143),
            (libc::SIGHUP, 129),
        ] {
            let e = stopped(sig);
            assert_eq!(exit::code_of(&e, 0), code);
            assert!(exit::message_of(&e).contains(signal_name(sig)));
        }
    }
}
