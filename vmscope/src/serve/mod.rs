//! `vmscope serve`: a Prometheus/OpenMetrics exporter. Samples every
//! interval with the same loader and collector as `record`, renders both
//! text formats once per interval, and serves the cached bytes, so a scrape
//! costs a copy of a reference however many arrive at once.
//!
//! Built to stay up for weeks next to clients it does not trust:
//! - a request head must arrive within [`HEAD_TIMEOUT`] (an idle keep-alive
//!   connection too), and a response must be sent within [`WRITE_TIMEOUT`]
//!   of its request, or the connection is dropped;
//! - a peer address is served [`SERVED_PER_PEER`] connections at a time,
//!   its others wait their turn (within the head timeout), and it holds at
//!   most [`MAX_PER_PEER`] connections, all together at most
//!   [`MAX_CONNECTIONS`]; at a limit, the oldest
//!   connection of that peer (or of anyone, at the total limit) that has
//!   been open for [`DISPLACE_AFTER`] without sending a request head makes
//!   room, else the new one is closed at once. Connections that never ask
//!   for anything only displace each other, and a newcomer has that long
//!   to ask before it can be displaced;
//! - a failed accept (EMFILE and the like) is retried with backoff, logged
//!   once per burst;
//! - a failed refresh is logged once per burst and the last good body is
//!   served meanwhile, with its age and the failures counted as metrics.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    convert::Infallible,
    fmt::Write as _,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::Bytes;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Body, Frame, Incoming, SizeHint},
    header,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Notify;

pub mod export;

use crate::{
    cli::ServeArgs,
    driver::{self, Signal, Signals},
    exit,
    record::on_oom as oom,
    source::kernel::caps::Privileges,
    source::loader::{self, LoadOptions},
    source::{Reading, Source, shed::Shed},
};
use export::{Format, State};

/// The largest request head accepted (hyper's smallest buffer).
pub const MAX_HEAD_BYTES: usize = 8192;

/// Connections open at once, from all peers.
const MAX_CONNECTIONS: usize = 512;

/// Connections served at once for one peer address; its others wait.
const SERVED_PER_PEER: usize = 16;

/// Connections open at once from one peer address, served or waiting (a
/// burst of scrapes from one host waits rather than being refused).
const MAX_PER_PEER: usize = 256;

/// How long a connection that has not sent a request head is safe from
/// being displaced by a newer one from a peer at its limit.
const DISPLACE_AFTER: Duration = Duration::from_secs(1);

/// How long a client has to send a whole request head, counted from the
/// connection's acceptance (or the previous response) on, its wait for a
/// turn included.
const HEAD_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the answer to a request may take to be sent, counted from the
/// request's head on. A client that stops reading is dropped after it.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first pause after a failed accept, doubled on each failure in a
/// row up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

const OPENMETRICS_EOF: &str = "# EOF\n";

/// Why the exporter closed a connection itself, as the `reason` label of
/// `vmscope_exporter_connections_dropped_total`.
#[derive(Clone, Copy)]
enum Dropped {
    /// Refused, or closed before its request head to make room, because
    /// its peer had [`MAX_PER_PEER`] connections; or its turn among the
    /// peer's [`SERVED_PER_PEER`] did not come within the head timeout.
    PeerLimit,
    /// The same at [`MAX_CONNECTIONS`].
    ConnectionLimit,
    HeadTimeout,
    WriteTimeout,
}

impl Dropped {
    const ALL: [Dropped; 4] = [
        Dropped::PeerLimit,
        Dropped::ConnectionLimit,
        Dropped::HeadTimeout,
        Dropped::WriteTimeout,
    ];

    fn label(self) -> &'static str {
        match self {
            Dropped::PeerLimit => "peer_limit",
            Dropped::ConnectionLimit => "connection_limit",
            Dropped::HeadTimeout => "head_timeout",
            Dropped::WriteTimeout => "write_timeout",
        }
    }
}

/// The rendered bodies, replaced on every successful refresh.
#[derive(Clone)]
struct Bodies {
    prometheus: Bytes,
    /// Without its `# EOF` line, which follows the exporter's own metrics.
    openmetrics: Bytes,
    /// When the sample they show was taken.
    rendered: Instant,
}

