//! `cargo xtask bench soak [--processes N] [--minutes M]`: vmscope's three
//! long-running modes (`serve`, `top --batch` and `record --format jsonl`)
//! side by side while N short-lived processes fork, fault and exit next to
//! a few long-lived ones. `/metrics` is scraped every second. It prints each
//! tool's memory at the start and end and its CPU per second, what was lost,
//! and any exported series that went down between two scrapes, against the
//! goals: under 5 MB of growth per tool, no series going down, and `record`
//! following every new child of its tree.
//!
//! `cargo xtask bench soak --cgroups N [--rate R] [--concurrency K]
//! [--pages P] [--minutes M] [--ci]` churns cgroups instead: N cgroups made, each given
//! one short-lived faulting process, and removed, while the same three
//! tools watch (`serve --per-cgroup 20`, `top --batch --cgroups`, `record
//! --cgroup`). See [`crate::bench_soak_cgroups`] for what it checks. This
//! file holds what both modes share: the tools' usage, the scrapes, and the
//! processes started.

use std::{
    collections::BTreeMap,
    ffi::OsString,
    io::{Read as _, Write as _},
    net::TcpStream,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_soak_cgroups,
    process::{self, say},
    tasks,
    workspace::Workspace,
};

/// Long-lived processes faulting steadily beside the churn.
const LONG_LIVED: usize = 4;
/// Memory growth allowed per tool.
pub const GOAL_GROWTH_KB: u64 = 5 * 1024;
/// Readings before this are warm-up (allocator arenas, first maps read).
const WARM_UP: Duration = Duration::from_secs(5);

struct Args {
    processes: Option<u64>,
    minutes: Option<f64>,
    cgroups: Option<u64>,
    concurrency: Option<usize>,
    pages: Option<u64>,
    rate: Option<f64>,
    ci: bool,
}

const USAGE: &str = "takes --processes N and --minutes M, or --cgroups N with \
                     --concurrency K, --pages P, --rate R, --minutes M and --ci";

fn parse(args: &[OsString]) -> Result<Args> {
    let mut a = Args {
        processes: None,
        minutes: None,
        cgroups: None,
        concurrency: None,
        pages: None,
        rate: None,
        ci: false,
    };
    let mut it = args.iter().map(|s| s.to_string_lossy().into_owned());
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("bench soak: {flag} needs a value"))
        };
        let count = |v: String, what: &str| -> Result<u64> {
            match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("bench soak: {what} takes a positive count, not {v:?}"),
            }
        };
        match flag.as_str() {
            "--processes" => a.processes = Some(count(value()?, "--processes")?),
            "--cgroups" => a.cgroups = Some(count(value()?, "--cgroups")?),
            "--concurrency" => {
                a.concurrency = Some(count(value()?, "--concurrency")?.min(256) as usize)
            }
            "--pages" => a.pages = Some(count(value()?, "--pages")?),
            "--ci" => a.ci = true,
            "--rate" => {
                let r: f64 = value()?
                    .parse()
                    .context("bench soak: --rate takes cgroups per second")?;
                if !(r >= 0.0 && r.is_finite()) {
                    bail!("bench soak: --rate must be 0 (as fast as they go) or more");
                }
                a.rate = Some(r);
            }
            "--minutes" => {
                let m: f64 = value()?
                    .parse()
                    .context("bench soak: --minutes takes a number")?;
                if !(m > 0.0 && m.is_finite()) {
                    bail!("bench soak: --minutes must be positive");
                }
                a.minutes = Some(m);
            }
            other => bail!("bench soak: unknown argument {other:?} ({USAGE})"),
        }
    }
    let cgroup_mode = a.cgroups.is_some() || a.ci;
    if cgroup_mode && a.processes.is_some() {
        bail!("bench soak: --processes and --cgroups are two different soaks; give one");
    }
    if !cgroup_mode && (a.concurrency.is_some() || a.pages.is_some() || a.rate.is_some()) {
        bail!("bench soak: --concurrency, --pages and --rate go with --cgroups N");
    }
    Ok(a)
}

