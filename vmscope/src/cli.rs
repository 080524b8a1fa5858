//! The command line (clap derive). Every subcommand and flag lives here.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

use crate::timefmt::{parse_history, parse_interval, parse_period, parse_run_length};

#[derive(Debug, Parser)]
#[command(
    name = "vmscope",
    version,
    about = "Watch the Linux virtual-memory system at work (eBPF)",
    after_help = "Exit codes: 0 ok, 1 failure, 2 usage error, 77 not enough privilege \
                  (needs root or CAP_BPF+CAP_PERFMON); when wrapping a command: its own code, \
                  128+N if it died of signal N, 125 if vmscope failed, 127 if not found."
)]
pub struct Cli {
    /// Show diagnostics, including those reported by the eBPF programs.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Report what this kernel lets vmscope do: hooks, attach kinds, privileges.
    Doctor(DoctorArgs),
    /// Record VM activity to a JSON document, optionally wrapping a command.
    Record(RecordArgs),
    /// Benchmark the probes' cost per page fault against nothing attached
    /// and an empty program on the same tracepoints.
    Overhead(OverheadArgs),
    /// Live view: rates, latency histograms and who pays, refreshed every
    /// interval (keys: ? for help, q to quit).
    Top(TopArgs),
    /// Serve metrics for Prometheus (OpenMetrics or Prometheus text) on
    /// /metrics, with /healthz.
    Serve(ServeArgs),
    /// Turn a recording, a bench file or a comparison (compare's JSON, or
    /// BASE and NEW) into a self-contained HTML page with plots.
    Report(ReportArgs),
    /// Run a command several times, each run recorded, and summarise.
    Bench(BenchArgs),
    /// Compare two recordings or two bench files: BASE, NEW, change, win or
    /// loss, and with several runs a 95% confidence interval.
    Compare(CompareArgs),
    /// Built-in workloads that reproduce classic VM experiments.
    #[command(subcommand)]
    Workload(Workload),
    /// One-command experiments: a built-in workload in two variants, every
    /// run recorded, compared, with the kernel-side evidence.
    #[command(subcommand)]
    Lab(Lab),
    /// Print the JSON Schema of recordings (or of `--format jsonl` lines,
    /// bench files, or `compare --format json` documents).
    Schema(SchemaArgs),
    /// Convert a recording into Parquet tables (samples, series, processes,
    /// cgroups, OOM kills, histograms) for DuckDB, pandas or Polars.
    Export(ExportArgs),
}

#[derive(Debug, Subcommand)]
pub enum Lab {
    /// MADV_DONTNEED against MADV_FREE (`workload lazyfree`).
    Lazyfree(LazyfreeLabArgs),
    /// Reclaim cost with 1 sharer against N (`workload rmap`); needs swap.
    Rmap(RmapLabArgs),
    /// Page faults with no storm against faults beside an mprotect (or
    /// mmap) storm on the same mapping (`workload mmap-lock`), recorded
    /// with the mmap_lock probes.
    MmapLock(MmapLockLabArgs),
    /// The working set against a hot set known exactly (`workload
    /// hotset`): measured, then grown and measured again, by each method
    /// this kernel offers.
    Wss(WssLabArgs),
}

#[derive(Debug, Args)]
pub struct WssLabArgs {
    /// Resident anonymous memory of the workload.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_bytes)]
    pub size: u64,

    /// Its hot set at first.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_bytes)]
    pub hot: u64,

    /// Its hot set after the first window.
    #[arg(long, value_name = "BYTES", default_value = "512M", value_parser = parse_bytes)]
    pub grow: u64,

    /// The working set's window.
    #[arg(long, value_name = "DUR", default_value = "10s",
          value_parser = crate::timefmt::parse_wss_window)]
    pub window: Duration,

    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LabCommon {
    /// Recorded runs of each variant (interleaved).
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..))]
    pub runs: u32,

    /// Where the two bench files and compare.json go
    /// [default: ./vmscope-lab-NAME].
    #[arg(short, long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,

    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    pub format: CompareFormat,

    /// A change smaller than this (percent) is not called a regression.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub threshold: f64,
}

