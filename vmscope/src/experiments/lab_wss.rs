//! `vmscope lab wss`: each working-set method this kernel offers, checked
//! against a hot set known exactly. It runs `workload hotset` (resident
//! memory of `--size`, of which `--hot` is touched every 200 ms), measures
//! it one full window, grows the hot set to `--grow`, and measures the
//! first window that starts after the change took effect. A method is
//! right when each figure is within 10% of the hot set. The
//! multi-generational LRU measures memory cgroups, so for it the workload
//! runs in a memory cgroup of its own; DAMON watches the process.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow};
use serde::Serialize;

use crate::{
    cli::WssLabArgs,
    exit,
    experiments::pressure::MemCgroup,
    model::wss::{MethodStatus, WssMethod, WssSample, WssSetup},
    source::wss::{Scanner, Targets, methods},
};

/// How far a figure may be from the hot set.
const TOLERANCE_PCT: f64 = 10.0;

/// One measurement against the truth.
#[derive(Debug, Serialize)]
struct WssCheck {
    method: &'static str,
    phase: &'static str,
    hot_bytes: u64,
    measured_bytes: u64,
    resident_bytes: u64,
    error_pct: f64,
    ok: bool,
    /// When the window ended, seconds after the hot set took this size.
    shown_after_s: f64,
}

#[derive(Debug, Serialize)]
struct WssLabOutcome {
    methods: Vec<MethodStatus>,
    window_s: f64,
    phases: Vec<WssCheck>,
    /// The referenced-bit scan's CPU time over its windows, in one CPU's
    /// share.
    scan_cpu_share: f64,
    /// The same for the multi-generational LRU's agings, where checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    mglru_cpu_share: Option<f64>,
    /// The same for DAMON (its kdamond's CPU time with vmscope's reads),
    /// where checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    damon_cpu_share: Option<f64>,
}

/// The workload, killed when dropped.
struct HotsetChild {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<serde_json::Value>,
    pid: u32,
}

impl HotsetChild {
    fn start(a: &WssLabArgs, cgroup: Option<&MemCgroup>) -> anyhow::Result<HotsetChild> {
        let me = std::env::current_exe().context("finding vmscope's own binary")?;
        let mut cmd = match cgroup {
            Some(c) => c.command(me)?,
            None => Command::new(me),
        };
        let mut child = cmd
            .args(["workload", "hotset", "--size"])
            .arg(a.size.to_string())
            .arg("--hot")
            .arg(a.hot.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting workload hotset")?;
        let stdin = child.stdin.take().context("the workload's stdin")?;
        let stdout = child.stdout.take().context("the workload's stdout")?;
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let mut w = HotsetChild {
            child,
            stdin,
            events,
            pid: 0,
        };
        let ready = w.event("ready", Duration::from_secs(120))?;
        w.pid = ready["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| anyhow!("workload hotset's ready line has no pid: {ready}"))?;
        Ok(w)
    }

    fn event(&self, name: &str, limit: Duration) -> anyhow::Result<serde_json::Value> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .events
                .recv_timeout(left)
                .map_err(|_| anyhow!("workload hotset said no `{name}` within {limit:?}"))?;
            if v["event"] == name {
                return Ok(v);
            }
        }
    }

    fn grow(&mut self, bytes: u64) -> anyhow::Result<Instant> {
        writeln!(self.stdin, "hot {bytes}").context("writing to workload hotset")?;
        self.stdin.flush().context("writing to workload hotset")?;
        self.event("hot", Duration::from_secs(60))?;
        Ok(Instant::now())
    }
}

