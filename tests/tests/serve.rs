//! `vmscope serve`, the Prometheus/OpenMetrics exporter: its endpoints and
//! refusals over a small HTTP/1.1 client written here, its memory under 200
//! concurrent scrapes, a clean exit on SIGTERM, `promtool check metrics` on
//! what it serves, a real Prometheus scraping swap and reclaim figures from a
//! swapping child in a memory cgroup, and the Grafana dashboard in
//! `vmscope/dist/grafana-host.json` asking only for metrics that `serve` exports.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    os::unix::process::{CommandExt as _, ExitStatusExt as _},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Barrier, Mutex, mpsc},
    time::{Duration, Instant},
};

use vmscope_tests::{is_root, pressure, root_or_skip, run_with_timeout, testchild, vmscope_bin};

/// Every metric name (as it appears on a sample line) that `vmscope serve`
/// exports.
const EXPORTED: &[&str] = &[
    "vmscope_build_info",
    "vmscope_probe_available",
    "vmscope_page_faults_total",
    "vmscope_major_faults_total",
    "vmscope_swap_in_pages_total",
    "vmscope_swap_out_pages_total",
    "vmscope_reclaim_duration_seconds_bucket",
    "vmscope_reclaim_duration_seconds_sum",
    "vmscope_reclaim_duration_seconds_count",
    "vmscope_psi_memory_some_ratio",
    "vmscope_psi_memory_full_ratio",
    "vmscope_psi_memory_some_seconds_total",
    "vmscope_psi_memory_full_seconds_total",
    "vmscope_tlb_flushes_total",
    "vmscope_process_page_faults_total",
    "vmscope_process_swap_out_pages_total",
    "vmscope_process_swap_in_pages_total",
];

/// The metric families of the text format (`# TYPE` name and type) that
/// every scrape declares; the per-process ones only with `--per-process`.
/// The PSI families are left out on a kernel without
/// `/proc/pressure/memory`. The reclaim histogram, whose series are one per
/// kind of reclaim seen, may be missing until the first reclaim.
const FAMILIES: &[(&str, &str)] = &[
    ("vmscope_build_info", "gauge"),
    ("vmscope_probe_available", "gauge"),
    ("vmscope_page_faults_total", "counter"),
    ("vmscope_major_faults_total", "counter"),
    ("vmscope_swap_in_pages_total", "counter"),
    ("vmscope_swap_out_pages_total", "counter"),
    ("vmscope_reclaim_duration_seconds", "histogram"),
    ("vmscope_psi_memory_some_ratio", "gauge"),
    ("vmscope_psi_memory_full_ratio", "gauge"),
    ("vmscope_psi_memory_some_seconds_total", "counter"),
    ("vmscope_psi_memory_full_seconds_total", "counter"),
    ("vmscope_tlb_flushes_total", "counter"),
];

const RECLAIM: &str = "vmscope_reclaim_duration_seconds";
const RECLAIM_KINDS: [&str; 4] = ["direct", "memcg", "memcg_softlimit", "node"];

const PROCESS_FAMILIES: &[&str] = &[
    "vmscope_process_page_faults_total",
    "vmscope_process_swap_out_pages_total",
    "vmscope_process_swap_in_pages_total",
];

/// What Prometheus itself sends when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
                                 application/openmetrics-text;version=0.0.1;q=0.75,\
                                 text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// How long one HTTP exchange may take.
const IO_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// A small HTTP/1.1 client: one request per connection (`Connection: close`),
// the answer read until the server closes.

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (any case).
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Debug)]
enum HttpError {
    /// The connection failed or closed before any byte of an answer.
    NoResponse(String),
    /// Bytes came back, but not a well-formed HTTP/1.1 response.
    Malformed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::NoResponse(e) => write!(f, "no response: {e}"),
            HttpError::Malformed(e) => write!(f, "malformed response: {e}"),
        }
    }
}

/// A request with `Host` and `Connection: close`, the `extra` headers, and
/// `body` with its `Content-Length` when it is not empty.
fn request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in extra {
        r.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut bytes = r.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `req` to `addr` and reads the answer until the server closes the
/// connection. A server that refuses a request may close before reading
/// all of it, so a failed write still reads what came back. `head`: the
/// answer to a HEAD request has no body whatever its headers say.
fn exchange(addr: SocketAddr, req: &[u8], head: bool) -> Result<Response, HttpError> {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .map_err(|e| HttpError::NoResponse(format!("connecting to {addr}: {e}")))?;
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let write_error = s.write_all(req).err();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if buf.is_empty() => {
                let w = write_error.map(|w| format!(" (writing: {w})"));
                return Err(HttpError::NoResponse(format!(
                    "reading: {e}{}",
                    w.unwrap_or_default()
                )));
            }
            // Reset after the answer (the server closed with unread input).
            Err(_) => break,
        }
    }
    if buf.is_empty() {
        let w = write_error.map(|w| format!(" (writing: {w})"));
        return Err(HttpError::NoResponse(format!(
            "closed without a byte{}",
            w.unwrap_or_default()
        )));
    }
    parse_response(&buf, head).map_err(HttpError::Malformed)
}

fn parse_response(buf: &[u8], head: bool) -> Result<Response, String> {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {:?}", String::from_utf8_lossy(buf)))?;
    let head_text = std::str::from_utf8(&buf[..end]).map_err(|e| format!("headers: {e}"))?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (n, v) = line
            .split_once(':')
            .ok_or_else(|| format!("header line {line:?}"))?;
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let mut r = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &buf[end + 4..];
    if head || status / 100 == 1 || status == 204 || status == 304 {
        return Ok(r);
    }
    if r.header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
    {
        r.body = dechunk(rest)?;
    } else if let Some(len) = r.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|e| format!("Content-Length {len:?}: {e}"))?;
        if rest.len() < len {
            return Err(format!(
                "Content-Length {len} but the connection closed after {} bytes",
                rest.len()
            ));
        }
        r.body = rest[..len].to_vec();
    } else {
        r.body = rest.to_vec();
    }
    Ok(r)
}