#[derive(Debug, Args)]
pub struct LazyfreeLabArgs {
    #[command(flatten)]
    pub common: LabCommon,

    #[command(flatten)]
    pub work: LazyfreeWork,
}

#[derive(Debug, Args)]
pub struct MmapLockLabArgs {
    #[command(flatten)]
    pub common: LabCommon,

    /// The NEW variant's storm (BASE has none).
    #[arg(long, value_enum, default_value_t = Storm::Mprotect)]
    pub storm: Storm,

    #[command(flatten)]
    pub work: MmapLockWork,
}

#[derive(Debug, Args)]
pub struct RmapLabArgs {
    #[command(flatten)]
    pub common: LabCommon,

    /// Sharers of the NEW variant (BASE has 1).
    #[arg(long, default_value_t = 64)]
    pub sharers: usize,

    #[command(flatten)]
    pub work: RmapWork,

    /// Set up a zram swap device of SIZE for the runs, and remove it after.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub setup_zram: Option<u64>,
}

#[derive(Debug, Args)]
#[command(mut_arg("interval", |a| a.help(
    "Refresh interval, 10ms to 1h (`+`/`-` change it while running)"
)))]
pub struct TopArgs {
    #[command(flatten)]
    pub sampling: SamplingArgs,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Print plain-text snapshots to stdout instead of the screen.
    #[arg(short, long)]
    pub batch: bool,

    /// With --batch: how many snapshots (one per interval).
    #[arg(short = 'n', long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Start on the cgroup table (`c` toggles it); with --batch, print the
    /// cgroup table after the process table.
    #[arg(long)]
    pub cgroups: bool,

    #[command(flatten)]
    pub flight: FlightArgs,
}

/// How often `top`, `serve` and `record` sample, and whether they attach
/// the opt-in mmap_lock probes. Each command words `--interval`'s help for
/// what the interval means to it.
#[derive(Clone, Debug, Args)]
pub struct SamplingArgs {
    #[arg(short, long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Attach the mmap_lock probes: wait histograms for read and write
    /// locks, failed trylocks, write hold time and per-process waits. Off by
    /// default: they run on every lock operation (see docs/cost.md).
    #[arg(long)]
    pub mmap_lock: bool,

    /// Time munmap and mprotect calls (their latency histograms). Off by
    /// default: two syscall events per call cost programs that map and
    /// unmap in a loop (see docs/cost.md). madvise is always timed.
    #[arg(long)]
    pub syscall_latency: bool,

    /// Count huge-page faults per process and per cgroup (faults that got
    /// a huge page, as the memory cgroup counts them; 6.16 on). Off by
    /// default: its hook runs on every page fault (see docs/cost.md).
    #[arg(long)]
    pub thp_faults: bool,

    /// Measure the working set: the bytes each followed process (every
    /// process, when none is followed) touched within --wss-window, and
    /// how long the rest lay idle. Clears the processes' referenced bits
    /// once a window; see docs/working-set.md for its cost and errors.
    #[arg(long)]
    pub working_set: bool,

    /// The working set's window: bytes touched within it (100ms to 1h).
    #[arg(long, value_name = "DUR", default_value = "10s", requires = "working_set",
          value_parser = crate::timefmt::parse_wss_window)]
    pub wss_window: Duration,

    /// How the working set is measured: `referenced_scan` (per process,
    /// every kernel), `mglru` (per memory cgroup, from the
    /// multi-generational LRU's generations), `damon` (per followed
    /// process, from DAMON's access sampling), or `auto`: mglru when the
    /// kernel offers it and the scope is a cgroup or the whole system, else
    /// the scan. `vmscope doctor` lists what this kernel offers.
    #[arg(
        long,
        value_name = "METHOD",
        default_value = "auto",
        requires = "working_set"
    )]
    pub wss_method: WssMethodArg,
}

