//! OOM kills: one count per victim the kernel marks (`oom:mark_victim`,
//! fired by `mark_oom_victim` for each task the OOM killer picks, memcg
//! OOMs included), and, from the classic tracepoint's record, the victim's
//! details as one `OomVictim` in the `OOM_VICTIMS` ring buffer (a rare
//! event; a record that finds the buffer full is counted as lost). The BTF
//! variant, used only where the classic one cannot be (tracefs
//! unreadable), counts without details.

use aya_ebpf::{EbpfContext as _, programs::TracePointContext};
use vmscope_common::{OomVictim, counter, off, oom_field};

use crate::maps;

#[inline(always)]
pub fn on_mark_victim() {
    maps::count(counter::OOM_KILLS);
}

/// The classic tracepoint: the count, then the record.
#[inline(always)]
pub fn on_mark_victim_record(ctx: &TracePointContext) {
    on_mark_victim();
    let Some(mut entry) = maps::OOM_VICTIMS.reserve::<OomVictim>(0) else {
        maps::count(counter::OOM_RECORDS_LOST);
        return;
    };
    entry.write(victim(ctx));
    entry.submit(0);
}

/// The field at `idx`'s offset, and its `oom_field` bit when the record
/// has it (offset 0: absent).
///
/// Read without a branch on the read's result (the helper zeroes what it
/// could not read, which cannot happen inside the record): a branch per
/// field gave the verifier a path per combination of fields read, and
/// loading this program took 30 ms, the longest of all.
#[inline(always)]
fn field<T: Default>(ctx: &TracePointContext, idx: usize, bit: u32, present: &mut u32) -> T {
    let at = maps::offset(idx);
    let mut v = T::default();
    if at == 0 {
        return v;
    }
    *present |= bit;
    // SAFETY: `v` is ours and `size_of::<T>()` long; the helper checks the
    // source address.
    unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_kernel(
            (&raw mut v).cast(),
            core::mem::size_of::<T>() as u32,
            ctx.as_ptr().cast::<u8>().add(at).cast(),
        );
    }
    v
}

#[inline(always)]
fn victim(ctx: &TracePointContext) -> OomVictim {
    let mut present = 0;
    let mut v = OomVictim {
        time_ns: maps::now(),
        pid: field::<i32>(ctx, off::OOM_PID, oom_field::PID, &mut present) as u32,
        total_vm_kb: field(ctx, off::OOM_TOTAL_VM, oom_field::TOTAL_VM, &mut present),
        anon_rss_kb: field(ctx, off::OOM_ANON_RSS, oom_field::ANON_RSS, &mut present),
        file_rss_kb: field(ctx, off::OOM_FILE_RSS, oom_field::FILE_RSS, &mut present),
        shmem_rss_kb: field(ctx, off::OOM_SHMEM_RSS, oom_field::SHMEM_RSS, &mut present),
        uid: field(ctx, off::OOM_UID, oom_field::UID, &mut present),
        pgtables_kb: field(ctx, off::OOM_PGTABLES, oom_field::PGTABLES, &mut present),
        oom_score_adj: i32::from(field::<i16>(
            ctx,
            off::OOM_SCORE_ADJ,
            oom_field::OOM_SCORE_ADJ,
            &mut present,
        )),
        present: 0,
        comm: [0; 16],
        trigger_cgroup: crate::cgroup::current_key().unwrap_or(0),
        victim_cgroup: 0,
    };
    if present & oom_field::PID != 0
        && let Some(p) = maps::PROCS.get_ptr(v.pid)
    {
        // SAFETY: a map value.
        v.victim_cgroup = unsafe { (*p).cgroup };
    }
    if comm(ctx, &mut v.comm) {
        present |= oom_field::COMM;
    }
    v.present = present;
    v
}

/// The victim's `comm`: a `char[16]` array in the record, or (newer
/// kernels) a `__data_loc` string whose word holds its offset (low 16 bits)
/// and length (high 16 bits). Bytes past the string are zeroed.
#[inline(always)]
fn comm(ctx: &TracePointContext, out: &mut [u8; 16]) -> bool {
    let at = maps::offset(off::OOM_COMM);
    if at == 0 {
        return false;
    }
    let (at, len) = if maps::offset(off::OOM_COMM_DATA_LOC) != 0 {
        let Ok(word) = (unsafe { ctx.read_at::<u32>(at) }) else {
            return false;
        };
        ((word & 0xffff) as usize, (word >> 16) as usize)
    } else {
        (at, 16)
    };
    let Ok(raw) = (unsafe { ctx.read_at::<[u8; 16]>(at) }) else {
        return false;
    };
    for (i, b) in raw.iter().enumerate() {
        out[i] = if i < len { *b } else { 0 };
    }
    true
}
