//! `vmscope serve` against clients that try to lock it out, run as a real
//! process over real sockets: a slowloris of 600 connections while a real
//! Prometheus keeps scraping and another address is served; 512 keep-alive
//! connections from 32 addresses that keep asking, holding every place
//! before Prometheus arrives; a client that stops reading; accept failures
//! (EMFILE, from a lowered RLIMIT_NOFILE); refreshes that fail (the map
//! reads' bpf(2) calls made to fail by tracing the server with ptrace); the
//! default bind being loopback; and the capabilities it gives up once
//! attached (as root, and as uid 65534 with file capabilities), with faults
//! still counted after and a swap device that appears later still getting
//! its probe.
//!
//! The tests run one at a time (they measure times and CPU).
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    io::{ErrorKind, Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, TcpStream},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use vmscope_tests::{
    root_or_skip,
    serve_fixture::{
        Prometheus, Serve, TCP_ESTABLISHED, connect_from, get_from, metric, tcp_state, tool_or_skip,
    },
};

/// The server's limits, as `serve.rs` sets them.
const HEAD_TIMEOUT: Duration = Duration::from_secs(3);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// Another loopback address, standing in for another peer.
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

static SERIAL: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `GET /metrics` from `from`: the body, and how long the answer took.
fn scrape_from(from: Ipv4Addr, addr: SocketAddr) -> (String, Duration) {
    let t = Instant::now();
    let r = get_from(from, addr, "/metrics").unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(r.status, 200, "GET /metrics: {r:?}");
    (r.body, t.elapsed())
}

/// The server's count of connections it closed for `reason` (NaN when the
/// body has none, which fails every comparison below).
fn dropped(body: &str, reason: &str) -> f64 {
    let series = format!("vmscope_exporter_connections_dropped_total{{reason=\"{reason}\"}}");
    metric(body, &series).unwrap_or(f64::NAN)
}

/// Whether the server has closed `s` (EOF or reset); `s` is non-blocking.
/// Bytes it sent are counted into `got`.
fn closed(s: &mut TcpStream, got: &mut usize) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => *got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// A slowloris connection: a request head begun and never finished.
struct Slow {
    s: TcpStream,
    opened: Instant,
}

fn slow(addr: SocketAddr) -> Option<Slow> {
    let opened = Instant::now();
    let mut s = connect_from(LOCAL, addr, None).ok()?;
    // Refused connections may be reset while this is written.
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: vmscope\r\nX-Slow: ");
    s.set_nonblocking(true).unwrap();
    Some(Slow { s, opened })
}

