//! `serve` and `top`'s `--history DUR [--on-oom DIR]`: the flight
//! recorder, and at each OOM kill a recording of its window written to
//! `DIR/oom-TIME-PID.json`.
//!
//! The recording is built on the view's thread at the sample that carries
//! the kill, and written on a thread of its own (started after privileges
//! were given up, so it holds none), atomically: a temporary file, synced,
//! then renamed. A failed write is reported in one line ([`Notes`]) and the
//! view goes on.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::{Arc, mpsc},
    time::{Duration, Instant, SystemTime},
};

use crate::{
    exit,
    model::{
        oom::OomKill,
        probes::ProbeStatus,
        recording::{Header, Recording, Scope, ScopeKind},
        sample::Sample,
    },
    record::{self, flight::Flight},
    source::Source,
};

/// Files written for one sample's kills at most (each lists them all).
const FILES_PER_SAMPLE: usize = 4;

/// Recordings waiting to be written at most; more are skipped, logged.
const QUEUE: usize = 8;

struct Job {
    path: PathBuf,
    rec: Arc<Recording>,
    victim: String,
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
    flight: Flight,
    header: Header,
    dir: Option<PathBuf>,
    jobs: Option<mpsc::SyncSender<Job>>,
    notes: Notes,
    /// The channel's other end when `notes` is one.
    heard: Option<mpsc::Receiver<String>>,
}

/// Checks `--history` and `--on-oom` before anything is loaded: a usage
/// error (exit 2) or a directory that cannot be written (exit 1), in one
/// line each.
pub fn check_args(history: Option<Duration>, on_oom: Option<&Path>) -> anyhow::Result<()> {
    match history {
        Some(h) if h.is_zero() => {
            return Err(exit::failure(
                exit::USAGE,
                "--history must be greater than zero (e.g. --history 5m)",
            ));
        }
        Some(h) if h > record::flight::MAX_WINDOW => {
            return Err(exit::failure(
                exit::USAGE,
                format!(
                    "--history {} is longer than the {} the flight recorder keeps",
                    humantime::format_duration(h),
                    humantime::format_duration(record::flight::MAX_WINDOW)
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
    let scope = Scope {
        kind,
        pids: pids.to_vec(),
        cgroup: None,
    };
    record::header(source, interval, scope, None)
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
        window: Duration,
        dir: Option<PathBuf>,
        source: &Source,
        interval: Duration,
        pids: &[u32],
        to_stderr: Option<&'static str>,
    ) -> Self {
        let (notes, heard) = match to_stderr {
            Some(prefix) => (Notes::Stderr(prefix), None),
            None => {
                let (tx, rx) = mpsc::channel();
                (Notes::Channel(tx), Some(rx))
            }
        };
        Self {
            flight: Flight::new(window),
            header: header(source, interval, pids),
            dir,
            jobs: None,
            notes,
            heard,
        }
    }

    /// The reports not yet taken (with [`Notes::Channel`]).
    pub fn notes(&self) -> Vec<String> {
        self.heard
            .as_ref()
            .map(|rx| rx.try_iter().collect())
            .unwrap_or_default()
    }

    /// Starts the writer, once this thread has given up its privileges
    /// (the writer inherits what it holds): the directory must be writable
    /// as it now stands.
    pub fn start_writer(&mut self) -> anyhow::Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        tempfile::Builder::new()
            .prefix(".vmscope-probe")
            .tempfile_in(dir)
            .map_err(|e| {
                exit::failure(
                    exit::FAILURE,
                    format!(
                        "--on-oom {}: cannot create a file there once privileges are given up: \
                         {e}; make it writable by uid {}",
                        dir.display(),
                        rustix::process::geteuid().as_raw()
                    ),
                )
            })?;
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let notes = self.notes.clone();
        std::thread::Builder::new()
            .name("vmscope-oom".into())
            .spawn(move || {
                for job in rx {
                    notes.say(write(&job));
                }
            })
            .map_err(|e| exit::failure(exit::FAILURE, format!("starting the OOM writer: {e}")))?;
        self.jobs = Some(tx);
        Ok(())
    }

    /// Takes the next sample; at OOM kills, queues the window's recording.
    pub fn push(&mut self, s: &Sample, probes: &[ProbeStatus]) {
        self.flight.push(s);
        let (Some(dir), Some(jobs)) = (&self.dir, &self.jobs) else {
            return;
        };
        if s.oom_kills.is_empty() {
            return;
        }
        let Some(rec) = self.flight.recording(self.header.clone(), probes) else {
            return;
        };
        let rec = Arc::new(rec);
        for k in s.oom_kills.iter().take(FILES_PER_SAMPLE) {
            let victim = format!(
                "pid {} ({}) in {}",
                k.pid.map_or_else(|| "?".into(), |p| p.to_string()),
                k.comm.as_deref().unwrap_or("?"),
                k.cgroup.as_deref().unwrap_or("an unknown cgroup")
            );
            let job = Job {
                path: dir.join(file_name(k)),
                rec: rec.clone(),
                victim,
            };
            if let Err(mpsc::TrySendError::Full(j) | mpsc::TrySendError::Disconnected(j)) =
                jobs.try_send(job)
            {
                self.notes.say(format!(
                    "OOM kill of {}: {} not written: {QUEUE} recordings are \
                     still being written",
                    j.victim,
                    j.path.display()
                ));
            }
        }
        if s.oom_kills.len() > FILES_PER_SAMPLE {
            self.notes.say(format!(
                "{} OOM kills in one interval: recordings written for the first \
                 {FILES_PER_SAMPLE}, each listing all of them",
                s.oom_kills.len()
            ));
        }
    }
}

/// Writes one recording; the line that says how it went.
fn write(job: &Job) -> String {
    let t = Instant::now();
    let r = record::write_atomic_regular(&job.path, |w| {
        serde_json::to_writer(&mut *w, &*job.rec)?;
        writeln!(w)?;
        Ok(())
    });
    match r {
        Ok(()) => format!(
            "OOM kill of {}: wrote {} ({} samples, {:.1} s of history, in {} ms)",
            job.victim,
            job.path.display(),
            job.rec.samples.len(),
            job.rec.duration_ns as f64 / 1e9,
            t.elapsed().as_millis()
        ),
        Err(e) => format!(
            "OOM kill of {}: its recording was not written: {e:#}; carrying on",
            job.victim
        ),
    }
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
