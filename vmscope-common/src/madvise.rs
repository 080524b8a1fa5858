//! madvise behaviours: a compact slot per behaviour for the eBPF maps, and
//! the names user space prints.

/// Behaviours 0..=31 map to themselves, 100..=103 to 32..=35, anything else
/// to `OTHER`.
pub const SLOTS: u32 = 37;
pub const OTHER: u32 = 36;
const _: () = assert!(OTHER < SLOTS);

#[inline(always)]
pub fn slot(behavior: u64) -> u32 {
    if behavior < 32 {
        behavior as u32
    } else if (100..=103).contains(&behavior) {
        32 + (behavior - 100) as u32
    } else {
        OTHER
    }
}

/// Whether a behaviour faults pages in (MADV_POPULATE_READ/WRITE), so the
/// swap entries it drops are swap-in rather than entries freed.
#[inline(always)]
pub fn populates(behavior: u64) -> bool {
    behavior == 22 || behavior == 23
}

/// Behaviour groups counted per process (so per cgroup): the ones whose
/// cost or gain vmscope measures, each on its own, and the rest together.
/// A per-process array of all [`SLOTS`] would triple a process's entry.
pub const GROUPS: usize = 8;
/// The groups' names, as recordings and `serve` label them.
pub const GROUP_NAMES: [&str; GROUPS] = [
    "dontneed", "free", "cold", "pageout", "willneed", "populate", "hugepage", "other",
];

/// The group of a behaviour: DONTNEED and DONTNEED_LOCKED; FREE; COLD;
/// PAGEOUT; WILLNEED; POPULATE_READ and POPULATE_WRITE; HUGEPAGE,
/// NOHUGEPAGE and COLLAPSE; everything else.
#[inline(always)]
pub fn group(behavior: u64) -> usize {
    match behavior {
        4 | 24 => 0,
        8 => 1,
        20 => 2,
        21 => 3,
        3 => 4,
        22 | 23 => 5,
        14 | 15 | 25 => 6,
        _ => 7,
    }
}

/// The behaviour value a slot stands for (`None` for `OTHER`).
pub fn slot_value(slot: u32) -> Option<u32> {
    match slot {
        0..=31 => Some(slot),
        32..=35 => Some(100 + slot - 32),
        _ => None,
    }
}

/// The kernel's name for a behaviour, without the `MADV_` prefix.
pub fn name(behavior: u32) -> Option<&'static str> {
    Some(match behavior {
        0 => "NORMAL",
        1 => "RANDOM",
        2 => "SEQUENTIAL",
        3 => "WILLNEED",
        4 => "DONTNEED",
        8 => "FREE",
        9 => "REMOVE",
        10 => "DONTFORK",
        11 => "DOFORK",
        12 => "MERGEABLE",
        13 => "UNMERGEABLE",
        14 => "HUGEPAGE",
        15 => "NOHUGEPAGE",
        16 => "DONTDUMP",
        17 => "DODUMP",
        18 => "WIPEONFORK",
        19 => "KEEPONFORK",
        20 => "COLD",
        21 => "PAGEOUT",
        22 => "POPULATE_READ",
        23 => "POPULATE_WRITE",
        24 => "DONTNEED_LOCKED",
        25 => "COLLAPSE",
        100 => "HWPOISON",
        101 => "SOFT_OFFLINE",
        102 => "GUARD_INSTALL",
        103 => "GUARD_REMOVE",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip() {
        for b in [0u64, 4, 8, 20, 23, 31, 100, 103] {
            assert_eq!(slot_value(slot(b)), Some(b as u32));
        }
        assert_eq!(slot(32), OTHER);
        assert_eq!(slot(99), OTHER);
        assert_eq!(slot(u64::MAX), OTHER);
        assert_eq!(slot_value(OTHER), None);
    }

    #[test]
    fn names_match_the_uapi() {
        assert_eq!(name(8), Some("FREE"));
        assert_eq!(name(4), Some("DONTNEED"));
        assert_eq!(name(20), Some("COLD"));
        assert_eq!(name(21), Some("PAGEOUT"));
        assert_eq!(name(5), None);
    }

    #[test]
    fn groups_name_their_behaviours() {
        let named = |b: u64| GROUP_NAMES[group(b)];
        assert_eq!(named(4), "dontneed");
        assert_eq!(named(24), "dontneed");
        assert_eq!(named(8), "free");
        assert_eq!(named(20), "cold");
        assert_eq!(named(21), "pageout");
        assert_eq!(named(3), "willneed");
        assert_eq!(named(23), "populate");
        assert_eq!(named(25), "hugepage");
        assert_eq!(named(9), "other");
        assert_eq!(named(u64::MAX), "other");
    }
}
