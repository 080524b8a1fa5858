//! The recording document every view shares: its assembly, schema, jsonl
//! stream, atomic writer and validating reader.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

mod assemble;

pub(crate) use assemble::{Parts, assemble};

use crate::exit;

use crate::model::recording::{Header, Line, Recording, RecordingScope, SCHEMA_VERSION, Tool};

/// Appends whole lines to a `--format jsonl` stream, flushing each so that
/// `tail -f` sees every interval as it ends.
pub struct JsonlWriter {
    out: Box<dyn std::io::Write + Send>,
    /// The file itself (not stdout): a line that fails half-way is cut off
    /// again, so the stream only ever holds whole lines.
    file: Option<std::fs::File>,
    /// Where the last whole line ends.
    whole: u64,
    what: String,
}

impl JsonlWriter {
    /// Opens the file, or uses stdout. The stream is written in place, not
    /// renamed: it is meant to be read while it grows.
    ///
    /// The path is opened without following a symbolic link (one planted
    /// there is refused with one line, its target untouched). A regular file
    /// is truncated, as before, unless it has other hard links; a device or
    /// FIFO (`/dev/null`) is written as it is, but a FIFO no process reads
    /// is refused at once (never waited on). Under sudo the file belongs
    /// to the invoking user.
    pub fn create(output: &Output) -> anyhow::Result<Self> {
        Ok(match output {
            Output::Stdout => Self {
                out: Box::new(std::io::stdout()),
                file: None,
                whole: 0,
                what: "stdout".into(),
            },
            Output::File(path) => {
                let f = open_stream(path)?;
                let out = f
                    .try_clone()
                    .with_context(|| format!("opening {}", path.display()))?;
                Self {
                    out: Box::new(out),
                    file: Some(f),
                    whole: 0,
                    what: path.display().to_string(),
                }
            }
        })
    }

    pub fn line(&mut self, line: &Line) -> anyhow::Result<()> {
        let mut buf = serde_json::to_vec(line).context("encoding a line")?;
        buf.push(b'\n');
        match self.out.write_all(&buf).and_then(|()| self.out.flush()) {
            Ok(()) => {
                self.whole += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.cut_partial();
                Err(e).with_context(|| format!("writing {}", self.what))
            }
        }
    }

    /// Removes what a failed write left of its line (truncating needs no
    /// space), so the next line starts where the last whole one ended.
    fn cut_partial(&mut self) {
        use std::io::Seek as _;
        if let Some(f) = &mut self.file
            && f.metadata().is_ok_and(|m| m.is_file())
        {
            let _ = f.set_len(self.whole);
            let _ = f.seek(std::io::SeekFrom::Start(self.whole));
        }
    }

    /// Whether this stream goes to a file (which may take a final line after
    /// a failure) rather than stdout.
    pub fn is_file(&self) -> bool {
        self.file.is_some()
    }
}

/// Opens a jsonl destination: never through a symbolic link, never a
/// regular file that has other names.
fn open_stream(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path);
    let f = match f {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            anyhow::bail!(
                "refusing to write {}: it is a symbolic link; remove it or choose another -o",
                path.display()
            );
        }
        Err(e) => {
            return Err(no_reader(path, e)).with_context(|| format!("creating {}", path.display()));
        }
    };
    blocking(&f).with_context(|| format!("opening {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("examining {}", path.display()))?;
    if meta.file_type().is_block_device() || meta.file_type().is_socket() {
        anyhow::bail!("refusing to write {}: not a regular file", path.display());
    }
    if meta.is_file() {
        if meta.nlink() > 1 {
            anyhow::bail!(
                "refusing to write {}: it has {} hard links, so truncating it would change \
                 another file; remove it or choose another -o",
                path.display(),
                meta.nlink()
            );
        }
        f.set_len(0)
            .with_context(|| format!("truncating {}", path.display()))?;
        give_to_invoker(&f).with_context(|| format!("creating {}", path.display()))?;
    }
    Ok(f)
}

/// Who owns the files vmscope writes: under sudo (root with `SUDO_UID` and
/// `SUDO_GID` set), the invoking user; otherwise whoever runs vmscope.
pub fn output_owner() -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let uid: u32 = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid: u32 = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    (uid != 0 || gid != 0).then_some((uid, gid))
}