#[test]
fn slowloris_of_600_leaves_prometheus_and_other_peers_served() {
    const TEST: &str = "slowloris_of_600_leaves_prometheus_and_other_peers_served";
    if !root_or_skip(TEST) || !tool_or_skip(TEST, "prometheus") {
        return;
    }
    let _serial = one_at_a_time();
    const CONNECTIONS: usize = 600;
    const ATTACK: Duration = Duration::from_secs(12);
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let addr = serve.addr;
    let prom = Prometheus::start(addr);
    let t = Instant::now();
    while prom.value("up") != Some(1.0) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "Prometheus: up = {:?} after 30 s\n{}",
            prom.query("up"),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The attack, from 127.0.0.1 (where Prometheus scrapes from too): 600
    // connections, each one re-opened whenever the server closes it.
    let attack_start = Instant::now();
    let attacker = std::thread::spawn(move || {
        let mut conns: Vec<Option<Slow>> = (0..CONNECTIONS).map(|_| slow(addr)).collect();
        let (mut reopened, mut answered) = (0usize, 0usize);
        while attack_start.elapsed() < ATTACK {
            std::thread::sleep(Duration::from_millis(500));
            for c in &mut conns {
                let gone = match c {
                    Some(c) => closed(&mut c.s, &mut answered),
                    None => true,
                };
                if gone {
                    *c = slow(addr);
                    reopened += 1;
                }
            }
        }
        // No more re-opening: the connections left are watched here, on
        // this thread, so that a close is seen when it happens, not when
        // the main thread is done asking Prometheus.
        (Aftermath::watch(conns), reopened, answered)
    });

    // Meanwhile fresh connections from the attacker's own address, which
    // may or may not get in. They run on their own thread: a connect whose
    // SYN the full backlog dropped waits a second for its retry, and that
    // wait must not thin out the other peer's GETs below.
    let same_address = std::thread::spawn(move || {
        let (mut ok, mut tried) = (0, 0);
        std::thread::sleep(Duration::from_millis(1500));
        while attack_start.elapsed() < ATTACK - Duration::from_millis(500) {
            tried += 1;
            if get_from(LOCAL, addr, "/healthz").is_ok_and(|r| r.status == 200) {
                ok += 1;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        (ok, tried)
    });
    // And another peer asks, twice a second.
    let mut other = Vec::new();
    std::thread::sleep(Duration::from_millis(1500));
    while attack_start.elapsed() < ATTACK - Duration::from_millis(500) {
        other.push(scrape_from(OTHER, addr).1);
        std::thread::sleep(Duration::from_millis(500));
    }
    let (same_ok, same_tried) = same_address.join().unwrap();
    // Prometheus's scrapes over the attack, its first 1.5 s left out.
    let window = format!("{}s", (ATTACK.as_secs_f64() - 2.0).floor());
    let scrapes = prom.value(&format!("count_over_time(up[{window}])"));
    let min_up = prom.value(&format!("min_over_time(up[{window}])"));
    let slowest = prom.value(&format!("max_over_time(scrape_duration_seconds[{window}])"));
    let (after, reopened, answered) = attacker.join().unwrap();
    let (body, _) = scrape_from(OTHER, addr);
    let max_other = other.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{TEST}: {CONNECTIONS} slow connections from {LOCAL} for {:.1} s, {reopened} re-opened \
         after the server closed them; Prometheus: {scrapes:?} scrapes in the last {window}, \
         min up {min_up:?}, slowest {slowest:?} s; {} GETs from {OTHER}: slowest {:.1} ms; \
         fresh /healthz from {LOCAL}: {same_ok} of {same_tried}; afterwards {} still open \
         {:.1} s after the attack, the longest-lived closed after {:.2} s; dropped: peer_limit \
         {}, head_timeout {}",
        ATTACK.as_secs_f64(),
        other.len(),
        max_other.as_secs_f64() * 1e3,
        after.open,
        after.watched.as_secs_f64(),
        after.longest.as_secs_f64(),
        dropped(&body, "peer_limit"),
        dropped(&body, "head_timeout"),
    );
    assert_eq!(
        (answered, after.answered),
        (0, 0),
        "the server answered bytes to an unfinished request head"
    );
    assert!(
        reopened > CONNECTIONS,
        "the attack never reached the server's limits ({reopened} re-opened)"
    );
    assert!(
        dropped(&body, "peer_limit") > 0.0 && dropped(&body, "head_timeout") > 0.0,
        "the server counted no refusals or head timeouts:\n{body}"
    );
    assert_eq!(
        min_up,
        Some(1.0),
        "Prometheus failed a scrape during the attack ({scrapes:?} scrapes)\n{}",
        prom.log()
    );
    assert!(
        scrapes.is_some_and(|n| n >= 6.0),
        "only {scrapes:?} Prometheus scrapes in {window} of attack"
    );
    assert!(other.len() >= 10, "{} GETs from {OTHER}", other.len());
    assert!(
        max_other < Duration::from_secs(1),
        "a GET from {OTHER} took {max_other:?} during the attack: {other:?}"
    );
    assert!(
        after.open == 0 && after.late.is_empty(),
        "{} of the {} slow connections open at the end are still open; {} closed later than \
         {HEAD_TIMEOUT:?} + 2 s after opening: {:?}",
        after.open,
        after.held,
        after.late.len(),
        after.late
    );
}

/// The slow connections left open when the attack ends, watched until the
/// server has closed them all (or for the head timeout and 10 s more).
struct Aftermath {
    /// How many were open when the attack ended.
    held: usize,
    /// How many were still open when the watch gave up.
    open: usize,
    /// Lifetimes of those closed later than the head timeout and 2 s.
    late: Vec<Duration>,
    longest: Duration,
    /// Bytes the server sent on them (it must send none).
    answered: usize,
    /// How long the watch took.
    watched: Duration,
}

impl Aftermath {
    fn watch(conns: Vec<Option<Slow>>) -> Aftermath {
        let start = Instant::now();
        let mut open: Vec<Slow> = conns.into_iter().flatten().collect();
        let mut a = Aftermath {
            held: open.len(),
            open: 0,
            late: Vec::new(),
            longest: Duration::ZERO,
            answered: 0,
            watched: Duration::ZERO,
        };
        while !open.is_empty() && start.elapsed() < HEAD_TIMEOUT + Duration::from_secs(10) {
            open.retain_mut(|c| {
                if closed(&mut c.s, &mut a.answered) {
                    let lived = c.opened.elapsed();
                    a.longest = a.longest.max(lived);
                    if lived > HEAD_TIMEOUT + Duration::from_secs(2) {
                        a.late.push(lived);
                    }
                    false
                } else {
                    true
                }
            });
            std::thread::sleep(Duration::from_millis(50));
        }
        a.open = open.len();
        a.watched = start.elapsed();
        a
    }
}

/// Peer addresses in the keep-alive crowd: 127.0.0.2 and up.
const CROWD_ADDRESSES: u8 = 32;
/// Connections per address: the server's turns per peer.
const CROWD_PER_ADDRESS: usize = 16;
/// How often each connection asks; within the head timeout, so that the
/// server never closes one for being idle too long.
const CROWD_PERIOD: Duration = Duration::from_secs(2);

/// What one address's connections have seen so far.
#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    opened: AtomicUsize,
    /// Connections found closed by the server.
    closed: AtomicUsize,
}