impl Drop for HotsetChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next window that starts at or after `after` (since `start`).
fn window_after(
    scanner: &Scanner,
    start: Instant,
    after: Instant,
    limit: Duration,
) -> anyhow::Result<WssSample> {
    let from = after.saturating_duration_since(start).as_nanos() as u64;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(w) = scanner.finished().into_iter().find(|w| w.start_ns >= from) {
            return Ok(w);
        }
        if Instant::now() > deadline {
            return Err(anyhow!("no working-set window finished within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn phase(
    method: WssMethod,
    name: &'static str,
    hot: u64,
    w: &WssSample,
    since: Instant,
    start: Instant,
) -> WssCheck {
    let measured = w.total_bytes();
    let error_pct = (measured as f64 - hot as f64) / hot as f64 * 100.0;
    let since_ns = since.saturating_duration_since(start).as_nanos() as u64;
    WssCheck {
        method: method.name(),
        phase: name,
        hot_bytes: hot,
        measured_bytes: measured,
        resident_bytes: w.rss_bytes(),
        error_pct,
        ok: error_pct.abs() <= TOLERANCE_PCT,
        shown_after_s: w.end_ns.saturating_sub(since_ns) as f64 / 1e9,
    }
}

pub fn run(a: &WssLabArgs) -> anyhow::Result<u8> {
    if a.hot == 0 || a.grow <= a.hot || a.grow > a.size {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "lab wss: needs 0 < --hot ({}) < --grow ({}) <= --size ({})",
                a.hot, a.grow, a.size
            ),
        ));
    }
    let all = methods();
    let (mut phases, scan_cpu_share) = measure(a, WssMethod::ReferencedScan, &all, None)?;
    let mut mglru_cpu_share = None;
    if all
        .iter()
        .any(|m| m.method == WssMethod::Mglru && m.offered)
    {
        // Generous: the cgroup is for telling the workload's pages apart,
        // not for limiting them.
        let cgroup = MemCgroup::new("vmscope-lab-wss", a.size.saturating_mul(4))?;
        let (p, cpu) = measure(a, WssMethod::Mglru, &all, Some(&cgroup))?;
        phases.extend(p);
        mglru_cpu_share = Some(cpu);
    }
    let mut damon_cpu_share = None;
    if all
        .iter()
        .any(|m| m.method == WssMethod::Damon && m.offered)
    {
        let (p, cpu) = measure(a, WssMethod::Damon, &all, None)?;
        phases.extend(p);
        damon_cpu_share = Some(cpu);
    }
    let outcome = WssLabOutcome {
        methods: all
            .into_iter()
            .map(|mut m| {
                m.used = m.offered;
                m
            })
            .collect(),
        window_s: a.window.as_secs_f64(),
        phases,
        scan_cpu_share,
        mglru_cpu_share,
        damon_cpu_share,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        print!("{}", render(&outcome));
    }
    Ok(if outcome.phases.iter().all(|p| p.ok) {
        0
    } else {
        exit::FAILURE
    })
}

/// One method's two phases against a fresh workload, and its CPU share.
fn measure(
    a: &WssLabArgs,
    method: WssMethod,
    all: &[MethodStatus],
    cgroup: Option<&MemCgroup>,
) -> anyhow::Result<(Vec<WssCheck>, f64)> {
    let mut work = HotsetChild::start(a, cgroup)?;
    let window = a.window;
    let setup = WssSetup::new(method, window.as_nanos() as u64, false, all.to_vec());
    let start = Instant::now();
    let scanner = Scanner::start(
        setup,
        Targets {
            all: false,
            roots: [work.pid].into(),
        },
        start,
    )?;
    // DAMON's regions take a while to settle on a new access pattern: its
    // grown figure is the first window that starts that long after the
    // change (`shown_after_s` says how long after it the window ended).
    let settle = match method {
        WssMethod::Damon => crate::source::damon::attrs().1,
        _ => Duration::ZERO,
    };
    let limit = window * 3 + settle + Duration::from_secs(30);
    let first = window_after(&scanner, start, start, limit)?;
    let grown = work.grow(a.grow)?;
    let after = window_after(&scanner, start, grown + settle, limit)?;
    drop(scanner);
    drop(work);
    let cpu: u64 = first.scan_cpu_ns + after.scan_cpu_ns;
    let span = (first.end_ns - first.start_ns) + (after.end_ns - after.start_ns);
    Ok((
        vec![
            phase(method, "hot", a.hot, &first, start, start),
            phase(method, "grown", a.grow, &after, grown, start),
        ],
        cpu as f64 / span.max(1) as f64,
    ))
}

fn render(o: &WssLabOutcome) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut s = String::new();
    s.push_str("method           phase   hot MiB  measured MiB  resident MiB  error   shown after  verdict\n");
    for p in &o.phases {
        s.push_str(&format!(
            "{:<16} {:<7} {:>7.1}  {:>12.1}  {:>12.1}  {:>+5.1}%  {:>9.1} s  {}\n",
            p.method,
            p.phase,
            mib(p.hot_bytes),
            mib(p.measured_bytes),
            mib(p.resident_bytes),
            p.error_pct,
            p.shown_after_s,
            if p.ok { "ok" } else { "off by more than 10%" }
        ));
    }
    for m in o.methods.iter().filter(|m| !m.used) {
        s.push_str(&format!(
            "{:<16} not checked: {}\n",
            m.method.name(),
            if m.offered {
                m.detail.as_str()
            } else {
                "not offered by this kernel"
            }
        ));
    }
    s.push_str(&format!(
        "window {:.0} s; the scan took {:.3}% of one CPU",
        o.window_s,
        o.scan_cpu_share * 100.0
    ));
    if let Some(c) = o.mglru_cpu_share {
        s.push_str(&format!(", the agings {:.3}%", c * 100.0));
    }
    if let Some(c) = o.damon_cpu_share {
        s.push_str(&format!(", DAMON {:.3}%", c * 100.0));
    }
    s.push('\n');
    s
}