/// The body of a `Transfer-Encoding: chunked` message.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line without CRLF")?;
        let line = std::str::from_utf8(&rest[..eol]).map_err(|e| e.to_string())?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(hex, 16).map_err(|e| format!("chunk size {hex:?}: {e}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err(format!("chunk of {size} bytes cut short"));
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// `GET path` with the `extra` headers; panics unless an answer came back.
fn get(addr: SocketAddr, path: &str, extra: &[(&str, &str)]) -> Response {
    exchange(addr, &request("GET", addr, path, extra, b""), false)
        .unwrap_or_else(|e| panic!("GET {path} from {addr}: {e}"))
}

/// `GET /metrics` in the Prometheus text format; panics unless 200.
fn scrape(addr: SocketAddr) -> String {
    let r = get(addr, "/metrics", &[]);
    assert_eq!(r.status, 200, "GET /metrics: {r:?}");
    r.text()
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The text exposition formats (Prometheus 0.0.4 and OpenMetrics), as far as
// these tests read them.

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

impl Sample {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

/// Every sample line of `body` (comments and blank lines skipped; a
/// timestamp or an exemplar after the value ignored).
fn parse_samples(body: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_sample(line).map_err(|e| format!("line {}: {e}: {line:?}", i + 1))?);
    }
    Ok(out)
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return Err("no metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("label without =")?;
            let lname = rest[..eq].trim().to_owned();
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let close = loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, c)) => value.push(c),
                }
            };
            rest = &rest[close + 1..];
            if labels.insert(lname.clone(), value).is_some() {
                return Err(format!("label {lname} twice"));
            }
        }
    }
    let token = rest
        .split_whitespace()
        .next()
        .ok_or("no value after the name")?;
    if !rest.starts_with(' ') {
        return Err("no blank before the value".into());
    }
    let value: f64 = token.parse().map_err(|e| format!("value {token:?}: {e}"))?;
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `# TYPE` lines as name → type.
fn declared_types(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("# TYPE ")?.split_whitespace();
            Some((w.next()?.to_owned(), w.next()?.to_owned()))
        })
        .collect()
}

fn samples_or_panic(body: &str) -> Vec<Sample> {
    parse_samples(body).unwrap_or_else(|e| panic!("unparsable scrape: {e}\n{body}"))
}

fn named<'a>(samples: &'a [Sample], name: &str) -> Vec<&'a Sample> {
    samples.iter().filter(|s| s.name == name).collect()
}

fn total(samples: &[Sample], name: &str) -> f64 {
    named(samples, name).iter().map(|s| s.value).sum()
}

// ---------------------------------------------------------------------------
// Processes the tests start, killed when dropped.

/// Kills (SIGKILL) the child's whole process group and reaps the child when
/// dropped, whatever happened before.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn spawn(mut cmd: Command) -> KillOnDrop {
        cmd.process_group(0).stdin(Stdio::null());
        KillOnDrop(Some(cmd.spawn().unwrap_or_else(|e| {
            panic!("spawning {:?}: {e}", cmd.get_program())
        })))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // SAFETY: plain syscall. The child leads its own process group
            // (`process_group(0)`), so this reaches what it started too.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running `vmscope serve`, killed when dropped.
struct Serve {
    proc: KillOnDrop,
    /// Where it listens, from its stderr line.
    addr: SocketAddr,
    /// The stderr lines it printed before the `listening on` line.
    before_listening: Vec<String>,
    /// Everything it has printed on stderr so far.
    stderr: Arc<Mutex<String>>,
}

const LISTENING: &str = "vmscope serve: listening on http://";

impl Serve {
    /// Starts `vmscope serve ARGS` and waits (up to a minute: loading the
    /// eBPF programs takes a while) for the line that says where it listens.
    fn start(args: &[&str]) -> Serve {
        let mut cmd = Command::new(vmscope_bin());
        cmd.arg("serve").args(args);
        Serve::start_cmd(cmd)
    }

