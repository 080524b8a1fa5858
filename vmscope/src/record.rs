//! The recording document: schema, writer (atomic), reader (validating).

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::{
    child::ChildReport,
    collect::Sample,
    exit,
    kernel::system::KernelInfo,
    loader::{FaultSource, ProbeStatus},
    model::{FaultTotals, Lost, ProcessTotal},
};

/// Bumped on any incompatible change to [`Recording`].
pub const SCHEMA_VERSION: u32 = 1;

/// How many processes `processes` lists (largest fault count first).
pub const TOP_PROCESSES: usize = 50;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Tool {
    pub fn this() -> Self {
        Self {
            name: "vmscope".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// Every process.
    System,
    /// The given pids and their descendants.
    Pids,
    /// The wrapped command's process tree.
    Command,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scope {
    pub kind: ScopeKind,
    pub pids: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Totals {
    /// System-wide, whatever the scope.
    pub system_faults: FaultTotals,
    /// The scope's processes (all of them for a system-wide recording).
    pub scope_faults: FaultTotals,
    /// Everything else: eBPF counters, madvise, histograms, vmstat, PSI.
    #[serde(flatten)]
    pub vm: crate::totals::VmTotals,
}

/// One recording. Raw cumulative `samples` are kept next to the summaries so
/// later tools can recompute with current code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recording {
    /// What was known at the start (also the first line of a jsonl stream).
    /// Its `probes` are as they stood at the end.
    #[serde(flatten)]
    pub header: Header,
    pub end_time: String,
    pub duration_ns: u64,
    /// Set when the recording ended on a signal (e.g. "SIGINT").
    pub interrupted_by: Option<String>,
    pub child: Option<ChildReport>,
    pub totals: Totals,
    /// At most `processes_limit` rows.
    pub processes: Vec<ProcessTotal>,
    pub processes_limit: usize,
    pub lost: Lost,
    /// What happened in each interval, derived from `samples`.
    #[serde(default)]
    pub series: crate::series::Series,
    pub samples: Vec<Sample>,
}

/// The fields of a recording known when it starts: the first line of a
/// `--format jsonl` stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    pub schema_version: u32,
    pub tool: Tool,
    pub kernel: KernelInfo,
    /// vmscope's own command line.
    pub command_line: Vec<String>,
    /// The wrapped command, if any.
    pub command: Option<Vec<String>>,
    pub scope: Scope,
    pub interval_ns: u64,
    pub start_time: String,
    pub probes: Vec<ProbeStatus>,
    pub fault_source: FaultSource,
    /// Names of the per-class slots in `samples[].faults.user/kernel`.
    pub fault_classes: Vec<String>,
}

/// One line of a `--format jsonl` stream: a header, then one sample per
/// interval, then the whole recording without its samples (they are the
/// lines above it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Box<Header>),
    Sample(Box<Sample>),
    Recording(Box<Recording>),
}

/// Appends whole lines to a `--format jsonl` stream, flushing each so that
/// `tail -f` sees every interval as it ends.
pub struct JsonlWriter {
    out: Box<dyn std::io::Write + Send>,
    what: String,
}

impl JsonlWriter {
    /// Creates (truncates) the file, or uses stdout. The stream is written
    /// in place, not renamed: it is meant to be read while it grows.
    pub fn create(output: &Output) -> anyhow::Result<Self> {
        Ok(match output {
            Output::Stdout => Self {
                out: Box::new(std::io::stdout()),
                what: "stdout".into(),
            },
            Output::File(path) => Self {
                out: Box::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("creating {}", path.display()))?,
                ),
                what: path.display().to_string(),
            },
        })
    }

    pub fn line(&mut self, line: &Line) -> anyhow::Result<()> {
        let mut buf = serde_json::to_vec(line).context("encoding a line")?;
        buf.push(b'\n');
        self.out
            .write_all(&buf)
            .and_then(|()| self.out.flush())
            .with_context(|| format!("writing {}", self.what))
    }
}

/// The published JSON Schema of a recording (`vmscope/schema/`).
pub fn recording_schema() -> serde_json::Value {
    schemars::schema_for!(Recording).to_value()
}

/// The published JSON Schema of one `--format jsonl` line.
pub fn line_schema() -> serde_json::Value {
    schemars::schema_for!(Line).to_value()
}

/// `vmscope schema`.
pub fn print_schema(jsonl: bool) -> anyhow::Result<u8> {
    let s = if jsonl {
        line_schema()
    } else {
        recording_schema()
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &s)
        .and_then(|()| writeln!(out).map_err(serde_json::Error::io))
        .context("writing the schema to stdout")?;
    Ok(0)
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

/// Writes a file through a temporary sibling and a rename.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| -> anyhow::Result<()> {
        let f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = std::io::BufWriter::new(f);
        fill(&mut w)?;
        let f = w.into_inner().context("flushing")?;
        f.sync_all().context("syncing")?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn published(name: &str) -> serde_json::Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("schema")
            .join(name);
        let text = std::fs::read_to_string(&path).expect("published schema");
        serde_json::from_str(&text).expect("schema is JSON")
    }

    #[test]
    fn published_schemas_are_current() {
        let hint = "regenerate with `vmscope schema > vmscope/schema/recording.schema.json` \
                    and `vmscope schema --jsonl > vmscope/schema/jsonl-line.schema.json`";
        assert!(
            published("recording.schema.json") == recording_schema(),
            "{hint}"
        );
        assert!(
            published("jsonl-line.schema.json") == line_schema(),
            "{hint}"
        );
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
