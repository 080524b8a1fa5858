//! `serve` and `top`'s `--history DUR [--on-oom DIR]`: the flight
//! recorder, and at each OOM episode a recording of its window written to
//! `DIR/oom-TIME-PID.json` (TIME and PID its first kill's).
//!
//! The view's thread only hands each sample, over a bounded channel, to a
//! thread of its own (`vmscope-oom`): when the channel is full the sample
//! is dropped and counted, so a slow disk never holds the view up. That
//! thread keeps the window, builds the recordings and writes them.
//!
//! An episode is the kills close together in time: it opens at a kill,
//! whose recording is written at once; kills until it has been quiet for
//! [`quiet`] (or until it is as long as the window) join it, and its file
//! is then written again, whole, listing them all. So a storm of kills
//! writes one file per episode, at most twice, never one per kill.
//!
//! `DIR` has a budget (`--on-oom-keep`, `--on-oom-max-bytes`): before a
//! recording is written, the oldest vmscope-written `oom-*.json` are
//! removed until it fits, each said in a line and counted ([`Stats`]).
//!
//! The writer thread is started before the view gives up its privileges
//! and gives up its own at once: under sudo (root with `SUDO_UID` and
//! `SUDO_GID`) it first takes the invoking user's file identity (fsuid,
//! fsgid, no supplementary groups), so its files are that user's from the
//! start; then it keeps no capability at all. Writes are atomic: a
//! temporary file, synced, then renamed. A failed write is reported in one
//! line ([`Notes`]) and the view goes on.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime},
};

use crate::{
    document, exit,
    flight::{Flight, MAX_WINDOW},
    model::{
        oom::OomKill,
        probes::ProbeStatus,
        recording::{Header, Recording, RecordingScope, ScopeKind},
        sample::Sample,
    },
    source::Source,
};

/// Samples waiting for the writer thread at most; more are dropped.
const QUEUE: usize = 16;

/// The shortest quiet that ends an episode.
const QUIET_MIN: Duration = Duration::from_secs(5);

/// How long without a kill ends an episode: [`QUIET_MIN`], or two
/// intervals when that is longer.
fn quiet(interval: Duration) -> Duration {
    QUIET_MIN.max(interval.saturating_mul(2))
}

/// `--on-oom-keep` and `--on-oom-max-bytes`.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub keep: usize,
    pub max_bytes: u64,
}

impl Budget {
    pub fn of(args: &crate::cli::FlightArgs) -> Self {
        Self {
            keep: usize::try_from(args.on_oom_keep).unwrap_or(usize::MAX),
            max_bytes: args.on_oom_max_bytes,
        }
    }
}

/// What the recorder did, for `serve`'s own metrics.
#[derive(Debug, Default)]
pub struct Stats {
    /// Recordings written (an episode's rewrite counts again).
    pub written: AtomicU64,
    /// Recordings that could not be written (failed, or over the budget
    /// alone).
    pub failed: AtomicU64,
    /// Old recordings removed to stay within the budget.
    pub removed: AtomicU64,
    /// Samples dropped because the writer thread was behind.
    pub samples_dropped: AtomicU64,
}

