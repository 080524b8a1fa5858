//! Which cgroup a process is in: its key is read in the kernel, in the
//! process's own context, when its statistics entry is created and again
//! after any task has moved between cgroups (`cgroup:cgroup_attach_task`
//! bumps `CGROUP_EPOCH`), so the page-fault path pays one array read and a
//! compare, not a pointer walk. The move's record also sets the moved
//! process's key itself, which a process faulting from its CPU's fault
//! cache would otherwise not look at until it lost that CPU. User space
//! folds each interval's per-process deltas into the cgroup the process
//! was in at the read.
//!
//! Cgroups created and removed in that hierarchy are reported through a
//! ring buffer (rare events), so that user space names a cgroup that lives
//! shorter than a read and forgets one as soon as it goes.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_task, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes,
    },
    macros::map,
    maps::{Array, PerCpuArray, RingBuf},
    programs::TracePointContext,
};
use vmscope_common::{
    CGROUP_RING_BYTES, CgroupEvent, ProcStats, SCOPE_PATH_BYTES, ScopePath, cgroup_event,
    cgroup_mode, counter, off,
};

use crate::maps;

/// Grows with every task moved between cgroups.
#[map]
pub static CGROUP_EPOCH: Array<u64> = Array::with_max_entries(1, 0);

/// `cgroup:cgroup_attach_task`: a task moved; every key may be stale.
#[inline(always)]
pub fn on_attach() {
    maps::count(counter::CGROUP_MOVES);
    if let Some(e) = CGROUP_EPOCH.get_ptr_mut(0) {
        maps::atomic_inc(e);
    }
}

/// The cgroup a `record --cgroup` follows, by path: a task moved into it
/// or into any cgroup below it, created before or after the recording
/// started, joins the followed set. Filled by user space.
#[map]
pub static SCOPE_PATH: Array<ScopePath> = Array::with_max_entries(1, 0);

/// Room to compare a moved task's destination path with `SCOPE_PATH`.
#[map]
static PATH_SCRATCH: PerCpuArray<[u8; SCOPE_PATH_BYTES]> = PerCpuArray::with_max_entries(1, 0);

/// Cgroups created and removed (`CgroupEvent`), drained by user space at
/// each read.
#[map]
pub static CGROUP_EVENTS: RingBuf = RingBuf::with_byte_size(CGROUP_RING_BYTES, 0);

/// The classic tracepoint: also follows a task moved into the followed
/// cgroup or below it (the record names the destination), so that its
/// first faults there are counted.
#[inline(always)]
pub fn on_attach_record(ctx: &TracePointContext) {
    on_attach();
    rekey(ctx);
    if !maps::filter_enabled() {
        return;
    }
    let (root_at, path_at, pid_at) = (
        maps::offset(off::ATTACH_DST_ROOT),
        maps::offset(off::ATTACH_DST_PATH),
        maps::offset(off::ATTACH_PID),
    );
    let hierarchy = maps::offset(off::CGROUP_HIERARCHY) as i32;
    if path_at == 0 || pid_at == 0 || root_at == 0 || hierarchy == 0 {
        return;
    }
    // SAFETY (all three): reads within the record at its format's offsets.
    let (Ok(root), Ok(word), Ok(pid)) = (
        unsafe { ctx.read_at::<i32>(root_at) },
        unsafe { ctx.read_at::<u32>(path_at) },
        unsafe { ctx.read_at::<i32>(pid_at) },
    ) else {
        return;
    };
    if root != hierarchy - 1 || !in_scope(ctx, word) {
        return;
    }
    crate::filter::follow(ctx, pid as u32);
}

/// Sets the moved process's key to its destination, from the record: a
/// process that faults on while one CPU's fault cache holds it looks its
/// entry up only when another process faults there, so the epoch alone
/// would leave its key stale, and its faults in the cgroup it left, for
/// as long as it keeps that CPU. The record's pid is the moved thread
/// group's leader (or the one thread moved: then no process's entry).
#[inline(always)]
fn rekey(ctx: &TracePointContext) {
    let (root_at, id_at, pid_at) = (
        maps::offset(off::ATTACH_DST_ROOT),
        maps::offset(off::ATTACH_DST_ID),
        maps::offset(off::ATTACH_PID),
    );
    let hierarchy = maps::offset(off::CGROUP_HIERARCHY) as i32;
    if id_at == 0 || pid_at == 0 || root_at == 0 || hierarchy == 0 {
        return;
    }
    // SAFETY (all three): reads within the record at its format's offsets.
    let (Ok(root), Ok(id), Ok(pid)) = (
        unsafe { ctx.read_at::<i32>(root_at) },
        unsafe { ctx.read_at::<u64>(id_at) },
        unsafe { ctx.read_at::<i32>(pid_at) },
    ) else {
        return;
    };
    if root != hierarchy - 1 || id == 0 {
        return;
    }
    if let Some(p) = maps::PROCS.get_ptr_mut(pid as u32) {
        // SAFETY: a map value.
        unsafe { (*p).cgroup = id };
    }
}

