//! `vmscope workload hotset`: a known working set, the ground truth for a
//! working-set figure (bytes touched within a window).
//!
//! It maps `--size` of anonymous memory and writes every page once, so all
//! of it is resident. Then it picks the hot set: `--hot` bytes of it, in
//! whole `--chunk`-sized pieces (2 MiB by default) chosen at random, each
//! aligned to its size, so a huge page is either all hot or all cold and
//! the figure is the same with transparent huge pages or without. Then it
//! goes in passes: each pass writes a word to every page of the hot set,
//! in a fresh random order, and sleeps for the rest of `--period`. So every
//! hot page is touched at least once per period and no other page is
//! touched again: clearing the referenced bits (`/proc/PID/clear_refs`) and
//! reading `Referenced:` in `/proc/PID/smaps_rollup` a period or more later
//! gives the hot set (plus the few pages of the program itself).
//!
//! A line `hot SIZE` on stdin changes the hot set at the next pass: growing
//! keeps the chunks it has and adds new ones at random, shrinking drops
//! chunks at random. JSON lines on stdout say when each set is in force:
//! `ready` after the fill and the first full pass, `hot` after the first
//! full pass of a new set, and the final line when it stops (after
//! `--seconds`, or on SIGINT, SIGTERM or SIGHUP).

use std::{
    io::{BufRead as _, Write as _},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{AnonMap, HeldSignals, fmt_bytes};
use crate::{
    cli::{HotsetArgs, parse_bytes},
    exit,
};

/// A seeded pseudo-random sequence (SplitMix64: any seed, 0 included,
/// gives a good sequence).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// Which chunks are hot: `order` holds every chunk of the mapping once and
/// the first `hot` of them are the hot set. Growing draws the new chunks
/// from the rest (the old ones stay where they are); shrinking moves
/// chunks drawn at random out of the first `hot`.
struct HotSet {
    order: Vec<usize>,
    hot: usize,
}

impl HotSet {
    fn new(chunks: usize) -> Self {
        Self {
            order: (0..chunks).collect(),
            hot: 0,
        }
    }

    /// The hot chunks' indices.
    fn chunks(&self) -> &[usize] {
        &self.order[..self.hot]
    }

    /// Makes the hot set `want` chunks (at most all of them).
    fn resize(&mut self, want: usize, rng: &mut Rng) {
        let n = self.order.len();
        let want = want.min(n);
        while self.hot < want {
            let j = self.hot + rng.below(n - self.hot);
            self.order.swap(self.hot, j);
            self.hot += 1;
        }
        while self.hot > want {
            let j = rng.below(self.hot);
            self.order.swap(j, self.hot - 1);
            self.hot -= 1;
        }
    }
}

/// The checked sizes of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HotsetPlan {
    /// Bytes mapped.
    size: usize,
    chunk: usize,
    /// Whole chunks in the mapping (a part chunk at its end is never hot).
    chunks: usize,
}

impl HotsetPlan {
    /// The whole chunks `bytes` of hot set rounds up to, or why it cannot
    /// be (a message that reads after the value's name).
    fn hot_chunks(&self, bytes: u64) -> Result<usize, String> {
        if bytes == 0 {
            return Err("must be more than 0".into());
        }
        if bytes > self.size as u64 {
            return Err(format!(
                "is more than --size {} ({} bytes); give at most that",
                fmt_bytes(self.size as u64),
                self.size
            ));
        }
        let n = usize::try_from(bytes.div_ceil(self.chunk as u64)).unwrap_or(usize::MAX);
        if n > self.chunks {
            return Err(format!(
                "rounds up to {n} chunks of {}, more than the {} whole chunks in --size {}",
                fmt_bytes(self.chunk as u64),
                self.chunks,
                fmt_bytes(self.size as u64)
            ));
        }
        Ok(n)
    }
}

/// Refuses settings that cannot run, before anything is mapped; returns
/// the plan and the hot set's chunks. Usage errors (exit 2), one line.
fn check(a: &HotsetArgs, page: u64) -> anyhow::Result<(HotsetPlan, usize)> {
    let usage = |m: String| exit::failure(exit::USAGE, m);
    if a.size == 0 || a.chunk == 0 {
        return Err(usage("--size and --chunk must be more than 0".into()));
    }
    if !a.chunk.is_multiple_of(page) {
        return Err(usage(format!(
            "--chunk {} is not a whole number of pages; give a multiple of {page}",
            a.chunk
        )));
    }
    if a.chunk > a.size {
        return Err(usage(format!(
            "--chunk {} is larger than --size {}; give a smaller chunk or a larger size",
            a.chunk, a.size
        )));
    }
    let size = usize::try_from(a.size)
        .ok()
        .filter(|s| s.checked_next_multiple_of(page as usize).is_some())
        .ok_or_else(|| usage(format!("--size {} is too large", a.size)))?;
    super::fits_memory(&[("--size", a.size)], a.size)?;
    let chunk = usize::try_from(a.chunk).unwrap_or(usize::MAX);
    let plan = HotsetPlan {
        size,
        chunk,
        chunks: size / chunk,
    };
    let hot = plan
        .hot_chunks(a.hot)
        .map_err(|m| usage(format!("--hot {} {m}", a.hot)))?;
    Ok((plan, hot))
}

