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
//!   room. Connections that never ask for anything only displace each
//!   other, and a newcomer has that long to ask before it can be displaced;
//! - at the total limit, when no such connection is left, an idle
//!   keep-alive connection (its last answer written out, no request head
//!   since) of the peer holding the most connections makes room, oldest
//!   first, provided that peer holds at least two more than the newcomer's
//!   or the newcomer's holds none. A peer never closes its own, a
//!   connection is never closed while a request of it is being answered,
//!   and a newcomer whose peer holds none gets in as long as any connection
//!   is idle, so peers that keep asking cannot lock out a scraper however
//!   many addresses they use. Each such close evens the holdings out (the
//!   sum of their squares falls), so closes cannot go round in a circle;
//!   only peers holding one connection each take turns, one per newcomer.
//!   The client sees a keep-alive connection closed between requests,
//!   which HTTP allows at any time and clients retry;
//! - otherwise the new connection is closed at once;
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
        atomic::{AtomicU8, AtomicU64, Ordering},
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
    flight::on_oom as oom,
    source::kernel::caps::Privileges,
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
    /// An idle keep-alive connection closed at [`MAX_CONNECTIONS`] to let
    /// in a peer holding fewer (see [`Conns::close_idle`]).
    IdleKeepAlive,
    HeadTimeout,
    WriteTimeout,
}

impl Dropped {
    const ALL: [Dropped; 5] = [
        Dropped::PeerLimit,
        Dropped::ConnectionLimit,
        Dropped::IdleKeepAlive,
        Dropped::HeadTimeout,
        Dropped::WriteTimeout,
    ];

    fn label(self) -> &'static str {
        match self {
            Dropped::PeerLimit => "peer_limit",
            Dropped::ConnectionLimit => "connection_limit",
            Dropped::IdleKeepAlive => "idle_keep_alive",
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
        let mut out = String::with_capacity(1024);
        let age = &export::BODY_AGE;
        export::write_head(&mut out, format, age);
        let _ = writeln!(out, "{} {:.3}", age.name, rendered.elapsed().as_secs_f64());
        let failures = &export::REFRESH_FAILURES;
        export::write_head(&mut out, format, failures);
        let _ = writeln!(
            out,
            "{} {}",
            failures.name,
            self.refresh_failures.load(Ordering::Relaxed)
        );
        let dropped = &export::CONNECTIONS_DROPPED;
        export::write_head(&mut out, format, dropped);
        for why in Dropped::ALL {
            let _ = writeln!(
                out,
                "{}{{reason=\"{}\"}} {}",
                dropped.name,
                why.label(),
                self.dropped[why as usize].load(Ordering::Relaxed)
            );
        }
        if let Some(f) = &self.flight {
            flight_metrics(&mut out, f, format);
        }
        out
    }
}

/// The flight recorder's counters (`--on-oom`).
fn flight_metrics(out: &mut String, f: &oom::Stats, format: Format) {
    let rows: [(&crate::model::catalogue::Family, &AtomicU64); 4] = [
        (&export::FLIGHT_WRITTEN, &f.written),
        (&export::FLIGHT_FAILED, &f.failed),
        (&export::FLIGHT_REMOVED, &f.removed),
        (&export::FLIGHT_SAMPLES_DROPPED, &f.samples_dropped),
    ];
    for (family, n) in rows {
        export::write_head(out, format, family);
        let _ = writeln!(out, "{} {}", family.name, n.load(Ordering::Relaxed));
    }
}

/// A response body sent as a few shared chunks, with its exact length.
struct Chunks {
    chunks: VecDeque<Bytes>,
    /// The phase of the connection it answers, told when hyper is done
    /// with the body (all of it taken, or none for HEAD).
    answering: Option<Arc<Phase>>,
}

impl Chunks {
    fn new(chunks: impl Into<VecDeque<Bytes>>) -> Chunks {
        Chunks {
            chunks: chunks.into(),
            answering: None,
        }
    }

    fn one(b: Bytes) -> Chunks {
        Chunks::new([b])
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        if let Some(p) = &self.answering {
            p.handed_over();
        }
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.chunks.pop_front().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.chunks.iter().map(|b| b.len() as u64).sum())
    }
}