/// Hands a regular file vmscope has just written to the invoking user
/// under sudo (unless it is theirs already: the OOM writer creates its
/// files as that user, and keeps no CAP_CHOWN).
fn give_to_invoker(f: &std::fs::File) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    if let Some((uid, gid)) = output_owner() {
        if f.metadata().is_ok_and(|m| m.uid() == uid && m.gid() == gid) {
            return Ok(());
        }
        std::os::unix::fs::fchown(f, Some(uid), Some(gid))
            .with_context(|| format!("giving it to uid {uid} gid {gid} (SUDO_UID/SUDO_GID)"))?;
    }
    Ok(())
}

/// The published JSON Schema of a recording (`vmscope/schema/`).
pub fn recording_schema() -> serde_json::Value {
    schemars::schema_for!(Recording).to_value()
}

/// The published JSON Schema of one `--format jsonl` line.
pub fn line_schema() -> serde_json::Value {
    schemars::schema_for!(Line).to_value()
}

/// Where a recording goes.
#[derive(Clone, Debug)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

impl Output {
    /// Checks the destination before anything runs: its directory must exist
    /// and be writable. Fails with one line naming the path.
    pub fn prepare(path: &Path) -> anyhow::Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self::Stdout);
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(exit::failure(
                exit::FAILURE,
                format!(
                    "cannot write {}: directory {} does not exist; create it or choose another -o",
                    path.display(),
                    dir.display()
                ),
            ));
        }
        if path.is_dir() {
            return Err(exit::failure(
                exit::FAILURE,
                format!(
                    "cannot write {}: it is a directory; give a file name with -o",
                    path.display()
                ),
            ));
        }
        if rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_err() {
            return Err(exit::failure(
                exit::FAILURE,
                format!(
                    "cannot write {}: directory {} is not writable",
                    path.display(),
                    dir.display()
                ),
            ));
        }
        Ok(Self::File(path.to_path_buf()))
    }

    /// Writes `rec` completely or not at all: to a temporary name in the same
    /// directory, flushed, then renamed over the destination.
    pub fn write(&self, rec: &Recording) -> anyhow::Result<()> {
        match self {
            Self::Stdout => {
                let mut out = std::io::stdout().lock();
                serde_json::to_writer(&mut out, rec).context("writing the recording to stdout")?;
                writeln!(out).context("writing the recording to stdout")?;
                Ok(())
            }
            Self::File(path) => write_atomic(path, |w| {
                serde_json::to_writer(&mut *w, rec)?;
                writeln!(w)?;
                Ok(())
            }),
        }
    }
}

/// Writes a file through a temporary sibling and a rename: created with
/// `O_EXCL` under an unpredictable name (`.NAME.XXXXXX.tmp`) in the target's
/// directory, filled, flushed, synced, given to the invoking user under
/// sudo, and renamed over `path` (a symbolic link there is replaced, its
/// target untouched). On any failure the temporary file is removed.
///
/// A character device (`/dev/null`) or a FIFO already at `path` is written
/// as it is, opened without blocking: a FIFO nobody reads is refused at
/// once rather than waited on forever.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    write_file(path, true, fill)
}

/// [`write_atomic`] for a file only vmscope names, in a directory others
/// may write to (the flight recorder's): anything but a regular file or a
/// symbolic link at `path` (a FIFO, a device, a socket) is refused, never
/// written to, so no one can make the writer wait.
pub fn write_atomic_regular(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    write_file(path, false, fill)
}

