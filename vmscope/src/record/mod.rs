//! `vmscope record`: attach, sample every interval, stop on command exit,
//! duration or signal, and write one complete document (built and written
//! by [`crate::document`]).

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;

use crate::{
    child,
    cli::{RecordArgs, RecordFormat},
    document::{self, JsonlWriter, Output},
    driver::{self, Signal, Signals},
    exit,
    model::probes::ProbeStatus,
    model::recording::{Header, Line, RecordingScope, ScopeKind},
    model::sample::Sample,
    source::kernel::caps::Privileges,
    source::loader::{LoadOptions, Since},
    source::{Reading, Source},
};

/// The reader's old path, still named by `report/leadup.rs`'s tests.
#[cfg(test)]
pub(crate) use crate::document::from_str;

pub fn run(args: RecordArgs) -> anyhow::Result<u8> {
    // Before loading raises RLIMIT_MEMLOCK: the command gets the caller's.
    child::save_original_limits();
    // Everything that can be checked before anything runs is checked first.
    let output = Output::prepare(&args.output)?;
    args.sampling.check()?;
    let resolved = match args.command.first() {
        Some(name) => Some(child::resolve(name)?),
        None => None,
    };
    args.process.check()?;
    if let Some(path) = &args.cgroup {
        check_cgroup(path)?;
    }
    Privileges::current().require_bpf()?;
    let cachestat = crate::source::kernel::cachestat::Watch::start(&args.cachestat)
        .map_err(|e| exit::failure(exit::USAGE, format!("{e}; give a readable file")))?;
    driver::run(record(args, output, resolved, cachestat))
}

/// `--cgroup PATH` names an existing cgroup of the hierarchy processes are
/// keyed by.
fn check_cgroup(path: &str) -> anyhow::Result<()> {
    use crate::source::kernel::cgroupfs;
    let h = cgroupfs::detect().map_err(|e| {
        exit::failure(
            exit::USAGE,
            format!("--cgroup {path}: no cgroups to follow: {e}"),
        )
    })?;
    if path.len() >= vmscope_common::SCOPE_PATH_BYTES {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--cgroup {}...: longer than {} bytes, which vmscope cannot follow; follow a cgroup above it",
                path.chars().take(40).collect::<String>(),
                vmscope_common::SCOPE_PATH_BYTES - 1
            ),
        ));
    }
    if !path.starts_with('/') || path.split('/').any(|p| p == "..") || !cgroupfs::exists(&h, path) {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--cgroup {path}: no such cgroup under {} (give its path from there, starting with /)",
                h.mount.display()
            ),
        ));
    }
    Ok(())
}

async fn record(
    args: RecordArgs,
    output: Output,
    resolved: Option<std::path::PathBuf>,
    cachestat: crate::source::kernel::cachestat::Watch,
) -> anyhow::Result<u8> {
    let mut setup = Setup::open(&args, &output, resolved)?;
    let limit = if args.all {
        usize::MAX
    } else {
        crate::model::recording::TOP_PROCESSES
    };
    let mut book = Book::new(limit, setup.stream.take(), setup.source.probes.clone());
    book.cachestat = Some(cachestat);
    let start = Instant::now();
    setup.source.start(start, args.sampling.interval);
    book.take(setup.source.next().await)?;

    let signals = Signals::install(&[Signal::Int, Signal::Term, Signal::Hup])?;
    let command = match setup.gated.take() {
        Some(g) => Some(Wrapped::release(g, setup.tap.take())?),
        None => None,
    };
    let mut run = Run {
        source: &mut setup.source,
        book: &mut book,
        signals,
        command,
        deadline: args.duration.map(|d| tokio::time::Instant::now() + d),
        interrupted_by: None,
        failure: None,
        child_report: None,
    };
    run.until_done().await;
    let Run {
        interrupted_by,
        mut failure,
        child_report,
        ..
    } = run;
    // The reads not yet taken and a last one: nothing read is lost.
    for r in setup.source.finish().await {
        if let Err(e) = book.take(r) {
            failure.get_or_insert(e);
            break;
        }
    }
    let ended = Ended {
        end_wall: SystemTime::now(),
        duration: start.elapsed(),
        interrupted_by,
        failure,
        child_report,
    };
    let (written, failure, child_report) = book.write(setup.header, ended, &output);
    // The document is out: detach without making the user wait for it.
    setup.source.release();
    conclude(
        failure,
        child_report.as_ref(),
        interrupted_by,
        written,
        &output,
        setup.wraps,
    )
}

