//! `vmscope record`: attach, sample every interval, stop on command exit,
//! duration or signal, and write one complete document.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;

use crate::{
    child,
    cli::{Format, RecordArgs},
    driver::{self, Signal, Signals},
    exit, model,
    record::{self, Header, JsonlWriter, Line, Output, Recording, Scope, ScopeKind, Totals},
    source::collect::{Collector, Sample},
    source::kernel::{caps::Privileges, system},
    source::loader::{self, LoadOptions},
    timefmt,
};

pub fn run(args: RecordArgs) -> anyhow::Result<u8> {
    // Before loading raises RLIMIT_MEMLOCK: the command gets the caller's.
    child::save_original_limits();
    // Everything that can be checked before anything runs is checked first.
    let output = Output::prepare(&args.output)?;
    if args.interval.is_zero() {
        return Err(exit::failure(
            exit::USAGE,
            "--interval must be greater than zero",
        ));
    }
    let resolved = match args.command.first() {
        Some(name) => Some(child::resolve(name)?),
        None => None,
    };
    for &pid in &args.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(exit::failure(
                exit::USAGE,
                format!("-p {pid}: no such process"),
            ));
        }
    }
    Privileges::current().require_bpf()?;
    driver::run(record(args, output, resolved))
}

async fn record(
    args: RecordArgs,
    output: Output,
    resolved: Option<std::path::PathBuf>,
) -> anyhow::Result<u8> {
    let (scope, filtered) = if !args.command.is_empty() {
        (ScopeKind::Command, true)
    } else if !args.pid.is_empty() {
        (ScopeKind::Pids, true)
    } else {
        (ScopeKind::System, false)
    };
    let mut probes = loader::load(&LoadOptions {
        filtered,
        swap: loader::SwapAttach::Auto,
        sample_hz: args.sample_hz,
    })?;
    for (names, why) in loader::unusable_by_reason(&probes.probes) {
        log::warn!("{names} unavailable: {why}");
    }
    let mut pids = args.pid.clone();
    for &pid in &pids {
        probes.track(pid)?;
    }
    // Opened before the command exists, so a refused path never leaves it
    // waiting.
    let mut stream = match args.format {
        Format::Json => None,
        Format::Jsonl => Some(JsonlWriter::create(&output)?),
    };
    let wraps = resolved.is_some();
    let mut tap = None;
    let gated = match &resolved {
        Some(path) => {
            let stdout = if args.keep_output {
                // With the recording on stdout, the command's output goes to stderr.
                let (w, t) = child::Tap::start(matches!(output, Output::Stdout))?;
                tap = Some(t);
                Some(w)
            } else {
                None
            };
            let g = child::spawn_gated(
                path,
                &args.command,
                child::run_as_from_sudo(args.as_root),
                stdout,
            )?;
            probes.track(g.pid)?;
            pids.push(g.pid);
            Some(g)
        }
        None => None,
    };

    let start_wall = SystemTime::now();
    let start = Instant::now();
    let header = Header {
        schema_version: record::SCHEMA_VERSION,
        tool: record::Tool::this(),
        kernel: system::kernel_info(),
        command_line: std::env::args().collect(),
        command: (!args.command.is_empty()).then(|| args.command.clone()),
        scope: Scope { kind: scope, pids },
        interval_ns: nanos(args.interval),
        start_time: timefmt::rfc3339(start_wall),
        probes: probes.probes.clone(),
        fault_source: probes.fault_source,
        fault_classes: (0..vmscope_common::FAULT_CLASSES)
            .map(|k| vmscope_common::fault_class_name(k).to_string())
            .collect(),
    };
    if let Some(w) = stream.as_mut() {
        w.line(&Line::Header(Box::new(header.clone())))?;
    }
    let mut collector = Collector::new(start);
    let limit = if args.all {
        usize::MAX
    } else {
        record::TOP_PROCESSES
    };
    // The totals are folded as samples arrive; a document keeps its
    // samples too, a stream has written them (so its memory stays flat).
    let mut fold = crate::model::fold::Fold::new(limit);
    let mut samples: Vec<Sample> = Vec::new();
    // A stream folds only the samples it could write, so its lines and its
    // final recording agree.
    let mut take = |s: anyhow::Result<Sample>| -> anyhow::Result<()> {
        let s = s?;
        fold.push(&s);
        match stream.as_mut() {
            Some(w) => w.line(&Line::Sample(Box::new(s)))?,
            None => samples.push(s),
        }
        Ok(())
    };
    take(collector.sample(&mut probes))?;

    let mut signals = Signals::install(&[Signal::Int, Signal::Term, Signal::Hup])?;

    let mut waiter = match gated {
        Some(g) => {
            let (started, handle) = g.release()?;
            let h = handle.clone();
            Some((
                handle,
                started,
                tokio::task::spawn_blocking(move || h.wait(started)),
            ))
        }
        None => None,
    };
    let mut deadline = args.duration.map(|d| tokio::time::Instant::now() + d);
    let mut ticker = driver::ticker(args.interval);

    let mut interrupted_by: Option<&'static str> = None;
    // vmscope's own failure mid-run: the recording ends, marked incomplete.
    let mut failure: Option<anyhow::Error> = None;
    // When the command gets SIGKILL, after vmscope's own SIGTERM.
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut sent: Vec<child::SignalSent> = Vec::new();
    let mut child_report = None;
    let send = |sent: &mut Vec<child::SignalSent>,
                handle: &child::Handle,
                started: Instant,
                signo: i32,
                reason: &str| {
        log::info!(
            "{reason}: sending {} to the command (pid {})",
            child::signal_name(signo),
            handle.pid
        );
        let delivered = if signo == libc::SIGKILL {
            let n = handle.kill_tree();
            log::info!("SIGKILL also sent to {n} descendants");
            true
        } else {
            handle.signal(signo)
        };
        if delivered {
            sent.push(child::SignalSent {
                signal: child::signal_name(signo),
                reason: reason.into(),
                after_ns: nanos(started.elapsed()),
            });
        }
    };
    loop {
        let dl = deadline;
        let until_deadline = async move {
            match dl {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let ka = kill_at;
        let until_kill = async move {
            match ka {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let child_done = async {
            match waiter.as_mut() {
                Some((_, _, h)) => h.await,
                None => std::future::pending().await,
            }
        };
        let sig = tokio::select! {
            _ = ticker.tick(), if failure.is_none() => {
                match take(collector.sample(&mut probes)) {
                    Ok(()) => None,
                    Err(e) => {
                        log::debug!("recording failed: {e:#}");
                        failure = Some(e);
                        Some(("error", libc::SIGTERM))
                    }
                }
            }
            r = child_done => {
                match r.context("waiting for the command").and_then(|r| r) {
                    Ok(mut report) => {
                        if let Some(t) = tap.take() {
                            report.output = Some(t.finish(Duration::from_secs(1)));
                        }
                        report.signals_sent = std::mem::take(&mut sent);
                        child_report = Some(report);
                    }
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
                break;
            }
            () = until_kill => {
                kill_at = None;
                if let Some((handle, started, _)) = &waiter {
                    send(&mut sent, handle, *started, libc::SIGKILL, "grace");
                }
                continue;
            }
            () = until_deadline => Some(("duration", libc::SIGTERM)),
            s = signals.recv() => Some((s.name(), s.number())),
        };
        let Some((why, signo)) = sig else { continue };
        match why {
            "duration" => deadline = None,
            "error" => deadline = None,
            _ => {
                interrupted_by.get_or_insert(why);
            }
        }
        match &waiter {
            // Forward and keep sampling until it exits: the document is
            // written once the command is gone, so nothing is lost. vmscope's
            // own SIGTERM (duration, failure) is followed by SIGKILL to the
            // command's tree if it is still running after the grace period.
            Some((handle, started, _)) => {
                let reason = if matches!(why, "duration" | "error") {
                    if kill_at.is_none() {
                        kill_at = Some(tokio::time::Instant::now() + child::GRACE);
                    }
                    why
                } else {
                    "forwarded"
                };
                send(&mut sent, handle, *started, signo, reason);
            }
            None => break,
        }
    }
    // The last sample, unless sampling itself is what failed.
    if let Err(e) = take(collector.sample(&mut probes)) {
        failure.get_or_insert(e);
    }
    let end_wall = SystemTime::now();
    let duration = start.elapsed();

    let source = probes.fault_source;
    let first = fold.first().map(|s| s.faults).unwrap_or_default();
    let last = fold.last().map(|s| s.faults).unwrap_or_default();
    let attached = |name: &str| loader::probe_usable(&probes.probes, name);
    let gup = attached(loader::ACCOUNT_PROBE);
    // The system's get_user_pages part comes from /proc/vmstat (pgfault).
    let system_faults = model::fault_totals(
        source,
        fold.pgfault,
        model::fault_delta(&first, &last).as_ref(),
    );
    let scope_faults = model::fault_totals(source, gup, Some(&fold.procs.faults()));
    let avail = model::ProcAvailability {
        major_faults: attached(loader::MAJOR_FAULTS_PROBE),
        swap: attached(loader::SWAP_PROBE),
        gup_faults: gup,
    };
    let summary = fold.summary_samples();
    let mut rec = Recording {
        header: Header {
            probes: probes.probes.clone(),
            ..header
        },
        end_time: timefmt::rfc3339(end_wall),
        duration_ns: nanos(duration),
        interrupted_by: interrupted_by.map(str::to_string),
        incomplete: failure.as_ref().map(|e| format!("{e:#}")),
        child: child_report.clone(),
        totals: Totals {
            system_faults,
            scope_faults,
            vm: crate::model::totals::vm_totals(
                &summary,
                &probes.probes,
                crate::procstat::read_psi().err().as_deref(),
            ),
        },
        processes: fold.procs.totals(source, avail, limit),
        processes_limit: limit.min(u32::MAX as usize),
        lost: model::lost(fold.last()),
        series: fold.series(|name| attached(crate::model::catalogue::counter_probe(name))),
        samples,
    };
    let written = match stream.as_mut() {
        Some(w) => {
            rec.samples = Vec::new();
            // A broken stdout takes nothing more; a file may, once the
            // command is gone (it may have freed the space it took).
            if failure.is_some() && !w.is_file() {
                Err(anyhow::anyhow!("not written"))
            } else {
                w.line(&Line::Recording(Box::new(rec)))
            }
        }
        None => output.write(&rec),
    };
    // The document is out: detach without making the user wait for it.
    crate::source::teardown::release(probes);
    if let Some(e) = failure {
        let stopped = match &child_report {
            Some(c) if !c.signals_sent.is_empty() => {
                let names: Vec<&str> = c.signals_sent.iter().map(|s| s.signal.as_str()).collect();
                format!(
                    "; the command (pid {}) was stopped with {}",
                    c.pid,
                    names.join(" then ")
                )
            }
            _ => String::new(),
        };
        let doc = match (&written, &output) {
            (Ok(()), Output::File(p)) => {
                format!("; an incomplete recording is in {}", p.display())
            }
            (Ok(()), Output::Stdout) => "; an incomplete recording went to stdout".into(),
            (Err(_), _) => "; no recording was written".into(),
        };
        let code = if wraps {
            exit::WRAPPER_FAILED
        } else {
            exit::FAILURE
        };
        return Err(exit::failure(
            exit::code_of(&e, code),
            format!("{}{stopped}{doc}", exit::message_of(&e)),
        ));
    }
    written?;
    Ok(match (&child_report, interrupted_by) {
        (Some(c), _) => u8::try_from(c.exit_code).unwrap_or(exit::WRAPPER_FAILED),
        (None, Some(_)) => 0,
        (None, None) => 0,
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