impl Stats {
    fn add(n: &AtomicU64) {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the view hands the writer thread.
struct Handoff {
    sample: Sample,
    probes: Vec<ProbeStatus>,
}

/// Where the recorder's one-line reports go: `serve` prints them to
/// stderr with its prefix; `top`, which owns the screen, takes them from a
/// channel ([`Recorder::notes`]) and shows the last.
#[derive(Clone)]
pub enum Notes {
    Stderr(&'static str),
    Channel(mpsc::Sender<String>),
}

impl Notes {
    fn say(&self, line: String) {
        match self {
            Notes::Stderr(prefix) => eprintln!("{prefix}: {line}"),
            Notes::Channel(tx) => {
                let _ = tx.send(line);
            }
        }
    }
}

/// The window, and where its recordings go.
pub struct Recorder {
    /// The window, kept here when nothing is written (no `--on-oom`);
    /// with `--on-oom` the writer thread keeps it.
    flight: Option<Flight>,
    header: Header,
    dir: Option<PathBuf>,
    budget: Budget,
    interval: Duration,
    feed: Option<mpsc::SyncSender<Handoff>>,
    writer: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
    /// Samples dropped in a row (said when the run of drops starts).
    dropping: u64,
    notes: Notes,
    /// The channel's other end when `notes` is one.
    heard: Option<mpsc::Receiver<String>>,
}

impl crate::cli::FlightArgs {
    /// Checks `--history` and `--on-oom` before anything is loaded (`top`
    /// and `serve` alike): a usage error (exit 2) or a directory that
    /// cannot be written (exit 1), in one line each.
    pub fn check(&self) -> anyhow::Result<()> {
        check_args(self.history, self.on_oom.as_deref())
    }
}

fn check_args(history: Option<Duration>, on_oom: Option<&Path>) -> anyhow::Result<()> {
    match history {
        Some(h) if h.is_zero() => {
            return Err(exit::failure(
                exit::USAGE,
                "--history must be greater than zero (e.g. --history 5m)",
            ));
        }
        Some(h) if h > MAX_WINDOW => {
            return Err(exit::failure(
                exit::USAGE,
                format!(
                    "--history {} is longer than the {} the flight recorder keeps",
                    humantime::format_duration(h),
                    humantime::format_duration(MAX_WINDOW)
                ),
            ));
        }
        _ => {}
    }
    let Some(dir) = on_oom else { return Ok(()) };
    if history.is_none() {
        return Err(exit::failure(
            exit::USAGE,
            "--on-oom needs --history: how much to keep for each OOM kill's recording \
             (e.g. --history 5m)",
        ));
    }
    if !dir.is_dir() {
        return Err(exit::failure(
            exit::FAILURE,
            format!(
                "--on-oom {}: not a directory (it must exist); create it or choose another",
                dir.display()
            ),
        ));
    }
    if rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_err() {
        return Err(exit::failure(
            exit::FAILURE,
            format!("--on-oom {}: the directory is not writable", dir.display()),
        ));
    }
    Ok(())
}

/// The recordings' header; `pids`: the processes followed (`top -p`), or
/// none (the whole system).
fn header(source: &Source, interval: Duration, pids: &[u32]) -> Header {
    let kind = if pids.is_empty() {
        ScopeKind::System
    } else {
        ScopeKind::Pids
    };
    let scope = RecordingScope {
        kind,
        pids: pids.to_vec(),
        cgroup: None,
    };
    document::header(source, interval, scope, None)
}

/// `oom-20250101T120000.123Z-4242.json`: the kill's time (UTC, to the
/// millisecond) and the victim's pid.
fn file_name(k: &OomKill) -> String {
    let t = humantime::parse_rfc3339(&k.timestamp).unwrap_or_else(|_| SystemTime::now());
    let t: String = humantime::format_rfc3339_millis(t)
        .to_string()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let pid = k
        .pid
        .map_or_else(|| "unknown".to_string(), |p| p.to_string());
    format!("oom-{t}-{pid}.json")
}

impl Recorder {
    /// `to_stderr`: the prefix of the lines printed to stderr; `None`
    /// keeps them for [`Self::notes`].
    pub fn new(
        args: &crate::cli::FlightArgs,
        source: &Source,
        interval: Duration,
        pids: &[u32],
        to_stderr: Option<&'static str>,
    ) -> Option<Self> {
        let window = args.history?;
        let (notes, heard) = match to_stderr {
            Some(prefix) => (Notes::Stderr(prefix), None),
            None => {
                let (tx, rx) = mpsc::channel();
                (Notes::Channel(tx), Some(rx))
            }
        };
        Some(Self {
            flight: Some(Flight::new(window)),
            header: header(source, interval, pids),
            dir: args.on_oom.clone(),
            budget: Budget::of(args),
            interval,
            feed: None,
            writer: None,
            stats: Arc::default(),
            dropping: 0,
            notes,
            heard,
        })
    }

    /// The reports not yet taken (with [`Notes::Channel`]).
    pub fn notes(&self) -> Vec<String> {
        self.heard
            .as_ref()
            .map(|rx| rx.try_iter().collect())
            .unwrap_or_default()
    }

    /// What it did so far; `None` without `--on-oom`.
    pub fn stats(&self) -> Option<Arc<Stats>> {
        self.dir.as_ref().map(|_| self.stats.clone())
    }

    /// Starts the writer thread (with `--on-oom`), which gives up its
    /// privileges at once (see the module's comment) and then tries DIR:
    /// the directory must be writable as it then stands. Call it before
    /// this thread gives up its own (`setfsuid` needs CAP_SETUID).
    /// Returns what the writer holds, for the privileges line.
    pub fn start_writer(&mut self) -> anyhow::Result<Option<String>> {
        let Some(dir) = self.dir.clone() else {
            return Ok(None);
        };
        let Some(flight) = self.flight.take() else {
            return Ok(None);
        };
        let owner = document::output_owner();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let (tx, rx) = mpsc::sync_channel::<Handoff>(QUEUE);
        let window = flight.window();
        let mut w = WriterThread {
            flight,
            header: self.header.clone(),
            dir: dir.clone(),
            budget: self.budget,
            quiet: nanos(quiet(self.interval)),
            cap: nanos(window),
            episode: None,
            stats: self.stats.clone(),
            notes: self.notes.clone(),
            probes: Vec::new(),
        };
        let handle = std::thread::Builder::new()
            .name("vmscope-oom".into())
            .spawn(move || {
                let ready = become_writer(owner).and_then(|()| try_dir(&w.dir));
                let ok = ready.is_ok();
                let _ = ready_tx.send(ready);
                if ok {
                    for f in rx {
                        w.take(f);
                    }
                    w.close();
                }
            })
            .map_err(|e| exit::failure(exit::FAILURE, format!("starting the OOM writer: {e}")))?;
        let ready = ready_rx
            .recv()
            .unwrap_or_else(|_| Err("the OOM writer ended at start".into()));
        if let Err(e) = ready {
            let _ = handle.join();
            let uid = owner.map_or_else(|| rustix::process::geteuid().as_raw(), |o| o.0);
            return Err(exit::failure(
                exit::FAILURE,
                format!(
                    "--on-oom {}: cannot create a file there once privileges are given up: \
                     {e}; make it writable by uid {uid}",
                    dir.display(),
                ),
            ));
        }
        self.feed = Some(tx);
        self.writer = Some(handle);
        Ok(Some(match owner {
            Some((uid, gid)) => format!(
                "the OOM writer keeps none and writes as uid {uid} gid {gid} (SUDO_UID/SUDO_GID)"
            ),
            None => "the OOM writer keeps none".into(),
        }))
    }

    /// Takes the next sample: into the window here, or handed to the
    /// writer thread (dropped, counted, when it is behind).
    pub fn push(&mut self, s: &Sample, probes: &[ProbeStatus]) {
        if let Some(f) = self.flight.as_mut() {
            f.push(s);
            return;
        }
        let Some(feed) = &self.feed else { return };
        let f = Handoff {
            sample: s.clone(),
            probes: probes.to_vec(),
        };
        match feed.try_send(f) {
            Ok(()) => {
                if self.dropping > 0 {
                    self.notes.say(format!(
                        "the OOM writer caught up; {} samples were dropped meanwhile \
                         (missing from its recordings)",
                        std::mem::take(&mut self.dropping)
                    ));
                }
            }
            Err(mpsc::TrySendError::Full(_) | mpsc::TrySendError::Disconnected(_)) => {
                Stats::add(&self.stats.samples_dropped);
                self.dropping += 1;
                if self.dropping == 1 {
                    self.notes.say(format!(
                        "the OOM writer is behind ({QUEUE} samples waiting): samples are \
                         dropped (counted) until it catches up"
                    ));
                }
            }
        }
    }
}

impl Drop for Recorder {
    /// Lets the writer finish: the open episode's file is written whole.
    fn drop(&mut self) {
        self.feed = None;
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Gives the calling thread (the writer, before it does anything else)
/// the file identity it writes with, then no capabilities at all. Under
/// sudo: the invoking user's fsuid and fsgid, and no supplementary groups
/// (these calls change the calling thread only: raw system calls, which
/// the C library does not repeat on the other threads).
fn become_writer(owner: Option<(u32, u32)>) -> Result<(), String> {
    if let Some((uid, gid)) = owner {
        // SAFETY: setgroups with an empty list; setfsgid and setfsuid with
        // integer arguments. Each affects this thread only.
        unsafe {
            if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0 {
                return Err(format!(
                    "dropping supplementary groups: {}",
                    std::io::Error::last_os_error()
                ));
            }
            libc::setfsgid(gid);
            libc::setfsuid(uid);
            // Each returns the identity before the call: set, it is the one
            // asked for.
            if libc::setfsgid(gid) as u32 != gid || libc::setfsuid(uid) as u32 != uid {
                return Err(format!(
                    "taking uid {uid} gid {gid} (SUDO_UID/SUDO_GID) for writing: refused"
                ));
            }
        }
    }
    crate::source::kernel::privdrop::keep_only(&[])
}

/// Creates and removes a file in `dir`.
fn try_dir(dir: &Path) -> Result<(), String> {
    tempfile::Builder::new()
        .prefix(".vmscope-probe")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// An OOM episode: kills close together, one file.
struct Episode {
    path: PathBuf,
    /// Its first kill, in words.
    victim: String,
    /// When its first and latest kills were seen (samples' `elapsed_ns`).
    first_ns: u64,
    last_ns: u64,
    kills: usize,
    /// Kills its file lists as last written.
    written: usize,
}

/// The writer thread's state.
struct WriterThread {
    flight: Flight,
    header: Header,
    dir: PathBuf,
    budget: Budget,
    quiet: u64,
    /// The longest episode: the window (its first kill stays in it).
    cap: u64,
    episode: Option<Episode>,
    stats: Arc<Stats>,
    notes: Notes,
    probes: Vec<ProbeStatus>,
}

fn victim(k: &OomKill) -> String {
    format!(
        "pid {} ({}) in {}",
        k.pid.map_or_else(|| "?".into(), |p| p.to_string()),
        k.comm.as_deref().unwrap_or("?"),
        k.cgroup.as_deref().unwrap_or("an unknown cgroup")
    )
}

impl WriterThread {
    /// One sample: into the window; a kill opens an episode (written at
    /// once) or joins the open one; quiet or length closes it.
    fn take(&mut self, f: Handoff) {
        let s = f.sample;
        self.probes = f.probes;
        let now = s.elapsed_ns;
        // Closed before this sample goes in, while the window still holds
        // the episode's first kill.
        if let Some(e) = &self.episode {
            let long = now.saturating_sub(e.first_ns) >= self.cap;
            let quiet = s.oom_kills.is_empty() && now.saturating_sub(e.last_ns) >= self.quiet;
            if long || quiet {
                self.close();
            }
        }
        self.flight.push(&s);
        match (&mut self.episode, s.oom_kills.first()) {
            (Some(e), Some(_)) => {
                e.last_ns = now;
                e.kills += s.oom_kills.len();
            }
            (None, Some(k)) => {
                self.episode = Some(Episode {
                    path: self.dir.join(file_name(k)),
                    victim: victim(k),
                    first_ns: now,
                    last_ns: now,
                    kills: s.oom_kills.len(),
                    written: 0,
                });
                self.write();
            }
            _ => {}
        }
    }

    /// Ends the open episode, writing its file again if kills joined it
    /// since.
    fn close(&mut self) {
        if self.episode.as_ref().is_some_and(|e| e.kills > e.written) {
            self.write();
        }
        self.episode = None;
    }

    /// Writes the open episode's recording, within the budget.
    fn write(&mut self) {
        let Some(e) = self.episode.as_mut() else {
            return;
        };
        let first = e.written == 0;
        e.written = e.kills;
        let (path, what) = if first {
            (e.path.clone(), format!("OOM kill of {}", e.victim))
        } else {
            (
                e.path.clone(),
                format!("OOM episode of {} kills from {}", e.kills, e.victim),
            )
        };
        let t = Instant::now();
        let Some(rec) = self.flight.recording(self.header.clone(), &self.probes) else {
            return;
        };
        let size = json_size(&rec);
        if size > self.budget.max_bytes {
            Stats::add(&self.stats.failed);
            self.notes.say(format!(
                "{what}: its recording was not written: {size} bytes, more than \
                 --on-oom-max-bytes {}; carrying on",
                self.budget.max_bytes
            ));
            return;
        }
        make_room(
            &self.dir,
            self.budget,
            &path,
            size,
            &self.stats,
            &self.notes,
        );
        let r = document::write_atomic_regular(&path, |w| {
            serde_json::to_writer(&mut *w, &rec)?;
            writeln!(w)?;
            Ok(())
        });
        let line = match r {
            Ok(()) => {
                Stats::add(&self.stats.written);
                format!(
                    "{what}: wrote {} ({} samples, {:.1} s of history, {} kills, {size} bytes, \
                     in {} ms)",
                    path.display(),
                    rec.samples.len(),
                    rec.duration_ns as f64 / 1e9,
                    rec.oom_kills.len(),
                    t.elapsed().as_millis()
                )
            }
            Err(e) => {
                Stats::add(&self.stats.failed);
                format!("{what}: its recording was not written: {e:#}; carrying on")
            }
        };
        self.notes.say(line);
    }
}

/// Removes the oldest recordings in `dir` until one of `size` bytes at
/// `path` (replacing any there) fits `budget`.
fn make_room(dir: &Path, budget: Budget, path: &Path, size: u64, stats: &Stats, notes: &Notes) {
    let mut old = recordings(dir);
    old.retain(|(p, _)| p != path);
    let mut bytes: u64 = old.iter().map(|(_, b)| b).sum();
    let mut left = old.len();
    for (p, b) in &old {
        if left < budget.keep && bytes.saturating_add(size) <= budget.max_bytes {
            break;
        }
        match std::fs::remove_file(p) {
            Ok(()) => {
                Stats::add(&stats.removed);
                notes.say(format!(
                    "removed {} ({b} bytes), the oldest recording, to keep within \
                     --on-oom-keep {} and --on-oom-max-bytes {}",
                    p.display(),
                    budget.keep,
                    budget.max_bytes
                ));
            }
            Err(e) => notes.say(format!("could not remove {}: {e}", p.display())),
        }
        left -= 1;
        bytes = bytes.saturating_sub(*b);
    }
}

/// How many bytes `rec` takes as written.
fn json_size(rec: &Recording) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, rec);
    c.0 + 1
}

/// Whether `name` is one vmscope gives a recording
/// (`oom-20250304T050607.891Z-4242.json`, or `-unknown.json`).
fn is_recording_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("oom-")
        .and_then(|r| r.strip_suffix(".json"))
    else {
        return false;
    };
    let Some((time, pid)) = rest.split_once("Z-") else {
        return false;
    };
    let t = time.as_bytes();
    let time_ok = t.len() == 19
        && t.iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            15 => *c == b'.',
            _ => c.is_ascii_digit(),
        });
    let pid_ok = pid == "unknown" || (!pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()));
    time_ok && pid_ok
}

