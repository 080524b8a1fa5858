//! Kernel text addresses to function names, from /proc/kallsyms (read once
//! per process; module symbols included).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock, PoisonError},
};

static SHARED: OnceLock<Result<Arc<Symbols>, String>> = OnceLock::new();

/// The thread [`Symbols::prefetch`] started, until [`Symbols::prefetched`]
/// has waited for it.
static PREFETCH: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

/// Why /proc/kallsyms shows no addresses to this process, from the
/// sysctls and capabilities the kernel decides it by.
fn hidden() -> String {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    let syslog = crate::source::kernel::caps::Privileges::current().cap_syslog;
    let why = hidden_reason(
        sysctl("kptr_restrict"),
        sysctl("perf_event_paranoid"),
        syslog,
    );
    format!("/proc/kallsyms shows no kernel addresses ({why}); stacks cannot be symbolized")
}

/// The kernel shows kallsyms addresses when kptr_restrict is 0 and either
/// perf_event_paranoid <= 1 or the opener has CAP_SYSLOG; when it is 1,
/// only with CAP_SYSLOG; when it is 2, never.
pub fn hidden_reason(kptr_restrict: Option<i64>, paranoid: Option<i64>, syslog: bool) -> String {
    match kptr_restrict {
        Some(r) if r >= 2 => format!("kernel.kptr_restrict={r} hides them from everyone"),
        Some(1) if syslog => "kernel.kptr_restrict=1 and CAP_SYSLOG, yet hidden".into(),
        Some(1) => "kernel.kptr_restrict=1 shows them only with CAP_SYSLOG, \
                    which vmscope lacks"
            .into(),
        Some(0) if !syslog => format!(
            "needs CAP_SYSLOG, or kernel.perf_event_paranoid at 1 or less (it is {})",
            paranoid.map_or("unknown".into(), |p| p.to_string())
        ),
        _ => "kernel.kptr_restrict or missing CAP_SYSLOG hides them".into(),
    }
}

/// Whether kallsyms shows real addresses, from its first lines: a check at
/// attach time that costs nothing next to reading the whole file, which
/// waits until the first stacks are symbolized.
pub fn visible() -> Result<(), String> {
    use std::io::BufRead as _;
    let f = std::fs::File::open("/proc/kallsyms")
        .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
    for line in std::io::BufReader::new(f).lines().take(64) {
        let line = line.map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
        if line
            .split_whitespace()
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
            .is_some_and(|a| a != 0)
        {
            return Ok(());
        }
    }
    Err(hidden())
}

pub struct Symbols {
    /// Every name without its module suffix, one after another: one
    /// allocation rather than one per symbol (kallsyms lists 100k+).
    names: String,
    /// Symbols by address (ascending; of equal addresses the last listed
    /// wins), each naming its span of `names`.
    by_addr: Vec<Entry>,
    /// `by_addr`'s indices in name order, built when first asked for (only
    /// planning direct timing asks).
    by_name: OnceLock<Vec<u32>>,
}

struct Entry {
    addr: u64,
    start: u32,
    len: u32,
}

