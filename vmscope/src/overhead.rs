//! `vmscope overhead`: what the probes cost on the page-fault path. Runs a
//! fault-heavy loop (first touch of fresh private pages) three ways in one
//! process, interleaved round by round so that machine noise hits all three
//! alike: with nothing attached, with an empty program on the same
//! tracepoints (the floor any eBPF tool pays), and with every vmscope probe.
//! The perf-event programs (major faults) are not part of the floor: they
//! do not fire on the minor faults this loop takes.

use anyhow::Context as _;
use aya::{
    Ebpf,
    programs::{BtfTracePoint, TracePoint},
};

use crate::{
    cli::OverheadArgs,
    kernel::caps::Privileges,
    loader::{self, LoadOptions, SwapAttach},
};

/// This thread's CPU time. Unlike wall time it leaves out time other
/// tasks (or, in a guest, the host) took the CPU away.
fn thread_cpu_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// CPU nanoseconds per fault for one pass over `pages` fresh pages, mapped
/// `chunk` pages at a time and unmapped after each chunk, so the same
/// physical pages are recycled rather than the whole of memory swept.
pub fn touch_pass(pages: usize, chunk: usize) -> anyhow::Result<f64> {
    let ps = rustix::param::page_size();
    let chunk = chunk.clamp(1, pages.max(1));
    let mut done = 0;
    let mut cpu_ns = 0u128;
    while done < pages {
        let n = chunk.min(pages - done);
        let len = n * ps;
        // SAFETY: a fresh anonymous mapping, written only within bounds,
        // then unmapped.
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
            let start = thread_cpu_ns();
            for i in 0..n {
                std::ptr::write_volatile(base.add(i * ps), 1);
            }
            cpu_ns += thread_cpu_ns() - start;
            rustix::mm::munmap(p, len).context("munmap")?;
        }
        done += n;
    }
    Ok(cpu_ns as f64 / pages as f64)
}

/// A hook vmscope attached, and how.
struct Hook {
    category: String,
    event: String,
    btf: bool,
}

/// An empty program attached to every tracepoint vmscope attaches to, the
/// same way (classic or BTF-typed), so the kernel does the same work to fire
/// them (e.g. `kmem:rss_stat` sums its counter for each classic event) and
/// only the programs' bodies differ.
fn floor(hooks: &[Hook]) -> anyhow::Result<Vec<Ebpf>> {
    let mut loaded = Vec::new();
    let mut classic = Ebpf::load(loader::object()?).context("loading the eBPF object")?;
    let p: &mut TracePoint = classic
        .program_mut("probe_tracepoint")
        .context("program probe_tracepoint missing")?
        .try_into()?;
    p.load()?;
    for h in hooks.iter().filter(|h| !h.btf) {
        p.attach(&h.category, &h.event).with_context(|| {
            format!("attaching the empty program to {}:{}", h.category, h.event)
        })?;
    }
    loaded.push(classic);
    let btf = aya::Btf::from_sys_fs();
    for h in hooks.iter().filter(|h| h.btf) {
        let btf = btf
            .as_ref()
            .map_err(|e| anyhow::anyhow!("kernel BTF: {e}"))?;
        // One object per hook: a BTF program is loaded for one event.
        let mut ebpf = Ebpf::load(loader::object()?).context("loading the eBPF object")?;
        let p: &mut BtfTracePoint = ebpf
            .program_mut("probe_tp_btf")
            .context("program probe_tp_btf missing")?
            .try_into()?;
        p.load(&h.event, btf)?;
        p.attach()
            .with_context(|| format!("attaching the empty tp_btf program to {}", h.event))?;
        loaded.push(ebpf);
    }
    Ok(loaded)
}

