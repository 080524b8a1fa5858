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
//!
//! Here: the limits and the run; the connections and responses are in
//! `http`, the shared state and its refresh in `upkeep`, the metrics text
//! in [`export`].

mod http;
mod upkeep;

use http::{Conns, Listening};
use upkeep::{Exporter, Shared, shed_privileges};

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, atomic::AtomicU64},
    time::{Duration, Instant},
};

use anyhow::Context as _;

pub mod export;

use crate::{
    cli::ServeArgs,
    driver::{self, Signal, Signals},
    exit,
    flight::on_oom as oom,
    source::Source,
    source::kernel::caps::Privileges,
};
use export::State;

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

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    args.sampling.check()?;
    args.flight.check()?;
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
    // Nothing is followed: the scan measures every process.
    if let Some(setup) = args.sampling.wss_setup(true, false)? {
        state.wss_edges_ns = Some(setup.age_edges_ns.clone());
        source.working_set(setup);
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use super::{
        http::{Chunks, Conn, Peer, Phase, Tracked, admit, connection},
        upkeep::Bodies,
    };
    use bytes::Bytes;
    use hyper::Response;
    use hyper_util::rt::TokioIo;
    use std::{
        convert::Infallible,
        net::IpAddr,
        sync::atomic::{AtomicU8, Ordering},
    };
    use tokio::sync::Notify;

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