/// What is ready before the first sample: the probes (loaded and told whom
/// to follow), the stream, the command (created, held at its exec) and the
/// recording's header.
struct Setup {
    source: Source,
    stream: Option<JsonlWriter>,
    gated: Option<child::Gated>,
    tap: Option<child::Tap>,
    header: Header,
    wraps: bool,
}

impl Setup {
    fn open(
        args: &RecordArgs,
        output: &Output,
        resolved: Option<std::path::PathBuf>,
    ) -> anyhow::Result<Setup> {
        let (scope, filtered) = if args.cgroup.is_some() {
            (ScopeKind::Cgroup, true)
        } else if !args.command.is_empty() {
            (ScopeKind::Command, true)
        } else if !args.process.pid.is_empty() {
            (ScopeKind::Pids, true)
        } else {
            (ScopeKind::System, false)
        };
        let opts = LoadOptions {
            filtered,
            rmap_maintenance: args.rmap_maintenance,
            ..args.process.load_options(&args.sampling)
        };
        let source = Source::open(opts, &args.process.pid)?;
        for (names, why) in crate::model::probes::unusable_by_reason(&source.probes) {
            log::warn!("{names} unavailable: {why}");
        }
        let mut pids = args.process.pid.clone();
        if let Some(path) = &args.cgroup {
            pids = source.track_cgroup(path)?;
            pids.sort_unstable();
        }
        // Opened before the command exists, so a refused path never leaves
        // it waiting.
        let mut stream = match args.format {
            RecordFormat::Json => None,
            RecordFormat::Jsonl => Some(JsonlWriter::create(output)?),
        };
        let wraps = resolved.is_some();
        let (gated, tap) = match &resolved {
            Some(path) => {
                let (g, tap) = spawn(args, output, path)?;
                // Under --cgroup, the command is followed only if it runs
                // in the cgroup.
                if args.cgroup.is_none() {
                    source.track(g.pid, Since::Fork)?;
                    pids.push(g.pid);
                }
                (Some(g), tap)
            }
            None => (None, None),
        };
        let working_set = args
            .sampling
            .wss_setup(scope == ScopeKind::System, args.cgroup.is_some())?;
        if let Some(w) = &working_set {
            source.working_set(w.clone());
        }
        let mut header = document::header(
            &source,
            args.sampling.interval,
            RecordingScope {
                kind: scope,
                pids,
                cgroup: args.cgroup.clone(),
            },
            (!args.command.is_empty()).then(|| args.command.clone()),
        );
        header.working_set = working_set;
        if let Some(w) = stream.as_mut() {
            w.line(&Line::Header(Box::new(header.clone())))?;
        }
        Ok(Setup {
            source,
            stream,
            gated,
            tap,
            header,
            wraps,
        })
    }
}

/// Creates the command, held before its exec until the first sample.
fn spawn(
    args: &RecordArgs,
    output: &Output,
    path: &std::path::Path,
) -> anyhow::Result<(child::Gated, Option<child::Tap>)> {
    let (stdout, tap) = if args.keep_output {
        // With the recording on stdout, the command's output goes to stderr.
        let (w, t) = child::Tap::start(matches!(output, Output::Stdout))?;
        (Some(w), Some(t))
    } else {
        (None, None)
    };
    let g = child::spawn_gated(
        path,
        &args.command,
        child::run_as_from_sudo(args.as_root),
        stdout,
    )?;
    Ok((g, tap))
}

/// The samples as they arrive: folded into the totals at once, and kept
/// (a document) or written (a stream, so its memory stays flat).
struct Book {
    fold: crate::model::fold::Fold,
    samples: Vec<Sample>,
    stream: Option<JsonlWriter>,
    /// The probes' status as of the latest read (the swap probe can attach
    /// late).
    probes: Vec<ProbeStatus>,
    limit: usize,
    /// The `--cachestat` files, read again when the document is made.
    cachestat: Option<crate::source::kernel::cachestat::Watch>,
}