pub fn bench_soak(ws: &mut Workspace, args: &[OsString]) -> Result<()> {
    let a = parse(args)?;
    process::require_root("bench soak")?;
    if a.cgroups.is_some() || a.ci {
        let asked = bench_soak_cgroups::Asked {
            cgroups: a.cgroups,
            concurrency: a.concurrency,
            pages: a.pages,
            rate: a.rate,
            minutes: a.minutes,
            ci: a.ci,
        };
        return bench_soak_cgroups::bench_soak_cgroups(ws, &asked);
    }
    let processes = a.processes.unwrap_or(100_000);
    let (vmscope, testchild) = build(ws)?;
    let dir = ws.target_dir()?.join("soak");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stream = dir.join("record.jsonl");
    let port = free_port()?;

    let mut kids = Kids(Vec::new());
    let tools = start_tools(&mut kids, &vmscope, &testchild, port, &stream, processes)?;
    let [(_, serve_pid), (_, top_pid), (_, record_pid)] = tools;
    let start = Instant::now();
    let mut watch = Watch::new(start);
    let limit = a.minutes.map(|m| Duration::from_secs_f64(m * 60.0));
    let record_code = loop {
        watch.read(port, start, tools);
        if let Some(st) = kids.try_wait(record_pid)? {
            break st;
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            say!(
                "bench soak: {} min up; stopping the workload",
                a.minutes.unwrap_or(0.0)
            );
            kids.signal(record_pid, libc::SIGINT);
        }
    };
    let elapsed = start.elapsed();
    kids.signal(top_pid, libc::SIGINT);
    kids.signal(serve_pid, libc::SIGINT);
    drop(kids);

    println!(
        "soak: {} processes forked, faulted and exited in {:.0} s beside {LONG_LIVED} long-lived ones; \
         /metrics scraped {} times ({} failed)",
        processes,
        elapsed.as_secs_f64(),
        watch.scrapes,
        watch.failed_scrapes
    );
    let mut ok = report_usage(&tools, &watch.readings, WARM_UP);
    ok &= report_decreased(&watch.decreased);
    ok &= record_books(&stream, processes, record_code)?;
    if !ok {
        bail!("bench soak: a goal was missed (see above)");
    }
    Ok(())
}

/// Builds vmscope and the test child; returns their paths.
pub fn build(ws: &mut Workspace) -> Result<(PathBuf, PathBuf)> {
    tasks::build(ws)?;
    let mut cmd = ws.cargo([
        "build",
        "--release",
        "-p",
        "vmscope-tests",
        "--bin",
        "vmscope-testchild",
    ]);
    process::run(&mut cmd)?;
    let release = ws.target_dir()?.join("release");
    Ok((release.join("vmscope"), release.join("vmscope-testchild")))
}

/// The tools under test and their pids.
pub type Tools = [(&'static str, u32); 3];

/// Starts the long-lived processes, `serve` (waiting until it answers),
/// `top --batch`, and `record` over `processes` short-lived ones.
fn start_tools(
    kids: &mut Kids,
    vmscope: &Path,
    testchild: &Path,
    port: u16,
    stream: &Path,
    processes: u64,
) -> Result<Tools> {
    for _ in 0..LONG_LIVED {
        let mut c = Command::new(testchild);
        c.args(["churn", "3600000"]);
        kids.spawn("long-lived churn", c)?;
    }
    let mut serve = Command::new(vmscope);
    serve.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--per-process",
        "20",
    ]);
    let serve_pid = kids.spawn("serve", serve)?;
    let mut top = Command::new(vmscope);
    top.args(["top", "--batch", "-n", "1000000", "-i", "1s"]);
    let top_pid = kids.spawn("top --batch", top)?;
    wait_healthy(port)?;
    let mut record = Command::new(vmscope);
    record
        .args(["record", "--format", "jsonl", "-i", "1s", "-o"])
        .arg(stream)
        .arg("--")
        .arg(testchild)
        .args(["forks", &processes.to_string()]);
    say!("bench soak: {}", process::show(&record));
    let record_pid = kids.spawn("record", record)?;
    Ok([
        ("serve", serve_pid),
        ("top", top_pid),
        ("record", record_pid),
    ])
}

/// What the once-a-second readings found.
pub struct Watch {
    /// Each tool's usage, by time since the start.
    pub readings: Vec<(Duration, [Option<Usage>; 3])>,
    /// The previous scrape's counter series.
    last: BTreeMap<String, f64>,
    pub scrapes: u64,
    pub failed_scrapes: u64,
    /// Series that went down between two scrapes.
    pub decreased: Vec<String>,
    /// When the next reading is due.
    next: Instant,
}

impl Watch {
    pub fn new(start: Instant) -> Self {
        Self {
            readings: Vec::new(),
            last: BTreeMap::new(),
            scrapes: 0,
            failed_scrapes: 0,
            decreased: Vec::new(),
            next: start,
        }
    }