/// The tracepoints a full load attaches (with or without the swap probe).
fn attached_hooks(swap: SwapAttach) -> anyhow::Result<Vec<Hook>> {
    let probes = loader::load(&LoadOptions {
        filtered: false,
        swap,
        sample_hz: 0,
    })?;
    Ok(probes
        .probes
        .iter()
        .filter(|p| p.attached && (p.method == "tracepoint" || p.method == "tp_btf"))
        .filter_map(|p| {
            let event = p
                .reason
                .as_deref()
                .and_then(|r| r.strip_prefix("attached as "))
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or(&p.probe);
            let (c, n) = event.split_once(':')?;
            Some(Hook {
                category: c.to_string(),
                event: n.to_string(),
                btf: p.method == "tp_btf",
            })
        })
        .collect())
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The measured configurations, in table order.
const MODES: [&str; 5] = [
    "nothing attached",
    "empty programs (floor)",
    "vmscope, all probes",
    "floor + swap probe",
    "vmscope + swap probe",
];

fn measure(mode: usize, hooks: &[Vec<Hook>; 2], args: &OverheadArgs) -> anyhow::Result<f64> {
    let run = || touch_pass(args.pages, args.chunk);
    match mode {
        0 => run(),
        1 | 3 => {
            let _floor = floor(&hooks[mode / 3])?;
            run()
        }
        _ => {
            let swap = if mode == 2 {
                SwapAttach::Never
            } else {
                SwapAttach::Always
            };
            let _probes = loader::load(&LoadOptions {
                filtered: false,
                swap,
                sample_hz: 0,
            })?;
            run()
        }
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    Privileges::current().require_bpf()?;
    if args.sampling {
        return crate::rmap::overhead::run(args);
    }
    crate::kernel::tracefs::tracefs().map_err(|e| anyhow::anyhow!(e))?;
    let hooks = [
        attached_hooks(SwapAttach::Never)?,
        attached_hooks(SwapAttach::Always)?,
    ];
    eprintln!(
        "floor: an empty program on the same {} tracepoints ({} of them BTF-typed), \
         {} with the swap probe",
        hooks[0].len(),
        hooks[0].iter().filter(|h| h.btf).count(),
        hooks[1].len()
    );
    let mut times: [Vec<f64>; 5] = Default::default();
    touch_pass(args.pages, args.chunk)?; // warm-up
    for round in 0..args.rounds as usize {
        // Rotate the order each round: whichever mode runs first after a
        // load or unload pays for it, and rotation spreads that evenly.
        for k in 0..MODES.len() {
            let mode = (round + k) % MODES.len();
            times[mode].push(measure(mode, &hooks, args)?);
        }
        let line: Vec<String> = times.iter().map(|t| format!("{:.0}", t[round])).collect();
        eprintln!(
            "round {}/{}: {} ns per fault",
            round + 1,
            args.rounds,
            line.join(" / ")
        );
    }
    let m: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    println!(
        "page-fault cost, {} fresh pages x {} rounds, CPU time (medians):",
        args.pages, args.rounds
    );
    for (name, v) in MODES.iter().zip(&m) {
        println!("  {name:<24} {v:8.1} ns/fault  (+{:.1} ns)", v - m[0]);
    }
    let vs_floor = |vm: f64, fl: f64| {
        if fl - m[0] > 0.0 {
            format!("{:.2}", (vm - m[0]) / (fl - m[0]))
        } else {
            "n/a (floor below noise)".into()
        }
    };
    println!("without the swap probe (no swap device active, the default then):");
    println!(
        "  vmscope / nothing          {:.3}  (goal <= 1.05)",
        m[2] / m[0]
    );
    println!(
        "  added cost vs floor        {}  (goal <= 1.5)",
        vs_floor(m[2], m[1])
    );
    println!("with the swap probe (a swap device active):");
    println!(
        "  vmscope / nothing          {:.3}  (goal <= 1.05)",
        m[4] / m[0]
    );
    println!(
        "  added cost vs floor        {}  (goal <= 1.5)",
        vs_floor(m[4], m[3])
    );
    Ok(0)
}
