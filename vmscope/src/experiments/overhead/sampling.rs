//! `vmscope overhead --sampling`: what the kernel-stack sampler costs. Two
//! workloads, each run with vmscope loaded without and with the sampler,
//! interleaved round by round (order rotated) so machine noise hits both
//! alike:
//! - a CPU loop on every CPU (the threads' CPU time for a fixed amount of
//!   work: without IRQ time accounting, the time of the sampling interrupts
//!   is charged to the task they interrupt, and other load on the machine
//!   does not count);
//! - the page-fault loop of `vmscope overhead` (CPU time per fault: deep
//!   kernel stacks to record).
//!
//! A third configuration, the floor, attaches an empty perf_event program
//! to the same cpu-clock events at the same rate: what any sampler pays for
//! the timer interrupts (expensive in a VM) before doing anything.
//!
//! The user-space read of one interval (counts, symbolizing new stacks) is
//! timed too.

use std::time::Instant;

use anyhow::Context as _;

use crate::{
    cli::OverheadArgs,
    experiments::overhead::touch_pass,
    source::loader::{self, LoadOptions, SwapAttach},
    stats,
};

/// An empty program on cpu-clock of every CPU at `hz`.
fn floor(hz: u32) -> anyhow::Result<aya::Ebpf> {
    use aya::programs::{
        PerfEvent,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    };
    let mut ebpf = aya::Ebpf::load(loader::object()?).context("loading the eBPF object")?;
    let p: &mut PerfEvent = ebpf
        .program_mut("probe_perf_event")
        .context("program probe_perf_event missing")?
        .try_into()?;
    p.load()?;
    let cpus = aya::util::online_cpus().map_err(|(what, e)| anyhow::anyhow!("{what}: {e}"))?;
    for cpu in cpus {
        p.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Period(1_000_000_000 / u64::from(hz)),
            false,
        )
        .with_context(|| format!("attaching the empty program to cpu-clock on cpu {cpu}"))?;
    }
    Ok(ebpf)
}

fn lcg(iters: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    std::hint::black_box(x)
}

fn thread_cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Mean CPU seconds of `threads` threads each running `iters` loop steps.
fn spin_pass(threads: usize, iters: u64) -> f64 {
    let total: f64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let start = thread_cpu_s();
                    lcg(iters);
                    thread_cpu_s() - start
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).sum()
    });
    total / threads as f64
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    let threads = aya::util::online_cpus()
        .map_err(|(what, e)| anyhow::anyhow!("{what}: {e}"))?
        .len();
    // About one second of work per thread.
    let probe = 20_000_000;
    let t = spin_pass(1, probe);
    let iters = ((probe as f64 / t.max(1e-6)) as u64).max(probe);
    let mut m = Measured::default();
    for round in 0..args.rounds as usize {
        for k in 0..3 {
            m.measure((round + k) % 3, args, threads, iters)?;
        }
        eprintln!(
            "round {}/{}: CPU loop {:.4} / {:.4} / {:.4} CPU-s, fault {:.0} / {:.0} / {:.0} ns \
             (without / with sampler / floor)",
            round + 1,
            args.rounds,
            m.spin[0][round],
            m.spin[1][round],
            m.spin[2][round],
            m.fault[0][round],
            m.fault[1][round],
            m.fault[2][round]
        );
    }
    m.print(args, threads);
    Ok(0)
}

/// What the rounds measured, per mode: 0 without the sampler, 1 with it,
/// 2 the floor.
#[derive(Default)]
struct Measured {
    /// CPU seconds of the CPU loop.
    spin: [Vec<f64>; 3],
    /// Nanoseconds per page fault.
    fault: [Vec<f64>; 3],
    /// How long the sampler's read took, in milliseconds.
    read_ms: Vec<f64>,
    samples_per_s: Vec<f64>,
}

impl Measured {
    /// One mode's run: loads the probes it asks for, then times the CPU loop
    /// and the fault pass under them.
    fn measure(
        &mut self,
        mode: usize,
        args: &OverheadArgs,
        threads: usize,
        iters: u64,
    ) -> anyhow::Result<()> {
        let mut probes = loader::load(&LoadOptions {
            sample_hz: if mode == 1 { args.sample_hz } else { 0 },
            ..super::system_wide(SwapAttach::Never)
        })?;
        let _floor = if mode == 2 {
            Some(floor(args.sample_hz)?)
        } else {
            None
        };
        if mode == 1 && probes.rmap.is_none() {
            let why = probes
                .probes
                .iter()
                .find(|p| p.probe == crate::source::rmap::PROBE)
                .and_then(|p| p.reason.clone())
                .unwrap_or_default();
            anyhow::bail!("the sampler did not attach: {why}");
        }
        // The sampler's first read is its baseline: the timed one
        // below is a real interval's.
        if let Some(s) = probes.rmap.as_mut() {
            s.read().context("reading the sampler")?;
        }
        let start = Instant::now();
        self.spin[mode].push(spin_pass(threads, iters));
        self.fault[mode].push(touch_pass(args.pages, args.chunk)?);
        if let Some(s) = probes.rmap.as_mut() {
            let elapsed = start.elapsed().as_secs_f64();
            let t = Instant::now();
            let r = s.read().context("reading the sampler")?;
            self.read_ms.push(t.elapsed().as_secs_f64() * 1e3);
            self.samples_per_s.push(r.samples as f64 / elapsed);
        }
        Ok(())
    }

    fn print(self, args: &OverheadArgs, threads: usize) {
        let Measured {
            spin,
            fault,
            mut read_ms,
            mut samples_per_s,
        } = self;
        // Ratios within each round (the modes ran back to back), then their
        // median: steadier than a ratio of medians on a noisy machine.
        let paired = |v: &[Vec<f64>; 3], mode: usize| {
            let mut r: Vec<f64> = v[mode].iter().zip(&v[0]).map(|(a, b)| a / b).collect();
            stats::median(&mut r)
        };
        let (sr, sf, fr, ff) = (
            paired(&spin, 1),
            paired(&spin, 2),
            paired(&fault, 1),
            paired(&fault, 2),
        );
        let [s0, s1, s2] = spin.map(|mut v| stats::median(&mut v));
        let [f0, f1, f2] = fault.map(|mut v| stats::median(&mut v));
        let read = stats::median(&mut read_ms);
        let rate = stats::median(&mut samples_per_s);
        println!(
            "kernel-stack sampler at {} Hz per CPU, {threads} CPUs, {} rounds (medians):",
            args.sample_hz, args.rounds
        );
        println!(
            "                         without     sampler       floor   sampler/without  floor/without"
        );
        println!(
            "  CPU loop (CPU-s)    {s0:>12.4}{s1:>12.4}{s2:>12.4}   {sr:>15.4}  {sf:>13.4}   (goal < 1.01)"
        );
        println!("  page fault (ns)     {f0:>12.0}{f1:>12.0}{f2:>12.0}   {fr:>15.4}  {ff:>13.4}");
        println!(
            "  (ratios: median over rounds of each round's ratio; floor: an empty program on \
             the same cpu-clock events)"
        );
        println!(
            "  one interval's read        {read:.2} ms ({:.3}% of one CPU at -i 1s; {rate:.0} samples/s)",
            read / 10.0
        );
    }
}