/// Keep-alive clients at many peer addresses, a thread per address, each
/// connection asking `HEAD /healthz` every [`CROWD_PERIOD`] and, when the
/// server has closed it, opening a new one at its next turn, as a real
/// client would. Stopped (threads joined, sockets closed) when dropped.
struct Crowd {
    stop: Arc<AtomicBool>,
    tallies: Vec<Arc<Tally>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Crowd {
    fn start(to: SocketAddr) -> Crowd {
        let stop = Arc::new(AtomicBool::new(false));
        let tallies: Vec<Arc<Tally>> = (0..CROWD_ADDRESSES).map(|_| Arc::default()).collect();
        let threads = tallies
            .iter()
            .zip(2u8..)
            .map(|(tally, last)| {
                let (stop, tally) = (stop.clone(), tally.clone());
                let from = Ipv4Addr::new(127, 0, 0, last);
                std::thread::spawn(move || ask_for_ever(from, to, &stop, &tally))
            })
            .collect();
        Crowd {
            stop,
            tallies,
            threads,
        }
    }

    /// Per address: (answered, opened, closed by the server).
    fn tally(&self) -> Vec<(usize, usize, usize)> {
        self.tallies
            .iter()
            .map(|t| {
                (
                    t.answered.load(Ordering::Relaxed),
                    t.opened.load(Ordering::Relaxed),
                    t.closed.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One address's [`CROWD_PER_ADDRESS`] connections, until `stop`.
fn ask_for_ever(from: Ipv4Addr, to: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    struct Client {
        s: Option<TcpStream>,
        due: Instant,
        /// Bytes after the last complete answer.
        got: Vec<u8>,
    }
    const HEAD: &[u8] = b"HEAD /healthz HTTP/1.1\r\nHost: vmscope\r\n\r\n";
    let start = Instant::now();
    let mut clients: Vec<Client> = (0..CROWD_PER_ADDRESS)
        .map(|i| Client {
            s: None,
            due: start + CROWD_PERIOD * i as u32 / CROWD_PER_ADDRESS as u32,
            got: Vec::new(),
        })
        .collect();
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        for c in &mut clients {
            let mut gone = false;
            if let Some(s) = c.s.as_mut() {
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => gone = true,
                        Ok(n) => {
                            c.got.extend_from_slice(&buf[..n]);
                            continue;
                        }
                        Err(e) => gone = e.kind() != ErrorKind::WouldBlock,
                    }
                    break;
                }
                // A HEAD answer is a head alone.
                while let Some(end) = c.got.windows(4).position(|w| w == b"\r\n\r\n") {
                    c.got.drain(..end + 4);
                    tally.answered.fetch_add(1, Ordering::Relaxed);
                }
            }
            if gone {
                c.s = None;
                c.got.clear();
                tally.closed.fetch_add(1, Ordering::Relaxed);
            }
            let now = Instant::now();
            if now < c.due {
                continue;
            }
            c.due += CROWD_PERIOD;
            if c.due < now {
                c.due = now + CROWD_PERIOD;
            }
            if c.s.is_none() {
                c.s = connect_from(from, to, None).ok().inspect(|s| {
                    s.set_nonblocking(true).unwrap();
                    tally.opened.fetch_add(1, Ordering::Relaxed);
                });
            }
            if let Some(s) = c.s.as_mut()
                && s.write_all(HEAD).is_err()
            {
                c.s = None;
                tally.closed.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 32 peer addresses × 16 keep-alive connections that keep asking fill
/// every one of the server's 512 places before Prometheus arrives; it must
/// still get in at every scrape, and the crowd must still be answered.
#[test]
fn keep_alive_crowd_of_32_peers_leaves_prometheus_scraping() {
    const TEST: &str = "keep_alive_crowd_of_32_peers_leaves_prometheus_scraping";
    if !root_or_skip(TEST) || !tool_or_skip(TEST, "prometheus") {
        return;
    }
    let _serial = one_at_a_time();
    const WINDOW: Duration = Duration::from_secs(24);
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let crowd = Crowd::start(serve.addr);
    // Every connection opened and asked at least once.
    std::thread::sleep(CROWD_PERIOD + Duration::from_secs(2));
    let settled = crowd.tally();
    let prom = Prometheus::start(serve.addr);
    let t = Instant::now();
    while !prom
        .value("count_over_time(up[1m])")
        .is_some_and(|n| n >= 1.0)
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "Prometheus: no scrape after 30 s: {:?}\n{}",
            prom.query("up"),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = crowd.tally();
    std::thread::sleep(WINDOW);
    let after = crowd.tally();
    let window = format!("{}s", WINDOW.as_secs());
    let scrapes = prom.value(&format!("count_over_time(up[{window}])"));
    let scraped = prom.value(&format!("sum_over_time(up[{window}])"));
    let min_up = prom.value(&format!("min_over_time(up[{window}])"));
    drop(crowd);
    let (body, _) = scrape_from(LOCAL, serve.addr);
    drop(prom);

    let sum = |v: &[(usize, usize, usize)]| {
        v.iter()
            .fold((0, 0, 0), |a, t| (a.0 + t.0, a.1 + t.1, a.2 + t.2))
    };
    let answered: Vec<usize> = before.iter().zip(&after).map(|(b, a)| a.0 - b.0).collect();
    let least = answered.iter().min().copied().unwrap_or_default();
    let (s, (b, a)) = (sum(&settled), (sum(&before), sum(&after)));
    eprintln!(
        "{TEST}: {CROWD_ADDRESSES} addresses × {CROWD_PER_ADDRESS} keep-alive connections, \
         HEAD /healthz every {CROWD_PERIOD:?}; before Prometheus: {} opened, {} answered, {} \
         closed by the server; over {window} of Prometheus: {scrapes:?} scrapes, \
         {scraped:?} with up = 1, min up {min_up:?}; the crowd: {} answered (least per address \
         {least}), {} re-opened, {} closed by the server; dropped: idle_keep_alive {}, \
         connection_limit {}, head_timeout {}",
        s.1,
        s.0,
        s.2,
        a.0 - b.0,
        a.1 - b.1,
        a.2 - b.2,
        dropped(&body, "idle_keep_alive"),
        dropped(&body, "connection_limit"),
        dropped(&body, "head_timeout"),
    );
    assert!(
        s.1 >= CROWD_ADDRESSES as usize * CROWD_PER_ADDRESS && s.0 >= s.1,
        "the crowd never held the server's places: {settled:?}"
    );
    assert_eq!(
        min_up,
        Some(1.0),
        "Prometheus failed scrapes among the crowd ({scraped:?} of {scrapes:?} up)\n{}",
        serve.stderr()
    );
    assert!(
        scrapes.is_some_and(|n| n >= WINDOW.as_secs_f64() / 2.0),
        "only {scrapes:?} Prometheus scrapes in {window}"
    );
    // 16 connections × 12 turns each, less what the server closed.
    assert!(
        least >= 100,
        "an address of the crowd was answered only {least} times in {window}: {answered:?}"
    );
    // Room is made once for Prometheus; the connection that made it is
    // refused after, rather than closing another of the crowd's in turn.
    let reopened = a.1 - b.1;
    assert!(
        reopened <= 4 * (WINDOW.as_secs() / CROWD_PERIOD.as_secs()) as usize,
        "the crowd re-opened {reopened} connections in {window}: closing each other's in turn"
    );
    assert!(
        dropped(&body, "idle_keep_alive") >= 1.0,
        "the server counted no idle keep-alive connection closed:\n{body}"
    );
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    const TEST: &str = "a_client_that_stops_reading_is_dropped_after_the_write_timeout";
    if !root_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    const STALLED: usize = 4;
    const PIPELINED: usize = 2000;
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let addr = serve.addr;
    let (before, _) = scrape_from(OTHER, addr);
    let size = before.len();

    // Clients with a 1 KiB receive buffer that ask for /metrics 2000 times
    // on one connection each (pipelined) and never read.
    let requests = "GET /metrics HTTP/1.1\r\nHost: vmscope\r\n\r\n".repeat(PIPELINED);
    let stalled: Vec<(TcpStream, Instant)> = (0..STALLED)
        .map(|_| {
            let mut s = connect_from(LOCAL, addr, Some(1024)).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
            let t = Instant::now();
            // The server stops reading too once its answers back up.
            let _ = s.write_all(requests.as_bytes());
            (s, t)
        })
        .collect();

    let mut closed_after: Vec<Option<Duration>> = vec![None; STALLED];
    let mut others = Vec::new();
    let t = Instant::now();
    let mut open_at_half = None;
    while t.elapsed() < WRITE_TIMEOUT + Duration::from_secs(6) && closed_after.contains(&None) {
        for (i, (s, start)) in stalled.iter().enumerate() {
            if closed_after[i].is_none() && tcp_state(s) != TCP_ESTABLISHED {
                closed_after[i] = Some(start.elapsed());
            }
        }
        if open_at_half.is_none() && t.elapsed() >= WRITE_TIMEOUT / 2 {
            open_at_half = Some(closed_after.iter().filter(|c| c.is_none()).count());
        }
        others.push(scrape_from(OTHER, addr).1);
        others.push(scrape_from(LOCAL, addr).1);
        std::thread::sleep(Duration::from_millis(250));
    }
    let (body, _) = scrape_from(OTHER, addr);
    let slowest = others.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{TEST}: {STALLED} clients sent {PIPELINED} pipelined requests for a {size}-byte body \
         and read nothing; still open after {:?}: {open_at_half:?}; closed after {:?}; \
         meanwhile {} scrapes by others, slowest {:.1} ms; write_timeout drops: {}",
        WRITE_TIMEOUT / 2,
        closed_after,
        others.len(),
        slowest.as_secs_f64() * 1e3,
        dropped(&body, "write_timeout"),
    );
    assert_eq!(
        open_at_half,
        Some(STALLED),
        "a stalled client was dropped before the write timeout"
    );
    for (i, c) in closed_after.iter().enumerate() {
        let c = c.unwrap_or_else(|| {
            panic!(
                "stalled client {i} still connected {:?} after its requests",
                WRITE_TIMEOUT + Duration::from_secs(6)
            )
        });
        assert!(
            c >= WRITE_TIMEOUT - Duration::from_millis(500)
                && c <= WRITE_TIMEOUT + Duration::from_secs(4),
            "stalled client {i} dropped after {c:?}, not about {WRITE_TIMEOUT:?}"
        );
    }
    assert!(
        dropped(&body, "write_timeout") >= STALLED as f64,
        "the server counted fewer write timeouts than stalled clients:\n{body}"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape by another client took {slowest:?} while the stalled ones were held"
    );
}

/// The socket inodes `pid` holds.
fn socket_inodes(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let target = std::fs::read_link(e.ok()?.path()).ok()?;
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The local addresses (as /proc/net/tcp* writes them) of the listening
/// sockets among `inodes`.
fn listening(table: &str, inodes: &[u64]) -> Vec<String> {
    std::fs::read_to_string(table)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let inode: u64 = f.get(9)?.parse().ok()?;
            (f.get(3) == Some(&"0A") && inodes.contains(&inode)).then(|| f[1].to_string())
        })
        .collect()
}

/// This host's IPv4 addresses other than loopback.
fn other_ipv4_addresses() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, walked read-only and freed once.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut p = list;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() && i32::from((*a).sa_family) == libc::AF_INET {
                let sin = &*(a.cast::<libc::sockaddr_in>());
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() {
                    out.push(ip);
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out
}

#[test]
fn the_default_bind_is_loopback() {
    const TEST: &str = "the_default_bind_is_loopback";
    if !root_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    let serve = Serve::start(&["-i", "500ms"]);
    assert_eq!(
        serve.addr,
        SocketAddr::from(([127, 0, 0, 1], 9464)),
        "without --listen"
    );
    let r = get_from(LOCAL, serve.addr, "/healthz").unwrap();
    assert_eq!((r.status, r.body.trim()), (200, "ok"));
    let inodes = socket_inodes(serve.pid());
    let v4 = listening("/proc/net/tcp", &inodes);
    let v6 = listening("/proc/net/tcp6", &inodes);
    // 127.0.0.1 in the kernel's byte order, port 9464 in hex.
    assert_eq!(v4, ["0100007F:24F8"], "listening sockets (IPv6: {v6:?})");
    assert!(v6.is_empty(), "also listening on IPv6: {v6:?}");
    let others = other_ipv4_addresses();
    for ip in &others {
        let to = SocketAddr::from((*ip, 9464));
        let e = TcpStream::connect_timeout(&to, Duration::from_secs(2));
        assert!(e.is_err(), "{to} accepted a connection");
    }
    eprintln!(
        "{TEST}: listens on {v4:?} only (/proc/net/tcp); connecting to port 9464 on {others:?} \
         refused"
    );
}

/// Makes every bpf(2) call of thread `tid` fail with EIO for `window`, by
/// tracing it (ptrace) and skipping the call; returns how many it failed.
#[cfg(target_arch = "x86_64")]
fn fail_bpf_calls(tid: i32, window: Duration) -> Result<u64, String> {
    use std::ffi::c_void;
    const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
    const PTRACE_EVENT_STOP: i32 = 128;
    const OP_ENTRY: u8 = 1;
    const OP_EXIT: u8 = 2;
    /// `struct ptrace_syscall_info`, as far as it is read here.
    #[repr(C)]
    struct Info {
        op: u8,
        _reserved: u8,
        _flags: u16,
        _arch: u32,
        _ip: u64,
        _sp: u64,
        nr: u64,
        _args: [u64; 6],
    }
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    let null = std::ptr::null_mut::<c_void>();
    // SAFETY: ptrace and waitpid on a process of ours; every buffer passed
    // is a local of the size given.
    unsafe {
        if libc::ptrace(
            libc::PTRACE_SEIZE,
            tid,
            null,
            libc::PTRACE_O_TRACESYSGOOD as usize as *mut c_void,
        ) != 0
        {
            return Err(os("PTRACE_SEIZE"));
        }
        if libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null) != 0 {
            return Err(os("PTRACE_INTERRUPT"));
        }
        let mut status = 0;
        if libc::waitpid(tid, &mut status, libc::__WALL) != tid {
            return Err(os("waitpid"));
        }
        let end = Instant::now() + window;
        let (mut failed, mut skipping, mut signal) = (0u64, false, 0usize);
        loop {
            if !skipping && Instant::now() >= end {
                libc::ptrace(libc::PTRACE_DETACH, tid, null, signal as *mut c_void);
                return Ok(failed);
            }
            if libc::ptrace(libc::PTRACE_SYSCALL, tid, null, signal as *mut c_void) != 0 {
                return Err(os("PTRACE_SYSCALL"));
            }
            signal = 0;
            if libc::waitpid(tid, &mut status, libc::__WALL) != tid {
                return Err(os("waitpid"));
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                return Err(format!("the traced server ended: status {status:#x}"));
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            let stop = libc::WSTOPSIG(status);
            if stop == libc::SIGTRAP | 0x80 {
                let mut info: Info = std::mem::zeroed();
                libc::ptrace(
                    PTRACE_GET_SYSCALL_INFO,
                    tid,
                    std::mem::size_of::<Info>() as *mut c_void,
                    (&mut info as *mut Info).cast::<c_void>(),
                );
                let mut regs: libc::user_regs_struct = std::mem::zeroed();
                let regs_p = (&mut regs as *mut libc::user_regs_struct).cast::<c_void>();
                match info.op {
                    OP_ENTRY if info.nr == libc::SYS_bpf as u64 => {
                        libc::ptrace(libc::PTRACE_GETREGS, tid, null, regs_p);
                        // No such call: the kernel skips it.
                        regs.orig_rax = u64::MAX;
                        libc::ptrace(libc::PTRACE_SETREGS, tid, null, regs_p);
                        skipping = true;
                    }
                    OP_EXIT if skipping => {
                        libc::ptrace(libc::PTRACE_GETREGS, tid, null, regs_p);
                        regs.rax = (-libc::EIO) as i64 as u64;
                        libc::ptrace(libc::PTRACE_SETREGS, tid, null, regs_p);
                        skipping = false;
                        failed += 1;
                    }
                    _ => {}
                }
            } else if status >> 16 != PTRACE_EVENT_STOP {
                // A signal for the server: delivered on resuming.
                signal = stop as usize;
            }
        }
    }
}

/// The thread of `pid` that owns the probes and reads their maps.
fn sampling_thread(pid: u32) -> i32 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| t.unwrap().path())
        .find(|t| {
            std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == "vmscope-source")
        })
        .and_then(|t| t.file_name()?.to_str()?.parse().ok())
        .unwrap_or_else(|| panic!("no vmscope-source thread in {pid}"))
}

/// x86-64 only: the failures are injected through its registers.
#[cfg(target_arch = "x86_64")]
#[test]
fn failed_refreshes_serve_the_last_body_with_its_age() {
    const TEST: &str = "failed_refreshes_serve_the_last_body_with_its_age";
    if !root_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    const FAILING: Duration = Duration::from_secs(4);
    let age = |b: &str| metric(b, "vmscope_exporter_body_age_seconds").unwrap();
    let failures = |b: &str| metric(b, "vmscope_exporter_refresh_failures_total").unwrap();
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "300ms"]);
    let addr = serve.addr;
    std::thread::sleep(Duration::from_millis(1000));
    let (body, _) = scrape_from(OTHER, addr);
    let (age0, failures0) = (age(&body), failures(&body));
    let threads = std::fs::read_dir(format!("/proc/{}/task", serve.pid()))
        .unwrap()
        .count();

    // The maps are read on the sampling thread.
    let tid = sampling_thread(serve.pid());
    let injector = std::thread::spawn(move || fail_bpf_calls(tid, FAILING));
    let mut during = Vec::new();
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    while t.elapsed() < FAILING - Duration::from_millis(300) {
        let (b, took) = scrape_from(OTHER, addr);
        let faults = b.contains("vmscope_page_faults_total{");
        during.push((age(&b), failures(&b), faults, took));
        std::thread::sleep(Duration::from_millis(400));
    }
    let failed_calls = injector.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(1500));
    let (after1, _) = scrape_from(OTHER, addr);
    std::thread::sleep(Duration::from_millis(1000));
    let (after2, _) = scrape_from(OTHER, addr);
    let stderr = serve.stderr();
    let max_age = during.iter().map(|d| d.0).fold(0.0, f64::max);
    let max_failures = during.iter().map(|d| d.1).fold(0.0, f64::max);
    eprintln!(
        "{TEST}: {threads} server threads; bpf(2) failed {failed_calls} times over {FAILING:?}; \
         before: age {age0} s, failures {failures0}; during (age, failures, has faults, took): \
         {during:?}; after: age {} s then {} s, failures {} then {}; stderr:\n{stderr}",
        age(&after1),
        age(&after2),
        failures(&after1),
        failures(&after2),
    );
    assert!(
        age0 < 1.0 && failures0 == 0.0,
        "before: age {age0}, failures {failures0}"
    );
    assert!(failed_calls > 0, "no bpf(2) call was made to fail");
    assert!(
        during.iter().all(|d| d.2),
        "a scrape while refreshes failed lacked the page-fault series: {during:?}"
    );
    assert!(
        max_age >= 2.0 && max_failures >= 3.0,
        "while bpf(2) failed for {FAILING:?}: the body's age reached only {max_age} s and \
         {max_failures} refresh failures were counted: {during:?}"
    );
    assert!(
        age(&after1) < 1.0 && age(&after2) < 1.0,
        "the body did not get fresh again after the failures stopped: ages {} and {}",
        age(&after1),
        age(&after2)
    );
    assert!(
        failures(&after1) >= max_failures && failures(&after2) == failures(&after1),
        "refresh failures after the failing window: {} then {}",
        failures(&after1),
        failures(&after2)
    );
    let count = |s: &str| stderr.lines().filter(|l| l.contains(s)).count();
    assert_eq!(
        (
            count("refreshing the metrics failed"),
            count("refreshing works again")
        ),
        (1, 1),
        "want the failures logged once, and the recovery once:\n{stderr}"
    );
}