fn write_file(
    path: &Path,
    special: bool,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    let result = (|| -> anyhow::Result<()> {
        match std::fs::symlink_metadata(path).map(|m| m.file_type()) {
            Ok(t) if t.is_symlink() => {
                // Replaced, never written through, unless it leads to
                // something no file should replace (`/dev/stdout`).
                if let Ok(m) = std::fs::metadata(path)
                    && !m.is_file()
                {
                    let to = std::fs::read_link(path).unwrap_or_default();
                    anyhow::bail!(
                        "refusing to replace the symbolic link {} (to {}, not a regular file); \
                         use - for stdout or choose another path",
                        path.display(),
                        to.display()
                    );
                }
            }
            // `/dev/null`, a FIFO: written as they are.
            Ok(t) if special && (t.is_char_device() || t.is_fifo()) => {
                return write_special(path, fill);
            }
            Ok(t) if !special && t.is_fifo() => {
                anyhow::bail!("refusing to write {}: it is a FIFO", path.display())
            }
            Ok(t) if !t.is_file() && !t.is_symlink() => {
                anyhow::bail!("refusing to write {}: not a regular file", path.display())
            }
            _ => {}
        }
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            // What File::create gives (less the umask), not tempfile's 0600.
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        // The path is removed when `tmp_path` drops, unless persisted.
        let (f, tmp_path) = tmp.into_parts();
        let mut w = std::io::BufWriter::new(f);
        fill(&mut w)?;
        let f = w.into_inner().context("flushing")?;
        give_to_invoker(&f)?;
        f.sync_all().context("syncing")?;
        drop(f);
        tmp_path
            .persist(path)
            .map_err(|e| e.error)
            .with_context(|| format!("renaming to {}", path.display()))?;
        // The rename itself, durable: best effort.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.with_context(|| format!("writing {}", path.display()))
}

/// Writes into a character device or FIFO already at `path`.
fn write_special(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| no_reader(path, e))
        .with_context(|| format!("opening {}", path.display()))?;
    let t = f.metadata().context("examining it")?.file_type();
    anyhow::ensure!(
        t.is_char_device() || t.is_fifo(),
        "{} changed while being opened",
        path.display()
    );
    blocking(&f).with_context(|| format!("opening {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    fill(&mut w)?;
    w.into_inner().context("flushing")?;
    Ok(())
}

/// Opening a FIFO for writing without blocking fails with ENXIO when no
/// one has it open for reading: said in words.
fn no_reader(path: &Path, e: std::io::Error) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::ENXIO) {
        anyhow::anyhow!(
            "refusing to write {}: it is a FIFO that no process is reading, so writing would \
             wait forever; start its reader first or choose another path",
            path.display()
        )
    } else {
        e.into()
    }
}

/// Writes to a file opened with `O_NONBLOCK` (so that the open could not
/// hang) block again, as for any output.
fn blocking(f: &std::fs::File) -> std::io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(f)?;
    fcntl_setfl(f, flags - OFlags::NONBLOCK)?;
    Ok(())
}

/// Reads a recording (a JSON document or a `--format jsonl` stream),
/// rejecting other schema versions with a clear message.
pub fn read(path: &Path) -> anyhow::Result<Recording> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    from_str(&text).with_context(|| format!("{} is not a vmscope recording", path.display()))
}

pub fn from_str(text: &str) -> anyhow::Result<Recording> {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first.trim_start().starts_with("{\"type\":\"header\"") {
        return from_jsonl(text);
    }
    let v: serde_json::Value = serde_json::from_str(text).context("invalid JSON")?;
    check_version(&v)?;
    serde_json::from_value(v).context("fields do not match the recording schema")
}

fn check_version(v: &serde_json::Value) -> anyhow::Result<()> {
    match v.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(SCHEMA_VERSION) => {}
        Some(n) => anyhow::bail!(
            "schema_version {n} is not supported (this vmscope reads {SCHEMA_VERSION})"
        ),
        None => anyhow::bail!("no schema_version field"),
    }
    Ok(())
}

/// Reassembles a `--format jsonl` stream into one recording.
pub fn from_jsonl(text: &str) -> anyhow::Result<Recording> {
    let mut samples = Vec::new();
    let mut rec = None;
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_str(l).with_context(|| format!("line {}: invalid JSON", i + 1))?;
        if v.get("type").and_then(serde_json::Value::as_str) != Some("sample") {
            check_version(&v).with_context(|| format!("line {}", i + 1))?;
        }
        let line: Line = serde_json::from_value(v)
            .with_context(|| format!("line {}: not a vmscope stream line", i + 1))?;
        match line {
            Line::Header(_) => {}
            Line::Sample(s) => samples.push(*s),
            Line::Recording(r) => rec = Some(r),
        }
    }
    let mut rec = rec.context(
        "the stream has no final recording line; vmscope was stopped before it could finish",
    )?;
    rec.samples = samples;
    Ok(*rec)
}

