//! `cargo xtask bench soak --cgroups N [--rate R] [--concurrency K]
//! [--pages P] [--minutes M] [--ci]`: cgroup churn under vmscope's three
//! long-running modes.
//!
//! N cgroups (default 10,000) are made below a parent, `/vmscope-soak`, on
//! the hierarchy vmscope keys processes by (the memory controller's v1
//! hierarchy where there is one, else cgroup v2), R a second (default 45;
//! 0: as fast as they go), at most K at a time (default 6). Each gets one
//! short-lived `vmscope-testchild touch P` (P pages, default 1024: 4 MiB),
//! which is waited for (its rusage taken by wait4), and is then removed.
//! The children are placed the two ways software places them, alternately:
//! the forked child writes "0" to the cgroup's `cgroup.procs` itself before
//! exec, or it waits on a pipe while the parent writes its pid there (how a
//! container runtime holds a child until it is placed).
//!
//! Meanwhile `serve --per-cgroup 20` (scraped every second), `top --batch
//! --cgroups -i 1s` and `record --cgroup /vmscope-soak --format jsonl -i
//! 1s` run. The goals, each printed with its numbers and, when missed,
//! named on a line of its own (the exit status is then 1):
//!
//! 1. Memory: each tool's RSS grows by under 5 MB from 130 s in to the end
//!    (from a third of the way in when the run is shorter than 190 s, which
//!    it says). Not from the first minute: serve keeps a removed cgroup's
//!    series 120 s after it finds it gone (`LINGER`), which it checks every
//!    10 s (`RECHECK`), so under steady churn its state grows by design for
//!    the first 130 s.
//! 2. Bounded series: at most 20 distinct `cgroup` labels in one scrape
//!    across serve's per-cgroup families (the OOM family has its own
//!    bound). The exporter picks the top N by activity, and a removed
//!    cgroup's lingering series take one of those N places, so the bound is
//!    N itself, with no slack.
//! 3. Every cgroup named: no `cgroup#ID` in serve's labels or top's cgroup
//!    table, and no cgroup in the recording without a path.
//! 4. The recording names every soak cgroup by its path and charges it
//!    what its process did, within 2%, for each cgroup and for the sum:
//!    the child's faults by wait4's rusage (its min_flt and maj_flt), with
//!    or without those taken between fork and the move (vmscope charges the
//!    interval a process moves in to its new cgroup).
//! 5. Restored: every child reaped, every soak cgroup and the parent
//!    removed, also after an error or Ctrl-C (a Drop guard; SIGINT, SIGTERM
//!    and SIGHUP stop the churn and the tools first).
//!
//! Also: no exported series goes down between scrapes, every child exits
//! 0, and all N cgroups are run (within M minutes when `--minutes` is
//! given). `--ci` is the run for CI: the default N and rate, which must be
//! done within 4 minutes, so that the whole run takes under 5.

mod books;
mod churn;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, ExitStatus},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use self::{
    books::{RecordBooks, Tally, TopBooks},
    churn::{ChildRun, Churn, Hierarchy, Placement, SoakTree},
};
use crate::{
    bench_soak::{self, GOAL_GROWTH_KB, Kids, Tools, Watch},
    process::{self, say},
    workspace::Workspace,
};

/// Per-cgroup series serve is asked for; the bound of goal 2.
const PER_CGROUP: usize = 20;
/// The CI run: how many cgroups (the default for every run), and the time
/// they must be done in.
const CI_CGROUPS: u64 = 10_000;
const CI_MINUTES: f64 = 4.0;
/// Cgroups started per second by default: 10,000 take 3.7 minutes, long
/// enough for every tool's state to reach its steady size (see [`STEADY`]).
const RATE: f64 = 45.0;
/// When the memory goal's first reading is taken. Not the first minute:
/// serve keeps a removed cgroup's series for `LINGER` (120 s) after it
/// finds it gone, which it checks every `RECHECK` (10 s; both in its
/// per-cgroup exporter), so under steady churn what it keeps grows by
/// design for the first 130 s.
const STEADY: Duration = Duration::from_secs(130);
/// Intervals the tools keep running after the last cgroup, so the last
/// exits are read.
const SETTLE_SECS: u32 = 3;

/// What was asked for (`None`: the default).
pub struct Asked {
    pub cgroups: Option<u64>,
    pub concurrency: Option<usize>,
    pub pages: Option<u64>,
    pub rate: Option<f64>,
    pub minutes: Option<f64>,
    pub ci: bool,
}

