//! The multi-generational LRU as a working-set method (see `model::wss`):
//! its generations per memory cgroup and node, read from and aged through
//! `/sys/kernel/debug/lru_gen`.
//!
//! An aging (`+ MEMCG NODE MAX_SEQ SWAP FORCE`) walks the page tables of
//! the memory cgroup's processes, moves every page found touched into the
//! youngest generation and makes a new, empty one. Read right after an
//! aging at the window's end, the generations younger than the window hold
//! the pages touched within it.

use std::collections::BTreeSet;

use crate::model::wss::{LruGen, MethodStatus, WssCgroup, WssMethod, mglru_by_edge};

/// The kernel's list of generations, and where agings are asked for.
pub const LRU_GEN: &str = "/sys/kernel/debug/lru_gen";
/// Which parts of the multi-generational LRU are on (`0x0000`: off).
pub const ENABLED: &str = "/sys/kernel/mm/lru_gen/enabled";

/// One memory cgroup's generations, node by node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memcg {
    pub id: u32,
    pub path: String,
    pub nodes: Vec<(u32, Vec<LruGen>)>,
}

impl Memcg {
    /// Every node's generations, in one list.
    pub fn gens(&self) -> impl Iterator<Item = &LruGen> {
        self.nodes.iter().flat_map(|(_, g)| g)
    }
}

/// Parses `lru_gen`: `memcg ID PATH` lines, each followed by `node N`
/// lines, each followed by one line per generation (`SEQ AGE_MS ANON
/// FILE`). A memory cgroup removed but not yet freed has an empty path.
pub fn parse(text: &str) -> Vec<Memcg> {
    let mut out: Vec<Memcg> = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("memcg") => {
                let Some(id) = f.next().and_then(|v| v.parse().ok()) else {
                    continue;
                };
                out.push(Memcg {
                    id,
                    path: f.next().unwrap_or("").to_string(),
                    nodes: Vec::new(),
                });
            }
            Some("node") => {
                if let (Some(m), Some(n)) = (out.last_mut(), f.next().and_then(|v| v.parse().ok()))
                {
                    m.nodes.push((n, Vec::new()));
                }
            }
            Some(seq) => {
                let nums: Vec<i64> = std::iter::once(seq)
                    .chain(f)
                    .map_while(|v| v.parse().ok())
                    .collect();
                let Some((_, gens)) = out.last_mut().and_then(|m| m.nodes.last_mut()) else {
                    continue;
                };
                if let [seq, age, counts @ ..] = nums.as_slice()
                    && !counts.is_empty()
                {
                    gens.push(LruGen {
                        seq: (*seq).max(0) as u64,
                        age_ms: (*age).max(0) as u64,
                        // Anon and file: the counts can dip below 0 for a
                        // moment while pages move.
                        pages: counts.iter().take(2).map(|&c| c.max(0) as u64).sum(),
                    });
                }
            }
            None => {}
        }
    }
    out
}

/// The generations now.
pub fn read() -> Result<Vec<Memcg>, String> {
    std::fs::read_to_string(LRU_GEN)
        .map(|t| parse(&t))
        .map_err(|e| format!("{LRU_GEN}: {e}"))
}

/// Ages `m` on each of its nodes: its touched pages move into the youngest
/// generation and a new one is made. Anonymous pages are aged too, with or
/// without swap; `force` lets the kernel merge the two oldest generations
/// when all four are in use.
pub fn age(m: &Memcg) -> Result<(), String> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(LRU_GEN)
        .map_err(|e| format!("{LRU_GEN}: {e}"))?;
    for (node, gens) in &m.nodes {
        let Some(max) = gens.iter().map(|g| g.seq).max() else {
            continue;
        };
        // A generation made meanwhile by the kernel's own aging makes the
        // command a no-op, which is what is wanted.
        f.write_all(format!("+ {} {node} {max} 1 1\n", m.id).as_bytes())
            .map_err(|e| format!("{LRU_GEN}: aging memcg {} node {node}: {e}", m.id))?;
    }
    Ok(())
}

/// The memory cgroups to measure: those named in `paths`, or every one
/// (`all`). Removed ones (no path) are left out.
pub fn chosen<'a>(
    memcgs: &'a [Memcg],
    all: bool,
    paths: &BTreeSet<String>,
) -> impl Iterator<Item = &'a Memcg> {
    memcgs
        .iter()
        .filter(move |m| !m.path.is_empty() && (all || paths.contains(&m.path)))
}

