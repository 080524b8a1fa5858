//! The page cache: `filemap:mm_filemap_add_to_page_cache` fires in the task
//! that adds a folio to a file's cache (a read that missed, readahead, a
//! fault on a file page not cached, a write to a page not cached). Its
//! pages (`1 << order`) are counted (in the followed scope) and added to
//! that task's process. `filemap:mm_filemap_get_pages` (6.11 on) fires
//! in a task whose read asked the cache for a range of pages: those pages
//! are counted once per read call (the hit ratio is reads less additions
//! over reads).

use aya_ebpf::{macros::map, maps::LruHashMap, programs::TracePointContext};
use vmscope_common::{counter, off};

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