    /// Starts `cmd` (vmscope serve, however it is run) and waits as
    /// [`Serve::start`] does.
    fn start_cmd(mut cmd: Command) -> Serve {
        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut proc = KillOnDrop::spawn(cmd);
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let pipe = proc.child().stderr.take().unwrap();
            let log = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push_str(&format!("{line}\n"));
                    // The receiver is gone once the line was found.
                    let _ = tx.send(line);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut before_listening = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line
                        .strip_prefix(LISTENING)
                        .and_then(|r| r.strip_suffix("/metrics"))
                    {
                        let addr = addr.parse().unwrap_or_else(|e| {
                            panic!("vmscope serve: bad address in {line:?}: {e}")
                        });
                        return Serve {
                            proc,
                            addr,
                            before_listening,
                            stderr,
                        };
                    }
                    before_listening.push(line);
                }
                Err(e) => {
                    // The reader thread ends at EOF: give the process a
                    // moment to be reaped for its status.
                    std::thread::sleep(Duration::from_millis(200));
                    let status = proc.child().try_wait().unwrap();
                    panic!(
                        "{args:?}: no `{LISTENING}IP:PORT/metrics` line on stderr \
                         ({e}; status {status:?}); stderr:\n{}",
                        stderr.lock().unwrap()
                    );
                }
            }
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Its resident set size in KiB, from `/proc/PID/status`.
    fn rss_kib(&self) -> u64 {
        let path = format!("/proc/{}/status", self.proc.pid());
        let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {path}:\n{status}"))
    }

    /// Sends `signal` and waits up to `limit` for the exit.
    fn stop(&mut self, signal: libc::c_int, limit: Duration) -> (ExitStatus, Duration) {
        let t = Instant::now();
        // SAFETY: plain syscall on our own child.
        assert_eq!(unsafe { libc::kill(self.proc.pid() as i32, signal) }, 0);
        loop {
            if let Some(st) = self.proc.child().try_wait().unwrap() {
                self.proc.0.take();
                return (st, t.elapsed());
            }
            assert!(
                t.elapsed() < limit,
                "vmscope serve still runs {limit:?} after signal {signal}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `tool` can be run. Without it the test skips with a one-line
/// reason, except under VMSCOPE_REQUIRE_BPF=1 (CI), where it fails.
fn tool_or_skip(test: &str, tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    vmscope_tests::skip_unless(
        test,
        found,
        &format!("{tool} is not installed"),
        "apt-get install prometheus",
    )
}

/// The version `vmscope --version` prints (its last word).
fn vmscope_version() -> String {
    let mut c = Command::new(vmscope_bin());
    c.arg("--version");
    let o = run_with_timeout(c, Duration::from_secs(30));
    assert!(o.status.success(), "vmscope --version: {:?}", o.status);
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap_or_else(|| panic!("vmscope --version printed nothing"))
        .to_owned()
}

/// The reclaim histogram, per kind: known kinds, cumulative buckets in
/// ascending `le` order ending at `+Inf`, which equals `_count`, and a
/// `_sum`.
fn check_reclaim_histogram(samples: &[Sample]) {
    let bucket = format!("{RECLAIM}_bucket");
    let mut kinds = BTreeSet::new();
    for s in samples.iter().filter(|s| s.name.starts_with(RECLAIM)) {
        let kind = s.label("kind").unwrap_or_else(|| panic!("no kind: {s:?}"));
        assert!(RECLAIM_KINDS.contains(&kind), "kind {kind:?}: {s:?}");
        kinds.insert(kind);
    }
    for kind in kinds {
        let of = |name: &str| -> Vec<&Sample> {
            samples
                .iter()
                .filter(|s| s.name == name && s.label("kind") == Some(kind))
                .collect()
        };
        let buckets = of(&bucket);
        let les: Vec<f64> = buckets
            .iter()
            .map(|b| b.label("le").unwrap().parse::<f64>().unwrap())
            .collect();
        assert!(
            les.windows(2).all(|w| w[0] < w[1]) && les.last() == Some(&f64::INFINITY),
            "{kind}: le not ascending to +Inf: {les:?}"
        );
        assert!(
            buckets.windows(2).all(|w| w[0].value <= w[1].value),
            "{kind}: buckets not cumulative: {buckets:#?}"
        );
        let count = of(&format!("{RECLAIM}_count"));
        let sum = of(&format!("{RECLAIM}_sum"));
        assert!(
            count.len() == 1 && sum.len() == 1 && sum[0].value >= 0.0,
            "{kind}: _count {count:?}, _sum {sum:?}"
        );
        assert_eq!(
            buckets.last().unwrap().value,
            count[0].value,
            "{kind}: +Inf bucket is not _count"
        );
    }
}

/// The `total=` stall times (µs) of `/proc/pressure/memory`, some and full.
fn psi_memory_totals() -> Option<[u64; 2]> {
    let text = std::fs::read_to_string("/proc/pressure/memory").ok()?;
    let field = |kind: &str| -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with(kind))?
            .split_whitespace()
            .find_map(|w| w.strip_prefix("total="))?
            .parse()
            .ok()
    };
    Some([field("some")?, field("full")?])
}

/// Checks what every text-format scrape must hold: the declared families
/// with their types, build info and probe availability.
fn check_text_scrape(body: &str, per_process: bool) -> Vec<Sample> {
    let samples = samples_or_panic(body);
    let types = declared_types(body);
    let psi = Path::new("/proc/pressure/memory").exists();
    for &(family, kind) in FAMILIES {
        if family.starts_with("vmscope_psi_") && !psi
            || family == RECLAIM && !samples.iter().any(|s| s.name.starts_with(RECLAIM))
        {
            continue;
        }
        assert_eq!(
            types.get(family).map(String::as_str),
            Some(kind),
            "`# TYPE {family} {kind}` missing from the scrape:\n{body}"
        );
    }
    for family in PROCESS_FAMILIES {
        if per_process {
            assert_eq!(
                types.get(*family).map(String::as_str),
                Some("counter"),
                "`# TYPE {family} counter` missing with --per-process:\n{body}"
            );
        } else {
            assert!(
                named(&samples, family).is_empty() && !types.contains_key(*family),
                "{family} exported without --per-process:\n{body}"
            );
        }
    }
    // More is allowed; it is said, so that the list above can follow.
    let extra: BTreeSet<&str> = samples
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !EXPORTED.contains(n))
        .collect();
    if !extra.is_empty() {
        eprintln!(
            "vmscope serve also exports {} metrics not in this test's list: {extra:?}",
            extra.len()
        );
    }

    let info = named(&samples, "vmscope_build_info");
    assert_eq!(info.len(), 1, "vmscope_build_info: {info:?}");
    assert_eq!(info[0].value, 1.0, "{info:?}");
    assert_eq!(
        info[0].label("version"),
        Some(vmscope_version().as_str()),
        "vmscope_build_info's version label is not what `vmscope --version` says"
    );

    let probes = named(&samples, "vmscope_probe_available");
    assert!(
        probes
            .iter()
            .any(|s| s.label("probe") == Some("exceptions:page_fault_user")),
        "no vmscope_probe_available{{probe=\"exceptions:page_fault_user\"}}: {probes:#?}"
    );
    for p in &probes {
        assert!(
            p.label("probe").is_some() && (p.value == 0.0 || p.value == 1.0),
            "{p:?}"
        );
    }
    for name in [
        "vmscope_major_faults_total",
        "vmscope_swap_in_pages_total",
        "vmscope_swap_out_pages_total",
    ] {
        let s = named(&samples, name);
        assert!(
            s.len() == 1 && s[0].labels.is_empty() && s[0].value >= 0.0,
            "{name}: want one unlabelled sample, got {s:?}"
        );
    }
    check_reclaim_histogram(&samples);
    for s in named(&samples, "vmscope_page_faults_total") {
        assert!(
            matches!(s.label("mode"), Some("user" | "kernel")) && s.label("class").is_some()
                || (s.label("mode"), s.label("class")) == (Some("gup"), Some("unclassified")),
            "{s:?}"
        );
    }
    assert_eq!(
        named(&samples, "vmscope_page_faults_total")
            .iter()
            .filter(|s| s.label("mode") == Some("gup"))
            .count(),
        1,
        "the get_user_pages part is one series"
    );
    samples
}

