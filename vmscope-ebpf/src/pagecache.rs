//! The page cache: `filemap:mm_filemap_add_to_page_cache` fires in the task
//! that adds a folio to a file's cache (a read that missed, readahead, a
//! fault on a file page not cached, a write to a page not cached). Its
//! pages (`1 << order`) are counted (in the followed scope) and added to
//! that task's process.

use aya_ebpf::programs::TracePointContext;
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
