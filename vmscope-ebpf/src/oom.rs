//! OOM kills: one count per victim the kernel marks (`oom:mark_victim`,
//! fired by `mark_oom_victim` for each task the OOM killer picks, memcg
//! OOMs included). A rare event, so the classic tracepoint is cheap enough;
//! the record's fields (pid, comm, rss, oom_score_adj) are not read yet.

use vmscope_common::counter;

use crate::maps;

#[inline(always)]
pub fn on_mark_victim() {
    maps::count(counter::OOM_KILLS);
}