#[test]
fn endpoints_errors_and_limits() {
    const TEST: &str = "endpoints_errors_and_limits";
    if !root_or_skip(TEST) {
        return;
    }
    let vmstat_before = pressure::vmstat();
    let psi_before = psi_memory_totals();
    let mut serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let addr = serve.addr;
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert!(
        serve.before_listening.is_empty(),
        "the listening line is not the first on stderr; before it: {:?}",
        serve.before_listening
    );

    // The text format, by default.
    let r = get(addr, "/metrics", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let ct = r.header("content-type").unwrap_or("");
    assert!(
        ct.starts_with("text/plain") && ct.replace(' ', "").contains("version=0.0.4"),
        "Content-Type {ct:?} is not the text format 0.0.4"
    );
    let body = r.text();
    assert!(!body.contains("# EOF"), "text format with # EOF:\n{body}");
    let first = check_text_scrape(&body, false);
    let faults_before = total(&first, "vmscope_page_faults_total");

    // Counted since vmscope started: never more than the kernel counted
    // meanwhile. (Where nothing was swapped before, since boot is the same.)
    let vmstat_now = pressure::vmstat();
    for (metric, counter) in [
        ("vmscope_swap_out_pages_total", "pswpout"),
        ("vmscope_swap_in_pages_total", "pswpin"),
    ] {
        let got = total(&first, metric);
        let since_start = vmstat_now[counter] - vmstat_before[counter];
        assert!(
            got <= since_start as f64,
            "{metric} is {got}, but /proc/vmstat {counter} grew by only {since_start} since \
             vmscope started ({} since boot): not cumulative since vmscope started",
            vmstat_now[counter]
        );
    }
    if let (Some(before), Some(now)) = (psi_before, psi_memory_totals()) {
        for (i, kind) in ["some", "full"].iter().enumerate() {
            let metric = format!("vmscope_psi_memory_{kind}_seconds_total");
            let got = total(&first, &metric);
            let since_start = (now[i] - before[i]) as f64 / 1e6;
            assert!(
                got <= since_start + 0.01,
                "{metric} is {got} s, but /proc/pressure/memory's {kind} total grew by only \
                 {since_start} s since vmscope started ({} s since boot): not cumulative since \
                 vmscope started",
                now[i] as f64 / 1e6
            );
        }
    }

    // A child's 20000 first-touch faults show up within a few intervals.
    let pages = 20000.0;
    let st = Command::new(testchild())
        .args(["touch", "20000"])
        .status()
        .unwrap();
    assert!(st.success(), "testchild touch: {st}");
    let t = Instant::now();
    let faults_after = loop {
        let n = total(
            &samples_or_panic(&scrape(addr)),
            "vmscope_page_faults_total",
        );
        if n - faults_before >= pages || t.elapsed() > Duration::from_secs(5) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!(
        "{TEST}: vmscope_page_faults_total {faults_before} -> {faults_after} \
         around a child's {pages} page touches"
    );
    assert!(faults_after > 0.0, "vmscope_page_faults_total stays 0");
    assert!(
        faults_after - faults_before >= pages,
        "vmscope_page_faults_total grew by {} within 5 s of a child's {pages} faults",
        faults_after - faults_before
    );

    // OpenMetrics when asked for, as Prometheus does.
    let r = get(addr, "/metrics", &[("Accept", PROMETHEUS_ACCEPT)]);
    assert_eq!(r.status, 200, "{r:?}");
    let ct = r.header("content-type").unwrap_or("");
    assert!(
        ct.starts_with("application/openmetrics-text"),
        "Content-Type {ct:?} for Accept: {PROMETHEUS_ACCEPT}"
    );
    let om = r.text();
    assert!(
        om.ends_with("# EOF\n") || om.ends_with("# EOF"),
        "the OpenMetrics body does not end with # EOF:\n{om}"
    );
    assert_eq!(om.matches("# EOF").count(), 1, "{om}");
    let om_samples = parse_samples(&om).unwrap_or_else(|e| panic!("{e}\n{om}"));
    assert!(
        om_samples.iter().any(|s| s.name == "vmscope_build_info"),
        "{om}"
    );

    // HEAD: the headers of a GET, no body.
    let r = exchange(addr, &request("HEAD", addr, "/metrics", &[], b""), true).unwrap();
    assert_eq!(r.status, 200, "HEAD /metrics: {r:?}");

    let r = get(addr, "/healthz", &[]);
    assert_eq!((r.status, r.text().trim()), (200, "ok"), "/healthz: {r:?}");
    let r = get(addr, "/nope", &[]);
    assert_eq!(r.status, 404, "/nope: {r:?}");
    for method in ["POST", "PUT", "DELETE"] {
        let req = request(method, addr, "/metrics", &[("Content-Length", "0")], b"");
        let r = exchange(addr, &req, false).unwrap_or_else(|e| panic!("{method}: {e}"));
        assert_eq!(r.status, 405, "{method} /metrics: {r:?}");
    }

    // Header blocks: 4 KiB is served, 20 KiB refused.
    let filler = "a".repeat(4 << 10);
    let r = get(addr, "/metrics", &[("X-Filler", &filler)]);
    assert_eq!(r.status, 200, "a 4 KiB header: {}", r.status);
    let filler = "a".repeat(20 << 10);
    let req = request("GET", addr, "/metrics", &[("X-Filler", &filler)], b"");
    match exchange(addr, &req, false) {
        Ok(r) => assert_eq!(
            r.status, 431,
            "a 20 KiB header was answered {} (want 431 or the connection closed)",
            r.status
        ),
        Err(HttpError::NoResponse(e)) => {
            eprintln!("{TEST}: a 20 KiB header: connection closed ({e})");
        }
        Err(e) => panic!("a 20 KiB header: {e}"),
    }

    // Bodies: with a length and chunked.
    let r = exchange(
        addr,
        &request("GET", addr, "/metrics", &[], b"hello"),
        false,
    )
    .unwrap();
    assert_eq!(r.status, 413, "GET with a 5-byte body: {r:?}");
    let chunked = request(
        "GET",
        addr,
        "/metrics",
        &[("Transfer-Encoding", "chunked")],
        b"",
    );
    let chunked = [chunked, b"5\r\nhello\r\n0\r\n\r\n".to_vec()].concat();
    let r = exchange(addr, &chunked, false).unwrap();
    assert_eq!(r.status, 413, "GET with a chunked body: {r:?}");

    // Still serving after all that.
    assert_eq!(get(addr, "/healthz", &[]).status, 200);

    // 200 scrapes at once: all answered, and the memory they took is given
    // back (or at least not kept per request).
    const SCRAPERS: usize = 200;
    let rss_before = serve.rss_kib();
    let barrier = Arc::new(Barrier::new(SCRAPERS));
    let t = Instant::now();
    let threads: Vec<_> = (0..SCRAPERS)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                exchange(addr, &request("GET", addr, "/metrics", &[], b""), false)
                    .map(|r| (r.status, r.body.len()))
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    let took = t.elapsed();
    let ok = results.iter().filter(|r| matches!(r, Ok((200, _)))).count();
    let bytes: usize = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.1)
        .sum();
    std::thread::sleep(Duration::from_millis(500));
    let rss_after = serve.rss_kib();
    let growth = rss_after as i64 - rss_before as i64;
    eprintln!(
        "{TEST}: {SCRAPERS} concurrent scrapes: {ok} answered 200 in {:.0} ms ({bytes} bytes); \
         vmscope VmRSS {rss_before} KiB before, {rss_after} KiB after ({growth:+} KiB)",
        took.as_secs_f64() * 1000.0
    );
    let failed: Vec<_> = results
        .iter()
        .filter(|r| !matches!(r, Ok((200, _))))
        .take(5)
        .collect();
    assert_eq!(
        ok, SCRAPERS,
        "not all answered 200; first failures: {failed:?}"
    );
    const RSS_GROWTH_LIMIT_KIB: i64 = 4 << 10;
    assert!(
        growth < RSS_GROWTH_LIMIT_KIB,
        "VmRSS grew by {growth} KiB over {SCRAPERS} concurrent scrapes (limit {RSS_GROWTH_LIMIT_KIB} KiB)"
    );

    let (status, took) = serve.stop(libc::SIGTERM, Duration::from_secs(5));
    eprintln!("{TEST}: SIGTERM: exited with {status} after {took:?}");
    assert_eq!(
        status.code(),
        Some(0),
        "after SIGTERM: {status} (signal {:?})",
        status.signal()
    );
}

/// The first scrape, before anything happened: each latency histogram
/// whose probe is attached is there with all its buckets (at whatever
/// count the first interval saw), so `rate()` works from the start; one
/// whose probe is not attached is absent, its availability series at 0.
#[test]
fn the_first_scrape_has_every_attached_histogram_with_its_buckets() {
    const TEST: &str = "the_first_scrape_has_every_attached_histogram_with_its_buckets";
    if !root_or_skip(TEST) {
        return;
    }
    // With the opt-in syscall timing, so that its histograms are checked too.
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "--syscall-latency"]);
    let samples = samples_or_panic(&scrape(serve.addr));
    let available = |probe: &str| {
        named(&samples, "vmscope_probe_available")
            .iter()
            .find(|s| s.label("probe") == Some(probe))
            .map(|s| s.value == 1.0)
            .unwrap_or_else(|| panic!("no availability series for {probe}"))
    };
    // (family, label, value, the probe that feeds it)
    let expected = [
        (
            "vmscope_reclaim_duration_seconds",
            "kind",
            "direct",
            "vmscan:mm_vmscan_direct_reclaim_end",
        ),
        (
            "vmscope_reclaim_duration_seconds",
            "kind",
            "memcg",
            "vmscan:mm_vmscan_memcg_reclaim_end",
        ),
        (
            "vmscope_madvise_duration_seconds",
            "behavior",
            "free",
            "syscalls:sys_exit_madvise",
        ),
        (
            "vmscope_madvise_duration_seconds",
            "behavior",
            "dontneed",
            "syscalls:sys_exit_madvise",
        ),
        (
            "vmscope_syscall_duration_seconds",
            "syscall",
            "munmap",
            "syscalls:sys_exit_munmap",
        ),
        (
            "vmscope_syscall_duration_seconds",
            "syscall",
            "mprotect",
            "syscalls:sys_exit_mprotect",
        ),
        (
            "vmscope_kswapd_active_duration_seconds",
            "",
            "",
            "vmscan:mm_vmscan_kswapd_sleep",
        ),
        (
            "vmscope_shrink_slab_duration_seconds",
            "",
            "",
            "vmscan:mm_shrink_slab_end",
        ),
    ];
    let mut attached = 0;
    for (family, label, value, probe) in expected {
        let of_series = |name: &str| -> Vec<&Sample> {
            named(&samples, name)
                .into_iter()
                .filter(|s| label.is_empty() || s.label(label) == Some(value))
                .collect()
        };
        let buckets = of_series(&format!("{family}_bucket"));
        let count = of_series(&format!("{family}_count"));
        if available(probe) {
            attached += 1;
            assert!(
                buckets.len() >= 20 && buckets.iter().any(|s| s.label("le") == Some("+Inf")),
                "{family}{{{label}={value}}}: {} buckets at the first scrape ({probe} attached)",
                buckets.len()
            );
            assert_eq!(count.len(), 1, "{family}{{{label}={value}}}: no _count");
        } else {
            assert!(
                buckets.is_empty(),
                "{family}{{{label}={value}}} without {probe}"
            );
        }
    }
    assert!(
        attached >= 4,
        "only {attached} of the histograms' probes attached"
    );
}

