//! A recording's per-cgroup table: vmscope's counts for each cgroup (its
//! processes' growth while they were in it) next to the cgroup's own
//! books as last read. Nothing when the recording has no cgroups.

use std::fmt::Write as _;

use super::{html_escape, oom::NULL};
use crate::{
    model::{catalogue::reclaim, cgroup::CgroupTotal, process::ProcessTotal, recording::Recording},
    units::fmt_value,
};

fn or_null(v: Option<u64>) -> String {
    v.map_or_else(|| NULL.to_owned(), |v| v.to_string())
}

/// The cgroup's limit: a size, `unlimited`, or unknown.
fn limit(c: &CgroupTotal) -> String {
    match &c.books_last {
        Some(b) => b
            .limit_bytes
            .map_or_else(|| "unlimited".into(), |v| fmt_value(v as f64, "bytes")),
        None => NULL.into(),
    }
}

/// madvise calls by behaviour, the groups that have any: `free 700,
/// dontneed 2`; `0` for none.
fn madvise(t: &ProcessTotal) -> String {
    let groups: Vec<String> = t
        .madvise
        .named()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if groups.is_empty() {
        "0".into()
    } else {
        groups.join(", ")
    }
}

/// The section, headings at `level`.
pub fn section(rec: &Recording, level: u8) -> String {
    if rec.cgroups.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<section id=\"cgroups\"><h{level}>Cgroups</h{level}><table><thead><tr>\
         <th class=\"l\">cgroup</th><th>faults</th><th>major</th><th>reclaim stall ms</th>\
         <th>swap-out pages</th><th>swap-in pages</th><th class=\"l\">madvise calls</th>\
         <th>limit</th><th>usage</th>\
         <th>OOM kills</th><th>victims recorded</th></tr></thead><tbody>"
    );
    for c in &rec.cgroups {
        let t = &c.totals;
        let name = c.path.clone().unwrap_or_else(|| format!("cgroup#{}", c.id));
        let books = c.books_last.as_ref();
        let victims = rec
            .oom_kills
            .iter()
            .filter(|k| k.cgroup.is_some() && k.cgroup == c.path)
            .count();
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td>\
             <td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{victims}</td></tr>",
            html_escape(&name),
            or_null(t.faults.total),
            or_null(t.major_faults),
            reclaim::STALLS
                .iter()
                .filter_map(|k| k.ns.total(t))
                .fold(0, u64::saturating_add) as f64
                / 1e6,
            or_null(t.swap_out_pages),
            or_null(t.swap_in_pages),
            madvise(t),
            limit(c),
            books
                .and_then(|b| b.usage_bytes)
                .map_or_else(|| NULL.into(), |v| fmt_value(v as f64, "bytes")),
            or_null(books.and_then(|b| b.events.get("oom_kill").copied())),
        );
    }
    let _ = writeln!(
        s,
        "</tbody></table><p>{} cgroups, most faults first. Faults, reclaim stall (direct and \
         memcg), swap and madvise calls (by behaviour) are vmscope's counts of the cgroup's processes while they were in \
         it; limit, usage and OOM kills are the cgroup's own books at their last reading \
         (OOM kills: v1 <code>memory.oom_control</code>, v2 <code>memory.events</code>, \
         since the cgroup was made); victims recorded: the OOM kills above in this cgroup. \
         {NULL}: unknown.</p></section>",
        rec.cgroups.len()
    );
    s
}
