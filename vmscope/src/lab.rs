//! `vmscope lab lazyfree|rmap`: a classic VM experiment as one command.
//!
//! A lab runs one built-in workload in two variants (BASE and NEW), R runs
//! each, interleaved (BASE, NEW, BASE, NEW, ...) so that a drift of the
//! machine hits both alike, every run recorded as `bench` records it. It
//! writes both bench files, the comparison and its report page into a
//! directory, prints the
//! comparison, then the kernel-side evidence for the difference: the
//! figures that explain it, side by side.
//!
//! - `lazyfree`: `workload lazyfree --free dontneed` against `--free free`;
//!   evidence: madvise calls and latency per behaviour, faults per record,
//!   TLB shootdown IPIs, pglazyfree/pglazyfreed.
//! - `rmap`: `workload rmap --sharers 1` against `--sharers N`; evidence:
//!   time per reclaimed page, the rmap walk and maintenance CPU (from the
//!   rmap method in use), memcg reclaim latency, pages swapped out, fork and
//!   exit time per sharer. Needs swap: with `--setup-zram SIZE` the lab
//!   adds a zram swap device for its runs and removes it afterwards.

use std::{
    fmt::Write as _,
    io::IsTerminal as _,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;

use crate::{
    bench,
    cli::{BenchArgs, CompareFormat, Lab, LabCommon, LazyfreeLabArgs, RmapLabArgs},
    compare::{self, Input, Report},
    exit,
    kernel::caps::Privileges,
    pressure::{self, ZramSwap},
    record,
};

/// One side of a lab.
struct Variant {
    /// Short name, also the bench file's name (`dontneed.json`).
    name: String,
    /// vmscope arguments after `vmscope`.
    args: Vec<String>,
}

/// A row of the evidence table: a label and the metric that backs it.
struct Evidence {
    label: &'static str,
    metric: String,
}

fn ev(label: &'static str, metric: &str) -> Evidence {
    Evidence {
        label,
        metric: metric.into(),
    }
}

pub fn run(lab: &Lab) -> anyhow::Result<u8> {
    Privileges::current().require_bpf()?;
    match lab {
        Lab::Lazyfree(a) => lazyfree(a),
        Lab::Rmap(a) => rmap(a),
    }
}

fn lazyfree(a: &LazyfreeLabArgs) -> anyhow::Result<u8> {
    let common = [
        vec!["workload".to_string(), "lazyfree".into()],
        a.work.argv(),
    ]
    .concat();
    let variant = |free: &str| Variant {
        name: free.into(),
        args: [common.clone(), vec!["--free".into(), free.into()]].concat(),
    };
    let evidence = vec![
        ev("lazyfree records/s", "lazyfree/records_per_sec"),
        ev("madvise(DONTNEED) calls", "madvise_dontneed_calls"),
        ev("madvise(FREE) calls", "madvise_free_calls"),
        ev("madvise(DONTNEED) p50", "madvise_dontneed.p50"),
        ev("madvise(DONTNEED) p99", "madvise_dontneed.p99"),
        ev("madvise(FREE) p50", "madvise_free.p50"),
        ev("madvise(FREE) p99", "madvise_free.p99"),
        ev("user faults per record", "user_faults_per_record"),
        ev("TLB shootdown IPIs", "tlb_shootdown_ipis"),
        ev("pglazyfree", "pglazyfree"),
        ev("pglazyfreed", "pglazyfreed"),
        ev("sys time", "sys"),
    ];
    experiment(
        "lazyfree",
        &a.common,
        variant("dontneed"),
        variant("free"),
        false,
        &evidence,
    )
}

fn rmap(a: &RmapLabArgs) -> anyhow::Result<u8> {
    if a.sharers < 2 {
        return Err(exit::failure(
            exit::USAGE,
            format!(
                "--sharers {} leaves nothing to compare with 1 sharer; give 2 or more",
                a.sharers
            ),
        ));
    }
    // Swap first: without it there is nothing to measure.
    let _zram = match a.setup_zram {
        Some(size) => {
            let z = ZramSwap::new(size).context("--setup-zram")?;
            eprintln!(
                "vmscope: swap on {} ({} MiB) for the runs; removed afterwards",
                z.device().display(),
                size >> 20
            );
            Some(z)
        }
        None if pressure::active_swaps()?.is_empty() => {
            return Err(exit::failure(
                exit::FAILURE,
                "lab rmap reclaims anonymous memory, which needs swap, and no swap device is \
                 active: add one (`swapon`), or give --setup-zram SIZE (e.g. 1G) to have a \
                 zram device set up for the runs",
            ));
        }
        None => None,
    };
    let common = [vec!["workload".to_string(), "rmap".into()], a.work.argv()].concat();
    let variant = |n: usize| Variant {
        name: format!("sharers-{n}"),
        args: [common.clone(), vec!["--sharers".into(), n.to_string()]].concat(),
    };
    let evidence = vec![
        ev("reclaim time per page", "rmap/reclaim_per_page_ns"),
        ev("pages reclaimed", "rmap/reclaimed_pages"),
        ev("rmap walk CPU (sampled)", "rmap_walk_cpu"),
        ev("rmap walk share of CPU", "rmap_walk_share"),
        ev("rmap maintenance CPU", "rmap_maint_cpu"),
        ev("memcg reclaim p50", "reclaim_memcg.p50"),
        ev("memcg reclaim p99", "reclaim_memcg.p99"),
        ev("reclaim stall", "reclaim_stall"),
        ev("pages swapped out", "pswpout"),
        ev("TLB shootdown IPIs", "tlb_shootdown_ipis"),
        ev("fork per sharer", "rmap/fork_per_sharer_us"),
        ev("exit per sharer", "rmap/exit_per_sharer_us"),
        ev("sys time", "sys"),
    ];
    experiment(
        "rmap",
        &a.common,
        variant(1),
        variant(a.sharers),
        true,
        &evidence,
    )
}

/// The recorded runs of both variants, interleaved; the comparison; the
/// evidence. `as_root`: the workload needs root (it creates a cgroup).
fn experiment(
    lab: &str,
    c: &LabCommon,
    base: Variant,
    new: Variant,
    as_root: bool,
    evidence: &[Evidence],
) -> anyhow::Result<u8> {
    let dir = c
        .output_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("vmscope-lab-{lab}")));
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "creating {} (choose another place with -o DIR)",
            dir.display()
        )
    })?;
    let me = std::env::current_exe().context("finding vmscope's own binary")?;
    let bench_args = |v: &Variant| BenchArgs {
        runs: c.runs,
        warmup: 0,
        trim: 0,
        output: dir.join(format!("{}.json", v.name)),
        name: Some(v.name.clone()),
        prepare: None,
        ignore_failure: false,
        show_output: false,
        metric: Vec::new(),
        interval: Duration::from_secs(1),
        as_root,
        command: std::iter::once(me.display().to_string())
            .chain(v.args.iter().cloned())
            .collect(),
    };
    let sides = [bench_args(&base), bench_args(&new)];
    let tmp = tempfile::tempdir().context("creating a temporary directory for the runs")?;
    let mut recs: [Vec<record::Recording>; 2] = [Vec::new(), Vec::new()];
    let mut codes: [Vec<i32>; 2] = [Vec::new(), Vec::new()];
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(u64::from(c.runs) * 2);
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    for i in 0..c.runs {
        for (k, args) in sides.iter().enumerate() {
            let name = args.name.as_deref().unwrap_or(lab);
            if let Some(b) = &bar {
                b.set_prefix(name.to_string());
            }
            let path = tmp.path().join(format!("{name}-{i}.json"));
            let (code, rec) = bench::record_run(args, &path)?;
            if code != 0 {
                if let Some(b) = &bar {
                    b.abandon();
                }
                let out = rec
                    .child
                    .as_ref()
                    .and_then(|c| c.output.as_ref())
                    .map(|o| o.tail.trim().to_string())
                    .unwrap_or_default();
                return Err(exit::failure(
                    exit::FAILURE,
                    format!(
                        "run {} of {name} (`vmscope {}`) exited with {code}{}{out}",
                        i + 1,
                        args.command[1..].join(" "),
                        if out.is_empty() { "" } else { ": " }
                    ),
                ));
            }
            recs[k].push(rec);
            codes[k].push(code);
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let [base_recs, new_recs] = recs;
    let [base_codes, new_codes] = codes;
    let files = [
        bench::assemble(&sides[0], base_recs, base_codes),
        bench::assemble(&sides[1], new_recs, new_codes),
    ];
    for (f, args) in files.iter().zip(&sides) {
        record::write_atomic(&args.output, |w| {
            serde_json::to_writer(&mut *w, f)?;
            Ok(())
        })?;
    }
    let [b, n] = files;
    let (bp, np) = (sides[0].output.clone(), sides[1].output.clone());
    let report = compare::build_report(
        (&bp, &Input::Bench(Box::new(b))),
        (&np, &Input::Bench(Box::new(n))),
        &[],
        c.threshold,
    )?;
    let compare_path = dir.join("compare.json");
    let json = compare::json(&report)?;
    record::write_atomic(&compare_path, |w| {
        std::io::Write::write_all(w, json.as_bytes())?;
        Ok(())
    })?;
    // The page with the plots, made from the comparison just written.
    crate::report::run(&crate::cli::ReportArgs {
        file: compare_path.clone(),
        new: None,
        output: Some(dir.join("report.html")),
        svg: None,
        png: None,
        threshold: c.threshold,
    })?;
    let mut text = match c.format {
        CompareFormat::Table => compare::table(&report),
        CompareFormat::Markdown => compare::markdown(&report),
        CompareFormat::Json => json,
    };
    if c.format != CompareFormat::Json {
        text.push('\n');
        text.push_str(&evidence_text(&report, evidence, c.format));
        let _ = writeln!(
            text,
            "\nbench files, the comparison and its page: {} ({}, {}, compare.json, report.html)",
            dir.display(),
            file_name(&bp),
            file_name(&np)
        );
    }
    print!("{text}");
    Ok(0)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| p.display().to_string(), |f| f.to_string_lossy().into())
}