#[test]
fn sigint_exits_0() {
    if !root_or_skip("sigint_exits_0") {
        return;
    }
    let mut serve = Serve::start(&["--listen", "127.0.0.1:0"]);
    assert_eq!(get(serve.addr, "/healthz", &[]).status, 200);
    let (status, _) = serve.stop(libc::SIGINT, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "after SIGINT: {status}");
}

#[test]
fn promtool_accepts_the_scraped_body() {
    const TEST: &str = "promtool_accepts_the_scraped_body";
    if !root_or_skip(TEST) || !tool_or_skip(TEST, "promtool") {
        return;
    }
    const TOP: usize = 3;
    let serve = Serve::start(&[
        "--listen",
        "127.0.0.1:0",
        "-i",
        "500ms",
        "--per-process",
        &TOP.to_string(),
    ]);
    // Some faulting processes for the per-process families, and a refresh.
    for _ in 0..3 {
        let st = Command::new(testchild())
            .args(["touch", "2000"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::thread::sleep(Duration::from_millis(1200));
    let body = scrape(serve.addr);
    let samples = check_text_scrape(&body, true);
    for family in PROCESS_FAMILIES {
        let rows = named(&samples, family);
        assert!(
            rows.len() <= TOP,
            "{family}: more than {TOP} rows: {rows:#?}"
        );
        for r in &rows {
            assert!(
                r.label("pid").is_some_and(|p| p.parse::<u32>().is_ok())
                    && r.label("comm").is_some(),
                "{r:?}"
            );
        }
    }
    let faulting = named(&samples, "vmscope_process_page_faults_total");
    assert!(!faulting.is_empty(), "no per-process rows:\n{body}");

    let mut check = Command::new("promtool");
    check
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = check.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}\nstdout:\n{}\nstderr:\n{}\nthe body:\n{body}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unprivileged_serve_exits_77() {
    let dir = tempfile::Builder::new()
        .prefix("vmscope-unpriv")
        .tempdir()
        .unwrap();
    let mut c = if is_root() {
        // A copy nobody can reach, wherever the build tree lives.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let bin = dir.path().join("vmscope");
        std::fs::copy(vmscope_bin(), &bin).unwrap();
        let mut c = Command::new(bin);
        c.uid(65534).gid(65534);
        c
    } else {
        Command::new(vmscope_bin())
    };
    c.args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir("/tmp");
    let o = run_with_timeout(c, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(77), "{err}");
    assert!(!err.contains("listening on"), "{err}");
}

// ---------------------------------------------------------------------------
// A real Prometheus.

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `query` evaluated now by the Prometheus at `addr`: each series' labels
/// and value (`NaN`, `+Inf` included), or the error it gave.
fn prom_query(addr: SocketAddr, query: &str) -> Result<Vec<(serde_json::Value, f64)>, String> {
    let path = format!("/api/v1/query?query={}", url_encode(query));
    let r =
        exchange(addr, &request("GET", addr, &path, &[], b""), false).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_slice(&r.body)
        .map_err(|e| format!("{}: not JSON ({e}): {}", r.status, r.text()))?;
    if v["status"] != "success" {
        return Err(format!("{}: {v}", r.status));
    }
    let number = |x: &serde_json::Value| -> Result<f64, String> {
        x[1].as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("value {x}"))
    };
    let data = &v["data"];
    match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|s| Ok((s["metric"].clone(), number(&s["value"])?)))
            .collect(),
        Some("scalar") => Ok(vec![(serde_json::Value::Null, number(&data["result"])?)]),
        _ => Err(format!("result {data}")),
    }
}