#[test]
fn accept_errors_back_off_instead_of_spinning() {
    const TEST: &str = "accept_errors_back_off_instead_of_spinning";
    if !root_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    const STARVED: Duration = Duration::from_secs(3);
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let addr = serve.addr;
    let pid = serve.pid() as libc::pid_t;
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscall with valid pointers.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
    // The soft limit at what is open: no descriptor left for a connection.
    let none_left = libc::rlimit {
        rlim_cur: open_fds,
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &none_left, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
    let cpu_before = serve.cpu_time();
    // Queued by the kernel, never accepted while no descriptor is left.
    let waiting: Vec<TcpStream> = (0..20)
        .map(|_| connect_from(Ipv4Addr::new(127, 0, 0, 3), addr, None).unwrap())
        .collect();
    std::thread::sleep(STARVED);
    let cpu = serve.cpu_time() - cpu_before;
    drop(waiting);
    // SAFETY: as above.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
    let t = Instant::now();
    let r = get_from(Ipv4Addr::new(127, 0, 0, 4), addr, "/healthz");
    let back = t.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    let stderr = serve.stderr();
    let failed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("accepting a connection failed"))
        .collect();
    let again: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("accepting again after"))
        .collect();
    eprintln!(
        "{TEST}: RLIMIT_NOFILE {open_fds} (all in use) for {STARVED:?} with 20 connections \
         waiting: {:.0} ms of CPU; served again {:.0} ms after the limit was raised; log: \
         {failed:?} {again:?}",
        cpu.as_secs_f64() * 1e3,
        back.as_secs_f64() * 1e3
    );
    assert!(
        r.as_ref().is_ok_and(|r| r.status == 200),
        "/healthz after the limit was raised: {r:?}"
    );
    assert!(
        back < Duration::from_millis(1500),
        "served only {back:?} after descriptors were available again"
    );
    assert!(
        failed.len() == 1 && failed[0].contains("Too many open files"),
        "want one log line for the burst of EMFILE:\n{stderr}"
    );
    assert_eq!(
        again.len(),
        1,
        "want one line at the end of the burst:\n{stderr}"
    );
    let n: u64 = again[0]
        .split("after ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {:?}", again[0]));
    assert!(
        n <= 20,
        "{n} accept attempts in {STARVED:?}: not backing off"
    );
    assert!(
        cpu < Duration::from_millis(300),
        "{cpu:?} of CPU in {STARVED:?} of failing accepts: spinning"
    );
}