/// What to run.
struct Plan {
    cgroups: u64,
    concurrency: usize,
    pages: u64,
    /// Cgroups started per second at most (`None`: as fast as they go).
    rate: Option<f64>,
    /// The time the churn must be done in; it is stopped there.
    limit: Option<Duration>,
    ci: bool,
}

impl Plan {
    fn of(a: &Asked) -> Plan {
        let minutes = a.minutes.or(a.ci.then_some(CI_MINUTES));
        Plan {
            cgroups: a.cgroups.unwrap_or(CI_CGROUPS),
            concurrency: a.concurrency.unwrap_or(6),
            pages: a.pages.unwrap_or(1024),
            rate: Some(a.rate.unwrap_or(RATE)).filter(|r| *r > 0.0),
            limit: minutes.map(|m| Duration::from_secs_f64(m * 60.0)),
            ci: a.ci,
        }
    }
}

pub fn bench_soak_cgroups(ws: &mut Workspace, asked: &Asked) -> Result<()> {
    let plan = Plan::of(asked);
    let (vmscope, testchild) = bench_soak::build(ws)?;
    let dir = ws.target_dir()?.join("soak-cgroups");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let h = Hierarchy::detect()?;
    let before = memory_cgroups();
    churn::catch_signals();
    let tree = SoakTree::create(&h)?;
    let tree_dir = tree.dir.clone();
    say!(
        "bench soak: {} cgroups below {} ({}), {} at a time, {}{}",
        plan.cgroups,
        tree_dir.display(),
        h.describe(),
        plan.concurrency,
        plan.rate
            .map_or("as fast as they go".into(), |r| format!("{r} a second")),
        if plan.ci { " (the CI run)" } else { "" }
    );
    let result = soak(&plan, &vmscope, &testchild, &dir, &tree);
    drop(tree);
    let restored = report_restored(&tree_dir, before);
    let mut missed = result?;
    missed.extend(restored);
    if let Some(sig) = churn::signal() {
        bail!("bench soak --cgroups: interrupted by signal {sig}; the system was cleaned up");
    }
    for m in &missed {
        println!("bench soak --cgroups: goal missed: {m}");
    }
    if !missed.is_empty() {
        bail!(
            "bench soak --cgroups: {} goal(s) missed (see above)",
            missed.len()
        );
    }
    Ok(())
}

/// Where the tools write.
struct Files {
    stream: PathBuf,
    top: PathBuf,
    /// The once-a-second readings, for a closer look.
    readings: PathBuf,
}

/// The run itself: the tools, the churn, then the reports. Returns the
/// goals missed.
fn soak(
    plan: &Plan,
    vmscope: &Path,
    testchild: &Path,
    dir: &Path,
    tree: &SoakTree,
) -> Result<Vec<String>> {
    let files = Files {
        stream: dir.join("record.jsonl"),
        top: dir.join("top.txt"),
        readings: dir.join("readings.tsv"),
    };
    for f in [&files.stream, &files.top, &files.readings] {
        let _ = std::fs::remove_file(f);
    }
    let port = bench_soak::free_port()?;
    let mut kids = Kids::default();
    let tools = start_tools(&mut kids, vmscope, port, &files, tree)?;
    wait_ready(&mut kids, tools, &files.stream, port)?;
    let start = Instant::now();
    let mut watch = Watch::new(start);
    let mut seen = ServeSeen::new(start);
    let churn = Churn::new(tree, testchild, plan.pages, plan.cgroups, plan.rate);
    let busy = drive(plan, &churn, &mut kids, tools, port, &mut watch, &mut seen)?;
    // After a signal the tools have it too: nothing to wait for.
    for _ in 0..SETTLE_SECS * u32::from(churn::signal().is_none()) {
        seen.note(watch.read(port, start, tools).as_deref(), &tree.rel());
    }
    let record_code = stop_tools(&mut kids, tools);
    drop(kids);
    write_readings(&files.readings, &watch, &seen)?;

    let runs = churn.runs.into_inner().unwrap_or_default();
    let errors = churn.errors.into_inner().unwrap_or_default();
    println!(
        "soak --cgroups: {} of {} cgroups made, given a faulting process and removed in {:.1} s \
         ({:.0} a second, {} at a time); /metrics scraped {} times ({} failed)",
        runs.len(),
        plan.cgroups,
        busy.as_secs_f64(),
        runs.len() as f64 / busy.as_secs_f64().max(1e-9),
        plan.concurrency,
        watch.scrapes,
        watch.failed_scrapes,
    );
    let mut missed = report_churn(plan, &runs, &errors, busy);
    missed.extend(report_memory(tools, &watch));
    if !bench_soak::report_decreased(&watch.decreased) {
        missed.push("an exported series went down between two scrapes".into());
    }
    let ids: BTreeSet<String> = runs.iter().map(|r| format!("cgroup#{}", r.id)).collect();
    missed.extend(seen.report(&tree.rel(), &ids));
    missed.extend(report_top(&files.top, &tree.rel(), &ids));
    missed.extend(report_record(&files.stream, &runs, tree, record_code)?);
    Ok(missed)
}