    /// Waits for the next second, then scrapes `/metrics` and reads each
    /// tool's usage; returns what the scrape read.
    pub fn read(&mut self, port: u16, start: Instant, tools: Tools) -> Option<String> {
        self.next += Duration::from_secs(1);
        std::thread::sleep(self.next.saturating_duration_since(Instant::now()));
        let body = match scrape(port) {
            Ok(body) => {
                self.scrapes += 1;
                let now = counters(&body);
                for (series, v) in &now {
                    if let Some(&was) = self.last.get(series)
                        && *v < was
                    {
                        self.decreased.push(format!("{series}: {was} -> {v}"));
                    }
                }
                // Series that went (a pruned process's) are not compared
                // again; Prometheus marks them stale.
                self.last = now;
                Some(body)
            }
            Err(e) => {
                self.failed_scrapes += 1;
                say!("bench soak: scrape failed: {e:#}");
                None
            }
        };
        self.readings
            .push((start.elapsed(), tools.map(|(_, pid)| Usage::of(pid).ok())));
        body
    }
}

/// Each tool's memory at `from` (after the warm-up), halfway from there
/// and at the end, and its CPU per second; whether every tool kept within
/// the growth goal.
pub fn report_usage(
    tools: &Tools,
    readings: &[(Duration, [Option<Usage>; 3])],
    from: Duration,
) -> bool {
    println!(
        "  tool     RSS at {:>3} s  halfway    at end   growth  2nd half   CPU/s",
        from.as_secs()
    );
    let mut ok = true;
    for (i, (name, _)) in tools.iter().enumerate() {
        let warm = readings
            .iter()
            .find(|(t, u)| *t >= from && u[i].is_some())
            .and_then(|(t, u)| u[i].map(|u| (*t, u)));
        let end = readings
            .iter()
            .rev()
            .find_map(|(t, u)| u[i].map(|u| (*t, u)));
        let (Some((t0, u0)), Some((t1, u1))) = (warm, end) else {
            println!("  {name:<8} too short to measure");
            ok = false;
            continue;
        };
        let half = readings
            .iter()
            .find(|(t, u)| *t >= (t0 + t1) / 2 && u[i].is_some())
            .and_then(|(_, u)| u[i])
            .unwrap_or(u1);
        let growth = u1.rss_kb.saturating_sub(u0.rss_kb);
        // What a bounded tool must show: no growth once its working set
        // (the processes alive and not yet pruned) is reached.
        let late = u1.rss_kb.saturating_sub(half.rss_kb);
        let cpu = (u1.cpu_s - u0.cpu_s) / (t1 - t0).as_secs_f64().max(1e-9);
        let verdict = if growth < GOAL_GROWTH_KB {
            ""
        } else {
            "  (goal < 5 MB)"
        };
        ok &= growth < GOAL_GROWTH_KB;
        println!(
            "  {name:<8} {:>7.1} MB  {:>6.1} MB  {:>6.1} MB  {:>+5.1} MB  {:>+5.1} MB  {:>5.1}%{verdict}",
            u0.rss_kb as f64 / 1024.0,
            half.rss_kb as f64 / 1024.0,
            u1.rss_kb as f64 / 1024.0,
            growth as f64 / 1024.0,
            late as f64 / 1024.0,
            100.0 * cpu
        );
    }
    ok
}

/// The series that went down (the first ten); whether there were none.
pub fn report_decreased(decreased: &[String]) -> bool {
    println!(
        "  exported series that went down between scrapes: {}{}",
        decreased.len(),
        if decreased.is_empty() {
            ""
        } else {
            "  (goal 0)"
        }
    );
    for d in decreased.iter().take(10) {
        println!("    {d}");
    }
    decreased.is_empty()
}

