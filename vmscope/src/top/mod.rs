//! `vmscope top`: the live view. The same loader, collector and model as
//! `record` feed [`live::Live`]; this module only runs the loop, owns the
//! terminal and hands views to [`draw`].

pub mod app;
pub mod draw;

use crate::model::{
    cgroup::CgroupScheme,
    view::{self, Unavailable},
};
use std::{
    io::Write as _,
    pin::Pin,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use crossterm::{
    cursor,
    event::{Event, EventStream, KeyEventKind},
    execute,
    terminal::{self, EnterAlternateScreen, LeaveAlternateScreen},
};
use futures_core::Stream as _;
use ratatui::{Terminal, backend::CrosstermBackend};

use crate::{
    cli::TopArgs,
    driver::{self, Signal, Signals},
    exit,
    model::probes::{FaultSource, ProbeStatus},
    model::{
        catalogue::{self, Need},
        live::Live,
    },
    source::Source,
    source::kernel::{caps::Privileges, system},
    source::procfs,
};
use app::{Action, App, HeaderFacts};

pub fn run(args: TopArgs) -> anyhow::Result<u8> {
    args.sampling.check()?;
    if args.count.is_some() && !args.batch {
        return Err(exit::failure(exit::USAGE, "-n needs --batch"));
    }
    args.process.check()?;
    if !args.batch && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(exit::failure(
            exit::USAGE,
            "stdout is not a terminal; use --batch -n COUNT for plain-text snapshots",
        ));
    }
    args.flight.check()?;
    Privileges::current().require_bpf()?;
    driver::run(async move {
        let source = Source::open(args.process.load_options(&args.sampling), &args.process.pid)?;
        // Nothing followed: the scan measures every process.
        if let Some(setup) = args
            .sampling
            .wss_setup(args.process.pid.is_empty(), false)?
        {
            source.working_set(setup);
        }
        if args.batch {
            batch(&args, source).await
        } else {
            interactive(&args, source).await
        }
    })
}

/// What `Live` must treat as unavailable, from the probes' status: the
/// catalogue's rate rows and process columns whose probe is not usable,
/// cgroup figures without attribution, and per-cgroup PSI on cgroup v1.
fn unavailable(
    probes: &[ProbeStatus],
    fault_source: FaultSource,
    cgroups: Option<&CgroupScheme>,
) -> Unavailable {
    let why = |probe: &str| {
        let p = probes.iter().find(|p| p.probe == probe)?;
        (!p.usable()).then(|| format!("{probe}: {}", p.reason.as_deref().unwrap_or("not attached")))
    };
    let mut u = Unavailable::new();
    for row in catalogue::RATES {
        for need in row.needs {
            let reason = match need {
                Need::Probe(probe) => why(probe),
                Need::FaultTracepoints => (fault_source != FaultSource::Tracepoint).then(|| {
                    "no exceptions:page_fault_kernel: faults are counted without the \
                         user/kernel split"
                        .to_string()
                }),
            };
            if let Some(reason) = reason {
                u.entry(row.label.to_string()).or_insert(reason);
            }
        }
    }
    for f in catalogue::PROC_FIELDS {
        if let (Some(column), Some(reason)) = (f.column, why(f.probe)) {
            u.entry(column.key.to_string()).or_insert(reason);
        }
    }
    if let Some(reason) = why(view::CGROUPS) {
        u.insert(view::CGROUPS.to_string(), reason);
    } else if cgroups.is_some_and(|c| c.hierarchy != "v2") {
        u.insert(
            view::CGROUP_PSI.to_string(),
            "cgroup v1 keeps no per-cgroup PSI".to_string(),
        );
    }
    u
}

fn header(probes: &[ProbeStatus], args: &TopArgs) -> HeaderFacts {
    let mem = procfs::meminfo();
    let k = system::kernel_info();
    HeaderFacts {
        kernel: format!("{} {}", k.release, k.machine),
        uptime_s: procfs::uptime_s(),
        probes_attached: probes.iter().filter(|p| p.attached).count(),
        probes_total: probes.len(),
        unavailable: probes
            .iter()
            .filter(|p| p.deferred)
            .map(|p| format!("{} waiting for a swap device", p.probe))
            .chain(
                crate::model::probes::unusable_by_reason(probes)
                    .into_iter()
                    .map(|(names, why)| format!("{names}: {why}")),
            )
            .collect(),
        mem_free_bytes: mem.get("MemAvailable").copied(),
        swap_total_bytes: mem.get("SwapTotal").copied(),
        swap_used_bytes: match (mem.get("SwapTotal"), mem.get("SwapFree")) {
            (Some(t), Some(f)) => Some(t.saturating_sub(*f)),
            _ => None,
        },
        scope: (!args.process.pid.is_empty()).then(|| {
            let pids: Vec<String> = args.process.pid.iter().map(u32::to_string).collect();
            format!("pids {} and descendants", pids.join(","))
        }),
    }
}