/// `--wss-method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WssMethodArg {
    Auto,
    #[value(name = "referenced_scan")]
    ReferencedScan,
    Mglru,
    Damon,
}

/// Whose processes `top` and `record` follow, and how often they sample
/// kernel stacks for the rmap and CPU-cost figures (`serve` does neither).
#[derive(Clone, Debug, Args)]
pub struct ProcessArgs {
    /// Restrict per-process figures to these pids and their descendants.
    #[arg(short, long, value_delimiter = ',')]
    pub pid: Vec<u32>,

    /// Kernel-stack samples per second per CPU for the rmap and CPU-cost
    /// figures (0 turns sampling off).
    #[arg(long, value_name = "HZ", default_value_t = crate::model::rmap::DEFAULT_HZ,
          value_parser = clap::value_parser!(u32).range(0..=10000))]
    pub sample_hz: u32,
}

/// The flight recorder's options, shared by `top` and `serve`.
#[derive(Clone, Debug, Args)]
pub struct FlightArgs {
    /// Keep the last DUR of samples in memory (the flight recorder; off by
    /// default; at most 1h), for --on-oom.
    #[arg(long, value_name = "DUR", value_parser = parse_history)]
    pub history: Option<Duration>,

    /// At each OOM episode (kills close together), write the --history
    /// window as a recording to DIR/oom-TIME-PID.json, named after its
    /// first kill (needs --history).
    #[arg(long, value_name = "DIR")]
    pub on_oom: Option<PathBuf>,

    /// Keep at most N recordings in the --on-oom DIR: the oldest
    /// vmscope-written oom-*.json go first (1 to 10000).
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub on_oom_keep: u32,

    /// Keep at most BYTES of recordings in the --on-oom DIR (e.g. 256M):
    /// the oldest vmscope-written oom-*.json go first; a recording larger
    /// than this is not written.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_bytes)]
    pub on_oom_max_bytes: u64,
}

#[derive(Debug, Args)]
#[command(mut_arg("interval", |a| a.help("How often the metrics are refreshed (10ms to 1h)")))]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback must be given explicitly.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub listen: std::net::SocketAddr,

    #[command(flatten)]
    pub sampling: SamplingArgs,

    /// Also export per-process series for the N processes with the most
    /// faults (0: none, which keeps label cardinality fixed; at most 1000).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub per_process: u16,

    /// Also export per-cgroup series for the N most active cgroups (0:
    /// none; at most 1000). See docs/serve.md for the ranking and ageing.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub per_cgroup: u16,

    #[command(flatten)]
    pub flight: FlightArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A recording (JSON document or jsonl stream), a bench file, or the
    /// output of `compare --format json`; with NEW, the baseline.
    #[arg(value_name = "FILE|BASE")]
    pub file: PathBuf,

    /// Compare FILE (as BASE) with this, as `vmscope compare` does: two
    /// recordings or two bench files.
    #[arg(value_name = "NEW")]
    pub new: Option<PathBuf>,

    /// Output HTML (`-` for stdout) [default: FILE with .html; with NEW,
    /// BASE-vs-NEW.html beside BASE].
    #[arg(short, long)]
    pub output: Option<PathBuf>,

    /// Also write each plot as an SVG file into this directory.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,

    /// Also write each plot as a PNG file into this directory (text drawn
    /// with the system's fonts).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,

    /// With BASE and NEW: a change smaller than this (percent) is not
    /// called a regression, as in `compare`.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub threshold: f64,
}

