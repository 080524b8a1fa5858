//! The DAMON working-set rule (see `source::damon` for the reads): pure,
//! so that it is tested with hand-made regions.
//!
//! DAMON splits a process's address space into regions and, every sampling
//! interval, checks whether one page picked at random in each region was
//! accessed since the last check. A scheme's tried regions list each
//! region's `nr_accesses`: how many of the last aggregation interval's
//! checks found its page accessed. vmscope reads them once per aggregation
//! interval and keeps, per process, when each address range was last seen
//! accessed and what share of it was ([`AccessMap`]); the bytes last seen
//! within the window, each range counted at its share, are the working set,
//! and the same record gives the idle ages.
//!
//! **A region's share.** DAMON's regions rarely fit the touched memory
//! exactly: a region that reaches past the edge of a hot range is found
//! accessed whenever its check lands on the hot part, and its boundaries
//! move at every aggregation. Counting every region found accessed whole
//! counted those edges, and over a window their union: 67 to 83 MiB for a
//! 64 MiB hot set in the 6.12 guest. A region whose share `f` of its pages
//! is touched is found accessed about `f` times as often as one that is
//! all touched, so a region counts `nr_accesses / reference` of its bytes
//! (at most all of them), the reference being the count of the process's
//! typical accessed byte: the median, by bytes, of the counts of the
//! regions found accessed in that read ([`reference`]). Memory touched
//! less often than that reference counts in part (docs/working-set.md).
//!
//! A region's `age` (aggregation intervals since its access count last
//! changed by more than a tenth of the maximum) is not used: a region whose
//! count goes between 0 and 1 or 2 keeps aging, so a region at 0 with a
//! large age may still have been accessed within the window.

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

/// Shares are kept in parts of this.
const ONE: u32 = 1 << 16;

/// The access count of the process's typical accessed byte in one read:
/// the median, by bytes, of the counts of the regions found accessed (0
/// when none was).
pub fn reference(regions: &[Region]) -> u32 {
    let mut acc: Vec<(u32, u64)> = regions
        .iter()
        .filter(|r| r.nr_accesses > 0 && r.end > r.start)
        .map(|r| (r.nr_accesses, r.end - r.start))
        .collect();
    acc.sort_unstable();
    let total: u64 = acc.iter().map(|&(_, b)| b).sum();
    let mut seen = 0u64;
    for (nr, bytes) in acc {
        seen += bytes;
        if seen * 2 >= total {
            return nr;
        }
    }
    0
}

/// One span of an [`AccessMap`]: where it ends, when it was last seen
/// accessed, and the share of it that was (in parts of [`ONE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    end: u64,
    t: u64,
    share: u32,
}

/// When each address range of one process was last seen accessed, and the
/// share of it that was: spans that never overlap, keyed by their start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessMap {
    spans: BTreeMap<u64, Seen>,
}

impl AccessMap {
    /// Marks the regions found accessed (`nr_accesses` > 0) as seen at
    /// `now_ns`, each at its share of [`reference`]; the rest keep what
    /// they had.
    pub fn mark(&mut self, regions: &[Region], now_ns: u64) {
        let refc = reference(regions).max(1);
        for r in regions
            .iter()
            .filter(|r| r.nr_accesses > 0 && r.end > r.start)
        {
            let share = (u64::from(r.nr_accesses) * u64::from(ONE) / u64::from(refc))
                .min(u64::from(ONE)) as u32;
            self.set(
                r.start,
                Seen {
                    end: r.end,
                    t: now_ns,
                    share,
                },
            );
        }
        self.merge();
    }

    fn set(&mut self, start: u64, new: Seen) {
        let end = new.end;
        // Spans overlapping [start, end): the one starting before it, and
        // those starting inside it.
        let mut hit: Vec<(u64, Seen)> = Vec::new();
        if let Some((&s, &old)) = self.spans.range(..start).next_back()
            && old.end > start
        {
            hit.push((s, old));
        }
        hit.extend(self.spans.range(start..end).map(|(&s, &old)| (s, old)));
        for &(s, old) in &hit {
            self.spans.remove(&s);
            if s < start {
                self.spans.insert(s, Seen { end: start, ..old });
            }
            if old.end > end {
                self.spans.insert(end, old);
            }
        }
        self.spans.insert(start, new);
    }