/// Whether some series of `result` is finite and above 0.
fn positive(result: &Result<Vec<(serde_json::Value, f64)>, String>) -> bool {
    result
        .as_ref()
        .is_ok_and(|r| r.iter().any(|(_, v)| v.is_finite() && *v > 0.0))
}

/// A real Prometheus scraping one target every second, in a directory of
/// its own; killed (before the directory goes) when dropped.
struct Prometheus {
    _proc: KillOnDrop,
    addr: SocketAddr,
    log_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts it and waits (up to 30 s) until it is ready.
    fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("vmscope-prometheus")
            .tempdir()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: vmscope\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log_path = dir.path().join("prometheus.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .current_dir(dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let prom = Prometheus {
            _proc: KillOnDrop::spawn(cmd),
            addr,
            log_path,
            _dir: dir,
        };
        let t = Instant::now();
        while !exchange(addr, &request("GET", addr, "/-/ready", &[], b""), false)
            .is_ok_and(|r| r.status == 200)
        {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "Prometheus not ready on {addr} after 30 s; its log:\n{}",
                prom.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        prom
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The scrape health of the target (`up`), once Prometheus has one.
    fn up(&self) -> Result<Vec<(serde_json::Value, f64)>, String> {
        prom_query(self.addr, "up")
    }
}

#[test]
fn real_prometheus_scrapes_swap_and_reclaim() {
    const TEST: &str = "real_prometheus_scrapes_swap_and_reclaim";
    if !root_or_skip(TEST) || !tool_or_skip(TEST, "prometheus") {
        return;
    }
    // Dropped in reverse order: the workload, Prometheus (before its
    // directory), vmscope, then the cgroup, the swap device and the lock.
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let cg = pressure::MemCgroup::new(64 << 20);
    let serve = Serve::start(&["--listen", "127.0.0.1:0", "-i", "500ms"]);
    let prom = Prometheus::start(serve.addr);
    let (prom_addr, prom_log) = (prom.addr, || prom.log());
    // 256 MiB written twice under a 64 MiB limit, over and over: swap-out
    // in the first pass, swap-in in the second, memcg reclaim throughout.
    let mut workload = cg.command("sh");
    workload
        .arg("-c")
        .arg(r#"i=0; while [ $i -lt 40 ]; do "$0" rewrite 65536 || exit; i=$((i+1)); done"#)
        .arg(testchild())
        .stdout(Stdio::null());
    let _workload = KillOnDrop::spawn(workload);

    let swap_out = "rate(vmscope_swap_out_pages_total[15s])";
    let reclaim_p90 = r#"histogram_quantile(0.9, rate(vmscope_reclaim_duration_seconds_bucket{kind="memcg"}[15s]))"#;
    let t = Instant::now();
    let (out, p90) = loop {
        let out = prom_query(prom_addr, swap_out);
        let p90 = prom_query(prom_addr, reclaim_p90);
        if positive(&out) && positive(&p90) {
            break (out.unwrap(), p90.unwrap());
        }
        if t.elapsed() > Duration::from_secs(40) {
            let targets = exchange(
                prom_addr,
                &request("GET", prom_addr, "/api/v1/targets", &[], b""),
                false,
            )
            .map(|r| r.text())
            .unwrap_or_else(|e| e.to_string());
            panic!(
                "after 40 s: {swap_out} = {out:?}\n{reclaim_p90} = {p90:?}\n\
                 up = {:?}\ntargets: {targets}\nvmscope stderr:\n{}\nPrometheus log:\n{}",
                prom_query(prom_addr, "up"),
                serve.stderr(),
                prom_log()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "{TEST}: after {:.1} s: {swap_out} = {:?}; {reclaim_p90} = {:?}",
        t.elapsed().as_secs_f64(),
        out.iter().map(|x| x.1).collect::<Vec<_>>(),
        p90.iter().map(|x| x.1).collect::<Vec<_>>()
    );

    // Every query of the dashboard is PromQL this Prometheus accepts, with
    // Grafana's variables filled in.
    let mut rejected = Vec::new();
    for expr in vmscope_tests::dashboard_exprs(&dashboard()) {
        let q = grafana_vars(&expr);
        if let Err(e) = prom_query(prom_addr, &q) {
            rejected.push(format!("{q}: {e}"));
        }
    }
    assert!(
        rejected.is_empty(),
        "Prometheus rejects dashboard queries:\n{}",
        rejected.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The Grafana dashboard.

fn dashboard_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vmscope/dist/grafana-host.json")
}

fn dashboard() -> serde_json::Value {
    vmscope_tests::read_json(&dashboard_path())
}

/// Every string anywhere in `v`.
fn all_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Object(m) => m.values().for_each(|x| all_strings(x, out)),
        serde_json::Value::Array(a) => a.iter().for_each(|x| all_strings(x, out)),
        _ => {}
    }
}

/// The `vmscope_…` metric names in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("vmscope_") {
        let before = rest[..at].chars().last();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            out.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    out
}

/// `expr` with the Grafana variables the dashboard uses replaced by values
/// Prometheus accepts.
fn grafana_vars(expr: &str) -> String {
    let q = expr
        .replace("$__rate_interval", "15s")
        .replace("${instance:regex}", ".+")
        .replace("$instance", ".+");
    assert!(!q.contains('$'), "an unknown Grafana variable in {expr:?}");
    q
}

#[test]
fn dashboard_queries_use_only_exported_metrics() {
    let d = dashboard();
    assert!(
        d["title"].is_string() && d["uid"].is_string() && d["schemaVersion"].is_u64(),
        "{} is not a Grafana dashboard (title, uid, schemaVersion)",
        dashboard_path().display()
    );
    let exprs = vmscope_tests::dashboard_exprs(&d);
    assert!(
        exprs.len() >= 10,
        "only {} queries: {exprs:#?}",
        exprs.len()
    );

    // Anywhere in the file (queries, template variables, descriptions).
    let mut strings = Vec::new();
    all_strings(&d, &mut strings);
    let used: BTreeSet<String> = strings.iter().flat_map(|s| metric_names(s)).collect();
    let unknown: Vec<_> = used
        .iter()
        .filter(|n| !EXPORTED.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard uses metrics `vmscope serve` does not export: {unknown:?}"
    );

    // It shows what it is for.
    let in_queries: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    for want in [
        "vmscope_page_faults_total",
        "vmscope_major_faults_total",
        "vmscope_swap_in_pages_total",
        "vmscope_swap_out_pages_total",
        "vmscope_reclaim_duration_seconds_bucket",
        "vmscope_psi_memory_some_ratio",
        "vmscope_psi_memory_full_ratio",
        "vmscope_tlb_flushes_total",
        "vmscope_probe_available",
        "vmscope_process_page_faults_total",
    ] {
        assert!(in_queries.contains(want), "no dashboard query uses {want}");
    }
    let reclaim = exprs
        .iter()
        .filter(|e| {
            e.contains("histogram_quantile(")
                && e.contains("vmscope_reclaim_duration_seconds_bucket")
        })
        .count();
    assert!(
        reclaim >= 2,
        "want reclaim p50 and p99 by histogram_quantile: {exprs:#?}"
    );
    for e in &exprs {
        grafana_vars(e);
    }
}

#[test]
fn client_and_parsers() {
    let r = parse_response(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n\
          3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        false,
    )
    .unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "abcde"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = parse_response(
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno",
        false,
    )
    .unwrap();
    assert_eq!((r.status, r.text().as_str()), (404, "no"));
    let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap();
    assert!(r.body.is_empty());
    assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).is_err());
    assert!(parse_response(b"garbage", false).is_err());