#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Recorded runs.
    #[arg(short, long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Unrecorded runs first.
    #[arg(short, long, default_value_t = 0)]
    pub warmup: u32,

    /// Drop the K lowest and K highest values of each metric from its mean.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub trim: usize,

    /// The bench file (`-` for stdout).
    #[arg(short, long, default_value = "vmscope-bench.json")]
    pub output: PathBuf,

    /// A label for this side of a comparison [default: the command line].
    #[arg(long)]
    pub name: Option<String>,

    /// A shell command run before each run (e.g. to drop caches).
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// Go on when a run fails (it is still summarised).
    #[arg(long)]
    pub ignore_failure: bool,

    /// Show each run's output (on stderr); it is always kept in the run's
    /// recording.
    #[arg(long)]
    pub show_output: bool,

    /// A figure read from each run's output, as in `compare --metric`
    /// (shown in the summary).
    #[arg(long, value_name = "NAME=REGEX")]
    pub metric: Vec<crate::model::metrics::MetricSpec>,

    /// Sampling interval of each run's recording (10ms to 1h).
    #[arg(short, long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Run the command as root even when vmscope was started by sudo.
    #[arg(long)]
    pub as_root: bool,

    /// Record each run with the mmap_lock probes (`record --mmap-lock`).
    #[arg(long)]
    pub mmap_lock: bool,

    /// Record each run with munmap and mprotect timed (`record
    /// --syscall-latency`).
    #[arg(long)]
    pub syscall_latency: bool,

    /// The command to benchmark (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Table,
    Markdown,
    Json,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a recording or a bench file.
    pub base: PathBuf,
    /// The candidate, of the same kind.
    pub new: PathBuf,
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    pub format: CompareFormat,
    /// A change smaller than this (percent) is not called a regression.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub threshold: f64,
    /// Exit 1 when a significant regression exceeds the threshold.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Only these metrics (the names in the metric column) can fail the
    /// run; implies --fail-on-regression. Gating on every row means some
    /// forty tests at p < 0.05, so an unrelated row will now and then be a
    /// chance "regression". Repeatable or comma-separated.
    #[arg(long, value_name = "METRIC", value_delimiter = ',')]
    pub fail_on: Vec<String>,
    /// A figure read from each run's kept command output: the last match of
    /// REGEX, its first group as a number, e.g.
    /// 'mb_s=Throughput ([0-9.]+) MB/sec'. NAME:lower for lower-is-better
    /// (default higher). Repeatable.
    #[arg(long, value_name = "NAME=REGEX")]
    pub metric: Vec<crate::model::metrics::MetricSpec>,
}

#[derive(Debug, Subcommand)]
pub enum Workload {
    /// File create/delete at 0, 1 and 4 KiB, mmap, protection-fault and
    /// page-fault latencies in microseconds.
    Lat(LatArgs),
    /// Threads fill, search and release chunks of memory with MADV_DONTNEED
    /// or MADV_FREE; reports records/s.
    Lazyfree(LazyfreeArgs),
    /// Reclaim of anonymous memory mapped by N processes: time per
    /// reclaimed page (needs root and swap).
    Rmap(RmapArgs),
    /// Writes a file faster than write-back with vm.dirty_bytes set low,
    /// so that dirty throttling puts the writer to sleep; restores the
    /// settings afterwards (needs root).
    Dirty(DirtyArgs),
    /// Threads fault fresh pages while one thread changes the same
    /// mapping's protection (or remaps a page of it) in a loop: mmap_lock
    /// contention; `--storm none` is the control.
    MmapLock(MmapLockArgs),
    /// Fragments memory, takes the remaining free huge-page-sized blocks
    /// into the hugetlb pool for the run, then faults MADV_HUGEPAGE memory:
    /// each huge page compacts directly. Puts the pool back afterwards
    /// (needs root).
    Compaction(CompactionArgs),
    /// Maps anonymous memory, writes it all once, then touches a random hot
    /// set of it (chunk by chunk) every period: a known working set. `hot
    /// SIZE` lines on stdin change the hot set while it runs.
    Hotset(HotsetArgs),
}