impl Book {
    fn new(limit: usize, stream: Option<JsonlWriter>, probes: Vec<ProbeStatus>) -> Book {
        Book {
            fold: crate::model::fold::Fold::new(limit),
            samples: Vec::new(),
            stream,
            probes,
            limit,
            cachestat: None,
        }
    }

    /// A stream folds only the samples it could write, so its lines and
    /// its final recording agree.
    fn take(&mut self, r: anyhow::Result<Reading>) -> anyhow::Result<()> {
        let r = r?;
        self.probes = r.probes;
        let s = r.sample;
        self.fold.push(&s);
        match self.stream.as_mut() {
            Some(w) => w.line(&Line::Sample(Box::new(s)))?,
            None => self.samples.push(s),
        }
        Ok(())
    }

    /// Writes the document (or the stream's closing line); returns how
    /// that went, with the run's failure and the command's report.
    fn write(
        self,
        header: Header,
        ended: Ended,
        output: &Output,
    ) -> (
        anyhow::Result<()>,
        Option<anyhow::Error>,
        Option<child::ChildReport>,
    ) {
        let Book {
            fold,
            samples,
            mut stream,
            probes,
            limit,
            cachestat,
        } = self;
        let failure = ended.failure;
        let child_report = ended.child_report;
        let mut rec = document::assemble(document::Parts {
            fold,
            samples,
            probes,
            limit,
            header,
            end_wall: ended.end_wall,
            duration: ended.duration,
            interrupted_by: ended.interrupted_by,
            incomplete: failure.as_ref().map(|e| format!("{e:#}")),
            child: child_report.clone(),
        });
        rec.cachestat = cachestat.map(|w| w.finish()).unwrap_or_default();
        // What the run found, said on stderr once the recording is written:
        // a run that fails says its one error line alone.
        let mut said: Vec<String> = rec.cachestat.iter().map(|f| f.summary()).collect();
        // Asked for by name (--working-set): said, not only written.
        said.extend(rec.working_set.as_ref().map(|w| w.summary()));
        // A run that swapped is told where the pages went: "swapped out"
        // alone reads as disk writes when zswap or zram took them all.
        said.extend(
            rec.swap_tiers
                .as_ref()
                .filter(|t| t.moved())
                .map(|t| t.summary.clone()),
        );
        // Reads are told how much the cache served.
        said.extend(rec.page_cache.as_ref().and_then(|p| p.summary()));
        // Two methods that disagree are said in words, not only in JSON.
        if let Some(a) = rec
            .totals
            .vm
            .rmap
            .as_ref()
            .and_then(|r| r.agreement.as_ref())
        {
            if a.agree {
                log::info!("{}", a.summary);
            } else {
                log::warn!("{}", a.summary);
            }
        }
        let written = match stream.as_mut() {
            Some(w) => {
                let mut rec = rec;
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
        if written.is_ok() && failure.is_none() {
            for line in said {
                eprintln!("vmscope: {line}");
            }
        }
        (written, failure, child_report)
    }
}

/// How the run ended.
struct Ended {
    end_wall: SystemTime,
    duration: Duration,
    interrupted_by: Option<&'static str>,
    failure: Option<anyhow::Error>,
    child_report: Option<child::ChildReport>,
}

/// The wrapped command once released: whom to signal, and its wait.
struct Wrapped {
    handle: child::Handle,
    started: Instant,
    wait: tokio::task::JoinHandle<anyhow::Result<child::ChildReport>>,
    tap: Option<child::Tap>,
    sent: Vec<child::SignalSent>,
    /// When it gets SIGKILL, after vmscope's own SIGTERM.
    kill_at: Option<tokio::time::Instant>,
}

impl Wrapped {
    fn release(g: child::Gated, tap: Option<child::Tap>) -> anyhow::Result<Wrapped> {
        let (started, handle) = g.release()?;
        let h = handle.clone();
        Ok(Wrapped {
            handle,
            started,
            wait: tokio::task::spawn_blocking(move || h.wait(started)),
            tap,
            sent: Vec::new(),
            kill_at: None,
        })
    }

    fn send(&mut self, signo: i32, reason: &str) {
        log::info!(
            "{reason}: sending {} to the command (pid {})",
            child::signal_name(signo),
            self.handle.pid
        );
        let delivered = if signo == libc::SIGKILL {
            let n = self.handle.kill_tree();
            log::info!("SIGKILL also sent to {n} descendants");
            true
        } else {
            self.handle.signal(signo)
        };
        if delivered {
            self.sent.push(child::SignalSent {
                signal: child::signal_name(signo),
                reason: reason.into(),
                after_ns: nanos(self.started.elapsed()),
            });
        }
    }

    /// The command's report once it has exited, with its captured output
    /// and the signals vmscope sent it.
    fn finish(
        &mut self,
        r: Result<anyhow::Result<child::ChildReport>, tokio::task::JoinError>,
    ) -> anyhow::Result<child::ChildReport> {
        let mut report = r.context("waiting for the command").and_then(|r| r)?;
        if let Some(t) = self.tap.take() {
            report.output = Some(t.finish(Duration::from_secs(1)));
        }
        report.signals_sent = std::mem::take(&mut self.sent);
        Ok(report)
    }
}

/// Sleeps until `at`, or for ever.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The loop between the first sample and the last: it ends when the
/// command exits, or (without a command) at the duration or a signal.
struct Run<'a> {
    source: &'a mut Source,
    book: &'a mut Book,
    signals: Signals,
    command: Option<Wrapped>,
    deadline: Option<tokio::time::Instant>,
    interrupted_by: Option<&'static str>,
    /// vmscope's own failure mid-run: the recording ends, marked
    /// incomplete.
    failure: Option<anyhow::Error>,
    child_report: Option<child::ChildReport>,
}

impl Run<'_> {
    async fn until_done(&mut self) {
        loop {
            let kill_at = self.command.as_ref().and_then(|c| c.kill_at);
            let child_done = async {
                match self.command.as_mut() {
                    Some(c) => (&mut c.wait).await,
                    None => std::future::pending().await,
                }
            };
            let sig = tokio::select! {
                r = self.source.next(), if self.failure.is_none() => match self.book.take(r) {
                    Ok(()) => None,
                    Err(e) => {
                        log::debug!("recording failed: {e:#}");
                        self.failure = Some(e);
                        Some(("error", libc::SIGTERM))
                    }
                },
                r = child_done => {
                    if let Some(c) = self.command.as_mut() {
                        match c.finish(r) {
                            Ok(report) => self.child_report = Some(report),
                            Err(e) => {
                                self.failure.get_or_insert(e);
                            }
                        }
                    }
                    return;
                }
                () = until(kill_at) => {
                    if let Some(c) = self.command.as_mut() {
                        c.kill_at = None;
                        c.send(libc::SIGKILL, "grace");
                    }
                    continue;
                }
                () = until(self.deadline) => Some(("duration", libc::SIGTERM)),
                s = self.signals.recv() => Some((s.name(), s.number())),
            };
            let Some((why, signo)) = sig else { continue };
            if !self.on_stop(why, signo) {
                return;
            }
        }
    }