// ---------------------------------------------------------------------------
// Privileges given up once everything is attached.

/// CAP_PERFMON (38) and CAP_BPF (39), as /proc shows capability sets.
const BPF_PERFMON: u64 = (1 << 38) | (1 << 39);

/// A thread's capability sets and no_new_privs, from its status file.
#[derive(Debug, PartialEq)]
struct Caps {
    eff: u64,
    prm: u64,
    inh: u64,
    amb: u64,
    bnd: u64,
    no_new_privs: bool,
}

/// The sets of every thread of `pid`, by thread id.
fn thread_caps(pid: u32) -> Vec<(String, Caps)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap();
        let status = std::fs::read_to_string(t.path().join("status")).unwrap();
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {status}"))
                .trim()
                .to_string()
        };
        let set = |name: &str| u64::from_str_radix(&field(name), 16).unwrap();
        out.push((
            format!("{} ({})", t.file_name().to_string_lossy(), comm.trim()),
            Caps {
                eff: set("CapEff:"),
                prm: set("CapPrm:"),
                inh: set("CapInh:"),
                amb: set("CapAmb:"),
                bnd: set("CapBnd:"),
                no_new_privs: field("NoNewPrivs:") == "1",
            },
        ));
    }
    out
}

/// Asserts that the sampling thread of `pid` (the one that owns the
/// probes) holds exactly `held` as effective and permitted, and every other
/// thread (those that talk to the network) nothing; none holds anything
/// inheritable or ambient, all have no_new_privs; and, when `bounding` is
/// given, the sampling thread has exactly that as its bounding set and the
/// others an empty one.
fn assert_holds(pid: u32, held: u64, bounding: Option<u64>, stderr: &str) {
    let threads = thread_caps(pid);
    assert!(
        threads.iter().any(|(t, _)| t.ends_with("(vmscope-source)")),
        "no sampling thread among {threads:x?}"
    );
    for (tid, c) in &threads {
        let sampling = tid.ends_with("(vmscope-source)");
        let (want, bnd) = if sampling {
            (held, bounding)
        } else {
            (0, bounding.map(|_| 0))
        };
        let ok = c.eff == want
            && c.prm == want
            && c.inh == 0
            && c.amb == 0
            && c.no_new_privs
            && bnd.is_none_or(|b| c.bnd == b);
        assert!(
            ok,
            "thread {tid} of {pid}: {c:x?}, want CapEff = CapPrm = {want:#x}, CapInh = CapAmb = 0, \
             NoNewPrivs, CapBnd {bnd:x?} ({} threads)\nstderr:\n{stderr}",
            threads.len()
        );
    }
}