/// A line from stdin: `Ok(None)` for a blank one, else the bytes of a
/// `hot SIZE` line, or the error line to print.
fn parse_line(line: &str) -> Result<Option<u64>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let bad = |why: String| {
        format!(
            "vmscope: workload hotset: ignoring stdin line {:?}: {why}; expected `hot SIZE`, \
             e.g. `hot 512M`",
            line.trim_end_matches(['\r', '\n'])
        )
    };
    match words.as_slice() {
        [] => Ok(None),
        ["hot", size] => parse_bytes(size).map(Some).map_err(bad),
        _ => Err(bad("not understood".into())),
    }
}

/// Reads `hot SIZE` lines from stdin and sends the hot set's chunks; a bad
/// line is said on stderr and skipped. Ends at the end of stdin.
fn read_changes(plan: &HotsetPlan, tx: &mpsc::Sender<(u64, usize)>) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("vmscope: workload hotset: reading stdin: {e}; no more changes");
                return;
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let bytes = match parse_line(&line) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(m) => {
                eprintln!("{m}");
                continue;
            }
        };
        match plan.hot_chunks(bytes) {
            Ok(n) => {
                say_rounding("hot", bytes, n, plan.chunk);
                if tx.send((bytes, n)).is_err() {
                    return;
                }
            }
            Err(m) => eprintln!(
                "vmscope: workload hotset: ignoring stdin line {:?}: {} {m}",
                line.trim_end_matches(['\r', '\n']),
                bytes
            ),
        }
    }
}

/// A line on stderr when a hot size is not a whole number of chunks.
fn say_rounding(what: &str, bytes: u64, chunks: usize, chunk: usize) {
    let rounded = (chunks * chunk) as u64;
    if rounded != bytes {
        eprintln!(
            "vmscope: workload hotset: {what} {bytes} rounded up to {chunks} whole chunks of {}: \
             {} ({rounded} bytes)",
            fmt_bytes(chunk as u64),
            fmt_bytes(rounded)
        );
    }
}

/// `len` bytes of anonymous memory starting at a multiple of `align` (a
/// power of two), with nothing else mapped around it in the same mapping.
fn aligned_map(len: usize, align: usize) -> anyhow::Result<AnonMap> {
    let over = AnonMap::new(len.checked_add(align).context("mapping size overflows")?)?;
    let base = over.ptr as usize;
    let start = base.next_multiple_of(align);
    let (head, tail) = (start - base, align - (start - base));
    // SAFETY: the head and tail lie inside the mapping just made, outside
    // `start..start + len`; `over` is forgotten, so only the middle is
    // unmapped again (by the map returned).
    unsafe {
        if head > 0 {
            libc::munmap(over.ptr.cast(), head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
    }
    std::mem::forget(over);
    Ok(AnonMap {
        ptr: start as *mut u8,
        len,
    })
}

/// The byte offsets of every page of the hot chunks.
fn hot_pages(set: &HotSet, chunk: usize, page: usize) -> Vec<usize> {
    set.chunks()
        .iter()
        .flat_map(|c| (0..chunk / page).map(move |p| c * chunk + p * page))
        .collect()
}

/// One pass: a word written to every page at `pages`, in a fresh order.
fn touch(map: &AnonMap, pages: &mut [usize], rng: &mut Rng, pass: u64) {
    rng.shuffle(pages);
    for &off in pages.iter() {
        // SAFETY: every offset is a page inside the mapping, which this
        // thread alone uses; pages are aligned for a u64.
        unsafe { std::ptr::write_volatile(map.ptr.add(off).cast::<u64>(), pass) };
    }
}

fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// Sleeps until `until` unless a held signal comes first; returns it.
fn sleep_until(held: &HeldSignals, until: Instant) -> Option<libc::c_int> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if let Some(s) = held.wait(left) {
            return Some(s);
        }
        if left.is_zero() || Instant::now() >= until {
            return None;
        }
    }
}

