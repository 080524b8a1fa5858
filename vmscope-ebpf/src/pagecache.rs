//! The page cache: `filemap:mm_filemap_add_to_page_cache` fires in the task
//! that adds a folio to a file's cache (a read that missed, readahead, a
//! fault on a file page not cached, a write to a page not cached). Its
//! pages (`1 << order`) are counted (in the followed scope) and added to
//! that task's process. `filemap:mm_filemap_get_pages` (6.11 on) fires
//! in a task whose read asked the cache for a range of pages: those pages
//! are counted once per read call (the hit ratio is reads less additions
//! over reads).
//!
//! `filemap:mm_filemap_delete_from_page_cache` (a BTF tracepoint: its
//! argument is the folio) fires for each folio taken out of a file's cache.
//! A removal by a task in reclaim (`PF_MEMALLOC`) is an eviction, any other
//! a drop (truncation, deletion, invalidation); both are counted
//! system-wide and against the memory cgroup the folio is charged to,
//! which is not the removing task's (kswapd evicts for every cgroup).

use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_probe_read_kernel},
    macros::map,
    maps::{HashMap, LruHashMap},
    programs::TracePointContext,
};
use vmscope_common::{CACHE_CGROUPS, CacheRemovals, counter, off};

use crate::maps;

pub fn on_add_to_page_cache(ctx: &TracePointContext) {
    if !maps::in_scope() {
        return;
    }
    // Kernels before 6.4 record no order: each event is a folio, counted
    // as one page (see docs/metrics.md).
    let at = maps::offset(off::FILEMAP_ADD_ORDER);
    let order = if at == 0 {
        0
    } else {
        // SAFETY: a record field at the offset tracefs gave.
        unsafe { ctx.read_at::<u8>(at) }.unwrap_or(0)
    };
    // A folio is at most a PMD's worth of pages on every architecture
    // vmscope runs on; the mask keeps the shift in range for the verifier.
    let pages = 1u64 << (order & 15);
    maps::add(counter::PAGE_CACHE_ADDED, pages);
    if let Some(p) = maps::current_proc() {
        // SAFETY: a map value.
        maps::atomic_add(unsafe { &raw mut (*p).page_cache_added_pages }, pages);
    }
}

/// The last range each thread asked the page cache for: one file, its
/// last page, and the first page of the latest request.
#[derive(Clone, Copy)]
pub struct ReadSpan {
    file: u64,
    last: u64,
    index: u64,
}

/// Keyed by thread id; LRU, so a thread that stops reading ages out.
#[map]
static READ_SPANS: LruHashMap<u32, ReadSpan> = LruHashMap::with_max_entries(MAX_READERS, 0);

/// Threads whose last read is remembered at once.
const MAX_READERS: u32 = 4096;

/// `filemap:mm_filemap_get_pages` fires each time `filemap_read` (read,
/// pread, readv, splice, sendfile) has a batch of folios for the rest of
/// its range: a 1 MiB read fires it once per batch, each time with the
/// range from where it got to up to the same last page. Each read's pages
/// are counted once: a call that continues the thread's last one (same
/// file and last page, further on) adds nothing.
pub fn on_get_pages(ctx: &TracePointContext) {
    if !maps::in_scope() {
        return;
    }
    let field = |i: usize| {
        let at = maps::offset(i);
        // SAFETY: a record field at the offset tracefs gave.
        (at != 0).then(|| unsafe { ctx.read_at::<u64>(at) }.unwrap_or(0))
    };
    let (Some(ino), Some(index), Some(last)) = (
        field(off::FILEMAP_READ_INO),
        field(off::FILEMAP_READ_INDEX),
        field(off::FILEMAP_READ_LAST),
    ) else {
        return;
    };
    let at = maps::offset(off::FILEMAP_READ_DEV);
    // SAFETY: as above; `dev_t` is 4 bytes in the record.
    let dev = if at == 0 {
        0
    } else {
        unsafe { ctx.read_at::<u32>(at) }.unwrap_or(0)
    };
    if last < index {
        return;
    }
    let file = ino ^ (u64::from(dev) << 40);
    let span = ReadSpan { file, last, index };
    let tid = maps::current_tid();
    let pages = match READ_SPANS.get_ptr_mut(tid) {
        // SAFETY: a map value.
        Some(s) => unsafe {
            let cont = (*s).file == file && (*s).last == last && index > (*s).index;
            *s = span;
            if cont { 0 } else { last - index + 1 }
        },
        None => {
            let _ = READ_SPANS.insert(tid, span, 0);
            last - index + 1
        }
    };
    if pages == 0 {
        return;
    }
    maps::add(counter::PAGE_CACHE_READ, pages);
    if let Some(p) = maps::current_proc() {
        // SAFETY: a map value.
        maps::atomic_add(unsafe { &raw mut (*p).page_cache_read_pages }, pages);
    }
}

