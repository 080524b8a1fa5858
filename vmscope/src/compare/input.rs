//! Reading one side of the comparison: a recording or a bench file, size-
//! capped, refused in one line when it is neither.

use std::path::Path;

use crate::model::recording::Recording;
use crate::{
    document::{self},
    exit,
    model::{
        bench::{self, BENCH_KIND, BenchFile},
        metrics::{self, MetricSpec, RunMetric},
    },
};

/// One side of the comparison as read from its file.
pub enum Input {
    Recording(Box<Recording>),
    Bench(Box<BenchFile>),
}

impl Input {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Self::Recording(_) => "recording",
            Self::Bench(_) => "bench",
        }
    }

    pub(super) fn describe(&self) -> &'static str {
        match self {
            Self::Recording(_) => "a recording",
            Self::Bench(_) => "a bench file",
        }
    }

    pub(super) fn name(&self) -> String {
        match self {
            Self::Recording(r) => r
                .header
                .command
                .as_ref()
                .map_or_else(|| "system-wide recording".into(), |c| c.join(" ")),
            Self::Bench(b) => b.name.clone(),
        }
    }

    pub(super) fn rmap_method(&self) -> Option<String> {
        let rec = match self {
            Self::Recording(r) => r.as_ref(),
            Self::Bench(b) => b.runs.first()?,
        };
        rec.totals.vm.rmap.as_ref().map(|r| match r.method {
            crate::model::rmap::Method::StackSampling => {
                format!("stack sampling at {} Hz", r.rate_hz)
            }
            crate::model::rmap::Method::DirectTiming => match (&r.sampled, &r.agreement) {
                (Some(s), Some(a)) => format!(
                    "direct timing (fentry/fexit, calibrated), primary; stack sampling at {} Hz \
                     beside it {}",
                    s.rate_hz,
                    if a.agree { "agrees" } else { "disagrees" }
                ),
                _ => "direct timing (fentry/fexit)".to_string(),
            },
        })
    }

    pub(super) fn recordings(&self) -> Vec<&Recording> {
        match self {
            Self::Recording(r) => vec![r],
            Self::Bench(b) => b.runs.iter().collect(),
        }
    }

    /// Each run's figures, with the `--metric` ones; a run where one
    /// cannot be read fails, naming the run.
    pub(super) fn runs(&self, specs: &[MetricSpec]) -> Result<Vec<Vec<RunMetric>>, String> {
        let recs = self.recordings();
        let n = recs.len();
        recs.into_iter()
            .enumerate()
            .map(|(i, r)| {
                metrics::run_metrics_with(r, specs)
                    .and_then(comparable)
                    .map_err(|e| {
                        if n > 1 {
                            format!("run {} of {n}: {e}", i + 1)
                        } else {
                            e
                        }
                    })
            })
            .collect()
    }
}

/// The largest magnitude a metric may have to be compared: far beyond any
/// measurement (counters are 64-bit), and small enough that the sums of
/// squares behind a standard deviation stay finite. A value beyond it (or
/// not finite) is damage, so the file is refused rather than compared
/// into infinities and NaNs.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// A run's figures, unless one of them is beyond [`MAX_MAGNITUDE`].
pub(super) fn comparable(m: Vec<RunMetric>) -> Result<Vec<RunMetric>, String> {
    match m
        .iter()
        .find(|r| !(r.value.is_finite() && r.value.abs() <= MAX_MAGNITUDE))
    {
        Some(r) => Err(format!(
            "{} is {:e}, beyond what can be compared (at most {MAX_MAGNITUDE:e} in size); \
             the file looks damaged",
            r.name, r.value
        )),
        None => Ok(m),
    }
}

/// One line for the user, naming the file.
pub fn bad_input(msg: String) -> anyhow::Error {
    exit::failure(exit::USAGE, msg.replace('\n', " "))
}

/// Whether `text` is a vmscope document of this `kind`, even a broken one
/// (`kind` is its first field, so it shows in the first bytes).
pub fn has_kind(text: &str, kind: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => v.get("kind").and_then(serde_json::Value::as_str) == Some(kind),
        Err(_) => text
            .get(..text.len().min(256))
            .is_some_and(|head| head.contains(&format!("\"{kind}\""))),
    }
}

/// "FILE is not a vmscope WHAT: why", noting a file that ends too soon; one
/// line, exit 2.
pub fn not_a(path: &Path, what: &str, e: &anyhow::Error) -> anyhow::Error {
    let truncated = e
        .chain()
        .filter_map(|c| c.downcast_ref::<serde_json::Error>())
        .any(serde_json::Error::is_eof);
    let hint = if truncated {
        " (the file looks truncated)"
    } else {
        ""
    };
    bad_input(format!(
        "{} is not a vmscope {what}: {e:#}{hint}",
        path.display()
    ))
}

/// The largest input `compare` and `report` read: a day's recording at a
/// 1 s interval is tens of MB, so a bigger file is a mistake, and its
/// text and parsed form would take several times its size in memory.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads the text of an input file of at most [`MAX_INPUT_BYTES`], refusing
/// a larger one in one line before reading it (a regular file by its size,
/// anything else, a pipe say, once that much has been read).
pub fn read_input(path: &Path) -> anyhow::Result<String> {
    read_capped(path, MAX_INPUT_BYTES)
}

pub(super) fn read_capped(path: &Path, limit: u64) -> anyhow::Result<String> {
    use std::io::Read as _;
    let shown = path.display();
    let cannot = |e: std::io::Error| bad_input(format!("cannot read {shown}: {e}"));
    let too_big = || {
        bad_input(format!(
            "{shown} is larger than the {} MiB vmscope reads; give a recording or a bench file",
            limit >> 20
        ))
    };
    let f = std::fs::File::open(path).map_err(cannot)?;
    let meta = f.metadata().map_err(cannot)?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })
}

/// Reads a recording (JSON or jsonl) or a bench file, telling them apart by
/// the bench file's `"kind": "vmscope-bench"`.
pub fn load(path: &Path) -> anyhow::Result<Input> {
    let text = read_input(path)?;
    parse(path, &text)
}

/// [`load`] on the text of the file at `path` (named in messages).
pub fn parse(path: &Path, text: &str) -> anyhow::Result<Input> {
    let shown = path.display();
    if text.trim().is_empty() {
        return Err(bad_input(format!(
            "{shown} is empty; give a recording or a bench file"
        )));
    }
    let is_bench = has_kind(text, BENCH_KIND);
    let why = |what: &str, e: anyhow::Error| not_a(path, what, &e);
    if is_bench {
        let b = bench::from_str(text).map_err(|e| why("bench file", e))?;
        Ok(Input::Bench(Box::new(b)))
    } else {
        let r = document::from_str(text).map_err(|e| why("recording", e))?;
        Ok(Input::Recording(Box::new(r)))
    }
}