/// A recording's header as it stands now: what is known of `source` (its
/// probes, fault source, cgroup scheme), the kernel, this command line and
/// the start time.
pub fn header(
    source: &crate::source::Source,
    interval: std::time::Duration,
    scope: RecordingScope,
    command: Option<Vec<String>>,
) -> Header {
    Header {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        kernel: crate::source::kernel::system::kernel_info(),
        command_line: std::env::args().collect(),
        command,
        scope,
        interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        start_time: crate::timefmt::rfc3339(std::time::SystemTime::now()),
        probes: source.probes.clone(),
        fault_source: source.fault_source,
        fault_classes: (0..vmscope_common::FAULT_CLASSES)
            .map(|k| vmscope_common::fault_class_name(k).to_string())
            .collect(),
        cgroup_scheme: source.cgroups.clone(),
        working_set: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
    }

    /// `f` on another thread; its result, or `None` if it has not returned
    /// within 5 s (it would block forever).
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }

    fn write_hello(w: &mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()> {
        w.write_all(b"hello\n")?;
        Ok(())
    }

    /// A FIFO nobody reads at an output path: refused at once, by the
    /// atomic writer, the jsonl stream and the flight recorder's writer,
    /// never waited on.
    #[test]
    fn a_fifo_without_a_reader_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("out.json");
        mkfifo(&fifo);
        let p = fifo.clone();
        let e = within_5s(move || write_atomic(&p, write_hello).map_err(|e| format!("{e:#}")))
            .expect("write_atomic waited for a reader")
            .expect_err("written to a FIFO nobody reads");
        assert!(e.contains("no process is reading"), "{e}");
        let p = fifo.clone();
        let e = within_5s(move || {
            JsonlWriter::create(&Output::File(p))
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        })
        .expect("the jsonl stream waited for a reader")
        .expect_err("a jsonl stream into a FIFO nobody reads");
        assert!(e.contains("no process is reading"), "{e}");
        let p = fifo.clone();
        let e =
            within_5s(move || write_atomic_regular(&p, write_hello).map_err(|e| format!("{e:#}")))
                .expect("the flight recorder's writer waited for a reader")
                .expect_err("an OOM recording into a FIFO");
        assert!(e.contains("it is a FIFO"), "{e}");
        assert!(fifo.exists(), "left as it was");
    }

    /// With a reader, the FIFO of `-o` is written; the flight recorder
    /// still never writes into one (its reader may never read).
    #[test]
    fn a_read_fifo_is_written_but_never_by_the_flight_recorder() {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("out.json");
        mkfifo(&fifo);
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("reader");
        let e = write_atomic_regular(&fifo, write_hello).expect_err("into a FIFO");
        assert!(format!("{e:#}").contains("it is a FIFO"), "{e:#}");
        write_atomic(&fifo, write_hello).expect("written to the FIFO");
        let mut got = String::new();
        let _ = reader.read_to_string(&mut got);
        assert_eq!(got, "hello\n");
        // A device other than a FIFO is not the flight recorder's either.
        let e = write_atomic_regular(Path::new("/dev/null"), write_hello).expect_err("device");
        assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        write_atomic(Path::new("/dev/null"), write_hello).expect("-o /dev/null");
    }

    #[test]
    fn reader_rejects_other_versions_and_non_recordings() {
        let e = from_str(r#"{"schema_version": 99}"#).expect_err("newer version");
        assert!(format!("{e:#}").contains("schema_version 99 is not supported"));
        assert!(from_str("{}").is_err());
        assert!(from_str("not json").is_err());
        assert!(from_str("").is_err());
    }

    #[test]
    fn truncated_stream_says_it_has_no_summary() {
        let header = r#"{"type":"header","schema_version":1}"#;
        let e = from_str(header).expect_err("incomplete header");
        assert!(format!("{e:#}").contains("line 1"), "{e:#}");
        let sample = serde_json::to_string(&Line::Sample(Box::default())).expect("encodes");
        let text = format!("{sample}\n{sample}\n");
        let e = from_jsonl(&text).expect_err("no summary line");
        assert!(
            format!("{e:#}").contains("no final recording line"),
            "{e:#}"
        );
    }
}