#[derive(Clone, Debug, Args)]
pub struct HotsetArgs {
    /// Anonymous memory mapped and written once (all of it resident).
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_bytes)]
    pub size: u64,

    /// The hot set, touched every period; rounded up to whole chunks.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_bytes)]
    pub hot: u64,

    /// The hot set's unit: aligned pieces of this size (a whole number of
    /// pages), chosen at random.
    #[arg(long, value_name = "BYTES", default_value = "2M", value_parser = parse_bytes)]
    pub chunk: u64,

    /// Every page of the hot set is touched once per period.
    #[arg(long, default_value = "200ms", value_parser = parse_period)]
    pub period: Duration,

    /// Stop after this many seconds of touching [default: run until
    /// SIGINT or SIGTERM].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: Option<u64>,

    /// Seed of the pseudo-random choice of chunks and touching order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Clone, Debug, Args)]
pub struct CompactionArgs {
    /// Anonymous memory filled, then half freed in holes smaller than a
    /// huge page.
    #[arg(long, value_name = "BYTES", default_value = "2G", value_parser = parse_bytes)]
    pub fill: u64,

    /// MADV_HUGEPAGE memory faulted afterwards: each huge page of it asks
    /// for a compaction.
    #[arg(long, value_name = "BYTES", default_value = "512M", value_parser = parse_bytes)]
    pub huge: u64,

    /// Free huge-page-sized blocks left outside the hugetlb pool (the
    /// kernel keeps some it will not hand out).
    #[arg(long, default_value_t = 64)]
    pub margin: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Storm {
    /// mprotect one page of the faulting threads' mapping back and forth
    /// (each call splits or merges it under the write lock).
    Mprotect,
    /// mmap(MAP_FIXED) over that page again and again.
    Mmap,
    /// No storm: the control.
    None,
}

#[derive(Clone, Debug, Args)]
pub struct MmapLockArgs {
    /// What the storm thread does.
    #[arg(long, value_enum, default_value_t = Storm::Mprotect)]
    pub storm: Storm,

    #[command(flatten)]
    pub work: MmapLockWork,
}

/// The mmap-lock workload's size, shared by `workload mmap-lock` and `lab
/// mmap-lock`.
#[derive(Clone, Debug, Args)]
pub struct MmapLockWork {
    /// Faulting threads [default: one per CPU].
    #[arg(short, long)]
    pub threads: Option<usize>,

    /// Fresh pages each faulting thread faults in (its slice is touched,
    /// then released with MADV_DONTNEED, until this many).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub faults: u64,

    /// Each faulting thread's slice of the shared mapping.
    #[arg(long, value_name = "BYTES", default_value = "16M", value_parser = parse_bytes)]
    pub slice: u64,
}

impl MmapLockWork {
    /// The same settings as `workload mmap-lock` arguments.
    pub fn argv(&self) -> Vec<String> {
        let mut a = vec![
            "--faults".to_string(),
            self.faults.to_string(),
            "--slice".into(),
            self.slice.to_string(),
        ];
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string()]);
        }
        a
    }
}

#[derive(Clone, Debug, Args)]
pub struct DirtyArgs {
    /// Bytes written (then fsync'd and deleted).
    #[arg(long, value_name = "BYTES", default_value = "512M", value_parser = parse_bytes)]
    pub size: u64,

    /// vm.dirty_bytes for the run (vm.dirty_background_bytes: half of it).
    #[arg(long, value_name = "BYTES", default_value = "1M", value_parser = parse_bytes)]
    pub dirty_bytes: u64,

    /// Directory of the file: on a disk filesystem (tmpfs is never
    /// throttled).
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    pub dir: std::path::PathBuf,
}