impl Symbols {
    /// Reads /proc/kallsyms. Fails, with the reason, when the kernel hides
    /// the addresses (kptr_restrict, or not privileged enough to see them).
    pub fn load() -> Result<Symbols, String> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
        let symbols = Symbols::parse(&text);
        // The text is several megabytes that the allocator would keep.
        drop(text);
        crate::source::kernel::trim_heap();
        symbols
    }

    /// The process's one copy (reading kallsyms takes about 0.1 s).
    pub fn shared() -> Result<Arc<Symbols>, String> {
        SHARED.get_or_init(|| Symbols::load().map(Arc::new)).clone()
    }

    /// Begins reading the process's one copy on a thread of its own, so
    /// that it is done by the time the first stacks are symbolized. The
    /// loader calls this as it starts loading programs: the kernel's
    /// verifier keeps one CPU busy then, and the read (about 0.1 s of one
    /// CPU) has the other instead of delaying the first reading, or the
    /// wrapped command's start, later on.
    pub fn prefetch() {
        let thread = std::thread::Builder::new()
            .name("vmscope-kallsyms".into())
            .spawn(|| drop(Symbols::shared()));
        if let Ok(t) = thread {
            *PREFETCH.lock().unwrap_or_else(PoisonError::into_inner) = Some(t);
        }
    }

    /// Waits until the thread [`Symbols::prefetch`] started has ended. It
    /// holds the capabilities of the thread that started it (its read
    /// needs CAP_SYSLOG to see addresses), so giving capabilities up waits
    /// for it: no thread is left holding them.
    pub fn prefetched() {
        let thread = PREFETCH
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// Parses kallsyms' text: `ADDRESS TYPE NAME [\t[MODULE]]` per line,
    /// in one pass over the text (it is read while the programs load, on
    /// the CPU the verifier does not hold: a second pass cost that CPU
    /// about 10 ms).
    pub fn parse(text: &str) -> Result<Symbols, String> {
        let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
        // Each line holds at least a 16-digit address and its type, in 19
        // bytes, besides its name (8 digits on 32-bit kernels: the names
        // then grow past this, and are trimmed all the same).
        let names = text.len().saturating_sub(19 * lines);
        Symbols::build(text.split('\n').filter_map(line_fields), names, lines)
    }

    pub fn from_map(by_addr: BTreeMap<u64, String>) -> Result<Symbols, String> {
        let pairs = by_addr
            .iter()
            .map(|(&a, n)| (a, n.split('\t').next().unwrap_or(n)));
        Symbols::build(pairs, 0, 0)
    }

    /// The table from (address, name) pairs, with room for `names` bytes
    /// of names and `entries` entries to begin with.
    fn build<'a>(
        pairs: impl Iterator<Item = (u64, &'a str)>,
        names: usize,
        entries: usize,
    ) -> Result<Symbols, String> {
        let mut names = String::with_capacity(names);
        let mut by_addr = Vec::with_capacity(entries);
        // A hidden kallsyms lists every symbol at address 0.
        for (addr, name) in pairs.filter(|&(a, _)| a != 0) {
            let (Ok(start), Ok(len)) = (u32::try_from(names.len()), u32::try_from(name.len()))
            else {
                return Err("/proc/kallsyms: over 4 GiB of names".into());
            };
            names.push_str(name);
            by_addr.push(Entry { addr, start, len });
        }
        Symbols::from_entries(names, by_addr)
    }

    /// The table from its names and entries, trimmed to their size (the
    /// room left over would stay with the allocator) and sorted by address.
    fn from_entries(mut names: String, mut by_addr: Vec<Entry>) -> Result<Symbols, String> {
        if by_addr.len() < 100 {
            return Err(hidden());
        }
        names.shrink_to_fit();
        by_addr.shrink_to_fit();
        // Stable: of equal addresses, the last listed stays last.
        by_addr.sort_by_key(|e| e.addr);
        Ok(Symbols {
            names,
            by_addr,
            by_name: OnceLock::new(),
        })
    }

    fn name(&self, e: &Entry) -> &str {
        &self.names[e.start as usize..(e.start + e.len) as usize]
    }

    /// The names in order, as indices into `by_addr`.
    fn by_name(&self) -> &[u32] {
        self.by_name.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.by_addr.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| {
                self.name(&self.by_addr[a as usize])
                    .cmp(self.name(&self.by_addr[b as usize]))
            });
            order
        })
    }

    /// The names, in order, from the first at or after `from`.
    fn names_from<'a>(&'a self, from: &str) -> impl Iterator<Item = &'a str> {
        let order = self.by_name();
        let first = order.partition_point(|&i| self.name(&self.by_addr[i as usize]) < from);
        order[first..]
            .iter()
            .map(|&i| self.name(&self.by_addr[i as usize]))
    }

    /// Whether a function of exactly this name exists (a name with a `.`
    /// after its first character is a clone's, never a function's).
    pub fn has(&self, name: &str) -> bool {
        if matches!(name.split_once('.'), Some((base, _)) if !base.is_empty()) {
            return false;
        }
        self.names_from(name).next() == Some(name)
    }

    /// Whether compiler clones of `name` exist (`name.isra.0`, ...).
    pub fn has_clone(&self, name: &str) -> bool {
        if name.is_empty() || name.contains('.') {
            return false;
        }
        let prefix = format!("{name}.");
        self.names_from(&prefix)
            .next()
            .is_some_and(|n| n.starts_with(&prefix))
    }

    /// The function containing `addr`: the nearest symbol at or below it.
    pub fn resolve(&self, addr: u64) -> Option<&str> {
        let after = self.by_addr.partition_point(|e| e.addr <= addr);
        after.checked_sub(1).map(|i| self.name(&self.by_addr[i]))
    }
}