/// Starts `serve`, `top --batch --cgroups` (its output to a file) and
/// `record --cgroup` over the soak's parent.
fn start_tools(
    kids: &mut Kids,
    vmscope: &Path,
    port: u16,
    files: &Files,
    tree: &SoakTree,
) -> Result<Tools> {
    let mut serve = Command::new(vmscope);
    serve.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--per-cgroup",
        &PER_CGROUP.to_string(),
    ]);
    say!("bench soak: {}", process::show(&serve));
    let serve_pid = kids.spawn("serve", serve)?;
    let mut top = Command::new(vmscope);
    top.args(["top", "--batch", "--cgroups", "-i", "1s", "-n", "1000000"]);
    let out = std::fs::File::create(&files.top)
        .with_context(|| format!("creating {}", files.top.display()))?;
    say!(
        "bench soak: {} > {}",
        process::show(&top),
        files.top.display()
    );
    let top_pid = kids.spawn_to("top --batch", top, out.into())?;
    let mut record = Command::new(vmscope);
    record
        .args(["record", "--cgroup", &tree.rel()])
        .args(["--format", "jsonl", "-i", "1s", "-o"])
        .arg(&files.stream);
    say!("bench soak: {}", process::show(&record));
    let record_pid = kids.spawn("record", record)?;
    Ok([
        ("serve", serve_pid),
        ("top", top_pid),
        ("record", record_pid),
    ])
}