/// The window's figure for each chosen memory cgroup, from generations
/// read right after the aging at the window's end.
pub fn window(memcgs: &[&Memcg], edges_ns: &[u64], page_size: u64) -> Vec<WssCgroup> {
    memcgs
        .iter()
        .map(|m| {
            let gens: Vec<LruGen> = m.gens().copied().collect();
            let (by_edge, resident) = mglru_by_edge(&gens, edges_ns, page_size);
            WssCgroup {
                cgroup: m.path.clone(),
                working_set_bytes: by_edge.last().copied().unwrap_or(0),
                resident_bytes: resident,
                referenced_by_edge: by_edge,
            }
        })
        .collect()
}

/// How this kernel stands with the method.
pub fn status() -> MethodStatus {
    let not = |detail: String| MethodStatus {
        method: WssMethod::Mglru,
        offered: false,
        used: false,
        detail,
    };
    let enabled = match std::fs::read_to_string(ENABLED) {
        Ok(v) => v.trim().to_string(),
        Err(_) => return not("no /sys/kernel/mm/lru_gen (kernel without CONFIG_LRU_GEN)".into()),
    };
    let on = u32::from_str_radix(enabled.trim_start_matches("0x"), 16).unwrap_or(0);
    if on & 1 == 0 {
        return not(format!(
            "the multi-generational LRU is built in but off ({ENABLED}: {enabled}); \
             `echo y > {ENABLED}` turns it on, for the whole system's reclaim"
        ));
    }
    match std::fs::metadata(LRU_GEN) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return not(format!(
                "no {LRU_GEN}: debugfs is not mounted (mount -t debugfs none /sys/kernel/debug)"
            ));
        }
        Err(e) => return not(format!("{LRU_GEN}: {e} (it needs root)")),
    }
    if let Err(e) = std::fs::File::open(LRU_GEN) {
        return not(format!("{LRU_GEN}: {e} (it needs root)"));
    }
    MethodStatus {
        method: WssMethod::Mglru,
        offered: true,
        used: false,
        detail: format!(
            "ages each memory cgroup's generations through {LRU_GEN} at the window's inner \
             edge and end, and counts the pages in those younger than the window, per memory \
             cgroup (enabled: {enabled})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "memcg     1 /\n node     0\n          0       5876          0           0 \n          3       5876         18           4 \nmemcg     2 /w\n node     0\n          8       6352      99055           0 \n          9       4240          0           0 \n         10       2116      32844           0 \n         11         16          0           0 \nmemcg     7 \n node     0\n          2        100          5           0 \n";

    #[test]
    fn generations_by_memcg_and_node() {
        let m = parse(TEXT);
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].id, m[0].path.as_str()), (1, "/"));
        assert_eq!(
            m[0].nodes[0].1[1],
            LruGen {
                seq: 3,
                age_ms: 5876,
                pages: 22
            }
        );
        assert_eq!(m[1].gens().count(), 4);
        assert_eq!(m[2].path, "");
        let paths = BTreeSet::from(["/w".to_string()]);
        let picked: Vec<u32> = chosen(&m, false, &paths).map(|m| m.id).collect();
        assert_eq!(picked, vec![2]);
        let all: Vec<u32> = chosen(&m, true, &paths).map(|m| m.id).collect();
        assert_eq!(all, vec![1, 2], "a removed memcg is left out");
    }

    #[test]
    fn a_window_counts_the_generations_younger_than_it() {
        // Read 2.1 s after the last aging, every 2 s: the 2.116 s
        // generation holds the 128 MiB hot set.
        let m = parse(TEXT);
        let w = window(&[&m[1]], &[1_000_000_000, 2_000_000_000], 4096);
        assert_eq!(w[0].working_set_bytes, 32844 * 4096);
        assert_eq!(w[0].resident_bytes, (99055 + 32844) * 4096);
        assert_eq!(w[0].referenced_by_edge, vec![0, 32844 * 4096]);
    }

    #[test]
    fn this_kernel_is_stated() {
        let s = status();
        assert_eq!(s.method, WssMethod::Mglru);
        assert!(!s.detail.is_empty());
    }
}
