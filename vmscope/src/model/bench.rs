//! The bench file: every run's recording and each figure summarised over
//! the runs. Written by `bench` and `lab`, read by `compare` and `report`.

use std::collections::BTreeMap;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::model::{
    metrics::{self, MetricSummary, RunMetric},
    recording::{Recording, Tool},
};

/// Bumped on any incompatible change to [`BenchFile`].
pub const BENCH_SCHEMA_VERSION: u32 = 1;

/// The `kind` of a bench file (a recording has none).
pub const BENCH_KIND: &str = "vmscope-bench";

/// Timing of the runs, in seconds, in the usual benchmark-tool shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchResult {
    pub command: String,
    pub mean: f64,
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Mean user and system CPU time.
    pub user: f64,
    pub system: f64,
    /// Wall time of each run.
    pub times: Vec<f64>,
    pub exit_codes: Vec<i32>,
}

/// A bench file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchFile {
    #[schemars(extend("const" = BENCH_KIND))]
    pub kind: String,
    pub schema_version: u32,
    pub tool: Tool,
    /// `--name`, or the command line.
    pub name: String,
    pub command: Vec<String>,
    pub warmup: u32,
    /// Runs summarised (failed runs excluded unless `--ignore-failure`).
    pub runs_requested: u32,
    pub trim: usize,
    pub results: Vec<BenchResult>,
    /// Per metric: its unit, better direction, values per run and summary.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Every run's full recording, in run order.
    pub runs: Vec<Recording>,
}

impl BenchFile {
    /// Each run's figures.
    pub fn run_metrics(&self) -> Vec<Vec<RunMetric>> {
        self.runs.iter().map(metrics::run_metrics).collect()
    }
}

/// The published JSON Schema of a bench file (`vmscope/schema/`).
pub fn bench_schema() -> serde_json::Value {
    schemars::schema_for!(BenchFile).to_value()
}

pub fn from_str(text: &str) -> anyhow::Result<BenchFile> {
    let v: serde_json::Value = serde_json::from_str(text).context("invalid JSON")?;
    if v.get("kind").and_then(serde_json::Value::as_str) != Some(BENCH_KIND) {
        anyhow::bail!("no \"kind\": \"{BENCH_KIND}\" field");
    }
    match v.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(BENCH_SCHEMA_VERSION) => {}
        Some(n) => anyhow::bail!(
            "schema_version {n} is not supported (this vmscope reads {BENCH_SCHEMA_VERSION})"
        ),
        None => anyhow::bail!("no schema_version field"),
    }
    serde_json::from_value(v).context("fields do not match the bench schema")
}