/// Waits until serve answers and the recording has its first sample, so
/// no cgroup is made before the tools look.
fn wait_ready(kids: &mut Kids, tools: Tools, stream: &Path, port: u16) -> Result<()> {
    let [(_, serve), _, (_, record)] = tools;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        for pid in [serve, record] {
            if let Some(st) = kids.try_wait(pid)? {
                bail!(
                    "bench soak: a tool exited before the churn started ({}; its stderr is above)",
                    process::describe(st)
                );
            }
        }
        let sampled =
            std::fs::read_to_string(stream).is_ok_and(|t| t.contains("\"type\":\"sample\""));
        if sampled && bench_soak::scrape(port).is_ok() {
            return Ok(());
        }
        if Instant::now() >= until || churn::stopped() {
            bail!("bench soak: serve and record were not both up within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the churn on K workers while reading the tools every second;
/// returns how long the churn took. It stops early on a signal, an error,
/// the time limit, or a tool that exits.
fn drive(
    plan: &Plan,
    churn: &Churn,
    kids: &mut Kids,
    tools: Tools,
    port: u16,
    watch: &mut Watch,
    seen: &mut ServeSeen,
) -> Result<Duration> {
    let start = Instant::now();
    std::thread::scope(|s| {
        let _stop = churn::StopOnDrop;
        let workers: Vec<_> = (0..plan.concurrency)
            .map(|_| s.spawn(|| churn.work()))
            .collect();
        while !workers.iter().all(|w| w.is_finished()) {
            seen.note(watch.read(port, start, tools).as_deref(), &churn.tree.rel());
            if plan.limit.is_some_and(|l| start.elapsed() >= l) && !churn::stopped() {
                say!("bench soak: the time limit is up; stopping the churn");
                churn::request_stop();
            }
            for (name, pid) in tools {
                if let Some(st) = kids.try_wait(pid)? {
                    churn.note_error(format!("{name} exited early ({})", process::describe(st)));
                }
            }
        }
        let busy = start.elapsed();
        for w in workers {
            if w.join().is_err() {
                churn.note_error("a worker panicked".into());
            }
        }
        Ok(busy)
    })
}

/// Stops the tools: record first (SIGINT, then it writes its final line),
/// then top and serve. Returns record's exit status.
fn stop_tools(kids: &mut Kids, tools: Tools) -> Option<ExitStatus> {
    let [(_, serve), (_, top), (_, record)] = tools;
    kids.signal(record, libc::SIGINT);
    let until = Instant::now() + Duration::from_secs(60);
    let code = loop {
        match kids.try_wait(record) {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(100)),
            _ => break None,
        }
    };
    kids.signal(top, libc::SIGINT);
    kids.signal(serve, libc::SIGINT);
    code
}

/// Writes each reading: the time, each tool's RSS and the scrape's count
/// of cgroup labels.
fn write_readings(file: &Path, watch: &Watch, seen: &ServeSeen) -> Result<()> {
    let mut out = String::from("t_s\tserve_rss_kb\ttop_rss_kb\trecord_rss_kb\tcgroup_labels\n");
    for ((t, usage), count) in watch.readings.iter().zip(&seen.counts) {
        let cell = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let rss = usage.map(|u| cell(u.map(|u| u.rss_kb)));
        out += &format!(
            "{:.1}\t{}\t{}\t{}\t{}\n",
            t.as_secs_f64(),
            rss[0],
            rss[1],
            rss[2],
            cell(count.map(|c| c as u64))
        );
    }
    std::fs::write(file, out).with_context(|| format!("writing {}", file.display()))?;
    say!("bench soak: the readings are in {}", file.display());
    Ok(())
}

/// Whether every cgroup was run, and each child exited 0.
fn report_churn(plan: &Plan, runs: &[ChildRun], errors: &[String], busy: Duration) -> Vec<String> {
    let mut missed = Vec::new();
    let failed = runs.iter().filter(|r| r.status != 0).count();
    for e in errors.iter().take(10) {
        println!("  error: {e}");
    }
    if !errors.is_empty() {
        missed.push(format!(
            "the churn hit {} error(s) (see above)",
            errors.len()
        ));
    }
    if failed > 0 {
        missed.push(format!("{failed} children did not exit 0"));
    }
    if (runs.len() as u64) < plan.cgroups {
        let within = plan
            .limit
            .map(|l| format!(" within {:.1} min", l.as_secs_f64() / 60.0))
            .unwrap_or_default();
        missed.push(format!(
            "only {} of {} cgroups were run{within} ({:.0} s)",
            runs.len(),
            plan.cgroups,
            busy.as_secs_f64()
        ));
    }
    missed
}

/// Goal 1, from [`STEADY`] in when the run lasts a minute past it, else
/// from a third of the way in.
fn report_memory(tools: Tools, watch: &Watch) -> Vec<String> {
    let end = watch.readings.last().map_or(Duration::ZERO, |(t, _)| *t);
    let from = if end >= STEADY + Duration::from_secs(60) {
        println!(
            "  memory: growth from {} s in (serve keeps removed cgroups 120 s after finding \
             them gone, checked every 10 s) to the end",
            STEADY.as_secs()
        );
        STEADY
    } else {
        let third = end / 3;
        println!(
            "  memory: the run took {:.0} s, under {} s: growth is measured from a third of \
             the way in ({} s), where serve may still be gaining removed cgroups it keeps \
             by design",
            end.as_secs_f64(),
            (STEADY + Duration::from_secs(60)).as_secs(),
            third.as_secs()
        );
        third
    };
    if bench_soak::report_usage(&tools, &watch.readings, from) {
        Vec::new()
    } else {
        vec![format!(
            "memory: a tool's RSS grew by {} MB or more from {} s in to the end",
            GOAL_GROWTH_KB / 1024,
            from.as_secs()
        )]
    }
}

/// What the scrapes showed of the per-cgroup families.
struct ServeSeen {
    /// The most distinct `cgroup` labels in one scrape, and when.
    most: usize,
    most_at: Duration,
    with_cgroups: u64,
    /// Soak cgroups ever exported.
    soak: BTreeSet<String>,
    /// `cgroup#ID` names anywhere in a scrape.
    by_id: BTreeSet<String>,
    /// Each scrape's count of labels (none when it failed), one per reading.
    counts: Vec<Option<usize>>,
    start: Instant,
}

impl ServeSeen {
    fn new(start: Instant) -> Self {
        ServeSeen {
            most: 0,
            most_at: Duration::ZERO,
            with_cgroups: 0,
            soak: BTreeSet::new(),
            by_id: BTreeSet::new(),
            counts: Vec::new(),
            start,
        }
    }

    fn note(&mut self, body: Option<&str>, parent: &str) {
        let t = self.start.elapsed();
        let Some(body) = body else {
            self.counts.push(None);
            return;
        };
        let labels = books::cgroup_labels(body);
        self.counts.push(Some(labels.len()));
        if labels.len() > self.most {
            self.most = labels.len();
            self.most_at = t;
        }
        self.with_cgroups += u64::from(!labels.is_empty());
        let prefix = format!("{parent}/");
        self.soak
            .extend(labels.into_iter().filter(|l| l.starts_with(&prefix)));
        self.by_id.extend(books::names_by_id(body));
    }

    /// Goals 2 and 3 for serve; `soak_ids` names the soak's cgroups by id.
    fn report(&self, parent: &str, soak_ids: &BTreeSet<String>) -> Vec<String> {
        let mut missed = Vec::new();
        println!(
            "  serve --per-cgroup {PER_CGROUP}: at most {} cgroup labels in one scrape{} \
             (goal <= {PER_CGROUP}); {} scrapes had per-cgroup series; {} of the soak's \
             cgroups below {parent} were exported at some point",
            self.most,
            if self.most > 0 {
                format!(" ({} s in)", self.most_at.as_secs())
            } else {
                String::new()
            },
            self.with_cgroups,
            self.soak.len(),
        );
        if self.most > PER_CGROUP {
            missed.push(format!(
                "serve exported {} cgroup labels in one scrape (bound {PER_CGROUP})",
                self.most
            ));
        }
        println!(
            "  serve: cgroups named by id (cgroup#ID): {}{}{} (goal 0)",
            self.by_id.len(),
            of_soak(&self.by_id, soak_ids),
            sample_of(&self.by_id)
        );
        if !self.by_id.is_empty() {
            missed.push(format!(
                "serve named {} cgroups by id (cgroup#ID)",
                self.by_id.len()
            ));
        }
        missed
    }
}

/// ", N of them the soak's" for the names by id that are soak cgroups.
fn of_soak(by_id: &BTreeSet<String>, soak_ids: &BTreeSet<String>) -> String {
    if by_id.is_empty() {
        return String::new();
    }
    format!(
        ", {} of them the soak's",
        by_id.intersection(soak_ids).count()
    )
}

/// " (e.g. a, b, c)" for the first few of `names`.
fn sample_of(names: &BTreeSet<String>) -> String {
    if names.is_empty() {
        return String::new();
    }
    let few: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    format!(" (e.g. {})", few.join(", "))
}

/// Goal 3 for top; `soak_ids` names the soak's cgroups by id.
fn report_top(file: &Path, parent: &str, soak_ids: &BTreeSet<String>) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let top = TopBooks::read(&text, &format!("{parent}/"));
    println!(
        "  top --batch --cgroups: {} snapshots, {} of the soak's cgroups shown; cgroups \
         shown by id: {}{}{} (goal 0)",
        top.snapshots,
        top.soak_rows.len(),
        top.by_id.len(),
        of_soak(&top.by_id, soak_ids),
        sample_of(&top.by_id)
    );
    if top.by_id.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "top showed {} cgroups by id (cgroup#ID)",
            top.by_id.len()
        )]
    }
}