/// What the recording says about following the tree: every child followed,
/// the tree's faults against its rusage, what the bounded maps lost.
fn record_books(stream: &Path, processes: u64, code: std::process::ExitStatus) -> Result<bool> {
    let text =
        std::fs::read_to_string(stream).with_context(|| format!("reading {}", stream.display()))?;
    let rec: serde_json::Value = text
        .lines()
        .rev()
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["type"] == "recording").then_some(v)
        })
        .with_context(|| format!("{} has no final recording line", stream.display()))?;
    let n = |p: &str| {
        rec.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    let untracked = n("/lost/untracked_children");
    let tree = n("/totals/scope_faults/total");
    let ru = n("/child/rusage/minflt") + n("/child/rusage/majflt");
    let samples = text
        .lines()
        .filter(|l| l.contains("\"type\":\"sample\""))
        .count();
    println!(
        "  record: exit {}, {samples} samples; children not followed {untracked} (goal 0); \
         tree faults {tree} vs the kernel's {ru} for it ({:+.2}%); evicted: {} process, {} mm entries",
        process::describe(code),
        100.0 * (tree as f64 - ru as f64) / (ru.max(1) as f64),
        n("/lost/proc_evictions"),
        n("/lost/mm_evictions"),
    );
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"sample\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_default();
    let g = |k: &str| last[k].as_u64().unwrap_or(0);
    let rmap_lost = last["rmap"]["lost_key"].as_u64().unwrap_or(0)
        + last["rmap"]["lost_stack"].as_u64().unwrap_or(0);
    println!(
        "  kernel entries at the end: {} per-process ({} pruned), {} followed; sampler samples lost {rmap_lost}",
        g("proc_entries"),
        g("proc_pruned"),
        g("tracked_entries"),
    );
    let within = (tree as f64 - ru as f64).abs() <= 0.02 * ru as f64;
    // Exits of the last second or so are pruned after the recording ends.
    let accounted = g("proc_pruned") + g("proc_entries") >= processes;
    Ok(untracked == 0 && within && code.success() && accounted)
}

#[derive(Clone, Copy)]
pub struct Usage {
    pub rss_kb: u64,
    pub cpu_s: f64,
}

impl Usage {
    pub fn of(pid: u32) -> Result<Usage> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmRSS")?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the parenthesised name: utime and stime are the 12th
        // and 13th.
        let rest = stat.rsplit_once(')').context("bad stat")?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f.get(11).zip(f.get(12)).map_or(0.0, |(u, s)| {
            u.parse::<f64>().unwrap_or(0.0) + s.parse::<f64>().unwrap_or(0.0)
        });
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Ok(Usage {
            rss_kb,
            cpu_s: ticks / hz,
        })
    }
}

/// Every counter series (`*_total`, histogram `_count`/`_sum`/`_bucket`)
/// with its labels, and its value.
fn counters(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            let counter = name.ends_with("_total")
                || name.ends_with("_count")
                || name.ends_with("_sum")
                || name.ends_with("_bucket");
            // The exporter's own gauges of staleness are not counters.
            (counter && !name.starts_with("vmscope_exporter_body_age"))
                .then(|| Some((series.to_string(), value.parse().ok()?)))?
        })
        .collect()
}

pub fn scrape(port: u16) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let (head, body) = buf.split_once("\r\n\r\n").context("no HTTP head")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("{}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_string())
}

pub fn wait_healthy(port: u16) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        if scrape(port).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("bench soak: vmscope serve did not answer on port {port} within 60 s")
}

pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// Processes started here: stopped (SIGTERM, then SIGKILL after 5 s) and
/// reaped when dropped, and killed by the kernel if xtask dies first.
#[derive(Default)]
pub struct Kids(Vec<(String, Child)>);

impl Kids {
    pub fn spawn(&mut self, what: &str, cmd: Command) -> Result<u32> {
        self.spawn_to(what, cmd, Stdio::null())
    }

    /// [`Kids::spawn`] with its standard output going to `stdout`.
    pub fn spawn_to(&mut self, what: &str, mut cmd: Command, stdout: Stdio) -> Result<u32> {
        cmd.stdin(Stdio::null()).stdout(stdout);
        // SAFETY: one async-signal-safe call in the child.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {what}: `{}`", process::show(&cmd)))?;
        let pid = child.id();
        self.0.push((what.to_string(), child));
        Ok(pid)
    }

    pub fn try_wait(&mut self, pid: u32) -> Result<Option<std::process::ExitStatus>> {
        for (what, c) in &mut self.0 {
            if c.id() == pid {
                return c.try_wait().with_context(|| format!("waiting for {what}"));
            }
        }
        Ok(None)
    }

    pub fn signal(&self, pid: u32, sig: libc::c_int) {
        // SAFETY: a child of ours, not yet reaped.
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    }
}

impl Drop for Kids {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            if c.try_wait().ok().flatten().is_none() {
                // SAFETY: a child of ours, not yet reaped.
                unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            }
        }
        let until = Instant::now() + Duration::from_secs(5);
        for (what, c) in &mut self.0 {
            while c.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
            if c.try_wait().ok().flatten().is_none() {
                say!("bench soak: {what} did not stop on SIGTERM; killing it");
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