/// Whether the `__data_loc` string at `word` (offset in the low 16 bits)
/// is the followed path or a path below it.
#[inline(always)]
fn in_scope(ctx: &TracePointContext, word: u32) -> bool {
    let Some(scope) = SCOPE_PATH.get(0) else {
        return false;
    };
    let n = scope.len as usize;
    if n == 0 || n >= SCOPE_PATH_BYTES {
        return false;
    }
    // The hierarchy's root: every cgroup is below it.
    if n == 1 {
        return true;
    }
    let Some(buf) = PATH_SCRATCH.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: a per-CPU map value, this CPU's only; the source is within
    // the record.
    let buf = unsafe { &mut *buf };
    let src = unsafe { ctx.as_ptr().add((word & 0xffff) as usize) } as *const u8;
    let Ok(got) = (unsafe { bpf_probe_read_kernel_str_bytes(src, buf) }).map(|b| b.len()) else {
        return false;
    };
    if got < n {
        return false;
    }
    // Word by word, with the masks user space computed from `n` (see
    // `ScopePath::mask`): no branch on `n` inside the loop, which older
    // verifiers (6.1) would follow path by path past their limit.
    let mut diff = 0u64;
    for w in 0..SCOPE_PATH_BYTES / 8 {
        let start = w * 8;
        // SAFETY: both arrays hold SCOPE_PATH_BYTES bytes, 8-aligned (a
        // map value, and a field after a u64), so words 0..64 lie within.
        let (a, b) = unsafe {
            (
                buf.as_ptr().add(start).cast::<u64>().read(),
                scope.path.as_ptr().add(start).cast::<u64>().read(),
            )
        };
        diff |= (a ^ b) & scope.mask[w];
    }
    if diff != 0 {
        return false;
    }
    // The path itself, or one below it (not a sibling sharing a prefix).
    // The index is re-read and masked: the compiler would drop a mask it
    // can prove redundant, and older verifiers (6.1) then follow the loop
    // into a branch whose bounds on `n` contradict each other and refuse
    // the program there.
    let at = unsafe { core::ptr::read_volatile(&raw const n) } & (SCOPE_PATH_BYTES - 1);
    got == n || buf[at] == b'/'
}

/// `cgroup:cgroup_mkdir` and `cgroup_rmdir` (classic): a cgroup of the
/// hierarchy processes are keyed by was created or removed.
#[inline(always)]
pub fn on_dir(ctx: &TracePointContext, kind: u32) {
    let (root_at, id_at, path_at) = (
        maps::offset(off::CGROUP_DIR_ROOT),
        maps::offset(off::CGROUP_DIR_ID),
        maps::offset(off::CGROUP_DIR_PATH),
    );
    let hierarchy = maps::offset(off::CGROUP_HIERARCHY) as i32;
    if id_at == 0 || root_at == 0 || hierarchy == 0 {
        return;
    }
    // SAFETY (both): reads within the record at its format's offsets.
    let (Ok(root), Ok(id)) = (unsafe { ctx.read_at::<i32>(root_at) }, unsafe {
        ctx.read_at::<u64>(id_at)
    }) else {
        return;
    };
    if root != hierarchy - 1 {
        return;
    }
    let Some(mut entry) = CGROUP_EVENTS.reserve::<CgroupEvent>(0) else {
        maps::count(counter::CGROUP_EVENTS_LOST);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: the reserved record, ours until submitted; the source is
    // within the tracepoint's record.
    unsafe {
        (*ev).id = id;
        (*ev).kind = kind;
        (*ev).len = 0;
        if kind == cgroup_event::CREATED
            && path_at != 0
            && let Ok(word) = ctx.read_at::<u32>(path_at)
        {
            let src = ctx.as_ptr().add((word & 0xffff) as usize) as *const u8;
            if let Ok(got) = bpf_probe_read_kernel_str_bytes(src, &mut (*ev).path) {
                (*ev).len = got.len() as u32;
            }
        }
    }
    entry.submit(0);
}

/// Brings `p`'s (the current process's) cgroup key up to date.
#[inline(always)]
pub fn refresh(p: *mut ProcStats) {
    let epoch = CGROUP_EPOCH.get(0).copied().unwrap_or(0).wrapping_add(1);
    // SAFETY: a map value.
    unsafe {
        if (*p).cgroup_epoch == epoch {
            return;
        }
        if let Some(key) = current_key() {
            (*p).cgroup = key;
        }
        (*p).cgroup_epoch = epoch;
    }
}

/// The current task's cgroup key, as `cgroup_mode` says to read it.
#[inline(always)]
pub fn current_key() -> Option<u64> {
    match maps::offset(off::CGROUP_MODE) as u32 {
        cgroup_mode::V2 => Some(unsafe { bpf_get_current_cgroup_id() }),
        cgroup_mode::V1_MEMCG => v1_memcg(),
        _ => None,
    }
}

#[inline(always)]
pub fn read_u64(addr: usize) -> Option<u64> {
    // SAFETY: kernel reads through the helper, which checks them.
    unsafe { bpf_probe_read_kernel(addr as *const u64) }
        .ok()
        .filter(|v| *v != 0)
}

/// `current->cgroups->subsys[memory_cgrp_id]->cgroup->kn->id`.
#[inline(always)]
fn v1_memcg() -> Option<u64> {
    let task = unsafe { bpf_get_current_task() } as usize;
    let set = read_u64(task + maps::offset(off::TASK_CGROUPS))?;
    let css = read_u64(set as usize + maps::offset(off::CSS_SET_MEMORY))?;
    css_cgroup_id(css as usize)
}

/// `css->cgroup->kn->id`: the id of the cgroup a subsystem state is of
/// (a memory cgroup's, for v1 keys and page-cache removals).
#[inline(always)]
pub fn css_cgroup_id(css: usize) -> Option<u64> {
    let cgrp = read_u64(css + maps::offset(off::CSS_CGROUP))?;
    let kn = read_u64(cgrp as usize + maps::offset(off::CGROUP_KN))?;
    read_u64(kn as usize + maps::offset(off::KN_ID))
}