/// Goals 3 and 4 for the recording.
fn report_record(
    stream: &Path,
    runs: &[ChildRun],
    tree: &SoakTree,
    code: Option<ExitStatus>,
) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(stream).with_context(|| format!("reading {}", stream.display()))?;
    let rec = RecordBooks::read(&text);
    let mut missed = Vec::new();
    let mount = tree
        .dir
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    println!(
        "  record --cgroup {}: {}, {} samples{}; cgroups keyed on {}",
        tree.rel(),
        code.map_or("did not stop within 60 s".into(), process::describe),
        rec.samples,
        if rec.recording.is_some() {
            ""
        } else {
            " (no final line)"
        },
        rec.mount.as_deref().unwrap_or("(no header)"),
    );
    if rec.mount.as_deref() != Some(mount.as_str()) {
        missed.push(format!(
            "record keyed cgroups on {:?}, but the soak's are below {mount}",
            rec.mount
        ));
    }
    let unnamed: BTreeSet<String> = rec.unnamed().map(|id| format!("cgroup#{id}")).collect();
    let literal = books::names_by_id(&text);
    let in_totals = rec.unnamed_in_totals();
    println!(
        "  record: cgroups never named (no path; shown as cgroup#ID): {}{} in the samples, \
         {in_totals} in the final line's cgroups, {} `cgroup#` strings (goal 0)",
        unnamed.len(),
        sample_of(&unnamed),
        literal.len(),
    );
    if !unnamed.is_empty() || in_totals > 0 || !literal.is_empty() {
        missed.push(format!(
            "the recording left {} cgroups without a name",
            unnamed.len().max(in_totals).max(literal.len())
        ));
    }
    missed.extend(report_cgroup_books(runs, &rec));
    if rec.unkeyed_rows > 0 || rec.backwards > 0 {
        println!(
            "  record: {} process rows without a cgroup, {} whose faults went back",
            rec.unkeyed_rows, rec.backwards
        );
    }
    Ok(missed)
}

