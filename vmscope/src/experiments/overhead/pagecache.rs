//! `vmscope overhead --page-cache`: what the page-cache probe costs where
//! it fires, on a folio added to the page cache. A write loop that adds
//! pages and no disk I/O: each pass writes a file of `--pages` pages in
//! 64 KiB writes (every page new to the cache) and truncates it (the pages
//! leave before any writeback), CPU time per page. Modes, interleaved round
//! by round: nothing attached, vmscope's default probes, and, where
//! installed, the peer's one-liner counting the same event per process
//! (bpftrace).

use std::io::{Seek as _, Write as _};

use anyhow::Context as _;

use crate::{cli::OverheadArgs, stats};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Nothing,
    Vmscope,
    Bpftrace,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Nothing => "nothing attached",
            Config::Vmscope => "vmscope, default probes",
            Config::Bpftrace => "bpftrace count per pid",
        }
    }
}

/// The peer: pages added, counted per process.
const BPFTRACE_PROGRAM: &str = "BEGIN { printf(\"ready\\n\"); } \
     tracepoint:filemap:mm_filemap_add_to_page_cache { @[pid] = count(); }";

/// CPU nanoseconds per page for one pass: `pages` pages written to the
/// empty `file`, which is then truncated.
fn write_pass(file: &mut std::fs::File, pages: usize) -> anyhow::Result<f64> {
    let ps = rustix::param::page_size();
    let buf = vec![7u8; 64 << 10];
    let len = pages * ps;
    let start = super::thread_cpu_ns();
    let mut done = 0;
    while done < len {
        let n = buf.len().min(len - done);
        file.write_all(&buf[..n])
            .context("writing the scratch file")?;
        done += n;
    }
    let cpu = super::thread_cpu_ns() - start;
    file.set_len(0).context("truncating the scratch file")?;
    file.rewind().context("rewinding the scratch file")?;
    Ok(cpu as f64 / pages as f64)
}

fn once(mode: Config, file: &mut std::fs::File, pages: usize) -> anyhow::Result<f64> {
    match mode {
        Config::Nothing => write_pass(file, pages),
        Config::Vmscope => {
            let _probes = super::load_system_wide(false, false)?;
            write_pass(file, pages)
        }
        Config::Bpftrace => super::with_bpftrace(BPFTRACE_PROGRAM, || write_pass(file, pages)),
    }
}

pub fn run(args: &OverheadArgs) -> anyhow::Result<u8> {
    // On the disk, not a tmpfs (whose pages never pass the tracepoint).
    let dir = std::path::Path::new("/var/tmp");
    let mut file = tempfile::tempfile_in(dir)
        .with_context(|| format!("creating a scratch file in {}", dir.display()))?;
    // 64 MiB a pass: large enough to time, small enough to stay in memory.
    let pages = args.pages.min((64 << 20) / rustix::param::page_size());
    let mut modes = vec![Config::Nothing, Config::Vmscope];
    if super::bpftrace_installed() {
        modes.push(Config::Bpftrace);
    } else {
        eprintln!("bpftrace is not installed: no peer column (apt-get install bpftrace)");
    }
    write_pass(&mut file, pages)?; // warm-up
    let mut per_page = super::interleaved(
        &modes,
        args.rounds,
        |mode| once(mode, &mut file, pages),
        |ns| format!("{ns:.0} ns"),
    )?;
    let med: Vec<f64> = per_page.iter_mut().map(|t| stats::median(t)).collect();
    println!(
        "page-cache probe cost, {} rounds (medians): {pages} pages written to a new file in \
         64 KiB writes, then truncated (CPU per page added to the cache)",
        args.rounds
    );
    for (i, mode) in modes.iter().enumerate() {
        println!("  {:<26} {:7.0} ns/page", mode.name(), med[i]);
    }
    println!("against nothing attached:");
    for (i, mode) in modes.iter().enumerate().skip(1) {
        println!("  {:<26} {:.3}x", mode.name(), med[i] / med[0]);
    }
    Ok(0)
}
