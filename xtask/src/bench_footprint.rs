//! `cargo xtask bench footprint [-- SECONDS]`: the resident memory of
//! serve, record and top (batch) once they have run SECONDS (default 8),
//! each next to its goal.

use std::{
    ffi::OsString,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::{process, tasks, workspace::Workspace};

const DEFAULT_SECONDS: u64 = 8;
const SERVE_ADDR: &str = "127.0.0.1:19466";

pub fn bench_footprint(ws: &mut Workspace, args: &[OsString]) -> Result<()> {
    let seconds = process::positive_arg("bench footprint", args, DEFAULT_SECONDS, "seconds")?;
    process::require_root("bench footprint")?;
    tasks::build(ws)?;
    let bin = ws.vmscope_bin()?;
    let out = std::env::temp_dir().join(format!("vmscope-footprint-{}.json", std::process::id()));
    let out = out
        .to_str()
        .context("temporary path is not UTF-8")?
        .to_owned();
    let runs: [(&str, f64, Vec<&str>); 3] = [
        ("serve", 20.0, vec!["serve", "--listen", SERVE_ADDR]),
        ("record", 40.0, vec!["record", "-o", &out, "-d", "1h"]),
        ("top --batch", 40.0, vec!["top", "--batch", "-n", "100000"]),
    ];
    println!("after {seconds} s   VmRSS MB  RssAnon MB  RssFile MB  VmHWM MB  goal MB");
    let mut over = false;
    for (name, goal, args) in runs {
        let [rss, anon, file, hwm] = measure(&bin, &args, Duration::from_secs(seconds))?;
        let verdict = if rss <= goal { "ok" } else { "OVER" };
        over |= rss > goal;
        println!(
            "{name:<12} {rss:>9.1} {anon:>11.1} {file:>11.1} {hwm:>9.1} {goal:>8.0}  {verdict}"
        );
    }
    let _ = std::fs::remove_file(&out);
    if over {
        bail!("bench footprint: over a goal");
    }
    Ok(())
}

/// Starts vmscope with `args`, waits, reads its memory from
/// /proc/PID/status (VmRSS, RssAnon, RssFile, VmHWM, in MB) and stops it.
fn measure(bin: &Path, args: &[&str], wait: Duration) -> Result<[f64; 4]> {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting vmscope {}", args.join(" ")))?;
    std::thread::sleep(wait);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let status = status.with_context(|| format!("vmscope {} ended early", args.join(" ")))?;
    let field = |key: &str| -> Result<f64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .with_context(|| format!("no {key} in /proc/PID/status"))
    };
    Ok([
        field("VmRSS")?,
        field("RssAnon")?,
        field("RssFile")?,
        field("VmHWM")?,
    ])
}