/// Goal 4: the soak's cgroups in the recording, by how their process was
/// placed.
fn report_cgroup_books(runs: &[ChildRun], rec: &RecordBooks) -> Vec<String> {
    let mut by: BTreeMap<&str, Tally> = BTreeMap::new();
    for r in runs {
        let key = match r.placement {
            Placement::ItselfBeforeExec => "child writes 0 before exec",
            Placement::HeldByParent => "held; parent writes its pid",
        };
        by.entry(key)
            .or_default()
            .add(r.id, &r.path, r.faults, r.before_move, rec);
    }
    let (by, all) = books::tally_all(by);
    println!(
        "  {:<28} {:>7} {:>7} {:>8} {:>7} {:>7}  {:>12} {:>12} {:>7}",
        "placement",
        "cgroups",
        "named",
        "unnamed",
        "absent",
        "agree",
        "recorded",
        "rusage",
        "before"
    );
    for (name, t) in by.iter().chain([(&"all", &all)]) {
        println!(
            "  {name:<28} {:>7} {:>7} {:>8} {:>7} {:>7}  {:>12} {:>12} {:>7}",
            t.cgroups,
            t.named,
            t.unnamed + t.misnamed,
            t.absent,
            t.agree,
            t.recorded_faults,
            t.faults,
            t.before_move
        );
    }
    let memcg: Option<u64> = runs.iter().map(|r| r.memcg_faults).sum();
    println!(
        "  (agree: recorded faults within {:.0}% of the child's rusage, with or without its \
         faults before the move, `before`; the cgroups' own memory.stat pgfault sum: {})",
        100.0 * books::FAULT_TOLERANCE,
        memcg.map_or("unavailable".into(), |m| m.to_string())
    );
    let mut missed = Vec::new();
    if all.named < all.cgroups {
        missed.push(format!(
            "the recording named {} of {} soak cgroups by their path ({} unnamed, {} absent)",
            all.named,
            all.cgroups,
            all.unnamed + all.misnamed,
            all.absent
        ));
    }
    if all.agree < all.cgroups {
        missed.push(format!(
            "the recording's faults agreed with the child's for {} of {} cgroups",
            all.agree, all.cgroups
        ));
    }
    if !all.sum_agrees() {
        missed.push(format!(
            "the recording charged the soak's cgroups {} faults; their children took {} \
             ({:+.1}%)",
            all.recorded_faults,
            all.faults,
            100.0 * (all.recorded_faults as f64 - all.faults as f64) / all.faults.max(1) as f64
        ));
    }
    missed
}

/// Memory cgroups the kernel counts (`/proc/cgroups`; removed ones count
/// until the kernel frees them).
fn memory_cgroups() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/cgroups").ok()?;
    t.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&"memory")).then(|| f.get(2)?.parse().ok())?
    })
}

/// Goal 5: the parent cgroup gone and no child of ours left.
fn report_restored(dir: &Path, before: Option<u64>) -> Vec<String> {
    let gone = !dir.exists();
    let mut status = 0;
    // SAFETY: polls for any child of ours without reaping a live one.
    let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    let no_children = r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
    let count = |c: Option<u64>| c.map_or("?".into(), |c| c.to_string());
    println!(
        "  restored: {} {}; child processes left: {} (goal: removed, none); memory cgroups \
         on the system: {} before, {} after (removed ones count until the kernel frees them)",
        dir.display(),
        if gone { "removed" } else { "STILL THERE" },
        if no_children { "none" } else { "some" },
        count(before),
        count(memory_cgroups()),
    );
    let mut missed = Vec::new();
    if !gone {
        missed.push(format!("{} was not removed", dir.display()));
    }
    if !no_children {
        missed.push("a child process was left".into());
    }
    missed
}
