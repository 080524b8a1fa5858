//! Swap by tier, system-wide: pages out and in by zswap and by the swap
//! devices (`/proc/vmstat`), zswap's write-back, the pool and each device
//! (see `model::tiers`). A count this kernel lacks (no zswap) has no
//! series, not 0.

use super::{Series, State, Writer, system, system_gauge};
use crate::model::catalogue::Family;

pub const TIER_PAGES: Family = system(
    "vmscope_swap_tier_pages_total",
    &["direction", "tier"],
    "Pages swapped out and in by tier: tier=\"zswap\" (compressed in RAM; vmstat \
     zswpout/zswpin) or \"device\" (a swap device, which may be zram; pswpout/pswpin, \
     zswap's write-back included). Absent for zswap on a kernel without it.",
);
pub const ZSWAP_WRITTEN_BACK: Family = system(
    "vmscope_zswap_written_back_pages_total",
    &[],
    "Pages zswap wrote back from its pool to the swap device (vmstat zswpwb, 6.8+).",
);
pub const ZSWAP_ENABLED: Family = system_gauge(
    "vmscope_zswap_enabled",
    &[],
    "1 when zswap is on (its `enabled` module parameter); absent without zswap.",
);
pub const ZSWAP_POOL: Family = system_gauge(
    "vmscope_zswap_pool_bytes",
    &[],
    "zswap's compressed pool (/proc/meminfo Zswap).",
);
pub const ZSWAP_STORED: Family = system_gauge(
    "vmscope_zswap_stored_bytes",
    &[],
    "What zswap's pool holds, uncompressed (/proc/meminfo Zswapped).",
);
pub const SWAP_DEVICE_USED: Family = system_gauge(
    "vmscope_swap_device_used_bytes",
    &["device", "medium"],
    "Swap in use on each device (/proc/swaps); medium=\"zram\" (compressed RAM) or \
     \"disk\".",
);
pub const ZRAM_ORIGINAL: Family = system_gauge(
    "vmscope_zram_original_bytes",
    &["device"],
    "Data a zram device holds, uncompressed (mm_stat orig_data_size).",
);
pub const ZRAM_COMPRESSED: Family = system_gauge(
    "vmscope_zram_compressed_bytes",
    &["device"],
    "The same, compressed (mm_stat compr_data_size).",
);
pub const ZRAM_USED: Family = system_gauge(
    "vmscope_zram_used_bytes",
    &["device"],
    "Memory a zram device takes, allocator overhead included (mm_stat mem_used_total).",
);

/// The families written here.
pub const FAMILIES: &[Family] = &[
    TIER_PAGES,
    ZSWAP_WRITTEN_BACK,
    ZSWAP_ENABLED,
    ZSWAP_POOL,
    ZSWAP_STORED,
    SWAP_DEVICE_USED,
    ZRAM_ORIGINAL,
    ZRAM_COMPRESSED,
    ZRAM_USED,
];

pub(super) fn render(w: &mut Writer, state: &State) {
    let mut pages: Series = Vec::new();
    for (direction, tier, key) in [
        ("out", "zswap", "zswpout"),
        ("out", "device", "pswpout"),
        ("in", "zswap", "zswpin"),
        ("in", "device", "pswpin"),
    ] {
        if let Some(v) = state.vmstat_growth(key) {
            pages.push((
                vec![("direction", direction.into()), ("tier", tier.into())],
                v.to_string(),
            ));
        }
    }
    w.write(&TIER_PAGES, pages);
    if let Some(v) = state.vmstat_growth("zswpwb") {
        w.write(&ZSWAP_WRITTEN_BACK, vec![(vec![], v.to_string())]);
    }
    let Some(t) = &state.now.tiers else { return };
    if let Some(z) = &t.zswap {
        w.write(
            &ZSWAP_ENABLED,
            vec![(vec![], u8::from(z.enabled).to_string())],
        );
        let one =
            |v: Option<u64>| -> Series { v.map(|v| (vec![], v.to_string())).into_iter().collect() };
        w.write(&ZSWAP_POOL, one(z.pool_bytes));
        w.write(&ZSWAP_STORED, one(z.stored_bytes));
    }
    w.write(
        &SWAP_DEVICE_USED,
        t.devices
            .iter()
            .map(|d| {
                (
                    vec![("device", d.name.clone()), ("medium", d.medium.clone())],
                    d.used_bytes.to_string(),
                )
            })
            .collect(),
    );
    let zram = |f: fn(&crate::model::tiers::ZramStat) -> u64| -> Series {
        t.devices
            .iter()
            .filter_map(|d| {
                Some((
                    vec![("device", d.name.clone())],
                    f(d.zram.as_ref()?).to_string(),
                ))
            })
            .collect()
    };
    w.write(&ZRAM_ORIGINAL, zram(|z| z.orig_data_bytes));
    w.write(&ZRAM_COMPRESSED, zram(|z| z.compr_data_bytes));
    w.write(&ZRAM_USED, zram(|z| z.mem_used_bytes));
}
