//! OOM kills: one count per victim the kernel marks (`oom:mark_victim`,
//! fired by `mark_oom_victim` for each task the OOM killer picks, memcg
//! OOMs included). A rare event: the BTF tracepoint is used where allowed
//! because it needs no tracefs, not for speed; the classic one otherwise.
//! The record's fields (pid, comm, rss, oom_score_adj) are not read yet.

use vmscope_common::counter;

use crate::maps;

#[inline(always)]
pub fn on_mark_victim() {
    maps::count(counter::OOM_KILLS);
}