/// A byte count: `4096`, `256K`, `64M`, `1G` (binary units; `KiB`, `MB`
/// and the like also work).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s.trim())
        .map_err(|e| format!("invalid size '{s}': {e} (examples: 4096, 256K, 64M, 1G)"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FreeMode {
    /// MADV_DONTNEED: pages are freed at once; the next use faults.
    Dontneed,
    /// MADV_FREE: pages are freed only if memory runs short.
    Free,
}

#[derive(Clone, Debug, Args)]
pub struct LazyfreeArgs {
    /// How a chunk is released after each record.
    #[arg(long, value_enum, default_value_t = FreeMode::Free)]
    pub free: FreeMode,

    #[command(flatten)]
    pub work: LazyfreeWork,
}

/// The lazyfree workload's size, shared by `workload lazyfree` and `lab
/// lazyfree`.
#[derive(Clone, Debug, Args)]
pub struct LazyfreeWork {
    /// Worker threads [default: one per CPU].
    #[arg(short, long)]
    pub threads: Option<usize>,

    /// Records per thread.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,

    /// Size of one chunk (a whole number of pages).
    #[arg(long, value_name = "BYTES", default_value = "256K", value_parser = parse_bytes)]
    pub chunk_size: u64,

    /// Chunks in each thread's pool.
    #[arg(long, default_value_t = 4)]
    pub chunks: usize,
}

impl LazyfreeWork {
    /// The same settings as `workload lazyfree` arguments.
    pub fn argv(&self) -> Vec<String> {
        let mut a = vec![
            "--records".to_string(),
            self.records.to_string(),
            "--chunk-size".into(),
            self.chunk_size.to_string(),
            "--chunks".into(),
            self.chunks.to_string(),
        ];
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string()]);
        }
        a
    }
}

#[derive(Clone, Debug, Args)]
pub struct RmapArgs {
    /// Forked children that keep the memory mapped.
    #[arg(long, default_value_t = 64)]
    pub sharers: usize,

    #[command(flatten)]
    pub work: RmapWork,
}

/// The rmap workload's memory and pressure, shared by `workload rmap` and
/// `lab rmap`.
#[derive(Clone, Debug, Args)]
pub struct RmapWork {
    /// Anonymous memory mapped by the parent and shared.
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_bytes)]
    pub size: u64,

    /// The memory cgroup limit lowered to, which forces the reclaim
    /// [default: the usage once the sharers are forked, less three
    /// quarters of --size].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
}

impl RmapWork {
    /// The same settings as `workload rmap` arguments.
    pub fn argv(&self) -> Vec<String> {
        let mut a = vec!["--size".to_string(), self.size.to_string()];
        if let Some(l) = self.memory_limit {
            a.extend(["--memory-limit".into(), l.to_string()]);
        }
        a
    }
}

#[derive(Debug, Args)]
pub struct LatArgs {
    /// Timed operations per figure (the median is reported).
    #[arg(long, default_value_t = 1000)]
    pub iterations: usize,

    /// Size of the file mapped for the mmap and page-fault figures.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub file_size: u64,

    /// Where the temporary files go [default: the temporary directory].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A recording (JSON document or jsonl stream).
    #[arg(value_name = "RECORDING")]
    pub file: PathBuf,

    /// Write one Parquet file per table, and the rest of the recording as
    /// recording.json, into this new (or empty) directory.
    #[arg(long, value_name = "DIR", required = true)]
    pub parquet: PathBuf,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// The schema of one `--format jsonl` line instead of a whole recording.
    #[arg(long, group = "document")]
    pub jsonl: bool,
    /// The schema of a `vmscope bench` file instead.
    #[arg(long, group = "document")]
    pub bench: bool,
    /// The schema of a `vmscope compare --format json` document instead.
    #[arg(long, group = "document")]
    pub compare: bool,
}