    /// A reason to stop. Without a command the loop ends (false). With
    /// one, the signal is forwarded and sampling goes on until it exits:
    /// the document is written once the command is gone, so nothing is
    /// lost. vmscope's own SIGTERM (duration, failure) is followed by
    /// SIGKILL to the command's tree if it still runs after the grace
    /// period.
    fn on_stop(&mut self, why: &'static str, signo: i32) -> bool {
        let own = matches!(why, "duration" | "error");
        if own {
            self.deadline = None;
        } else {
            self.interrupted_by.get_or_insert(why);
        }
        let Some(c) = self.command.as_mut() else {
            return false;
        };
        let reason = if own {
            if c.kill_at.is_none() {
                c.kill_at = Some(tokio::time::Instant::now() + child::GRACE);
            }
            why
        } else {
            "forwarded"
        };
        c.send(signo, reason);
        true
    }
}

/// The exit status, or the one-line error that says what became of the
/// command and the recording.
fn conclude(
    failure: Option<anyhow::Error>,
    child_report: Option<&child::ChildReport>,
    interrupted_by: Option<&'static str>,
    written: anyhow::Result<()>,
    output: &Output,
    wraps: bool,
) -> anyhow::Result<u8> {
    if let Some(e) = failure {
        let stopped = match child_report {
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
        let doc = match (&written, output) {
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
    Ok(match (child_report, interrupted_by) {
        (Some(c), _) => u8::try_from(c.exit_code).unwrap_or(exit::WRAPPER_FAILED),
        (None, _) => 0,
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