/// What the readings go into: the model, and with `--history` the flight
/// recorder.
struct Feed<'a> {
    args: &'a TopArgs,
    live: Live,
    fault_source: FaultSource,
    cgroups: Option<CgroupScheme>,
    flight: Option<crate::flight::on_oom::Recorder>,
}

impl<'a> Feed<'a> {
    /// `to_stderr`: where the flight recorder's reports go (`None`: to the
    /// OOM line of the screen's header).
    fn new(
        args: &'a TopArgs,
        source: &Source,
        to_stderr: Option<&'static str>,
    ) -> anyhow::Result<Self> {
        // The writer starts at once and gives up its own privileges (`top`
        // keeps its: the probes are its own).
        let flight = crate::flight::on_oom::Recorder::new(
            &args.flight,
            source,
            args.sampling.interval,
            &args.process.pid,
            to_stderr,
        )
        .map(|mut r| {
            r.start_writer()?;
            anyhow::Ok(r)
        })
        .transpose()?;
        let mut live = Live::new(unavailable(
            &source.probes,
            source.fault_source,
            source.cgroups.as_ref(),
        ));
        if let Some(setup) = args
            .sampling
            .wss_setup(args.process.pid.is_empty(), false)?
        {
            live.show_working_set(setup.age_edges_ns);
        }
        Ok(Self {
            args,
            live,
            fault_source: source.fault_source,
            cgroups: source.cgroups.clone(),
            flight,
        })
    }

    /// One reading: the header, what is unavailable, the OOM kills (into
    /// the flight recorder too), then the model.
    fn take(&mut self, app: &mut App, reading: crate::source::Reading) {
        app.header = header(&reading.probes, self.args);
        self.live.set_unavailable(unavailable(
            &reading.probes,
            self.fault_source,
            self.cgroups.as_ref(),
        ));
        app.note_oom(&reading.sample);
        if let Some(f) = self.flight.as_mut() {
            f.push(&reading.sample, &reading.probes);
            if let Some(n) = f.notes().pop() {
                app.oom.written = Some(n);
            }
        }
        if let Some(v) = self.live.push(reading.sample) {
            app.update(v);
        }
    }
}

/// `--batch`: plain-text snapshots, one per interval.
async fn batch(args: &TopArgs, mut source: Source) -> anyhow::Result<u8> {
    let count = args.count.unwrap_or(1);
    let mut app = App::new(header(&source.probes, args), args.sampling.interval);
    let mut signals = Signals::install(&[Signal::Int, Signal::Term])?;
    let mut feed = Feed::new(args, &source, Some("vmscope top"))?;
    source.start(Instant::now(), args.sampling.interval);
    feed.take(&mut app, source.next().await?);
    let mut out = std::io::stdout().lock();
    for i in 0..count {
        let reading = tokio::select! {
            r = source.next() => r?,
            _ = signals.recv() => break,
        };
        feed.take(&mut app, reading);
        if i > 0 {
            writeln!(out).context("writing to stdout")?;
        }
        write!(out, "{}", draw::snapshot_text(&app, args.cgroups)).context("writing to stdout")?;
        out.flush().context("writing to stdout")?;
    }
    source.release();
    Ok(0)
}

/// Whether the terminal is in `top`'s modes (raw, alternate screen, cursor
/// hidden). The first [`restore`] clears it, so the terminal is put back
/// once: leaving the alternate screen a second time would also move the
/// cursor back to where `top` started (the terminal restores the cursor it
/// saved on entry even when not on the alternate screen), and whatever is
/// printed next, such as a panic's message, would be written over.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back however `top` ends: dropped on return and on
/// unwinding, and called by the panic hook before the message is printed.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> anyhow::Result<Self> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let owned = restore();
                previous(info);
                // A panic off the main thread would leave the loop drawing
                // on the restored terminal: end the process instead (the
                // kernel drops the programs with its descriptors).
                if owned && std::thread::current().name() != Some("main") {
                    std::process::exit(PANIC_EXIT.into());
                }
            }));
        });
        terminal::enable_raw_mode().context("switching the terminal to raw mode")?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard;
        execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide)
            .context("switching to the alternate screen")?;
        Ok(guard)
    }
}

/// The exit status of a panic (Rust's, also when it unwinds out of `main`).
const PANIC_EXIT: u8 = 101;

/// Raw mode off first (a `tcsetattr`, which never waits for output), then
/// the main screen and the cursor. Errors are ignored: after a hangup every
/// write fails with EIO and the terminal cannot be opened, and there is
/// nothing left to restore. Returns whether the terminal was `top`'s.
fn restore() -> bool {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return false;
    }
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
    true
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Whether the terminal has gone away (hung up): a hung-up terminal answers
/// every ioctl with EIO, so it is no longer a terminal.
fn terminal_gone() -> bool {
    !std::io::IsTerminal::is_terminal(&std::io::stdout())
}