/// Page-cache pages removed, by the id of the memory cgroup they were
/// charged to. Read and pruned by user space.
#[map]
pub static CACHE_REMOVALS: HashMap<u64, CacheRemovals> =
    HashMap::with_max_entries(CACHE_CGROUPS, 0);

/// `PF_MEMALLOC` (include/linux/sched.h): the task is reclaiming memory.
const PF_MEMALLOC: u32 = 0x800;
/// `memcg_data`'s low bits: flags, never part of the cgroup's address; a
/// folio whose `MEMCG_DATA_OBJEXTS`/`OBJCGS` bit (1) is set holds no
/// memory cgroup pointer.
const MEMCG_DATA_FLAGS: u64 = 7;
const MEMCG_DATA_OBJEXTS: u64 = 1;

#[inline(always)]
fn read<T>(addr: usize) -> Option<T> {
    // SAFETY: kernel reads through the helper, which checks them.
    unsafe { bpf_probe_read_kernel(addr as *const T) }.ok()
}

/// `mm_filemap_delete_from_page_cache(struct folio *folio)`.
pub fn on_delete_from_page_cache(folio: usize) {
    let (memcg_at, flags_at) = (
        maps::offset(off::FOLIO_MEMCG_DATA),
        maps::offset(off::TASK_FLAGS),
    );
    if memcg_at == 0 || flags_at == 0 {
        return;
    }
    let task = unsafe { bpf_get_current_task() } as usize;
    let evicted = read::<u32>(task + flags_at).is_some_and(|f| f & PF_MEMALLOC != 0);
    let pages = folio_pages(folio);
    maps::add(
        if evicted {
            counter::PAGE_CACHE_EVICTED
        } else {
            counter::PAGE_CACHE_DROPPED
        },
        pages,
    );
    let Some(slot) = memcg_id(folio + memcg_at).and_then(removals) else {
        maps::add(counter::PAGE_CACHE_REMOVED_UNCHARGED, pages);
        return;
    };
    // SAFETY: a map value.
    let field = unsafe {
        if evicted {
            &raw mut (*slot).evicted
        } else {
            &raw mut (*slot).dropped
        }
    };
    maps::atomic_add(field, pages);
}

/// The folio's pages: 1, or a large folio's count (`PG_head` set).
#[inline(always)]
fn folio_pages(folio: usize) -> u64 {
    let Some(flags) = read::<u64>(folio + maps::offset(off::FOLIO_FLAGS)) else {
        return 1;
    };
    let head = maps::offset(off::PG_HEAD) & 63;
    let at = maps::offset(off::FOLIO_NR_PAGES);
    if flags & (1 << head) == 0 || at == 0 {
        return 1;
    }
    match read::<u32>(folio + at) {
        Some(n) if n > 0 => u64::from(n),
        _ => 1,
    }
}

/// `memcg->css.cgroup->kn->id`, from the folio's `memcg_data` at `at`.
#[inline(always)]
fn memcg_id(at: usize) -> Option<u64> {
    let data = read::<u64>(at)?;
    if data & MEMCG_DATA_OBJEXTS != 0 {
        return None;
    }
    let memcg = (data & !MEMCG_DATA_FLAGS) as usize;
    if memcg == 0 {
        return None;
    }
    crate::cgroup::css_cgroup_id(memcg + maps::offset(off::MEMCG_CSS))
}

/// The cgroup's entry, made on its first removal.
#[inline(always)]
fn removals(id: u64) -> Option<*mut CacheRemovals> {
    if let Some(p) = CACHE_REMOVALS.get_ptr_mut(id) {
        return Some(p);
    }
    // BPF_NOEXIST: another CPU may have made it meanwhile; then use that.
    let _ = CACHE_REMOVALS.insert(id, CacheRemovals::default(), 1);
    CACHE_REMOVALS.get_ptr_mut(id)
}