/// A kallsyms line's address and name (its module suffix left off), or
/// `None` for a line of another shape. Byte by byte: a general splitter
/// took about 80 ns a line here, on 120,000 lines.
fn line_fields(line: &str) -> Option<(u64, &str)> {
    let bytes = line.as_bytes();
    let mut value = 0u64;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            b' ' if i > 0 => break,
            _ => return None,
        };
        if i == 16 {
            return None;
        }
        value = (value << 4) | u64::from(digit);
        i += 1;
    }
    // ` T name[\t[module]]`: one space, the type letter, one space.
    if bytes.get(i) != Some(&b' ') || bytes.get(i + 2) != Some(&b' ') {
        return None;
    }
    let start = i + 3;
    let len = bytes[start.min(bytes.len())..]
        .iter()
        .position(|&b| b == b'\t' || b == b' ')
        .unwrap_or(bytes.len().saturating_sub(start));
    let name = line.get(start..start + len)?;
    (!name.is_empty()).then_some((value, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: u64) -> BTreeMap<u64, String> {
        (0..n)
            .map(|i| (0x1000 + i * 0x100, format!("f{i}")))
            .collect()
    }

    #[test]
    fn addresses_resolve_to_the_enclosing_function() {
        let mut t = table(200);
        t.insert(0x1000 + 5 * 0x100, "zram_write_page\t[zram]".into());
        let s = Symbols::from_map(t).expect("symbols");
        assert_eq!(s.resolve(0x1000), Some("f0"));
        assert_eq!(s.resolve(0x10ff), Some("f0"));
        assert_eq!(s.resolve(0x1100), Some("f1"));
        assert_eq!(s.resolve(0x1510), Some("zram_write_page"));
        assert_eq!(s.resolve(0x10), None);
        assert!(s.has("f3") && s.has("zram_write_page") && !s.has("f999"));
    }

    #[test]
    fn clones_are_told_apart_from_the_function_itself() {
        let mut t = table(200);
        t.insert(0x90000, "shrink_folio_list.isra.0".into());
        let s = Symbols::from_map(t).expect("symbols");
        assert!(!s.has("shrink_folio_list") && s.has_clone("shrink_folio_list"));
    }

    #[test]
    fn exact_names_and_clone_bases_are_told_by_their_first_dot() {
        let mut t = table(200);
        t.insert(0x90000, "a.b.c".into());
        t.insert(0x90100, ".Lhidden.1".into());
        t.insert(0x90200, "ab".into());
        t.insert(0x90300, "zz.cold".into());
        let s = Symbols::from_map(t).expect("symbols");
        assert!(s.has(".Lhidden.1") && s.has("ab") && !s.has("a.b.c") && !s.has("a"));
        assert!(s.has_clone("a") && s.has_clone("zz") && !s.has_clone("ab"));
        assert!(!s.has_clone("a.b") && !s.has_clone("") && !s.has_clone("f1"));
        assert!(!s.has("zz") && !s.has("") && s.has("f199"));
    }

    #[test]
    fn kallsyms_text_parses_with_module_suffixes_and_hidden_lines() {
        let mut text: String = (0..200)
            .map(|i| format!("{:016x} T f{i}\n", 0x1000 + i * 0x100))
            .collect();
        text.push_str("ffffffffc0001000 t zram_write_page\t[zram]\n");
        text.push_str("0000000000000000 A hidden\n");
        let s = Symbols::parse(&text).expect("symbols");
        assert_eq!(s.resolve(0x1150), Some("f1"));
        assert_eq!(s.resolve(0xffff_ffff_c000_1010), Some("zram_write_page"));
        assert!(!s.has("hidden"));
        let hidden: String = (0..200)
            .map(|i| format!("0000000000000000 T f{i}\n"))
            .collect();
        assert!(Symbols::parse(&hidden).is_err());
    }

    /// The reason depends on who runs the test (CAP_SYSLOG) and on this
    /// kernel's settings: whichever it is, it names what would show the
    /// addresses.
    #[test]
    fn hidden_kallsyms_is_refused_with_the_reason() {
        let hidden: BTreeMap<u64, String> = [(0, "_stext".to_string())].into();
        let e = Symbols::from_map(hidden).err().expect("refused");
        assert!(e.contains("shows no kernel addresses"), "{e}");
        assert!(
            e.contains("kptr_restrict") || e.contains("CAP_SYSLOG"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod hidden_tests {
    use super::hidden_reason;

    #[test]
    fn the_reason_names_what_would_show_the_addresses() {
        assert!(hidden_reason(Some(2), Some(2), true).contains("kptr_restrict=2"));
        assert!(hidden_reason(Some(1), Some(-1), false).contains("only with CAP_SYSLOG"));
        let r = hidden_reason(Some(0), Some(2), false);
        assert!(r.contains("CAP_SYSLOG") && r.contains("it is 2"), "{r}");
    }
}
