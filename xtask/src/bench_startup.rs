//! `cargo xtask bench startup [-- ROUNDS]`: how long vmscope makes people
//! wait when it starts and stops. Every figure is measured once per round,
//! the rounds interleaved, and the table shows each figure's median, min and
//! max next to its goal.

use std::{
    ffi::OsString,
    io::Read as _,
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    process::{self, say},
    tasks,
    workspace::Workspace,
};

const DEFAULT_ROUNDS: usize = 5;
const SERVE_ADDR: &str = "127.0.0.1:19465";

// Each figure: its name and its goal in seconds.
const RECORD_TOTAL: (&str, f64) = ("record -- true: total", 0.3);
const RECORD_EXEC: (&str, f64) = ("record -- true: start to exec", 0.10);
const BENCH_TOTAL: (&str, f64) = ("bench -r 10 -- true: total", 4.0);
const TOP_BATCH: (&str, f64) = ("top --batch -n 1 -i 100ms", 0.5);
const SERVE_UP: (&str, f64) = ("serve: start to /healthz", 0.3);
const SERVE_DOWN: (&str, f64) = ("serve: SIGTERM to exit", 0.3);
const TOP_SIGTERM: (&str, f64) = ("top --batch: SIGTERM to exit", 0.3);
const TOP_QUIT: (&str, f64) = ("top (tmux): q to exit", 0.2);

/// One figure: its name, goal in seconds, and one value per round.
struct Figure {
    name: &'static str,
    goal: f64,
    values: Vec<f64>,
}

