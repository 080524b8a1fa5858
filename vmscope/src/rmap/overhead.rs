//! `vmscope overhead --sampling`: what the kernel-stack sampler costs. Two
//! workloads, each run with vmscope loaded without and with the sampler,
//! interleaved round by round (order rotated) so machine noise hits both
//! alike:
//! - a CPU loop on every CPU (wall time of a fixed amount of work: the
//!   sampling interrupts take their time from it);
//! - the page-fault loop of `vmscope overhead` (CPU time per fault: deep
//!   kernel stacks to record).
//!
//! The user-space read of one interval (counts, symbolizing new stacks) is
//! timed too.

use std::time::Instant;

use anyhow::Context as _;

use crate::{
    cli::OverheadArgs,
    loader::{self, LoadOptions, SwapAttach},
    overhead::{median, touch_pass},
};

fn lcg(iters: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    std::hint::black_box(x)
}

/// Wall seconds for `threads` threads to each run `iters` loop steps.
fn spin_pass(threads: usize, iters: u64) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| lcg(iters));
        }
    });
    start.elapsed().as_secs_f64()
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    let threads = aya::util::online_cpus()
        .map_err(|(what, e)| anyhow::anyhow!("{what}: {e}"))?
        .len();
    // About one second of work per thread.
    let probe = 20_000_000;
    let t = spin_pass(1, probe);
    let iters = ((probe as f64 / t.max(1e-6)) as u64).max(probe);
    let load = |hz| {
        loader::load(&LoadOptions {
            filtered: false,
            swap: SwapAttach::Never,
            sample_hz: hz,
        })
    };
    let mut spin: [Vec<f64>; 2] = Default::default();
    let mut fault: [Vec<f64>; 2] = Default::default();
    let mut read_ms = Vec::new();
    let mut samples_per_s = Vec::new();
    for round in 0..args.rounds as usize {
        for k in 0..2 {
            let mode = (round + k) % 2;
            let mut probes = load(if mode == 1 { args.sample_hz } else { 0 })?;
            if mode == 1 && probes.sampler.is_none() {
                let why = probes
                    .probes
                    .iter()
                    .find(|p| p.probe == super::PROBE)
                    .and_then(|p| p.reason.clone())
                    .unwrap_or_default();
                anyhow::bail!("the sampler did not attach: {why}");
            }
            let start = Instant::now();
            spin[mode].push(spin_pass(threads, iters));
            fault[mode].push(touch_pass(args.pages, args.chunk)?);
            if let Some(s) = probes.sampler.as_mut() {
                let elapsed = start.elapsed().as_secs_f64();
                let t = Instant::now();
                let r = s.read().context("reading the sampler")?;
                read_ms.push(t.elapsed().as_secs_f64() * 1e3);
                samples_per_s.push(r.samples as f64 / elapsed);
            }
        }
        eprintln!(
            "round {}/{}: CPU loop {:.3} / {:.3} s, fault {:.0} / {:.0} ns (without / with sampler)",
            round + 1,
            args.rounds,
            spin[0][round],
            spin[1][round],
            fault[0][round],
            fault[1][round]
        );
    }
    let [s0, s1] = spin.map(|mut v| median(&mut v));
    let [f0, f1] = fault.map(|mut v| median(&mut v));
    let read = median(&mut read_ms);
    let rate = median(&mut samples_per_s);
    println!(
        "kernel-stack sampler at {} Hz per CPU, {threads} CPUs, {} rounds (medians):",
        args.sample_hz, args.rounds
    );
    println!(
        "  CPU loop on every CPU      {s0:.3} s without, {s1:.3} s with: ratio {:.4} (goal < 1.01)",
        s1 / s0
    );
    println!(
        "  page-fault loop            {f0:.0} ns/fault without, {f1:.0} with: ratio {:.4}",
        f1 / f0
    );
    println!(
        "  one interval's read        {read:.2} ms ({:.3}% of one CPU at -i 1s; {rate:.0} samples/s)",
        read / 10.0
    );
    Ok(0)
}
