//! The DAMON working-set rule (see `source::damon` for the reads): pure,
//! so that it is tested with hand-made regions.
//!
//! DAMON splits a process's address space into regions and, every sampling
//! interval, checks whether one page picked at random in each region was
//! accessed since the last check. A scheme's tried regions list each
//! region's `nr_accesses`: how many of the last aggregation interval's
//! checks found its page accessed. vmscope reads them once per aggregation
//! interval and keeps, per process, when each address range was last seen
//! accessed ([`AccessMap`]); the bytes last seen within the window are the
//! working set, and the same record gives the idle ages.
//!
//! A region's `age` (aggregation intervals since its access count last
//! changed by more than a tenth of the maximum) is not used: a region whose
//! count goes between 0 and 1 or 2 keeps aging, so a region at 0 with a
//! large age may still have been accessed within the window
//! (docs/working-set.md has what the kernel showed).

use std::collections::BTreeMap;

/// One region as `schemes/N/tried_regions/M/` lists it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    /// Checks that found it accessed in the last aggregation interval.
    pub nr_accesses: u32,
    /// Aggregation intervals since its access count last changed much.
    pub age: u32,
}

/// When each address range of one process was last seen accessed: spans
/// that never overlap, keyed by their start, each with its end and the
/// time of the read that last found it accessed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessMap {
    spans: BTreeMap<u64, (u64, u64)>,
}

impl AccessMap {
    /// Marks the regions found accessed (`nr_accesses` > 0) as seen at
    /// `now_ns`; the rest keep the time they had.
    pub fn mark(&mut self, regions: &[Region], now_ns: u64) {
        for r in regions
            .iter()
            .filter(|r| r.nr_accesses > 0 && r.end > r.start)
        {
            self.set(r.start, r.end, now_ns);
        }
        self.merge();
    }

    fn set(&mut self, start: u64, end: u64, t: u64) {
        // Spans overlapping [start, end): the one starting before it, and
        // those starting inside it.
        let mut hit: Vec<(u64, u64, u64)> = Vec::new();
        if let Some((&s, &(e, old))) = self.spans.range(..start).next_back()
            && e > start
        {
            hit.push((s, e, old));
        }
        hit.extend(
            self.spans
                .range(start..end)
                .map(|(&s, &(e, old))| (s, e, old)),
        );
        for &(s, e, old) in &hit {
            self.spans.remove(&s);
            if s < start {
                self.spans.insert(s, (start, old));
            }
            if e > end {
                self.spans.insert(end, (e, old));
            }
        }
        self.spans.insert(start, (end, t));
    }

    /// Joins neighbours seen at the same time, so that the map stays as
    /// small as the regions are many.
    fn merge(&mut self) {
        let mut out: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut last: Option<(u64, u64, u64)> = None;
        for (&s, &(e, t)) in &self.spans {
            match &mut last {
                Some((_, le, lt)) if *le == s && *lt == t => *le = e,
                _ => {
                    if let Some((ls, le, lt)) = last.take() {
                        out.insert(ls, (le, lt));
                    }
                    last = Some((s, e, t));
                }
            }
        }
        if let Some((ls, le, lt)) = last {
            out.insert(ls, (le, lt));
        }
        self.spans = out;
    }

    /// Drops what was last seen before `t_ns`.
    pub fn forget_before(&mut self, t_ns: u64) {
        self.spans.retain(|_, &mut (_, t)| t >= t_ns);
    }

    /// Bytes last seen accessed within each edge before `now_ns`,
    /// cumulative, capped at `resident` (a region can hold pages never
    /// faulted in). A read at `t` saw the accesses of the aggregation
    /// interval before it, so a span counts at an edge when `t` is within
    /// the edge plus `slack` (the aggregation interval) of `now_ns`.
    pub fn by_edge(&self, now_ns: u64, edges_ns: &[u64], slack_ns: u64, resident: u64) -> Vec<u64> {
        let mut out = vec![0u64; edges_ns.len()];
        for (&s, &(e, t)) in &self.spans {
            let idle = now_ns.saturating_sub(t);
            if let Some(i) = edges_ns.iter().position(|&edge| idle <= edge + slack_ns) {
                for b in &mut out[i..] {
                    *b += e - s;
                }
            }
        }
        out.iter().map(|&b| b.min(resident)).collect()
    }

    /// How many spans it holds.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn r(start: u64, end: u64, nr_accesses: u32) -> Region {
        Region {
            start,
            end,
            nr_accesses,
            age: 0,
        }
    }

    #[test]
    fn accessed_regions_count_at_the_edge_their_last_read_reaches() {
        let s = 1_000_000_000u64;
        let mut m = AccessMap::default();
        // A hot 4 MiB seen at every read, a warm 2 MiB seen 5 s before the
        // window's end, a cold 8 MiB never (nr_accesses 0).
        for t in 0..=10 {
            let warm = if t == 5 { 1 } else { 0 };
            m.mark(
                &[
                    r(0, 4 * MIB, 3),
                    r(4 * MIB, 6 * MIB, warm),
                    r(6 * MIB, 14 * MIB, 0),
                ],
                t * s,
            );
        }
        let edges = [s, 10 * s];
        assert_eq!(
            m.by_edge(10 * s, &edges, s / 10, u64::MAX),
            vec![4 * MIB, 6 * MIB]
        );
        // Capped at what is resident.
        assert_eq!(
            m.by_edge(10 * s, &edges, s / 10, 5 * MIB),
            vec![4 * MIB, 5 * MIB]
        );
        // Ten seconds on, with nothing seen since: all of it idle past the
        // 1 s edge, the warm part past the window too.
        assert_eq!(
            m.by_edge(20 * s, &edges, s / 10, u64::MAX),
            vec![0, 4 * MIB]
        );
        m.forget_before(10 * s);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m.by_edge(10 * s, &edges, 0, u64::MAX),
            vec![4 * MIB, 4 * MIB]
        );
    }

    #[test]
    fn regions_that_move_overwrite_only_what_they_cover() {
        let mut m = AccessMap::default();
        m.mark(&[r(0, 10 * MIB, 1)], 1);
        // DAMON split and moved its regions: a later read sees the middle.
        m.mark(
            &[
                r(0, 2 * MIB, 0),
                r(2 * MIB, 5 * MIB, 2),
                r(5 * MIB, 10 * MIB, 0),
            ],
            9,
        );
        assert_eq!(m.len(), 3);
        assert_eq!(
            m.by_edge(10, &[1, 5, 10], 0, u64::MAX),
            vec![3 * MIB, 3 * MIB, 10 * MIB]
        );
        // A span reaching over two old ones, then the same time again: merged.
        m.mark(&[r(MIB, 6 * MIB, 1)], 9);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m.by_edge(10, &[1, 10], 0, u64::MAX),
            vec![5 * MIB, 10 * MIB]
        );
        assert!(!m.is_empty());
        m.forget_before(100);
        assert!(m.is_empty());
    }
}