pub fn bench_startup(ws: &mut Workspace, args: &[OsString]) -> Result<()> {
    let rounds = process::positive_arg("bench startup", args, DEFAULT_ROUNDS, "rounds")?;
    process::require_root("bench startup")?;
    tasks::build(ws)?;
    let bin = ws.vmscope_bin()?;
    let dir = std::env::temp_dir().join(format!("vmscope-bench-startup-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut figures = Figures::default();
    let tmux = process::find_in_path("tmux").is_some();
    for round in 0..rounds {
        let (total, exec) = record_true(&bin, &dir)?;
        figures.push(RECORD_TOTAL, total);
        figures.push(RECORD_EXEC, exec);
        let bench = timed(Command::new(&bin).args([
            "bench",
            "-r",
            "10",
            "-o",
            path(&dir.join("bench.json"))?,
            "--",
            "true",
        ]))?;
        figures.push(BENCH_TOTAL, bench);
        let top = timed(Command::new(&bin).args(["top", "--batch", "-n", "1", "-i", "100ms"]))?;
        figures.push(TOP_BATCH, top);
        let (up, down) = serve(&bin)?;
        figures.push(SERVE_UP, up);
        figures.push(SERVE_DOWN, down);
        let top_down = sigterm_after_start(
            Command::new(&bin).args(["top", "--batch", "-n", "1000", "-i", "1s"]),
        )?;
        figures.push(TOP_SIGTERM, top_down);
        if tmux {
            figures.push(TOP_QUIT, top_quit(&bin)?);
        }
        say!("bench startup: round {}/{rounds} done", round + 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("vmscope start-up and tear-down, {rounds} interleaved rounds (seconds):");
    println!(
        "  {:<32} {:>8} {:>8} {:>8} {:>8}",
        "figure", "median", "min", "max", "goal"
    );
    for f in &figures.0 {
        let mut v = f.values.clone();
        v.sort_by(f64::total_cmp);
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        println!(
            "  {:<32} {median:>8.3} {:>8.3} {:>8.3} {:>8} {}",
            f.name,
            v[0],
            v[v.len() - 1],
            format!("<= {}", f.goal),
            if median <= f.goal { "met" } else { "NOT met" }
        );
    }
    Ok(())
}

/// The figures in the order they were first measured, each found by its
/// name (no index to keep in step with a list).
#[derive(Default)]
struct Figures(Vec<Figure>);

impl Figures {
    fn push(&mut self, (name, goal): (&'static str, f64), value: f64) {
        match self.0.iter_mut().find(|f| f.name == name) {
            Some(f) => f.values.push(value),
            None => self.0.push(Figure {
                name,
                goal,
                values: vec![value],
            }),
        }
    }
}

fn path(p: &Path) -> Result<&str> {
    p.to_str().context("a temporary path that is not UTF-8")
}

fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `record -o FILE -- sh -c 'date > T'`: total wall time, and how long after
/// vmscope started the command ran (the command writes the clock).
fn record_true(bin: &Path, dir: &Path) -> Result<(f64, f64)> {
    let stamp = dir.join("exec-time");
    let _ = std::fs::remove_file(&stamp);
    let script = format!("date +%s.%N > {}", path(&stamp)?);
    let started = wall_now();
    let total = timed(Command::new(bin).args([
        "record",
        "-o",
        path(&dir.join("x.json"))?,
        "--",
        "sh",
        "-c",
        &script,
    ]))?;
    let at: f64 = std::fs::read_to_string(&stamp)
        .context("the wrapped command left no time stamp")?
        .trim()
        .parse()
        .context("the wrapped command's time stamp")?;
    Ok((total, (at - started).max(0.0)))
}

/// Runs a command to its end with its output discarded; its wall time.
fn timed(cmd: &mut Command) -> Result<f64> {
    let t = Instant::now();
    let st = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", process::show(cmd)))?;
    if !st.success() {
        bail!("{} failed ({st})", process::show(cmd));
    }
    Ok(t.elapsed().as_secs_f64())
}

fn sigterm(child: &Child) {
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// Waits for a child to exit; how long that took.
fn wait_exit(child: &mut Child, limit: Duration) -> Result<f64> {
    let t = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return Ok(t.elapsed().as_secs_f64());
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "still running {} s after it was told to stop",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `serve`: from start to the first answer on /healthz, and from SIGTERM
/// to exit.
fn serve(bin: &Path) -> Result<(f64, f64)> {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .args(["serve", "--listen", SERVE_ADDR])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting vmscope serve")?;
    let up = loop {
        if healthz() {
            break t.elapsed().as_secs_f64();
        }
        if child.try_wait()?.is_some() || t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("vmscope serve never answered on {SERVE_ADDR}");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    sigterm(&child);
    let down = wait_exit(&mut child, Duration::from_secs(30))?;
    Ok((up, down))
}

fn healthz() -> bool {
    use std::io::Write as _;
    let Ok(mut s) = TcpStream::connect(SERVE_ADDR) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200")
}

/// Starts a command, waits until it has printed its first output (it is up),
/// then SIGTERM: the time to exit.
fn sigterm_after_start(cmd: &mut Command) -> Result<f64> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", process::show(cmd)))?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut first = [0u8; 1];
    out.read_exact(&mut first)
        .context("the command printed nothing")?;
    sigterm(&child);
    let secs = wait_exit(&mut child, Duration::from_secs(30))?;
    Ok(secs)
}

/// Interactive `top` in a tmux session: once its screen is up, `q`; the
/// time until the shell that started it runs its next command (what a
/// user waits for: the prompt).
fn top_quit(bin: &Path) -> Result<f64> {
    let session = format!("vmscope-bench-{}", std::process::id());
    let stamp = std::env::temp_dir().join(format!("{session}.end"));
    let _ = std::fs::remove_file(&stamp);
    let cmd = format!(
        "{} top; date +%s.%N > {}",
        process::quote(bin),
        process::quote(&stamp)
    );
    process::run(Command::new("tmux").args([
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]))?;
    let t = Instant::now();
    let screen_up = loop {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()?;
        if String::from_utf8_lossy(&out.stdout).contains("PID") {
            break true;
        }
        if t.elapsed() > Duration::from_secs(30) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !screen_up {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &session])
            .stderr(Stdio::null())
            .status();
        bail!("top's screen never came up in tmux");
    }
    let sent = wall_now();
    process::run(Command::new("tmux").args(["send-keys", "-t", &session, "q"]))?;
    let t = Instant::now();
    let end = loop {
        if let Some(at) = std::fs::read_to_string(&stamp)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            break at;
        }
        if t.elapsed() > Duration::from_secs(30) {
            bail!("top did not quit within 30 s of q");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = std::fs::remove_file(&stamp);
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .stderr(Stdio::null())
        .status();
    Ok((end - sent).max(0.0))
}