#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// Fresh pages touched per pass.
    #[arg(long, default_value_t = 1 << 20)]
    pub pages: usize,
    /// Pages mapped at a time within a pass (each chunk is unmapped before
    /// the next, so the same physical memory is reused).
    #[arg(long, default_value_t = 1 << 14)]
    pub chunk: usize,
    /// Rounds; each runs every mode once, in a rotated order.
    #[arg(short, long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Measure the kernel-stack sampler instead: a CPU loop on every CPU
    /// and the page-fault loop, with vmscope loaded without and with the
    /// sampler, interleaved; prints the medians and ratios.
    #[arg(long)]
    pub sampling: bool,
    /// Measure the mmap_lock probes instead, on `workload mmap-lock`
    /// beside an mprotect storm: nothing attached, vmscope's default
    /// probes, and vmscope with --mmap-lock, interleaved; prints the
    /// medians and ratios.
    #[arg(long, conflicts_with = "sampling")]
    pub mmap_lock: bool,
    /// Measure the page-cache probe instead: CPU per page written to a new
    /// file (each page added to the cache) with nothing attached and with
    /// vmscope's default probes, interleaved; prints the medians and ratios.
    #[arg(long, conflicts_with_all = ["sampling", "mmap_lock"])]
    pub page_cache: bool,
    /// Measure what vmscope costs memory syscalls instead: a map, touch
    /// and unmap loop, an mprotect loop, a madvise loop and a getppid loop
    /// (CPU per iteration) with nothing attached, vmscope's default probes
    /// and --syscall-latency, interleaved; prints the medians and ratios.
    #[arg(long, conflicts_with_all = ["sampling", "mmap_lock", "page_cache"])]
    pub syscalls: bool,
    /// Measure vmscope on four workloads instead, with a zram swap device
    /// on: the fault loop, the map/touch/unmap and mprotect loops, redis
    /// (redis-server driven by redis-benchmark, where installed) and a
    /// swap-heavy loop in a memory cgroup; nothing attached, `vmscope
    /// record` and `vmscope serve` (each its own process, default options)
    /// and the peer's one-liner for each, interleaved; prints the medians,
    /// the ratios against nothing and the goals.
    #[arg(long, conflicts_with_all = ["sampling", "mmap_lock", "page_cache", "syscalls"])]
    pub workloads: bool,
    /// With the page-fault loop (the default measure): vmscope with
    /// --thp-faults too, beside the default load, so that the huge-page
    /// fault probe's cost on every fault is its own row.
    #[arg(long, conflicts_with_all = ["sampling", "mmap_lock", "page_cache", "syscalls", "workloads"])]
    pub thp_faults: bool,
    /// With --workloads: the vmscope executable whose `record` and `serve`
    /// are measured (default: this one), e.g. an earlier build to set
    /// beside this one.
    #[arg(long, value_name = "PATH", requires = "workloads")]
    pub binary: Option<std::path::PathBuf>,
    /// With --sampling: samples per second per CPU.
    #[arg(long, value_name = "HZ", default_value_t = crate::model::rmap::DEFAULT_HZ,
          value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub sample_hz: u32,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormat {
    Json,
    Jsonl,
}

#[derive(Debug, Args)]
#[command(mut_arg("interval", |a| a.help("Sampling interval for the time series (10ms to 1h)")))]
pub struct RecordArgs {
    /// Output file (`-` for stdout). Written to a temporary name and renamed.
    #[arg(short, long, default_value = "vmscope.json")]
    pub output: PathBuf,

    /// Stop after this long (a bare number means seconds; at most 365 days).
    /// Without a command and without this, recording runs until Ctrl-C.
    #[arg(short, long, value_parser = parse_run_length)]
    pub duration: Option<Duration>,

    #[command(flatten)]
    pub sampling: SamplingArgs,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Restrict per-process figures to the processes in this cgroup and
    /// below it (a path under the memory controller's hierarchy, e.g.
    /// /system.slice/x.service), those moved in during the run, and their
    /// children. With a command, the command only sets how long to record.
    #[arg(long, value_name = "PATH", conflicts_with = "pid")]
    pub cgroup: Option<String>,

    /// Run the wrapped command as root even when vmscope was started by sudo.
    #[arg(long)]
    pub as_root: bool,

    /// Pass the command's standard output through (to stderr with `-o -`)
    /// and keep its last 64 KiB in the recording, where `compare` and
    /// `bench` read workload figures from it (a final JSON line, or
    /// `--metric NAME=REGEX`).
    #[arg(long, requires = "command")]
    pub keep_output: bool,

