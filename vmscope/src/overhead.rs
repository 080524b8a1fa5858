//! `vmscope overhead`: what the probes cost on the page-fault path. Runs a
//! fault-heavy loop (first touch of fresh private pages) three ways in one
//! process, interleaved round by round so that machine noise hits all three
//! alike: with nothing attached, with an empty program on the same
//! tracepoints (the floor any eBPF tool pays), and with every vmscope probe.
//! The perf-event programs (major faults) are not part of the floor: they
//! do not fire on the minor faults this loop takes.

use std::time::Instant;

use anyhow::Context as _;
use aya::{Ebpf, programs::TracePoint};

use crate::{
    cli::OverheadArgs,
    kernel::caps::Privileges,
    loader::{self, LoadOptions},
};

/// Nanoseconds per fault for one pass over `pages` fresh pages.
fn touch_pass(pages: usize) -> anyhow::Result<f64> {
    let ps = rustix::param::page_size();
    let len = pages * ps;
    // SAFETY: a fresh anonymous mapping, written only within bounds, then unmapped.
    unsafe {
        let p = rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE,
        )
        .context("mmap")?;
        rustix::mm::madvise(p, len, rustix::mm::Advice::LinuxNoHugepage).context("madvise")?;
        let base = p.cast::<u8>();
        let start = Instant::now();
        for i in 0..pages {
            std::ptr::write_volatile(base.add(i * ps), 1);
        }
        let ns = start.elapsed().as_nanos() as f64;
        rustix::mm::munmap(p, len).context("munmap")?;
        Ok(ns / pages as f64)
    }
}

/// An empty program attached to every tracepoint vmscope attaches to, so
/// the kernel does the same work to fire them (e.g. `kmem:rss_stat` sums its
/// counter for each event) and only the programs' bodies differ.
fn floor(tracepoints: &[(String, String)]) -> anyhow::Result<Ebpf> {
    let mut ebpf = Ebpf::load(loader::object()?).context("loading the eBPF object")?;
    let p: &mut TracePoint = ebpf
        .program_mut("probe_tracepoint")
        .context("program probe_tracepoint missing")?
        .try_into()?;
    p.load()?;
    for (category, name) in tracepoints {
        p.attach(category, name)
            .with_context(|| format!("attaching the empty program to {category}:{name}"))?;
    }
    Ok(ebpf)
}

/// The tracepoints a full load attaches, as (category, event) pairs.
fn attached_tracepoints() -> anyhow::Result<Vec<(String, String)>> {
    let probes = loader::load(&LoadOptions { filtered: false })?;
    Ok(probes
        .probes
        .iter()
        .filter(|p| p.attached && p.method == "tracepoint")
        .filter_map(|p| {
            let event = p
                .reason
                .as_deref()
                .and_then(|r| r.strip_prefix("attached as "))
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or(&p.probe);
            let (c, n) = event.split_once(':')?;
            Some((c.to_string(), n.to_string()))
        })
        .collect())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    Privileges::current().require_bpf()?;
    crate::kernel::tracefs::tracefs().map_err(|e| anyhow::anyhow!(e))?;
    let pages = args.pages;
    let tracepoints = attached_tracepoints()?;
    eprintln!(
        "floor: an empty program on the same {} tracepoints",
        tracepoints.len()
    );
    let (mut none, mut empty, mut full) = (Vec::new(), Vec::new(), Vec::new());
    touch_pass(pages)?; // warm-up
    for round in 0..args.rounds as usize {
        // Rotate the order each round: whichever mode runs first after a
        // load or unload pays for it, and rotation spreads that evenly.
        for k in 0..3 {
            match (round + k) % 3 {
                0 => none.push(touch_pass(pages)?),
                1 => {
                    let _floor = floor(&tracepoints)?;
                    empty.push(touch_pass(pages)?);
                }
                _ => {
                    let _probes = loader::load(&LoadOptions { filtered: false })?;
                    full.push(touch_pass(pages)?);
                }
            }
        }
        eprintln!(
            "round {}/{}: none {:.0} ns, floor {:.0} ns, vmscope {:.0} ns per fault",
            round + 1,
            args.rounds,
            none[round],
            empty[round],
            full[round]
        );
    }
    let (n, e, f) = (median(&mut none), median(&mut empty), median(&mut full));
    println!(
        "page-fault overhead, {pages} pages x {} rounds (medians):",
        args.rounds
    );
    println!("  nothing attached      {n:8.1} ns/fault");
    println!(
        "  empty program (floor) {e:8.1} ns/fault  (+{:.1} ns)",
        e - n
    );
    println!(
        "  vmscope, all probes   {f:8.1} ns/fault  (+{:.1} ns)",
        f - n
    );
    println!("  vmscope / nothing     {:.3}  (goal <= 1.05)", f / n);
    let added = if e - n > 0.0 {
        format!("{:.2}", (f - n) / (e - n))
    } else {
        "n/a (floor below noise)".into()
    };
    println!("  added cost vs floor   {added}  (goal <= 1.5)");
    Ok(0)
}