/// The recordings in `dir` vmscope wrote (by their names; regular files
/// only), oldest first (names begin with the time), with their sizes.
fn recordings(dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, u64)> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_recording_name))
        .filter_map(|e| {
            let m = std::fs::symlink_metadata(e.path()).ok()?;
            m.is_file().then(|| (e.path(), m.len()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_after_the_kills_time_and_pid() {
        let k = OomKill {
            timestamp: "2025-03-04T05:06:07.891234567Z".into(),
            pid: Some(4242),
            ..Default::default()
        };
        assert_eq!(file_name(&k), "oom-20250304T050607.891Z-4242.json");
        let k = OomKill { pid: None, ..k };
        assert!(file_name(&k).ends_with("-unknown.json"));
    }

    #[test]
    fn only_the_names_vmscope_gives_are_recordings() {
        assert!(is_recording_name("oom-20250304T050607.891Z-4242.json"));
        assert!(is_recording_name("oom-20250304T050607.891Z-unknown.json"));
        for n in [
            "oom-notes.json",
            "oom-20250304T050607.891Z-.json",
            "oom-20250304T050607.891Z-42.json.tmp",
            ".oom-20250304T050607.891Z-42.json.abc.tmp",
            "oom-2025030T050607.891Z-42.json",
            "oom-20250304T050607.891Z-4x.json",
        ] {
            assert!(!is_recording_name(n), "{n}");
        }
    }

    #[test]
    fn the_budget_removes_the_oldest_recordings_first() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let name = |i: u32| format!("oom-2025030{i}T050607.891Z-{i}.json");
        for i in 1..=5 {
            std::fs::write(dir.path().join(name(i)), vec![b'x'; 100]).expect("writing");
        }
        std::fs::write(dir.path().join("oom-notes.json"), "keep me").expect("writing");
        let stats = Stats::default();
        let (tx, rx) = mpsc::channel();
        let notes = Notes::Channel(tx);
        let keep = |keep, max_bytes| Budget { keep, max_bytes };
        // Three kept, the new one among them: three of the five go, the
        // oldest.
        let new = dir.path().join(name(6));
        make_room(dir.path(), keep(3, 1 << 20), &new, 100, &stats, &notes);
        let left: Vec<_> = recordings(dir.path()).into_iter().map(|(p, _)| p).collect();
        assert_eq!(left, [4, 5].map(|i| dir.path().join(name(i))), "{left:?}");
        assert_eq!(stats.removed.load(Ordering::Relaxed), 3);
        assert_eq!(
            rx.try_iter().filter(|l| l.starts_with("removed ")).count(),
            3
        );
        // Bytes: 250 allowed, 100 to come, so one of 100 may stay.
        make_room(dir.path(), keep(10, 250), &new, 100, &stats, &notes);
        assert_eq!(recordings(dir.path()).len(), 1);
        // A file replaced in place does not count against itself.
        let last = dir.path().join(name(5));
        make_room(dir.path(), keep(1, 100), &last, 100, &stats, &notes);
        assert_eq!(recordings(dir.path()).len(), 1);
        assert!(dir.path().join("oom-notes.json").exists());
    }

    fn at(secs: u64, kills: &[u32]) -> Sample {
        let timestamp = format!("2025-01-01T00:{:02}:{:02}Z", secs / 60, secs % 60);
        Sample {
            elapsed_ns: secs * 1_000_000_000,
            oom_kills: kills
                .iter()
                .map(|&pid| OomKill {
                    timestamp: timestamp.clone(),
                    pid: Some(pid),
                    ..Default::default()
                })
                .collect(),
            timestamp,
            ..Default::default()
        }
    }

    /// Kills close together are one episode, one file (written at the
    /// first kill and again, whole, once quiet); a kill after the quiet
    /// opens another; a storm longer than the window is cut at the window.
    #[test]
    fn kills_close_together_share_one_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rec: Recording =
            document::from_str(include_str!("../../../tests/fixtures/churn.recording.json"))
                .expect("the fixture is a recording");
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel();
        let mut w = WriterThread {
            flight: Flight::new(Duration::from_secs(30)),
            header: rec.header,
            dir: dir.path().to_path_buf(),
            budget: Budget {
                keep: 10,
                max_bytes: 1 << 30,
            },
            quiet: nanos(quiet(Duration::from_secs(1))),
            cap: nanos(Duration::from_secs(30)),
            episode: None,
            stats: stats.clone(),
            notes: Notes::Channel(tx),
            probes: Vec::new(),
        };
        let mut feed = |t: u64, kills: &[u32]| {
            w.take(Handoff {
                sample: at(t, kills),
                probes: Vec::new(),
            });
        };
        let written = || stats.written.load(Ordering::Relaxed);
        let files = || recordings(dir.path()).len();
        for t in 0..5 {
            feed(t, &[]);
        }
        feed(5, &[100, 101]);
        assert_eq!((files(), written()), (1, 1));
        feed(6, &[102]);
        feed(8, &[103]);
        for t in 9..13 {
            feed(t, &[]);
        }
        // Quiet for 4 s: still open.
        assert_eq!((files(), written()), (1, 1));
        feed(13, &[]);
        assert_eq!((files(), written()), (1, 2));
        let (path, _) = recordings(dir.path()).remove(0);
        let doc: Recording =
            document::from_str(&std::fs::read_to_string(&path).expect("read")).expect("whole");
        assert!(
            path.ends_with("oom-20250101T000005.000Z-100.json"),
            "{path:?}"
        );
        assert_eq!(doc.oom_kills.len(), 4);
        // A storm: a kill every second for 70 s, episodes cut at 30 s.
        for t in 20..90 {
            feed(t, &[1000 + u32::try_from(t).unwrap_or(0)]);
        }
        assert_eq!(files(), 1 + 3, "{:?}", recordings(dir.path()));
        assert_eq!(written(), 2 + 2 + 2 + 1);
        // The first storm episode's file still holds its first kill.
        let first = dir.path().join("oom-20250101T000020.000Z-1020.json");
        let doc: Recording =
            document::from_str(&std::fs::read_to_string(&first).expect("read")).expect("whole");
        assert_eq!(doc.oom_kills.len(), 30);
        assert_eq!(doc.oom_kills[0].pid, Some(1020));
        let said: Vec<String> = rx.try_iter().collect();
        assert!(said.iter().all(|l| l.contains("wrote")), "{said:#?}");
    }

    #[test]
    fn bad_history_and_on_oom_are_refused_in_one_line() {
        let code = |r: anyhow::Result<()>| exit::code_of(&r.expect_err("refused"), 0);
        let tmp = std::env::temp_dir();
        assert_eq!(code(check_args(Some(Duration::ZERO), None)), exit::USAGE);
        assert_eq!(
            code(check_args(Some(Duration::from_secs(7200)), None)),
            exit::USAGE
        );
        assert_eq!(code(check_args(None, Some(&tmp))), exit::USAGE);
        assert_eq!(
            code(check_args(
                Some(Duration::from_secs(5)),
                Some(Path::new("/nonexistent/vmscope"))
            )),
            exit::FAILURE
        );
        assert!(check_args(Some(Duration::from_secs(5)), Some(&tmp)).is_ok());
        assert!(check_args(None, None).is_ok());
    }
}
