//! For the tests of `vmscope serve` under hostile clients: the server and a
//! real Prometheus as child processes, a minimal HTTP/1.1 GET, client
//! sockets bound to a chosen loopback source address or with a chosen
//! receive buffer, a TCP socket's state, and metric lines read off a body.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream},
    os::{
        fd::{AsRawFd as _, FromRawFd as _},
        unix::process::CommandExt as _,
    },
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use crate::vmscope_bin;

/// A child process whose whole process group is killed (SIGKILL) and reaped
/// when dropped.
pub struct KillOnDrop(pub Option<Child>);

impl KillOnDrop {
    pub fn spawn(mut cmd: Command) -> KillOnDrop {
        cmd.process_group(0).stdin(Stdio::null());
        KillOnDrop(Some(cmd.spawn().unwrap_or_else(|e| {
            panic!("spawning {:?}: {e}", cmd.get_program())
        })))
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // SAFETY: plain syscall; the child leads its own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running `vmscope serve`, killed when dropped.
pub struct Serve {
    pub proc: KillOnDrop,
    /// Where it listens, from its stderr line.
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

const LISTENING: &str = "vmscope serve: listening on http://";

impl Serve {
    /// Starts `vmscope serve ARGS` and waits (up to a minute) for the line
    /// that says where it listens.
    pub fn start(args: &[&str]) -> Serve {
        let mut cmd = Command::new(vmscope_bin());
        cmd.arg("serve").args(args);
        Serve::start_cmd(cmd)
    }

    /// Starts `cmd`, a command line that ends in `vmscope serve ARGS` (run
    /// through setpriv, say), and waits the same way.
    pub fn start_cmd(mut cmd: Command) -> Serve {
        let args = format!("{:?}", cmd.get_args().collect::<Vec<_>>());
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut proc = KillOnDrop::spawn(cmd);
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = proc.child().stderr.take().unwrap();
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                log.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line
                        .strip_prefix(LISTENING)
                        .and_then(|r| r.strip_suffix("/metrics"))
                    {
                        let addr = addr.parse().unwrap();
                        return Serve { proc, addr, stderr };
                    }
                }
                Err(e) => {
                    std::thread::sleep(Duration::from_millis(200));
                    let status = proc.child().try_wait().unwrap();
                    panic!(
                        "vmscope serve {args}: no listening line ({e}; status {status:?}); \
                         stderr:\n{}",
                        stderr.lock().unwrap()
                    );
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The CPU time (user + system) it has used so far.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        // After the command name in parentheses: state is field 3, utime 14.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        // SAFETY: plain query.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Duration::from_secs_f64((f[0] + f[1]) as f64 / hz)
    }
}

/// Whether `tool` can be run. Without it the test skips with a one-line
/// reason, except under VMSCOPE_REQUIRE_BPF=1, where it fails.
pub fn tool_or_skip(test: &str, tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    crate::skip_unless(
        test,
        found,
        &format!("{tool} is not installed"),
        &format!("apt-get install {tool}"),
    )
}

/// A TCP connection to `to` from `from` (port chosen by the kernel), with
/// the receive buffer set to `rcvbuf` bytes first when given.
pub fn connect_from(
    from: Ipv4Addr,
    to: SocketAddr,
    rcvbuf: Option<i32>,
) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        panic!("{to}: IPv4 only")
    };
    let sockaddr = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain syscalls on a socket owned here; the addresses and the
    // option value are locals of the right sizes.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = TcpStream::from_raw_fd(fd);
        if let Some(n) = rcvbuf {
            let r = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&n as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let src = sockaddr(SocketAddrV4::new(from, 0));
        if libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let dst = sockaddr(to);
        if libc::connect(fd, (&dst as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// The kernel's TCP state of a socket (`TCP_ESTABLISHED` = 1, `TCP_CLOSE`
/// = 7 after a reset, `TCP_CLOSE_WAIT` = 8 after the peer's FIN).
pub fn tcp_state(s: &TcpStream) -> u8 {
    // struct tcp_info starts with `__u8 tcpi_state`.
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the buffer and its length are valid; the kernel writes at
    // most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info[0]
}

pub const TCP_ESTABLISHED: u8 = 1;

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// `GET path` over `s` with `Connection: close`, read until the server
/// closes (the body is whatever follows the head).
pub fn get_over(mut s: TcpStream, path: &str, limit: Duration) -> Result<Answer, String> {
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    let host = s.peer_addr().map_err(|e| e.to_string())?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| format!("writing: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| format!("reading: {e} after {} bytes", buf.len()))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no head in {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("status line of {head:?}"))?;
    Ok(Answer {
        status,
        body: body.to_owned(),
    })
}

/// `GET path` from `addr`, from the source address `from`.
pub fn get_from(from: Ipv4Addr, addr: SocketAddr, path: &str) -> Result<Answer, String> {
    let s = connect_from(from, addr, None).map_err(|e| format!("connecting: {e}"))?;
    get_over(s, path, Duration::from_secs(15))
}

/// The value of the unlabelled sample `name`, or of the one written
/// exactly as `name{labels}`.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A real Prometheus scraping one target every second, in a directory of
/// its own; killed (before the directory goes) when dropped.
pub struct Prometheus {
    _proc: KillOnDrop,
    pub addr: SocketAddr,
    log_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts it and waits (up to 30 s) until it is ready.
    pub fn start(target: SocketAddr) -> Prometheus {
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
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
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
        while !get_from(Ipv4Addr::LOCALHOST, addr, "/-/ready").is_ok_and(|r| r.status == 200) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "Prometheus not ready on {addr} after 30 s; its log:\n{}",
                prom.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        prom
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// `query` evaluated now: each series' labels and value, or the error.
    pub fn query(&self, query: &str) -> Result<Vec<(serde_json::Value, f64)>, String> {
        let path = format!("/api/v1/query?query={}", url_encode(query));
        let r = get_from(Ipv4Addr::LOCALHOST, self.addr, &path)?;
        let v: serde_json::Value = serde_json::from_str(&r.body)
            .map_err(|e| format!("{}: not JSON ({e}): {}", r.status, r.body))?;
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

    /// The one value of `query`, if it has exactly one series.
    pub fn value(&self, query: &str) -> Option<f64> {
        match self.query(query) {
            Ok(v) if v.len() == 1 => Some(v[0].1),
            _ => None,
        }
    }
}