/// The sum of every `series{...}` line of a body.
fn sum_of(body: &str, series: &str) -> f64 {
    body.lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix('{'))
        .filter_map(|l| {
            l.rsplit_once("} ")?
                .1
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .sum()
}

fn faults(addr: SocketAddr) -> f64 {
    sum_of(&scrape_from(LOCAL, addr).0, "vmscope_page_faults_total")
}

/// Polls `f` every 100 ms for up to `limit`; the time it took when true.
fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if f() {
            return Some(t.elapsed());
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The exporter after its capabilities are gone: `vmscope-testchild touch
/// 20000` shows in the page-fault counters, with no failed refresh.
fn still_counts(test: &str, serve: &Serve, child: &std::path::Path) -> (f64, f64) {
    let before = faults(serve.addr);
    let o = std::process::Command::new(child)
        .args(["touch", "20000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "vmscope-testchild touch 20000: {o:?}");
    let mut after = before;
    let took = within(Duration::from_secs(5), || {
        after = faults(serve.addr);
        after - before >= 20000.0
    });
    let body = scrape_from(LOCAL, serve.addr).0;
    let failures = metric(&body, "vmscope_exporter_refresh_failures_total").unwrap_or(f64::NAN);
    eprintln!(
        "{test}: page faults {before} -> {after} (+{}) after touch 20000, in {took:?}; \
         refresh failures {failures}",
        after - before
    );
    assert!(
        took.is_some(),
        "faults grew by {} (< 20000) within 5 s after the drop\nstderr:\n{}",
        after - before,
        serve.stderr()
    );
    assert_eq!(
        failures,
        0.0,
        "refreshes failed after the drop:\n{}",
        serve.stderr()
    );
    (before, after)
}

/// With a swap device appearing after the drop: the deferred swap probe
/// attaches with the CAP_BPF+CAP_PERFMON kept for it, then those go too,
/// and the probe counts swap-out (16384 pages rewritten under a 16 MiB
/// memory cgroup).
fn swap_after_the_drop(test: &str, serve: &Serve, child: &std::path::Path) {
    let swap = vmscope_tests::pressure::ZramSwap::new(256 << 20);
    let available = "vmscope_probe_available{probe=\"kmem:rss_stat\"}";
    let attached = within(Duration::from_secs(10), || {
        metric(&scrape_from(LOCAL, serve.addr).0, available) == Some(1.0)
            && thread_caps(serve.pid())
                .iter()
                .all(|(_, c)| c.eff == 0 && c.prm == 0)
    });
    let stderr = serve.stderr();
    eprintln!("{test}: zram swap on; swap probe attached and capabilities 0 after {attached:?}");
    assert!(
        attached.is_some(),
        "within 10 s of a swap device: {available} = {:?}, caps {:x?}\nstderr:\n{stderr}",
        metric(&scrape_from(LOCAL, serve.addr).0, available),
        thread_caps(serve.pid())
    );
    assert_holds(serve.pid(), 0, None, &stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("privileges: the swap probe no longer waits")
                && l.contains("kept no capabilities")
                && l.contains("dropped CAP_BPF+CAP_PERFMON")),
        "no log line for the second drop:\n{stderr}"
    );
    let out = "vmscope_swap_attributed_pages_total{direction=\"out\"}";
    let before = metric(&scrape_from(LOCAL, serve.addr).0, out).unwrap_or(f64::NAN);
    let cg = vmscope_tests::pressure::MemCgroup::new(16 << 20);
    let o = cg
        .command(child)
        .args(["rewrite", "16384"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "rewrite 16384 in a 16 MiB cgroup: {o:?}"
    );
    let pswpout = vmscope_tests::pressure::vmstat()["pswpout"];
    let mut after = before;
    let counted = within(Duration::from_secs(5), || {
        after = metric(&scrape_from(LOCAL, serve.addr).0, out).unwrap_or(f64::NAN);
        after - before >= 1000.0
    });
    eprintln!(
        "{test}: swap-out attributed {before} -> {after} (+{}) for 64 MiB rewritten under a \
         16 MiB limit (pswpout now {pswpout}), in {counted:?}",
        after - before
    );
    assert!(
        counted.is_some(),
        "{out} grew by {} (< 1000) after the drop\nstderr:\n{}",
        after - before,
        serve.stderr()
    );
    drop(cg);
    drop(swap);
}

/// `serve` as root: after attaching, every thread holds only CAP_BPF and
/// CAP_PERFMON while the swap probe waits (bounding set the same,
/// no_new_privs), or nothing when a swap device is already on; the
/// exporter still counts faults; a swap device that appears later still
/// gets the swap probe attached, and then nothing is left.
#[test]
fn serve_as_root_keeps_only_what_the_deferred_swap_probe_needs() {
    const TEST: &str = "serve_as_root_keeps_only_what_the_deferred_swap_probe_needs";
    if !root_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    let _swap_lock = vmscope_tests::pressure::exclusive();
    let swap_on = !vmscope_tests::pressure::active_swaps().is_empty();
    let before = thread_caps(std::process::id());
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "300ms"]);
    let r = get_from(LOCAL, serve.addr, "/healthz").unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let stderr = stderr_with(&serve, "vmscope serve: privileges:");
    let line = stderr
        .lines()
        .find(|l| l.contains("vmscope serve: privileges:"))
        .unwrap_or_else(|| panic!("no privileges line:\n{stderr}"));
    let caps = thread_caps(serve.pid());
    eprintln!(
        "{TEST}: started with CapEff {:#x}; swap on at start: {swap_on}; {} thread(s): {:x?}; \
         log: {line}",
        before[0].1.eff,
        caps.len(),
        caps
    );
    assert!(line.contains("still uid 0"), "{line}");
    if swap_on {
        assert_holds(serve.pid(), 0, None, &stderr);
        assert!(line.contains("kept no capabilities"), "{line}");
    } else {
        let held = BPF_PERFMON & before[0].1.prm;
        let bounding = (before[0].1.eff & (1 << 8) != 0).then_some(held);
        assert_holds(serve.pid(), held, bounding, &stderr);
        assert!(
            line.contains("kept CAP_BPF+CAP_PERFMON while the swap probe waits"),
            "{line}"
        );
    }
    still_counts(TEST, &serve, &vmscope_tests::testchild());
    if swap_on {
        eprintln!("{TEST}: a swap device was on at start: the deferred-probe part is not tried");
    } else {
        swap_after_the_drop(TEST, &serve, &vmscope_tests::testchild());
    }
}

/// The same as uid 65534 from a copy given `cap_bpf,cap_perfmon+ep` by
/// setcap: it starts with just those two, keeps them while the swap probe
/// waits, and gives them up once it has attached.
#[test]
fn serve_with_file_capabilities_gives_them_up_once_the_swap_probe_attaches() {
    const TEST: &str = "serve_with_file_capabilities_gives_them_up_once_the_swap_probe_attaches";
    if !root_or_skip(TEST) || !vmscope_tests::privilege::tools_or_skip(TEST) {
        return;
    }
    let _serial = one_at_a_time();
    let _swap_lock = vmscope_tests::pressure::exclusive();
    let swap_on = !vmscope_tests::pressure::active_swaps().is_empty();
    let u = vmscope_tests::privilege::Unprivileged::new();
    let mut cmd = u.as_nobody(&u.capped);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "-i", "300ms"]);
    let serve = Serve::start_cmd(cmd);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.pid())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains("65534")),
        "{status}"
    );
    let stderr = stderr_with(&serve, "vmscope serve: privileges:");
    let line = stderr
        .lines()
        .find(|l| l.contains("vmscope serve: privileges:"))
        .unwrap_or_else(|| panic!("no privileges line:\n{stderr}"));
    eprintln!("{TEST}: swap on at start: {swap_on}; log: {line}");
    assert!(!line.contains("uid 0"), "{line}");
    if swap_on {
        assert_holds(serve.pid(), 0, None, &stderr);
    } else {
        assert_holds(serve.pid(), BPF_PERFMON, None, &stderr);
        assert!(line.contains("dropped none"), "{line}");
    }
    still_counts(TEST, &serve, &u.testchild);
    if swap_on {
        eprintln!("{TEST}: a swap device was on at start: the deferred-probe part is not tried");
    } else {
        swap_after_the_drop(TEST, &serve, &u.testchild);
    }
}

/// serve's stderr once it holds `needle` (its privileges line follows the
/// listening line), or as it is after 10 s.
fn stderr_with(serve: &Serve, needle: &str) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let e = serve.stderr();
        if e.contains(needle) || std::time::Instant::now() > until {
            return e;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