    /// Joins neighbours seen at the same time at the same share, so that
    /// the map stays as small as the regions are many.
    fn merge(&mut self) {
        let mut out: BTreeMap<u64, Seen> = BTreeMap::new();
        let mut last: Option<(u64, Seen)> = None;
        for (&s, &span) in &self.spans {
            match &mut last {
                Some((_, l)) if l.end == s && l.t == span.t && l.share == span.share => {
                    l.end = span.end
                }
                _ => {
                    if let Some((ls, l)) = last.take() {
                        out.insert(ls, l);
                    }
                    last = Some((s, span));
                }
            }
        }
        if let Some((ls, l)) = last {
            out.insert(ls, l);
        }
        self.spans = out;
    }

    /// Drops what was last seen before `t_ns`.
    pub fn forget_before(&mut self, t_ns: u64) {
        self.spans.retain(|_, span| span.t >= t_ns);
    }

    /// Bytes last seen accessed within each edge before `now_ns`, each span
    /// counted at its share, cumulative, capped at `resident` (a region can
    /// hold pages never faulted in). A read at `t` saw the accesses of the
    /// aggregation interval before it, so a span counts at an edge when `t`
    /// is within the edge plus `slack` (the aggregation interval) of
    /// `now_ns`.
    pub fn by_edge(&self, now_ns: u64, edges_ns: &[u64], slack_ns: u64, resident: u64) -> Vec<u64> {
        let mut out = vec![0u64; edges_ns.len()];
        for (&s, span) in &self.spans {
            let idle = now_ns.saturating_sub(span.t);
            if let Some(i) = edges_ns.iter().position(|&edge| idle <= edge + slack_ns) {
                let bytes =
                    (u128::from(span.end - s) * u128::from(span.share) / u128::from(ONE)) as u64;
                for b in &mut out[i..] {
                    *b += bytes;
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
        // A hot 4 MiB seen at every read, a warm 2 MiB seen (all of it) 5 s
        // before the window's end, a cold 8 MiB never (nr_accesses 0).
        for t in 0..=10 {
            let warm = if t == 5 { 3 } else { 0 };
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
    fn the_reference_is_the_count_of_the_median_accessed_byte() {
        assert_eq!(reference(&[]), 0);
        assert_eq!(reference(&[r(0, MIB, 0)]), 0);
        // 8 MiB at 6, 2 MiB at 3, 2 MiB at 1, and idle regions ignored.
        let rs = [
            r(0, 2 * MIB, 1),
            r(2 * MIB, 10 * MIB, 6),
            r(10 * MIB, 12 * MIB, 3),
            r(12 * MIB, 40 * MIB, 0),
        ];
        assert_eq!(reference(&rs), 6);
        // Where most accessed bytes are found accessed less often, the
        // reference is theirs.
        assert_eq!(reference(&[r(0, MIB, 9), r(MIB, 9 * MIB, 2)]), 2);
    }

    #[test]
    fn a_region_reaching_past_a_hot_range_counts_at_its_share() {
        // The 6.12 guest's case: DAMON's regions over a hot range found
        // accessed 6 times in 10, and two regions at its edges that reach
        // into idle memory, found accessed 3 times and once.
        let rs = [
            r(0, 2 * MIB, 1),
            r(2 * MIB, 10 * MIB, 6),
            r(10 * MIB, 12 * MIB, 3),
        ];
        let mut m = AccessMap::default();
        m.mark(&rs, 1);
        let got = m.by_edge(1, &[1], 0, u64::MAX)[0];
        // 8 MiB, half of 2 MiB, a sixth of 2 MiB (to the share's rounding).
        let want = 8 * MIB + MIB + 2 * MIB / 6;
        assert!(got.abs_diff(want) < 64, "{got} vs {want}");
        // The edges move at the next read: what they covered before keeps
        // its old share, and the new edge counts at its own; nothing is
        // counted whole for being found accessed once.
        m.mark(
            &[
                r(MIB, 2 * MIB, 1),
                r(2 * MIB, 10 * MIB, 6),
                r(10 * MIB, 11 * MIB, 6),
            ],
            2,
        );
        let got = m.by_edge(2, &[2], 0, u64::MAX)[0];
        let want = MIB / 6 + MIB / 6 + 8 * MIB + MIB + MIB / 2;
        assert!(got.abs_diff(want) < 64, "{got} vs {want}");
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