    let s = parse_samples(
        "# HELP x y\n# TYPE x counter\nx_total 3\n\
         y{a=\"1\",b=\"q\\\"uo\\\\te\\n\"} +Inf 1700000000\nz{} NaN\nw{le=\"0.5\",} 1e3 # {} 1\n",
    )
    .unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!((s[0].name.as_str(), s[0].value), ("x_total", 3.0));
    assert_eq!(s[1].label("b"), Some("q\"uo\\te\n"));
    assert!(s[1].value.is_infinite() && s[2].value.is_nan());
    assert_eq!((s[3].label("le"), s[3].value), (Some("0.5"), 1000.0));
    assert!(parse_samples("x{a=1} 2\n").is_err());
    assert!(parse_samples("x{a=\"1\" 2\n").is_err());
    assert_eq!(
        declared_types("# TYPE x counter\n# HELP x y\n")
            .get("x")
            .map(String::as_str),
        Some("counter")
    );

    assert_eq!(
        url_encode("rate(a{k=\"v\"}[1s])"),
        "rate%28a%7Bk%3D%22v%22%7D%5B1s%5D%29"
    );
    assert_eq!(
        metric_names("sum(rate(vmscope_a_total[1m])) / xvmscope_b + vmscope_c:d"),
        ["vmscope_a_total", "vmscope_c:d"].map(String::from).into()
    );
}

/// The `[Service]` keys of a systemd unit (a key given twice: the last).
fn unit_service_keys(unit: &str) -> std::collections::BTreeMap<String, String> {
    let mut section = "";
    let mut keys = std::collections::BTreeMap::new();
    for line in unit.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
        } else if section == "Service"
            && let Some((k, v)) = line.split_once('=')
        {
            keys.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    keys
}