/// Where a connection stands between its requests, for choosing which one
/// may be closed to make room.
struct Phase(AtomicU8);

impl Phase {
    /// No request head yet.
    const FRESH: u8 = 0;
    /// A request head has arrived; hyper does not have all of its answer.
    const ANSWERING: u8 = 1;
    /// Hyper has all of the answer; some may not be written out yet.
    const SENDING: u8 = 2;
    /// The last answer is written out and no request head has come since:
    /// an idle keep-alive connection, or one whose next head is arriving.
    const IDLE: u8 = 3;

    fn new() -> Phase {
        Phase(AtomicU8::new(Phase::FRESH))
    }

    /// Whether a request head has ever arrived.
    fn asked(&self) -> bool {
        self.0.load(Ordering::Relaxed) != Phase::FRESH
    }

    fn idle(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Phase::IDLE
    }

    /// A request head arrived.
    fn request(&self) {
        self.0.store(Phase::ANSWERING, Ordering::Relaxed);
    }

    /// Hyper is done with the answer's body.
    fn handed_over(&self) {
        let _ = self.0.compare_exchange(
            Phase::ANSWERING,
            Phase::SENDING,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The socket was flushed with nothing left in hyper's buffer.
    fn written(&self) {
        let _ = self.0.compare_exchange(
            Phase::SENDING,
            Phase::IDLE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

/// A connection's socket, telling its [`Phase`] when an answer has been
/// written out: hyper writes its buffer out whole before it flushes the
/// socket, and flushes after every write.
struct Tracked {
    stream: tokio::net::TcpStream,
    phase: Arc<Phase>,
}

impl tokio::io::AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.stream).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            self.phase.written();
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
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
    phase: Arc<Phase>,
    close: Arc<Notify>,
}

/// A connection's place in [`Conns`], given back when dropped.
struct Ticket {
    id: u64,
    conns: Arc<Mutex<Conns>>,
    phase: Arc<Phase>,
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

    /// How many connections `peer` holds.
    fn held(&self, peer: IpAddr) -> usize {
        self.per_peer.get(&peer).map_or(0, |p| p.open)
    }

    /// Closes the oldest connection (of `peer`, when given) that has not
    /// sent a request head yet, if it has been open for [`DISPLACE_AFTER`];
    /// false when there is none.
    fn displace(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .open
            .iter()
            .find(|(_, c)| peer.is_none_or(|p| c.peer == p) && !c.phase.asked())
            .filter(|(_, c)| c.opened.elapsed() >= DISPLACE_AFTER)
            .map(|(&id, _)| id);
        self.close(victim)
    }

    /// Closes the oldest idle keep-alive connection of the peer holding
    /// the most, for a newcomer from `peer`, if that one holds at least two
    /// more than `peer` or `peer` holds none; false when there is none.
    /// Either way the newcomer's peer is not the victim's, and with two
    /// more the holdings end up more even (n² + m² falls when n ≥ m + 2
    /// become n - 1 and m + 1), so newcomers cannot close each other's
    /// connections in a circle.
    fn close_idle(&mut self, peer: IpAddr) -> bool {
        let has = self.held(peer);
        let victim = self
            .open
            .iter()
            .filter(|(_, c)| c.phase.idle())
            .map(|(&id, c)| (self.held(c.peer), std::cmp::Reverse(id)))
            .filter(|&(n, _)| has == 0 || n >= has + 2)
            .max()
            .map(|(_, std::cmp::Reverse(id))| id);
        self.close(victim)
    }

    /// Removes `victim` and tells its task to close it; false for none.
    fn close(&mut self, victim: Option<u64>) -> bool {
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
    if c.held(peer) >= MAX_PER_PEER {
        shared.count(Dropped::PeerLimit);
        if !c.displace(Some(peer)) {
            return None;
        }
    } else if c.open.len() >= MAX_CONNECTIONS {
        if c.displace(None) {
            shared.count(Dropped::ConnectionLimit);
        } else if c.close_idle(peer) {
            shared.count(Dropped::IdleKeepAlive);
        } else {
            shared.count(Dropped::ConnectionLimit);
            return None;
        }
    }
    let id = c.next;
    c.next += 1;
    let phase = Arc::new(Phase::new());
    let close = Arc::new(Notify::new());
    c.open.insert(
        id,
        Conn {
            peer,
            opened: Instant::now(),
            phase: phase.clone(),
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
        phase,
        close,
        turns,
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    args.sampling.check()?;
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
    let mut source = Source::open(args.sampling.load_options(), &[])?;
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
        interval: args.sampling.interval,
        failures: Burst::default(),
        flight: oom::Recorder::new(
            &args.flight,
            &source,
            args.sampling.interval,
            &[],
            Some("vmscope serve"),
        ),
    };
    source.start(Instant::now(), args.sampling.interval);
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
        let (shared, deadline, phase) = (shared.clone(), deadline.clone(), ticket.phase.clone());
        hyper::service::service_fn(move |req| {
            phase.request();
            if let Ok(mut d) = deadline.lock() {
                *d = tokio::time::Instant::now() + WRITE_TIMEOUT;
            }
            let mut r = respond(&req, &shared);
            r.body_mut().answering = Some(phase.clone());
            async move { Ok::<_, Infallible>(r) }
        })
    };
    let stream = Tracked {
        stream,
        phase: ticket.phase.clone(),
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
                    shared.count(if ticket.phase.asked() {
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
            let mut r = Response::new(Chunks::new([body, Bytes::from(own)]));
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// Opens a connection from 127.0.0.`peer` in `phase`; its id.
    fn open(c: &mut Conns, peer: u8, phase: u8) -> u64 {
        let id = c.next;
        c.next += 1;
        let peer = IpAddr::from([127, 0, 0, peer]);
        c.open.insert(
            id,
            Conn {
                peer,
                opened: Instant::now(),
                phase: Arc::new(Phase(AtomicU8::new(phase))),
                close: Arc::new(Notify::new()),
            },
        );
        c.per_peer
            .entry(peer)
            .or_insert_with(|| Peer {
                open: 0,
                turns: Arc::new(tokio::sync::Semaphore::new(SERVED_PER_PEER)),
            })
            .open += 1;
        id
    }

    fn newcomer(peer: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, peer])
    }

    #[test]
    fn an_idle_connection_of_the_biggest_holder_makes_room_oldest_first() {
        let mut c = Conns::default();
        let busy = open(&mut c, 2, Phase::ANSWERING);
        let oldest_idle = open(&mut c, 2, Phase::IDLE);
        open(&mut c, 2, Phase::IDLE);
        open(&mut c, 3, Phase::IDLE);
        open(&mut c, 3, Phase::IDLE);
        assert!(c.close_idle(newcomer(1)));
        assert!(!c.open.contains_key(&oldest_idle) && c.open.contains_key(&busy));
        assert_eq!((c.held(newcomer(2)), c.held(newcomer(3))), (2, 2));
    }

    #[test]
    fn connections_being_answered_or_never_asked_are_not_idle() {
        let mut c = Conns::default();
        for phase in [Phase::FRESH, Phase::ANSWERING, Phase::SENDING] {
            open(&mut c, 2, phase);
        }
        let idle = open(&mut c, 3, Phase::IDLE);
        assert!(c.close_idle(newcomer(1)));
        assert!(!c.open.contains_key(&idle));
        assert!(!c.close_idle(newcomer(1)), "closed a busy connection");
        assert_eq!(c.open.len(), 3);
    }

    #[test]
    fn a_peer_closes_only_for_holdings_two_bigger_than_its_own() {
        let mut c = Conns::default();
        for _ in 0..3 {
            open(&mut c, 2, Phase::IDLE);
        }
        open(&mut c, 3, Phase::IDLE);
        open(&mut c, 3, Phase::IDLE);
        // 3 against 2: closing would only swap the holdings round.
        assert!(!c.close_idle(newcomer(3)));
        // Its own, never.
        assert!(!c.close_idle(newcomer(2)));
        assert_eq!(c.open.len(), 5);
        // 3 against 1: one of the bigger holder's goes, then 2 against 1
        // is even enough.
        open(&mut c, 4, Phase::IDLE);
        assert!(c.close_idle(newcomer(4)));
        assert_eq!(c.held(newcomer(2)), 2);
        assert!(!c.close_idle(newcomer(4)));
        assert_eq!(c.open.len(), 5);
    }

    #[test]
    fn a_peer_holding_none_takes_a_turn_among_peers_holding_one() {
        let mut c = Conns::default();
        let first = open(&mut c, 2, Phase::IDLE);
        open(&mut c, 3, Phase::IDLE);
        assert!(c.close_idle(newcomer(4)));
        assert!(!c.open.contains_key(&first));
        // A peer holding one does not close another's one.
        open(&mut c, 4, Phase::IDLE);
        assert!(!c.close_idle(newcomer(4)));
    }

    /// Reads one answer's head and its `content-length` bytes of body.
    async fn answer(s: &mut tokio::net::TcpStream, body: bool) -> usize {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if !body || got.len() >= end + 4 + len {
                    return len;
                }
            }
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
    }

    /// A client's socket and the server's end of it.
    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, from) = listener.accept().await.unwrap();
        (client, server, from)
    }

    fn settle() -> tokio::time::Sleep {
        tokio::time::sleep(Duration::from_millis(200))
    }

    /// An answer in one chunk is all with hyper at once, and the
    /// connection is idle only once the client has taken it.
    #[tokio::test]
    async fn an_answer_all_with_hyper_is_not_idle_until_written_out() {
        let (mut client, server, _) = pair().await;
        let phase = Arc::new(Phase::new());
        let service = {
            let phase = phase.clone();
            hyper::service::service_fn(move |_| {
                phase.request();
                let mut body = Chunks::one(Bytes::from(vec![b'#'; 32 << 20]));
                body.answering = Some(phase.clone());
                async move { Ok::<_, Infallible>(Response::new(body)) }
            })
        };
        let stream = Tracked {
            stream: server,
            phase: phase.clone(),
        };
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service),
        );
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: vmscope\r\n\r\n")
            .await
            .unwrap();
        settle().await;
        assert_eq!(phase.0.load(Ordering::Relaxed), Phase::SENDING);
        assert_eq!(answer(&mut client, true).await, 32 << 20);
        settle().await;
        assert!(phase.idle(), "not idle after the answer was read");
    }