/// The exit status for dying of `signo` (128+N), after arming a watchdog:
/// whatever is left (restoring the terminal, detaching) must not keep
/// vmscope alive when the terminal is wedged or gone. Past the grace the
/// process ends at once with the same status; the kernel then drops the
/// programs with the last descriptors.
fn ended_by(signo: libc::c_int) -> u8 {
    let code = 128 + u8::try_from(signo).unwrap_or(0);
    let _ = std::thread::Builder::new()
        .name("exit-watchdog".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_secs(5));
            // SAFETY: ends the process; nothing after it runs.
            unsafe { libc::_exit(code.into()) };
        });
    code
}

async fn interactive(args: &TopArgs, mut source: Source) -> anyhow::Result<u8> {
    // Nothing may write to the terminal behind the screen's back.
    log::set_max_level(log::LevelFilter::Off);
    // Caught before the terminal changes modes, so no signal's default
    // action can end vmscope with the terminal left raw.
    let mut signals = Signals::install(&[Signal::Term, Signal::Hup, Signal::Int])?;
    let mut app = App::new(header(&source.probes, args), args.sampling.interval);
    if args.cgroups {
        app.table = app::Table::Cgroups;
    }
    let mut feed = Feed::new(args, &source, None)?;
    source.start(Instant::now(), args.sampling.interval);
    feed.take(&mut app, source.next().await?);

    let _guard = TerminalGuard::enter()?;
    // Never dropped: its `Drop` shows the cursor and, when that fails (as
    // every write does once the terminal has hung up), prints to stderr,
    // which panics on a dead terminal. `restore` shows the cursor.
    let mut term = std::mem::ManuallyDrop::new(
        Terminal::new(CrosstermBackend::new(std::io::stdout())).context("opening the terminal")?,
    );
    term.clear().context("clearing the terminal")?;

    let mut events = EventStream::new();

    let mut test_panic = TestPanic::from_env();
    let result: anyhow::Result<u8> = async {
        loop {
            // A terminal that has gone away ends `top` as its SIGHUP would
            // (which may come a moment later, or never, when the session's
            // leader ignores it).
            if let Err(e) = term.draw(|f| draw::draw(f, &app)) {
                if terminal_gone() {
                    return Ok(ended_by(libc::SIGHUP));
                }
                return Err(anyhow::Error::new(e).context("drawing"));
            }
            tokio::select! {
                r = source.next() => {
                    test_panic.tick();
                    feed.take(&mut app, r?);
                }
                ev = next_event(&mut events) => match ev {
                    Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                        match app.on_key(k) {
                            Action::Quit => return Ok(0),
                            Action::Reset => feed.live.reset(),
                            Action::Interval(d) => source.set_interval(d),
                            Action::None => {}
                        }
                    }
                    Some(Ok(_)) => {} // resize and others: redrawn at the top of the loop
                    Some(Err(_)) | None if terminal_gone() => return Ok(ended_by(libc::SIGHUP)),
                    Some(Err(e)) => {
                        return Err(anyhow::Error::new(e).context("reading the terminal's input"));
                    }
                    None => anyhow::bail!("the terminal's input closed"),
                },
                // SIGTERM, SIGHUP, or SIGINT sent by someone else: Ctrl-C
                // in the terminal is a key (raw mode).
                s = signals.recv() => return Ok(ended_by(s.number())),
            }
        }
    }
    .await;
    // Dropping the stream wakes crossterm's reader thread and does not wait
    // for it: once the terminal is gone (a hangup), that thread can be
    // stuck reading for good, and waiting would keep vmscope alive. The
    // process ends when `run` returns.
    drop(events);
    restore();
    source.release();
    match result {
        // An error cannot be shown on a terminal that has hung up (and
        // printing it there would panic): it ends as the hangup.
        Err(_) if terminal_gone() => Ok(ended_by(libc::SIGHUP)),
        r => r,
    }
}

/// The next terminal event. Cancel-safe: an event not yet taken stays
/// with crossterm's reader.
async fn next_event(events: &mut EventStream) -> Option<std::io::Result<Event>> {
    std::future::poll_fn(|cx| Pin::new(&mut *events).poll_next(cx)).await
}

/// A test hook, not a feature: with `VMSCOPE_TEST_PANIC=N` in the
/// environment, the interactive loop panics on its Nth tick, so the
/// end-to-end tests (tests/tests/terminal.rs) can check that a panic puts
/// the terminal back before its message is printed. Unset (as for every
/// user), it costs one environment lookup at start.
struct TestPanic(Option<u32>);

impl TestPanic {
    fn from_env() -> Self {
        TestPanic(
            std::env::var("VMSCOPE_TEST_PANIC")
                .ok()
                .and_then(|v| v.parse().ok()),
        )
    }

    fn tick(&mut self) {
        if let Some(n) = &mut self.0 {
            *n = n.saturating_sub(1);
            assert!(
                *n > 0,
                "VMSCOPE_TEST_PANIC: the panic asked for by the test hook"
            );
        }
    }
}