/// The evidence table: each figure's mean per run on both sides, taken from
/// the comparison's rows, or from one side's values when only that side has
/// it (a behaviour used on one side only).
fn evidence_text(r: &Report, evidence: &[Evidence], format: CompareFormat) -> String {
    let side_mean = |metric: &str, new: bool| -> Option<(f64, String)> {
        let row = r.rows.iter().find(|x| x.metric == metric)?;
        let s = if new { &row.new } else { &row.base };
        Some((s.mean, row.unit.clone()))
    };
    let cell = |metric: &str, new: bool| match side_mean(metric, new) {
        Some((v, unit)) => compare::fmt_value(v, &unit),
        None => r
            .one_sided
            .iter()
            .find(|x| x.metric == metric && x.new == new)
            .map_or_else(|| "-".to_string(), |x| compare::fmt_value(x.mean, &x.unit)),
    };
    let mut s = String::new();
    let (bn, nn) = (r.base.name.as_str(), r.new.name.as_str());
    let md = format == CompareFormat::Markdown;
    if md {
        let _ = writeln!(s, "| kernel evidence (mean per run) | {bn} | {nn} |");
        let _ = writeln!(s, "|---|---:|---:|");
    } else {
        let _ = writeln!(
            s,
            "kernel evidence (mean per run; - : not seen on that side)"
        );
        let _ = writeln!(s, "{:<28} {:>16} {:>16}", "", bn, nn);
    }
    for e in evidence {
        let (b, n) = (cell(&e.metric, false), cell(&e.metric, true));
        if md {
            let _ = writeln!(s, "| {} | {b} | {n} |", e.label);
        } else {
            let _ = writeln!(s, "{:<28} {b:>16} {n:>16}", e.label);
        }
    }
    s
}