    /// List every process seen in `processes`, not only the top 50 by faults.
    #[arg(long)]
    pub all: bool,

    /// A file whose page-cache residency (cached, dirty, under write-back,
    /// evicted, recently evicted pages: cachestat(2), 6.5+) is read at the
    /// start and the end of the recording. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub cachestat: Vec<PathBuf>,

    /// `json`: one document, written atomically when recording ends.
    /// `jsonl`: streamed, one line per interval (see docs/record.md).
    #[arg(long, value_enum, default_value_t = RecordFormat::Json)]
    pub format: RecordFormat,

    /// Where rmap functions are timed directly (fentry), time the rmap
    /// maintenance functions too (adding and removing entries on fault,
    /// fork and unmap). Off by default: they run on every page fault.
    #[arg(long)]
    pub rmap_maintenance: bool,

    /// The command to run and observe (after `--`).
    #[arg(last = true, value_name = "CMD", conflicts_with = "pid")]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn record_parses_perf_like_flags() {
        let cli = Cli::try_parse_from([
            "vmscope", "record", "-o", "x.json", "-d", "5", "-i", "250ms", "--", "sleep", "1",
        ])
        .expect("parses");
        let Command::Record(r) = cli.command else {
            panic!("not record")
        };
        assert_eq!(r.duration, Some(Duration::from_secs(5)));
        assert_eq!(r.sampling.interval, Duration::from_millis(250));
        assert_eq!(r.command, ["sleep", "1"]);
    }

    #[test]
    fn pid_list_is_comma_separated() {
        let cli = Cli::try_parse_from(["vmscope", "record", "-p", "1,22,333"]).expect("parses");
        let Command::Record(r) = cli.command else {
            panic!("not record")
        };
        assert_eq!(r.process.pid, [1, 22, 333]);
    }

    #[test]
    fn bad_pid_is_a_usage_error() {
        let e = Cli::try_parse_from(["vmscope", "record", "-p", "x"]).expect_err("rejects");
        assert_eq!(e.exit_code(), 2);
    }

    /// Every duration argument: a value too large for a `Duration`, or
    /// outside its range, is a usage error naming the argument and the
    /// range, never a panic.
    #[test]
    fn out_of_range_durations_are_usage_errors() {
        let cases: [&[&str]; 9] = [
            &["record", "-d", "1e20"],
            &["record", "-i", "1ns"],
            &["record", "-i", "1e30"],
            &["serve", "--history", "1e20"],
            &["serve", "-i", "1ns"],
            &["top", "-i", "1e30"],
            &["top", "--history", "1e20"],
            &["bench", "-i", "1ns", "--", "true"],
            &["serve", "--history", "2h"],
        ];
        for args in cases {
            let argv = std::iter::once("vmscope").chain(args.iter().copied());
            let e = Cli::try_parse_from(argv).expect_err(&args.join(" "));
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let text = e.to_string();
            assert!(text.contains(args[1]), "{args:?}: {text}");
            assert!(
                text.contains("out of range: allowed is"),
                "{args:?}: {text}"
            );
        }
    }

    /// Per-process series are bounded like per-cgroup ones: label
    /// cardinality stays within what a Prometheus can take.
    #[test]
    fn per_process_is_bounded() {
        let parse = |n: &str| Cli::try_parse_from(["vmscope", "serve", "--per-process", n]);
        let Command::Serve(s) = parse("1000").expect("1000 is allowed").command else {
            panic!("not serve")
        };
        assert_eq!(s.per_process, 1000);
        for n in ["1001", "100000000"] {
            let e = parse(n).expect_err(n);
            assert_eq!(e.exit_code(), 2);
            let text = e.to_string();
            assert!(
                text.contains("--per-process") && text.contains("0..=1000"),
                "{text}"
            );
        }
    }

    #[test]
    fn history_range_is_what_the_flight_recorder_keeps() {
        assert_eq!(crate::timefmt::HISTORY.max, crate::flight::MAX_WINDOW);
    }
}