/// The shipped unit, `vmscope/dist/vmscope-serve.service`, run the way
/// systemd would: its ExecStart as uid 65534 (standing in for its `User=`)
/// with the ambient capabilities and bounding set it names and nothing
/// else. A real Prometheus scrapes it.
#[test]
fn the_systemd_unit_runs_serve_unprivileged_and_prometheus_scrapes_it() {
    const TEST: &str = "the_systemd_unit_runs_serve_unprivileged_and_prometheus_scrapes_it";
    if !root_or_skip(TEST)
        || !vmscope_tests::privilege::tools_or_skip(TEST)
        || !tool_or_skip(TEST, "prometheus")
    {
        return;
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../vmscope/dist/vmscope-serve.service");
    let unit = std::fs::read_to_string(&path).unwrap();
    let keys = unit_service_keys(&unit);
    let key = |k: &str| {
        keys.get(k)
            .unwrap_or_else(|| panic!("{}: no {k}= in [Service]", path.display()))
            .as_str()
    };
    let caps = |k: &str| {
        let mut c: Vec<&str> = key(k).split_whitespace().collect();
        c.sort_unstable();
        c
    };
    assert_ne!(key("User"), "root");
    assert_eq!(caps("AmbientCapabilities"), ["CAP_BPF", "CAP_PERFMON"]);
    assert_eq!(caps("CapabilityBoundingSet"), ["CAP_BPF", "CAP_PERFMON"]);
    assert_eq!(key("NoNewPrivileges"), "yes");
    let mut argv: Vec<String> = key("ExecStart")
        .split_whitespace()
        .map(String::from)
        .collect();
    assert!(
        argv[0].ends_with("/vmscope") && argv[1] == "serve",
        "{argv:?}"
    );
    let listen = argv.iter().position(|a| a == "--listen").unwrap() + 1;
    assert!(argv[listen].starts_with("127.0.0.1:"), "{argv:?}");
    // Our build in place of the installed path, on a free port.
    argv[listen] = "127.0.0.1:0".into();
    let u = vmscope_tests::privilege::Unprivileged::new();
    let mut cmd = u.with_ambient(&u.plain);
    cmd.args(&argv[1..]);
    let serve = Serve::start_cmd(cmd);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.proc.pid())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} missing: {status}"))
            .trim()
            .to_string()
    };
    assert!(field("Uid:").starts_with("65534"), "{status}");
    let bpf_perfmon = format!("{:016x}", (1u64 << 38) | (1u64 << 39));
    // Both while the swap probe waits for a swap device, none once it has
    // attached (another test here may turn swap on meanwhile).
    let eff = field("CapEff:");
    assert!(
        eff == bpf_perfmon || eff == format!("{:016x}", 0),
        "{status}"
    );
    assert_eq!(field("CapBnd:"), bpf_perfmon, "{status}");

    scraped_with_faults(&serve);
}

/// `serve` as uid 65534 from a copy of the binary given CAP_BPF+CAP_PERFMON
/// by setcap (file capabilities, where the unit above uses ambient ones).
#[test]
fn serve_with_file_capabilities_as_nobody_is_scraped_by_prometheus() {
    const TEST: &str = "serve_with_file_capabilities_as_nobody_is_scraped_by_prometheus";
    if !root_or_skip(TEST)
        || !vmscope_tests::privilege::tools_or_skip(TEST)
        || !tool_or_skip(TEST, "prometheus")
    {
        return;
    }
    let u = vmscope_tests::privilege::Unprivileged::new();
    let mut cmd = u.as_nobody(&u.capped);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "-i", "500ms"]);
    let serve = Serve::start_cmd(cmd);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.proc.pid())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains("65534")),
        "{status}"
    );
    scraped_with_faults(&serve);
}

/// `/metrics` has page-fault series, and a real Prometheus scrapes them
/// (`up` is 1 and the fault counter is above 0) within 30 s.
fn scraped_with_faults(serve: &Serve) {
    let metrics = get(serve.addr, "/metrics", &[]).text();
    assert!(
        metrics.contains("vmscope_page_faults_total{"),
        "{metrics}\nstderr:\n{}",
        serve.stderr()
    );
    let prom = Prometheus::start(serve.addr);
    let t = Instant::now();
    loop {
        let up = prom.up();
        let faults = prom_query(prom.addr, "vmscope_page_faults_total");
        if up.as_ref().is_ok_and(|r| r.iter().any(|(_, v)| *v == 1.0)) && positive(&faults) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "after 30 s: up = {up:?}, faults = {faults:?}\nvmscope stderr:\n{}\nPrometheus log:\n{}",
            serve.stderr(),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `serve --working-set` measures every process (nothing is followed): a
/// hot set of 128 MiB in 512 MiB resident, in a cgroup of its own, is that
/// cgroup's working set within 10%; the scope's figure holds it; the idle
/// buckets split the resident memory. Nothing is exported before the
/// first window ends (unmeasured is absent, not 0).
#[test]
fn serve_working_set_per_cgroup_finds_a_known_hot_set() {
    const TEST: &str = "serve_working_set_per_cgroup_finds_a_known_hot_set";
    if !root_or_skip(TEST) {
        return;
    }
    let _x = vmscope_tests::pressure::exclusive();
    let cg = vmscope_tests::pressure::MemCgroup::new(1 << 30);
    let mut cmd = cg.command(vmscope_bin());
    cmd.args(["workload", "hotset", "--size", "512M", "--hot", "128M"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut hot = KillOnDrop::spawn(cmd);
    let out = hot.child().stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.contains(r#""event":"ready""#), "{ready}");
    std::thread::spawn(move || lines.for_each(drop));
    let serve = Serve::start(&[
        "--listen",
        "127.0.0.1:0",
        "--working-set",
        "--wss-window",
        "2s",
    ]);
    let first = samples_or_panic(&scrape(serve.addr));
    assert!(
        named(&first, "vmscope_working_set_bytes").is_empty(),
        "a working set before the first window ended"
    );
    let name = cg.path().file_name().unwrap().to_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let samples = loop {
        let s = samples_or_panic(&scrape(serve.addr));
        if !named(&s, "vmscope_cgroup_working_set_bytes").is_empty() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no window within 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mine = named(&samples, "vmscope_cgroup_working_set_bytes")
        .into_iter()
        .find(|s| {
            s.label("cgroup")
                .is_some_and(|c| c.ends_with(&format!("/{name}")))
        })
        .unwrap_or_else(|| panic!("no series for cgroup {name}"));
    assert_eq!(mine.label("window"), Some("2s"));
    let want = 128.0 * 1024.0 * 1024.0;
    assert!(
        (mine.value - want).abs() <= want * 0.10,
        "the hot set's cgroup: {} MiB, not 128 MiB ± 10%",
        mine.value / 1024.0 / 1024.0
    );
    let scope = named(&samples, "vmscope_working_set_bytes");
    assert_eq!(scope.len(), 1, "{scope:?}");
    assert!(scope[0].value >= mine.value, "{scope:?}");
    let idle: Vec<&str> = named(&samples, "vmscope_idle_bytes")
        .iter()
        .filter_map(|s| s.label("idle"))
        .collect();
    assert_eq!(
        idle,
        ["lt_1s", "lt_2s", "older"],
        "idle buckets up to the window"
    );
    let older = named(&samples, "vmscope_idle_bytes")
        .into_iter()
        .find(|s| s.label("idle") == Some("older"))
        .unwrap()
        .value;
    assert!(
        older >= 380.0 * 1024.0 * 1024.0,
        "the cold 384 MiB are idle: {older}"
    );
    drop(hot);
}