    /// A real connection served by [`connection`]: idle only once an
    /// answer has been read whole, and then closed by [`Conns::close_idle`].
    #[tokio::test]
    async fn a_connection_is_idle_only_once_its_answer_is_written_out() {
        let shared = Arc::new(Shared {
            bodies: Mutex::new(Bodies {
                // More than the socket buffers hold without a reader.
                prometheus: Bytes::from(vec![b'#'; 32 << 20]),
                openmetrics: Bytes::new(),
                rendered: Instant::now(),
            }),
            refresh_failures: AtomicU64::new(0),
            dropped: Default::default(),
            flight: None,
        });
        let (mut client, server, from) = pair().await;
        let conns = Arc::new(Mutex::new(Conns::default()));
        let ticket = admit(&conns, from.ip(), &shared).unwrap();
        let phase = ticket.phase.clone();
        tokio::spawn(connection(server, shared, ticket));
        settle().await;
        assert!(!phase.asked());

        client
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: vmscope\r\n\r\n")
            .await
            .unwrap();
        settle().await;
        assert!(phase.asked() && !phase.idle(), "idle while answering");
        assert!(!conns.lock().unwrap().close_idle(newcomer(9)));
        assert!(answer(&mut client, true).await > 32 << 20);
        settle().await;
        assert!(phase.idle(), "not idle after the answer was read");

        client
            .write_all(b"HEAD /healthz HTTP/1.1\r\nHost: vmscope\r\n\r\n")
            .await
            .unwrap();
        answer(&mut client, false).await;
        settle().await;
        assert!(phase.idle(), "not idle after a HEAD answer");
        assert!(conns.lock().unwrap().close_idle(newcomer(9)));
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), client.read_to_end(&mut rest));
        assert!(
            matches!(read.await, Ok(Ok(0))),
            "still open, or sent {rest:?}"
        );
    }
}
