//! Which cgroup a process is in: its key is read in the kernel, in the
//! process's own context, when its statistics entry is created and again
//! after any task has moved between cgroups (`cgroup:cgroup_attach_task`
//! bumps `CGROUP_EPOCH`), so the page-fault path pays one array read and a
//! compare, not a pointer walk. User space folds each interval's
//! per-process deltas into the cgroup the process was in at the read.

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_task, bpf_probe_read_kernel},
    macros::map,
    maps::{Array, HashMap},
    programs::TracePointContext,
};
use vmscope_common::{MAX_SCOPE_CGROUPS, ProcStats, cgroup_mode, counter, off};

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

/// The cgroups a `record --cgroup` follows (value unused): a task moved
/// into one joins the followed set. Filled by user space.
#[map]
pub static SCOPE_CGROUPS: HashMap<u64, u8> = HashMap::with_max_entries(MAX_SCOPE_CGROUPS, 0);

/// The classic tracepoint: also follows a task moved into a followed
/// cgroup (the record names the destination), so that its first faults
/// there are counted.
#[inline(always)]
pub fn on_attach_record(ctx: &TracePointContext) {
    on_attach();
    if !maps::filter_enabled() {
        return;
    }
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
    if root != hierarchy - 1 || SCOPE_CGROUPS.get_ptr(id).is_none() {
        return;
    }
    crate::filter::follow(ctx, pid as u32);
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
fn read_u64(addr: usize) -> Option<u64> {
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
    let cgrp = read_u64(css as usize + maps::offset(off::CSS_CGROUP))?;
    let kn = read_u64(cgrp as usize + maps::offset(off::CGROUP_KN))?;
    read_u64(kn as usize + maps::offset(off::KN_ID))
}