/// What the connections share: the bodies and the exporter's own figures.
struct Shared {
    bodies: Mutex<Bodies>,
    refresh_failures: AtomicU64,
    dropped: [AtomicU64; Dropped::ALL.len()],
    /// The flight recorder's figures, with `--on-oom`.
    flight: Option<Arc<oom::Stats>>,
}

impl Shared {
    fn count(&self, why: Dropped) {
        self.dropped[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The exporter's own metrics, as of now, in `format`.
    fn own_metrics(&self, format: Format, rendered: Instant) -> String {
        let family = |name: &'static str, counter: bool| match format {
            Format::OpenMetrics if counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let mut out = String::with_capacity(1024);
        let age = "vmscope_exporter_body_age_seconds";
        let _ = writeln!(
            out,
            "# HELP {age} Seconds since the served metrics were sampled \
             (grows while refreshes fail).\n# TYPE {age} gauge\n{age} {:.3}",
            rendered.elapsed().as_secs_f64()
        );
        let failures = "vmscope_exporter_refresh_failures_total";
        let _ = writeln!(
            out,
            "# HELP {f} Refreshes of the metrics that failed (the last good ones \
             were served meanwhile).\n# TYPE {f} counter\n{failures} {}",
            self.refresh_failures.load(Ordering::Relaxed),
            f = family(failures, true),
        );
        let dropped = "vmscope_exporter_connections_dropped_total";
        let _ = writeln!(
            out,
            "# HELP {f} Connections the exporter closed itself, by reason.\n# TYPE {f} counter",
            f = family(dropped, true),
        );
        for why in Dropped::ALL {
            let _ = writeln!(
                out,
                "{dropped}{{reason=\"{}\"}} {}",
                why.label(),
                self.dropped[why as usize].load(Ordering::Relaxed)
            );
        }
        if let Some(f) = &self.flight {
            flight_metrics(&mut out, f, family);
        }
        out
    }
}

/// The flight recorder's counters (`--on-oom`).
fn flight_metrics(
    out: &mut String,
    f: &oom::Stats,
    family: impl Fn(&'static str, bool) -> &'static str,
) {
    let rows: [(&'static str, &str, &AtomicU64); 4] = [
        (
            "vmscope_flight_recordings_written_total",
            "OOM recordings written to the --on-oom directory (an episode's final rewrite counts again).",
            &f.written,
        ),
        (
            "vmscope_flight_recordings_failed_total",
            "OOM recordings that could not be written (each logged).",
            &f.failed,
        ),
        (
            "vmscope_flight_recordings_removed_total",
            "Old OOM recordings removed to keep within --on-oom-keep and --on-oom-max-bytes.",
            &f.removed,
        ),
        (
            "vmscope_flight_samples_dropped_total",
            "Samples the flight recorder dropped because its writer was behind.",
            &f.samples_dropped,
        ),
    ];
    for (name, help, n) in rows {
        let _ = writeln!(
            out,
            "# HELP {f} {help}\n# TYPE {f} counter\n{name} {}",
            n.load(Ordering::Relaxed),
            f = family(name, true),
        );
    }
}

/// A response body sent as a few shared chunks, with its exact length.
struct Chunks(VecDeque<Bytes>);

impl Chunks {
    fn one(b: Bytes) -> Chunks {
        Chunks(VecDeque::from([b]))
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}

/// The open connections, oldest first, and how many each peer has.
#[derive(Default)]
struct Conns {
    open: BTreeMap<u64, Conn>,
    per_peer: HashMap<IpAddr, Peer>,
    next: u64,
}

struct Peer {
    open: usize,
    /// [`SERVED_PER_PEER`] turns, taken in arrival order.
    turns: Arc<tokio::sync::Semaphore>,
}

struct Conn {
    peer: IpAddr,
    opened: Instant,
    /// Set once a request head has arrived: no longer displaceable.
    asked: Arc<AtomicBool>,
    close: Arc<Notify>,
}

/// A connection's place in [`Conns`], given back when dropped.
struct Ticket {
    id: u64,
    conns: Arc<Mutex<Conns>>,
    asked: Arc<AtomicBool>,
    close: Arc<Notify>,
    turns: Arc<tokio::sync::Semaphore>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ok(mut c) = self.conns.lock() {
            c.remove(self.id);
        }
    }
}

impl Conns {
    fn remove(&mut self, id: u64) -> Option<Conn> {
        let conn = self.open.remove(&id)?;
        if let Some(p) = self.per_peer.get_mut(&conn.peer) {
            p.open -= 1;
            if p.open == 0 {
                self.per_peer.remove(&conn.peer);
            }
        }
        Some(conn)
    }

    /// Closes the oldest connection (of `peer`, when given) that has not
    /// sent a request head yet, if it has been open for [`DISPLACE_AFTER`];
    /// false when there is none.
    fn displace(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .open
            .iter()
            .find(|(_, c)| peer.is_none_or(|p| c.peer == p) && !c.asked.load(Ordering::Relaxed))
            .filter(|(_, c)| c.opened.elapsed() >= DISPLACE_AFTER)
            .map(|(&id, _)| id);
        match victim.and_then(|id| self.remove(id)) {
            Some(c) => {
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Admits a connection from `peer`, making room as the limits say, or
/// says which limit refused it.
fn admit(conns: &Arc<Mutex<Conns>>, peer: IpAddr, shared: &Shared) -> Option<Ticket> {
    let mut c = conns.lock().ok()?;
    if c.per_peer.get(&peer).map_or(0, |p| p.open) >= MAX_PER_PEER {
        shared.count(Dropped::PeerLimit);
        if !c.displace(Some(peer)) {
            return None;
        }
    } else if c.open.len() >= MAX_CONNECTIONS {
        shared.count(Dropped::ConnectionLimit);
        if !c.displace(None) {
            return None;
        }
    }
    let id = c.next;
    c.next += 1;
    let asked = Arc::new(AtomicBool::new(false));
    let close = Arc::new(Notify::new());
    c.open.insert(
        id,
        Conn {
            peer,
            opened: Instant::now(),
            asked: asked.clone(),
            close: close.clone(),
        },
    );
    let p = c.per_peer.entry(peer).or_insert_with(|| Peer {
        open: 0,
        turns: Arc::new(tokio::sync::Semaphore::new(SERVED_PER_PEER)),
    });
    p.open += 1;
    let turns = p.turns.clone();
    Some(Ticket {
        id,
        conns: conns.clone(),
        asked,
        close,
        turns,
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    if args.interval.is_zero() {
        return Err(exit::failure(
            exit::USAGE,
            "--interval must be greater than zero",
        ));
    }
    oom::check_args(args.flight.history, args.flight.on_oom.as_deref())?;
    Privileges::current().require_bpf()?;
    driver::run(serve(args))
}

/// Failures in a row of one kind (refreshes, accepts), so that a burst is
/// logged once when it starts and once when it ends.
#[derive(Default)]
struct Burst {
    failures: u64,
    since: Option<Instant>,
}

impl Burst {
    /// Counts a failure; true for the first of a burst.
    fn fail(&mut self) -> bool {
        self.failures += 1;
        self.since.get_or_insert_with(Instant::now);
        self.failures == 1
    }

    /// Ends a burst: its failures and how long it lasted, if there was one.
    fn end(&mut self) -> Option<(u64, Duration)> {
        let since = self.since.take()?;
        let n = std::mem::take(&mut self.failures);
        Some((n, since.elapsed()))
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| {
            exit::failure(
                exit::FAILURE,
                format!(
                    "cannot listen on {}: {e}; choose another address with --listen",
                    args.listen
                ),
            )
        })?;
    let mut source = Source::load(LoadOptions {
        filtered: false,
        swap: loader::SwapAttach::Auto,
        // The exporter has no rmap series yet.
        sample_hz: 0,
        mmap_lock: args.mmap_lock,
        rmap_maintenance: false,
    })?;
    let mut state = State {
        fault_source: Some(source.fault_source),
        ..Default::default()
    };
    state.cgroups.top = usize::from(args.per_cgroup);
    state.cgroups.mount = source
        .cgroups
        .as_ref()
        .map(|c| std::path::PathBuf::from(&c.mount));
    let mut exporter = Exporter {
        state,
        per_process: usize::from(args.per_process),
        interval: args.interval,
        failures: Burst::default(),
        flight: oom::Recorder::new(
            &args.flight,
            &source,
            args.interval,
            &[],
            Some("vmscope serve"),
        ),
    };
    source.start(Instant::now(), args.interval);
    // Without a first good sample there is nothing to serve.
    let first = exporter.render(source.next().await)?;
    // The OOM writer starts before this thread gives its privileges up:
    // under sudo it takes the invoking user's file identity first.
    let writer = match exporter.flight.as_mut() {
        Some(f) => f.start_writer()?,
        None => None,
    };
    let shared = Arc::new(Shared {
        bodies: Mutex::new(first),
        refresh_failures: AtomicU64::new(0),
        dropped: Default::default(),
        flight: exporter.flight.as_ref().and_then(oom::Recorder::stats),
    });
    // Everything that attaches at start has; the listener is bound.
    let said = shed_privileges(&source, writer.as_deref());
    let local: SocketAddr = listener.local_addr().context("reading the bound address")?;
    // The listening line first (scripts wait for it), then what was shed
    // before it.
    eprintln!("vmscope serve: listening on http://{local}/metrics");
    eprintln!("{said}");
    let signals = Signals::install(&[Signal::Term, Signal::Int])?;
    Listening {
        listener,
        shared,
        conns: Arc::new(Mutex::new(Conns::default())),
        failures: Burst::default(),
        backoff: ACCEPT_BACKOFF_MIN,
        paused_until: None,
    }
    .run(&mut source, &mut exporter, signals)
    .await;
    // The open OOM episode's file, written whole.
    drop(exporter.flight.take());
    source.release();
    eprintln!("vmscope serve: stopped");
    Ok(0)
}

/// Turns reads into the bodies served.
struct Exporter {
    state: State,
    per_process: usize,
    interval: Duration,
    /// Refreshes that failed in a row.
    failures: Burst,
    /// `--history`: the flight recorder (and `--on-oom`'s writer).
    flight: Option<oom::Recorder>,
}

impl Exporter {
    /// The bodies for this read; an error for a read that failed.
    fn render(&mut self, r: anyhow::Result<Reading>) -> anyhow::Result<Bodies> {
        let r = r?;
        if let Some(f) = self.flight.as_mut() {
            f.push(&r.sample, &r.probes);
        }
        self.state.apply(r.sample);
        self.state.probes = r.probes;
        if let Some(shed) = r.shed {
            eprintln!(
                "{}",
                shed_line(&shed, "the swap probe no longer waits: ", None, None)
            );
        }
        let om = export::render(&self.state, Format::OpenMetrics, self.per_process);
        let om = om.strip_suffix(OPENMETRICS_EOF).unwrap_or(&om).to_owned();
        Ok(Bodies {
            prometheus: Bytes::from(export::render(
                &self.state,
                Format::Prometheus,
                self.per_process,
            )),
            openmetrics: Bytes::from(om),
            rendered: Instant::now(),
        })
    }

    /// Serves this read's bodies from now on, or keeps the last good ones
    /// (logged once per burst of failures).
    fn refresh(&mut self, r: anyhow::Result<Reading>, shared: &Shared) {
        match self.render(r) {
            Ok(b) => {
                if let Some((n, took)) = self.failures.end() {
                    eprintln!(
                        "vmscope serve: refreshing works again after {n} failed refreshes \
                         over {:.1} s",
                        took.as_secs_f64()
                    );
                }
                if let Ok(mut slot) = shared.bodies.lock() {
                    *slot = b;
                }
            }
            Err(e) => {
                shared.refresh_failures.fetch_add(1, Ordering::Relaxed);
                if self.failures.fail() {
                    let age = shared
                        .bodies
                        .lock()
                        .map(|b| b.rendered.elapsed().as_secs_f64())
                        .unwrap_or_default();
                    eprintln!(
                        "vmscope serve: refreshing the metrics failed: {e:#}; serving the last \
                         good ones ({age:.1} s old) and retrying every {}",
                        humantime::format_duration(self.interval)
                    );
                }
            }
        }
    }
}

/// The accept loop and what it keeps between accepts.
struct Listening {
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    conns: Arc<Mutex<Conns>>,
    failures: Burst,
    backoff: Duration,
    paused_until: Option<tokio::time::Instant>,
}

impl Listening {
    /// Serves until SIGTERM or SIGINT, refreshing the bodies at every read.
    async fn run(&mut self, source: &mut Source, exporter: &mut Exporter, mut signals: Signals) {
        loop {
            let paused = self.paused_until;
            tokio::select! {
                r = source.next() => exporter.refresh(r, &self.shared),
                accepted = self.listener.accept(), if paused.is_none() => self.on_accept(accepted),
                () = tokio::time::sleep_until(paused.unwrap_or_else(tokio::time::Instant::now)),
                    if paused.is_some() => self.paused_until = None,
                _ = signals.recv() => return,
            }
        }
    }

    fn on_accept(&mut self, accepted: std::io::Result<(tokio::net::TcpStream, SocketAddr)>) {
        match accepted {
            Ok((stream, peer)) => {
                if let Some((n, took)) = self.failures.end() {
                    eprintln!(
                        "vmscope serve: accepting again after {n} failed accepts over {:.1} s",
                        took.as_secs_f64()
                    );
                }
                self.backoff = ACCEPT_BACKOFF_MIN;
                // Refused: dropped, so closed at once.
                if let Some(ticket) = admit(&self.conns, peer.ip().to_canonical(), &self.shared) {
                    tokio::spawn(connection(stream, self.shared.clone(), ticket));
                }
            }
            // The peer gave up before it was accepted: nothing to wait for.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                ) => {}
            Err(e) => {
                if self.failures.fail() {
                    eprintln!(
                        "vmscope serve: accepting a connection failed: {e}; retrying after \
                         {} ms, backing off to {} s",
                        self.backoff.as_millis(),
                        ACCEPT_BACKOFF_MAX.as_secs()
                    );
                }
                self.paused_until = Some(tokio::time::Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// Gives up every capability the exporter no longer needs, for good, and
/// says so in one line. The sampling thread keeps what reading and the
/// deferred swap probe need (see `source::shed`); this thread, which talks
/// to the network, keeps nothing: it only accepts on a socket already
/// bound and renders owned samples.
fn shed_privileges(source: &Source, writer: Option<&str>) -> String {
    let shed = source.shed();
    let own = crate::source::kernel::privdrop::keep_only(&[]).err();
    shed_line(&shed, "", Some(own), writer)
}

/// The privileges line: what the sampling thread kept and why, what it
/// dropped, and (at the first drop) how the other threads stand.
/// `writer`: what the OOM writer, which gave its own up itself, holds.
fn shed_line(shed: &Shed, now: &str, own: Option<Option<String>>, writer: Option<&str>) -> String {
    use crate::source::kernel::privdrop;
    if let Some(why) = &shed.kept {
        return format!("vmscope serve: privileges: {now}{why}");
    }
    let mut why = Vec::new();
    if shed.for_swap {
        why.push("while the swap probe waits for a swap device (attaching it needs them)".into());
    }
    if let Some(c) = shed.for_reads {
        why.push(format!(
            "{c} because this kernel refuses map reads without it \
             (kernel.unprivileged_bpf_disabled is set, kernels before 6.5)"
        ));
    }
    let kept = if shed.after.is_empty() {
        "the sampling thread kept no capabilities (the maps are read through open descriptors)"
            .to_string()
    } else {
        format!(
            "the sampling thread kept {} {}",
            privdrop::names(&shed.after),
            why.join("; ")
        )
    };
    let dropped: ::caps::CapsHashSet = shed.before.difference(&shed.after).copied().collect();
    let dropped = match dropped.len() {
        0 => "dropped none".to_string(),
        n if n <= 4 => format!("dropped {}", privdrop::names(&dropped)),
        n => format!("dropped the other {n}"),
    };
    let threads = match own {
        None => String::new(),
        Some(Some(e)) => format!("; the serving thread could not drop its own: {e}"),
        // The sampling thread and this one have given theirs up.
        Some(None) => {
            let helpers = usize::from(writer.is_some());
            match privdrop::other_threads().saturating_sub(1 + helpers) {
                0 => "; the serving thread keeps none".to_string(),
                n => format!("; the serving thread keeps none; {n} other threads keep theirs"),
            }
        }
    };
    let threads = match writer {
        Some(w) => format!("{threads}; {w}"),
        None => threads,
    };
    let root = if rustix::process::getuid().is_root() || rustix::process::geteuid().is_root() {
        "; still uid 0, so root's file permissions remain: run it as its own user \
         (vmscope/dist/vmscope-serve.service) to give those up too"
    } else {
        ""
    };
    format!("vmscope serve: privileges: {now}{kept}; {dropped}{threads}{root}")
}

/// Serves one connection until it closes, is displaced, or a response
/// takes longer than [`WRITE_TIMEOUT`] from its request on.
async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>, ticket: Ticket) {
    // Until the first request head: the head timeout, from acceptance on.
    let deadline = Arc::new(Mutex::new(tokio::time::Instant::now() + HEAD_TIMEOUT));
    let first = deadline
        .lock()
        .map(|d| *d)
        .unwrap_or_else(|_| tokio::time::Instant::now());
    // This peer's turn; held until the connection ends.
    let _turn = tokio::select! {
        turn = ticket.turns.clone().acquire_owned() => match turn {
            Ok(t) => t,
            Err(_) => return,
        },
        () = tokio::time::sleep_until(first) => {
            shared.count(Dropped::PeerLimit);
            return;
        }
        () = ticket.close.notified() => return,
    };
    let service = {
        let (shared, deadline, asked) = (shared.clone(), deadline.clone(), ticket.asked.clone());
        hyper::service::service_fn(move |req| {
            asked.store(true, Ordering::Relaxed);
            if let Ok(mut d) = deadline.lock() {
                *d = tokio::time::Instant::now() + WRITE_TIMEOUT;
            }
            let r = respond(&req, &shared);
            async move { Ok::<_, Infallible>(r) }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let sleep = tokio::time::sleep_until(first);
    let mut sleep = std::pin::pin!(sleep);
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if served.is_err_and(|e| e.is_timeout()) {
                    shared.count(Dropped::HeadTimeout);
                }
                break;
            }
            // Displaced by a newer connection (counted there).
            () = ticket.close.notified() => break,
            () = sleep.as_mut() => {
                let now = tokio::time::Instant::now();
                let d = deadline.lock().map(|d| *d).unwrap_or(now);
                if d > now {
                    sleep.as_mut().reset(d);
                } else {
                    shared.count(if ticket.asked.load(Ordering::Relaxed) {
                        Dropped::WriteTimeout
                    } else {
                        Dropped::HeadTimeout
                    });
                    break;
                }
            }
        }
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Chunks> {
    let mut r = Response::new(Chunks::one(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn respond(req: &Request<Incoming>, shared: &Shared) -> Response<Chunks> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let has_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "requests carry no body here\n",
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::from_accept(accept);
            let Ok(b) = shared.bodies.lock().map(|b| b.clone()) else {
                return text(StatusCode::INTERNAL_SERVER_ERROR, "no metrics\n");
            };
            let mut own = shared.own_metrics(format, b.rendered);
            let body = match format {
                Format::Prometheus => b.prometheus,
                Format::OpenMetrics => {
                    own.push_str(OPENMETRICS_EOF);
                    b.openmetrics
                }
            };
            let mut r = Response::new(Chunks(VecDeque::from([body, Bytes::from(own)])));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(format.content_type()),
            );
            r
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /healthz\n",
        ),
    }
}