fn emit(doc: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{doc}").context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

/// `len` bytes aligned to `align`, every page written once (resident).
fn filled_map(len: usize, align: usize, page: usize) -> anyhow::Result<AnonMap> {
    let map = aligned_map(len, align)?;
    for off in (0..len).step_by(page) {
        // SAFETY: a page of the mapping owned here.
        unsafe { std::ptr::write_volatile(map.ptr.add(off).cast::<u64>(), 1) };
    }
    Ok(map)
}

pub fn run(a: &HotsetArgs) -> anyhow::Result<u8> {
    let page = rustix::param::page_size();
    let (plan, hot) = check(a, page as u64)?;
    say_rounding("--hot", a.hot, hot, plan.chunk);
    // Held before the stdin thread starts, so that it holds them too and
    // they wait for `sleep_until`.
    let held = HeldSignals::hold()?;
    let len = plan.size.next_multiple_of(page);
    // Chunks aligned to the largest power of two that divides them: a
    // 2 MiB chunk is a huge page.
    let map = filled_map(len, 1 << plan.chunk.trailing_zeros(), page)?;
    let (tx, rx) = mpsc::channel();
    {
        let plan = plan.clone();
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || read_changes(&plan, &tx))
            .context("starting the stdin thread")?;
    }
    let mut rng = Rng(a.seed);
    let mut set = HotSet::new(plan.chunks);
    set.resize(hot, &mut rng);
    let mut pages = hot_pages(&set, plan.chunk, page);
    let (mut passes, mut overruns) = (0u64, 0u64);
    let period = a.period;
    let mut pass = |pages: &mut Vec<usize>, rng: &mut Rng| {
        let t = Instant::now();
        passes += 1;
        touch(&map, pages, rng, passes);
        if t.elapsed() > period {
            overruns += 1;
        }
        t
    };
    let mut started = pass(&mut pages, &mut rng);
    let ready = Instant::now();
    let hot_bytes = |set: &HotSet| (set.hot * plan.chunk) as u64;
    emit(&serde_json::json!({
        "event": "ready",
        "pid": std::process::id(),
        "size_bytes": a.size,
        "hot_bytes": hot_bytes(&set),
        "chunk_bytes": plan.chunk,
        "period_ms": period.as_secs_f64() * 1e3,
    }))?;
    eprintln!(
        "vmscope: workload hotset: {} resident, {} hot in {} chunks of {}, touched every {}; \
         write `hot SIZE` to stdin to change it",
        fmt_bytes(len as u64),
        fmt_bytes(hot_bytes(&set)),
        set.hot,
        fmt_bytes(plan.chunk as u64),
        humantime::format_duration(period)
    );
    let deadline = a.seconds.map(|s| ready + Duration::from_secs(s));
    let ended_by = loop {
        let next = started + period;
        let until = deadline.map_or(next, |d| d.min(next));
        if let Some(sig) = sleep_until(&held, until) {
            break signal_name(sig);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "seconds";
        }
        // Only the last of several waiting changes ever gets a pass.
        let change = rx.try_iter().last();
        if let Some((_, n)) = change {
            set.resize(n, &mut rng);
            pages = hot_pages(&set, plan.chunk, page);
        }
        started = pass(&mut pages, &mut rng);
        if change.is_some() {
            emit(&serde_json::json!({
                "event": "hot",
                "hot_bytes": hot_bytes(&set),
                "at_s": ready.elapsed().as_secs_f64(),
            }))?;
        }
    };
    let seconds = ready.elapsed().as_secs_f64();
    emit(&serde_json::json!({
        "workload": "hotset",
        "size_bytes": a.size,
        "hot_bytes": hot_bytes(&set),
        "passes": passes,
        "overruns": overruns,
        "seconds": seconds,
        "ended_by": ended_by,
        "config": {
            "chunk_bytes": plan.chunk,
            "period_ms": period.as_secs_f64() * 1e3,
            "seed": a.seed,
        },
    }))?;
    // A second signal that came meanwhile is taken too, not delivered.
    while held.wait(Duration::ZERO).is_some() {}
    drop(held);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(size: u64, hot: u64, chunk: u64) -> HotsetArgs {
        HotsetArgs {
            size,
            hot,
            chunk,
            period: Duration::from_millis(200),
            seconds: None,
            seed: 1,
        }
    }

    #[test]
    fn the_hot_set_is_exact_without_duplicates_and_grows_keeping_its_chunks() {
        let mut rng = Rng(1);
        let mut set = HotSet::new(512);
        set.resize(128, &mut rng);
        let mut first: Vec<usize> = set.chunks().to_vec();
        assert_eq!(first.len(), 128);
        first.sort_unstable();
        first.dedup();
        assert_eq!(first.len(), 128, "duplicates");
        assert!(first.iter().all(|&c| c < 512));
        // Not simply the first chunks.
        assert_ne!(first, (0..128).collect::<Vec<_>>());

        set.resize(300, &mut rng);
        let mut grown: Vec<usize> = set.chunks().to_vec();
        grown.sort_unstable();
        grown.dedup();
        assert_eq!(grown.len(), 300);
        assert!(first.iter().all(|c| grown.binary_search(c).is_ok()));

        set.resize(50, &mut rng);
        let mut shrunk: Vec<usize> = set.chunks().to_vec();
        shrunk.sort_unstable();
        shrunk.dedup();
        assert_eq!(shrunk.len(), 50);
        assert!(shrunk.iter().all(|c| grown.binary_search(c).is_ok()));

        set.resize(512, &mut rng);
        let mut all = set.chunks().to_vec();
        all.sort_unstable();
        assert_eq!(all, (0..512).collect::<Vec<_>>());
    }

    #[test]
    fn the_same_seed_picks_the_same_set() {
        let pick = |seed| {
            let mut rng = Rng(seed);
            let mut set = HotSet::new(64);
            set.resize(10, &mut rng);
            set.chunks().to_vec()
        };
        assert_eq!(pick(1), pick(1));
        assert_ne!(pick(1), pick(2));
        assert_eq!(pick(0).len(), 10);
    }

    #[test]
    fn hot_pages_are_every_page_of_each_chunk_aligned() {
        let mut rng = Rng(3);
        let mut set = HotSet::new(8);
        set.resize(3, &mut rng);
        let (chunk, page) = (8 << 10, 4 << 10);
        let pages = hot_pages(&set, chunk, page);
        assert_eq!(pages.len(), 6);
        for c in set.chunks() {
            assert!(pages.contains(&(c * chunk)) && pages.contains(&(c * chunk + page)));
        }
        let mut shuffled = pages.clone();
        rng.shuffle(&mut shuffled);
        shuffled.sort_unstable();
        let mut sorted = pages;
        sorted.sort_unstable();
        assert_eq!(shuffled, sorted);
    }

    #[test]
    fn hot_lines_parse_and_bad_ones_say_the_expected_form() {
        assert_eq!(parse_line("hot 512M\n"), Ok(Some(512 << 20)));
        assert_eq!(parse_line("  hot   4096 \r\n"), Ok(Some(4096)));
        assert_eq!(parse_line(" \n"), Ok(None));
        for bad in ["hot\n", "hot 5X\n", "cold 1M\n", "hot 1M 2M\n", "512M\n"] {
            let e = parse_line(bad).expect_err(bad);
            assert!(
                e.contains("expected `hot SIZE`")
                    && e.contains(bad.trim_end())
                    && !e.contains('\n'),
                "{e}"
            );
        }
    }

    #[test]
    fn hot_sizes_round_up_to_whole_chunks_within_the_size() {
        let plan = HotsetPlan {
            size: 65 << 20,
            chunk: 2 << 20,
            chunks: 32,
        };
        assert_eq!(plan.hot_chunks(1), Ok(1));
        assert_eq!(plan.hot_chunks(3 << 20), Ok(2));
        assert_eq!(plan.hot_chunks(64 << 20), Ok(32));
        assert!(plan.hot_chunks(0).is_err());
        // 65 MiB is within --size but needs a 33rd chunk.
        assert!(
            plan.hot_chunks(65 << 20)
                .expect_err("33")
                .contains("33 chunks")
        );
        assert!(
            plan.hot_chunks(66 << 20)
                .expect_err("more")
                .contains("--size")
        );
    }

    #[test]
    fn bad_settings_are_one_line_usage_errors() {
        let page = 4096;
        for (a, what) in [
            (args(64 << 20, 128 << 20, 2 << 20), "--hot"),
            (args(0, 0, 2 << 20), "--size"),
            (args(64 << 20, 0, 2 << 20), "--hot"),
            (args(64 << 20, 16 << 20, 0), "--chunk"),
            (args(64 << 20, 16 << 20, 5000), "--chunk"),
            (args(1 << 20, 1 << 20, 2 << 20), "--chunk"),
            (args(u64::MAX / 2, 1 << 20, 2 << 20), "--size"),
        ] {
            let e = check(&a, page).expect_err(what);
            assert_eq!(exit::code_of(&e, 0), exit::USAGE, "{a:?}");
            let msg = exit::message_of(&e);
            assert!(msg.contains(what) && !msg.contains('\n'), "{msg}");
        }
        let (plan, hot) = check(&args(64 << 20, 16 << 20, 2 << 20), page).expect("fits");
        assert_eq!(
            (plan.size, plan.chunk, plan.chunks, hot),
            (64 << 20, 2 << 20, 32, 8)
        );
    }
}
