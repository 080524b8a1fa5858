//! The per-mm swap map, read into sums that never decrease: swap pages
//! by owning process, and in total by direction.

use std::collections::{HashMap, HashSet};

use anyhow::Context as _;
use vmscope_common::MmSwap;

use super::Collector;
use crate::source::loader::Loaded;

/// The per-mm swap map, summed.
#[derive(Clone, Default)]
pub(super) struct SwapSums {
    /// tgid -> (swapped-out pages, swapped-in pages).
    pub(super) by_tgid: HashMap<u32, (u64, u64)>,
    pub(super) out: u64,
    pub(super) inn: u64,
    pub(super) freed: u64,
    pub(super) copied: u64,
    pub(super) unowned_out: u64,
    pub(super) entries: u64,
}

impl Collector {
    /// The per-mm swap map summed, plus what gone entries had counted;
    /// the entries of `ending` processes are deleted after this read.
    pub(super) fn read_mms(
        &mut self,
        probes: &Loaded,
        ending: &HashSet<u32>,
    ) -> anyhow::Result<SwapSums> {
        let map = aya::maps::IterableMap::<u64, MmSwap>::map(&probes.mms);
        let all = match crate::source::batch::lookup_all::<u64, MmSwap>(map, 256)
            .context("reading the per-mm swap map")?
        {
            Some(all) => all,
            None => probes
                .mms
                .iter()
                .collect::<Result<Vec<_>, _>>()
                .context("reading the per-mm swap map")?,
        };
        let (sums, doomed) = self.mm.update(all, ending, self.page_size);
        self.doomed_mms.extend(doomed);
        Ok(sums)
    }
}

/// The per-mm swap map across reads: the entries as last read, and what
/// entries that have since gone (evicted, deleted at their owner's exit,
/// or replaced by a new mm at the same address) had counted, so that the
/// sums never decrease whatever the map drops.
///
/// A new mm at a dead one's address (the allocator hands it out again at
/// once, so short-lived processes in a row share one) finds the dead one's
/// entry and counts on from its totals, under its own owner. What the
/// entry had counted when its owner changed is then the new owner's base,
/// taken off what the entry shows from there on; the old owner keeps it.
#[derive(Default)]
pub(super) struct MmBooks {
    pub(super) last: HashMap<u64, MmSwap>,
    /// Per key, the counts of the entry's earlier owners (absent: none).
    pub(super) base: HashMap<u64, MmSwap>,
    pub(super) gone: SwapSums,
    pub(super) pruned: u64,
}

impl MmBooks {
    /// Takes a fresh read of the map: the sums, and the keys to delete
    /// now (the mms of `ending` processes, counted as pruned).
    pub(super) fn update(
        &mut self,
        all: Vec<(u64, MmSwap)>,
        ending: &HashSet<u32>,
        page_size: u64,
    ) -> (SwapSums, Vec<u64>) {
        let pages = |b: u64| b / page_size.max(1);
        let add_to = |s: &mut SwapSums, mm: &MmSwap, per_process: bool| {
            let (out, inn) = (pages(mm.out_bytes), pages(mm.in_bytes));
            s.out += out;
            s.inn += inn;
            s.freed += pages(mm.freed_bytes);
            s.copied += pages(mm.copied_bytes);
            if mm.tgid == 0 {
                s.unowned_out += out;
            } else if per_process && (out > 0 || inn > 0) {
                let e = s.by_tgid.entry(mm.tgid).or_default();
                e.0 += out;
                e.1 += inn;
            }
        };
        let mut live = SwapSums::default();
        let mut now: HashMap<u64, MmSwap> = HashMap::with_capacity(all.len());
        let mut bases: HashMap<u64, MmSwap> = HashMap::new();
        for (key, mm) in all {
            live.entries += 1;
            let mut base = self.base.remove(&key).unwrap_or_default();
            // The same key with another owner, or with counts that went
            // down, is a new mm at a reused address: the old one has gone
            // with what it counted over its base.
            if let Some(old) = self.last.remove(&key)
                && !follows(&old, &mm)
            {
                add_to(&mut self.gone, &less(&old, &base), true);
                base = if counts_follow(&old, &mm) {
                    old
                } else {
                    MmSwap::default()
                };
            }
            add_to(&mut live, &less(&mm, &base), true);
            if base != MmSwap::default() {
                bases.insert(key, base);
            }
            now.insert(key, mm);
        }
        // Entries no longer in the map keep what they had counted.
        for (key, old) in std::mem::replace(&mut self.last, now) {
            let base = self.base.remove(&key).unwrap_or_default();
            add_to(&mut self.gone, &less(&old, &base), true);
        }
        self.base = bases;
        let mut s = live;
        let g = &self.gone;
        s.out += g.out;
        s.inn += g.inn;
        s.freed += g.freed;
        s.copied += g.copied;
        s.unowned_out += g.unowned_out;
        for (&tgid, &(out, inn)) in &g.by_tgid {
            let e = s.by_tgid.entry(tgid).or_default();
            e.0 += out;
            e.1 += inn;
        }
        let doomed: Vec<u64> = self
            .last
            .iter()
            .filter(|(_, mm)| mm.tgid != 0 && ending.contains(&mm.tgid))
            .map(|(&k, _)| k)
            .collect();
        for key in &doomed {
            self.pruned += 1;
            s.entries -= 1;
            // System-wide only: the owner's per-process figures end with it
            // (a later process under its pid starts from zero).
            if let Some(old) = self.last.remove(key) {
                let base = self.base.remove(key).unwrap_or_default();
                add_to(&mut self.gone, &less(&old, &base), false);
            }
        }
        (s, doomed)
    }
}

/// Whether `new` is `old` read again later: the same owner (or the owner
/// learned since) and no counter lower.
fn follows(old: &MmSwap, new: &MmSwap) -> bool {
    (old.tgid == new.tgid || old.tgid == 0) && counts_follow(old, new)
}

/// Whether no counter of `new` is lower than `old`'s: the entry counted
/// on (whoever owns it now), rather than being made afresh.
fn counts_follow(old: &MmSwap, new: &MmSwap) -> bool {
    new.out_bytes >= old.out_bytes
        && new.in_bytes >= old.in_bytes
        && new.freed_bytes >= old.freed_bytes
        && new.copied_bytes >= old.copied_bytes
}

/// `mm`'s counts over `base`'s, under `mm`'s owner.
fn less(mm: &MmSwap, base: &MmSwap) -> MmSwap {
    MmSwap {
        out_bytes: mm.out_bytes.saturating_sub(base.out_bytes),
        in_bytes: mm.in_bytes.saturating_sub(base.in_bytes),
        freed_bytes: mm.freed_bytes.saturating_sub(base.freed_bytes),
        copied_bytes: mm.copied_bytes.saturating_sub(base.copied_bytes),
        ..*mm
    }
}
