//! The HTTP side of `serve`: admitting connections within the per-peer
//! and total limits (and what makes room), the accept loop, each
//! connection's timeouts, and the responses, streamed from the cached
//! bodies.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    convert::Infallible,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use bytes::Bytes;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Body, Frame, Incoming, SizeHint},
    header,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Notify;

use crate::{driver::Signals, source::Source};

use super::export::Format;
use super::upkeep::{Dropped, Exporter, Shared};
use super::{
    ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, Burst, DISPLACE_AFTER, HEAD_TIMEOUT, MAX_CONNECTIONS,
    MAX_HEAD_BYTES, MAX_PER_PEER, OPENMETRICS_EOF, SERVED_PER_PEER, WRITE_TIMEOUT,
};

/// A response body sent as a few shared chunks, with its exact length.
pub(super) struct Chunks {
    pub(super) chunks: VecDeque<Bytes>,
    /// The phase of the connection it answers, told when hyper is done
    /// with the body (all of it taken, or none for HEAD).
    pub(super) answering: Option<Arc<Phase>>,
}

impl Chunks {
    pub(super) fn new(chunks: impl Into<VecDeque<Bytes>>) -> Chunks {
        Chunks {
            chunks: chunks.into(),
            answering: None,
        }
    }

    pub(super) fn one(b: Bytes) -> Chunks {
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
pub(super) struct Phase(pub(super) AtomicU8);

impl Phase {
    /// No request head yet.
    pub(super) const FRESH: u8 = 0;
    /// A request head has arrived; hyper does not have all of its answer.
    pub(super) const ANSWERING: u8 = 1;
    /// Hyper has all of the answer; some may not be written out yet.
    pub(super) const SENDING: u8 = 2;
    /// The last answer is written out and no request head has come since:
    /// an idle keep-alive connection, or one whose next head is arriving.
    pub(super) const IDLE: u8 = 3;

    pub(super) fn new() -> Phase {
        Phase(AtomicU8::new(Phase::FRESH))
    }

    /// Whether a request head has ever arrived.
    pub(super) fn asked(&self) -> bool {
        self.0.load(Ordering::Relaxed) != Phase::FRESH
    }

    pub(super) fn idle(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Phase::IDLE
    }

    /// A request head arrived.
    pub(super) fn request(&self) {
        self.0.store(Phase::ANSWERING, Ordering::Relaxed);
    }

    /// Hyper is done with the answer's body.
    pub(super) fn handed_over(&self) {
        let _ = self.0.compare_exchange(
            Phase::ANSWERING,
            Phase::SENDING,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The socket was flushed with nothing left in hyper's buffer.
    pub(super) fn written(&self) {
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
pub(super) struct Tracked {
    pub(super) stream: tokio::net::TcpStream,
    pub(super) phase: Arc<Phase>,
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
pub(super) struct Conns {
    pub(super) open: BTreeMap<u64, Conn>,
    pub(super) per_peer: HashMap<IpAddr, Peer>,
    pub(super) next: u64,
}

pub(super) struct Peer {
    pub(super) open: usize,
    /// [`SERVED_PER_PEER`] turns, taken in arrival order.
    pub(super) turns: Arc<tokio::sync::Semaphore>,
}

pub(super) struct Conn {
    pub(super) peer: IpAddr,
    pub(super) opened: Instant,
    pub(super) phase: Arc<Phase>,
    pub(super) close: Arc<Notify>,
}

/// A connection's place in [`Conns`], given back when dropped.
pub(super) struct Ticket {
    pub(super) id: u64,
    pub(super) conns: Arc<Mutex<Conns>>,
    pub(super) phase: Arc<Phase>,
    pub(super) close: Arc<Notify>,
    pub(super) turns: Arc<tokio::sync::Semaphore>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ok(mut c) = self.conns.lock() {
            c.remove(self.id);
        }
    }
}

impl Conns {
    pub(super) fn remove(&mut self, id: u64) -> Option<Conn> {
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
    pub(super) fn held(&self, peer: IpAddr) -> usize {
        self.per_peer.get(&peer).map_or(0, |p| p.open)
    }

    /// Closes the oldest connection (of `peer`, when given) that has not
    /// sent a request head yet, if it has been open for [`DISPLACE_AFTER`];
    /// false when there is none.
    pub(super) fn displace(&mut self, peer: Option<IpAddr>) -> bool {
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
    pub(super) fn close_idle(&mut self, peer: IpAddr) -> bool {
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
    pub(super) fn close(&mut self, victim: Option<u64>) -> bool {
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
pub(super) fn admit(conns: &Arc<Mutex<Conns>>, peer: IpAddr, shared: &Shared) -> Option<Ticket> {
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

/// The accept loop and what it keeps between accepts.
pub(super) struct Listening {
    pub(super) listener: tokio::net::TcpListener,
    pub(super) shared: Arc<Shared>,
    pub(super) conns: Arc<Mutex<Conns>>,
    pub(super) failures: Burst,
    pub(super) backoff: Duration,
    pub(super) paused_until: Option<tokio::time::Instant>,
}

impl Listening {
    /// Serves until SIGTERM or SIGINT, refreshing the bodies at every read.
    pub(super) async fn run(
        &mut self,
        source: &mut Source,
        exporter: &mut Exporter,
        mut signals: Signals,
    ) {
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

    pub(super) fn on_accept(
        &mut self,
        accepted: std::io::Result<(tokio::net::TcpStream, SocketAddr)>,
    ) {
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

/// Serves one connection until it closes, is displaced, or a response
/// takes longer than [`WRITE_TIMEOUT`] from its request on.
pub(super) async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>, ticket: Ticket) {
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

pub(super) fn text(status: StatusCode, body: &'static str) -> Response<Chunks> {
    let mut r = Response::new(Chunks::one(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(super) fn respond(req: &Request<Incoming>, shared: &Shared) -> Response<Chunks> {
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
