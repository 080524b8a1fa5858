//! Pages removed from the page cache, per memory cgroup, against the
//! kernel's own books: a cold file read through a cgroup four times smaller
//! than it (its limit's reclaim evicts as the read goes on, in large
//! folios on kernels that cache files in them), where the cgroup's
//! evictions equal the file pages the kernel says reclaim freed
//! (`/proc/vmstat` `pgsteal_file`, and the inode shrinker's steals), and
//! what is left equals the cgroup's own cache (`memory.stat`); and a
//! cached file deleted by a process of another cgroup, whose pages count
//! as dropped against the cgroup that cached them, as `mincore` counted
//! them before; and a mapped file paged out with MADV_PAGEOUT, whose pages
//! `mincore` saw leave are the cgroup's evictions.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use vmscope_tests::{pressure, *};

const MIB: u64 = 1 << 20;
const PROBE: &str = "filemap:mm_filemap_delete_from_page_cache";

fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// A file of `bytes` on the disk (the target directory, not a tmpfs),
/// written and then dropped from the cache, in a directory of its own.
fn cold_file(bytes: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("data");
    write_cold_file(&path, bytes);
    (dir, path)
}

/// The cgroup's page cache in bytes by its own `memory.stat` (v1 `cache`,
/// v2 `file`).
fn cache_bytes(cg: &pressure::MemCgroup) -> u64 {
    let path = cg.path().join("memory.stat");
    let stat = std::fs::read_to_string(&path).unwrap();
    let key = if cg.version() == 1 { "cache " } else { "file " };
    stat.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {}", path.display()))
}

/// File pages reclaim freed, by the kernel's count: from the LRU
/// (`pgsteal_file`) and with their inodes (`pginodesteal`,
/// `kswapd_inodesteal`).
fn stolen(v: &std::collections::BTreeMap<String, u64>) -> u64 {
    ["pgsteal_file", "pginodesteal", "kswapd_inodesteal"]
        .iter()
        .map(|k| v.get(*k).copied().unwrap_or(0))
        .sum()
}

/// The cgroup's row of the recording's `page_cache.cgroups`.
fn row<'a>(rec: &'a serde_json::Value, cg: &pressure::MemCgroup) -> &'a serde_json::Value {
    let leaf = cg.path().file_name().unwrap().to_str().unwrap().to_string();
    let pc = &rec["page_cache"];
    pc["cgroups"]
        .as_array()
        .unwrap_or_else(|| panic!("no page_cache.cgroups in {pc:#}"))
        .iter()
        .find(|c| c["path"].as_str().is_some_and(|p| p.ends_with(&leaf)))
        .unwrap_or_else(|| panic!("no row for {leaf} in {pc:#}"))
}

#[test]
fn a_cgroups_evictions_equal_the_file_pages_reclaim_freed_and_what_is_left_its_cache() {
    if !root_or_skip(
        "a_cgroups_evictions_equal_the_file_pages_reclaim_freed_and_what_is_left_its_cache",
    ) {
        return;
    }
    let _alone = pressure::exclusive();
    let bytes = 512 * MIB;
    let (dir, path) = cold_file(bytes);
    let pages = bytes / page_bytes();
    let cg = pressure::MemCgroup::new(128 * MIB);
    assert_eq!(cache_bytes(&cg), 0, "a new cgroup holds no cache");
    // Reads of 1 MiB: readahead then caches the file in large folios
    // (on kernels whose file system takes them), each evicted whole.
    let input = format!("if={}", path_str(&path));
    let argv = ["dd", &input, "of=/dev/null", "bs=1M", "status=none"];
    let wrapped = cg.in_cgroup_argv(&argv);
    let before = stolen(&pressure::vmstat());
    let (o, rec) = record_to(dir.path(), "evict", &wrapped, &[], Duration::from_secs(300));
    let after = stolen(&pressure::vmstat());
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    let probe = probe(&rec, PROBE);
    assert_eq!(probe["attached"], true, "{probe}");
    let cache_left = cache_bytes(&cg) / page_bytes();
    let r = row(&rec, &cg);
    let n = |k: &str| {
        r[k].as_u64()
            .unwrap_or_else(|| panic!("{k} is not a count: {r:#}"))
    };
    let (evicted, dropped, added) = (n("evicted_pages"), n("dropped_pages"), n("added_pages"));
    let system = rec["totals"]["counters"]["page_cache_evicted_pages"]
        .as_u64()
        .unwrap();
    eprintln!(
        "evicted {evicted}, dropped {dropped}, added {added}, left {cache_left}; \
         system-wide {system}; the kernel's file steals {}",
        after - before
    );
    // The limit holds a quarter of the file: reclaim evicted most of it.
    assert!(evicted >= pages / 2, "{evicted} of {pages} pages evicted");
    // Every file page reclaim freed meanwhile was this cgroup's (nothing
    // else here reclaims while it runs), and the count is in pages
    // whatever the folios' size.
    let slack = |v: u64| (v / 100).max(64);
    assert!(
        evicted.abs_diff(after - before) <= slack(evicted),
        "{evicted} pages evicted from the cgroup, {} file pages freed by reclaim",
        after - before
    );
    // The system-wide count holds the cgroup's (and whatever else the
    // machine removed under reclaim meanwhile).
    assert!(
        system >= evicted,
        "system-wide {system}, the cgroup's {evicted}"
    );
    // Nothing was deleted or truncated.
    assert!(dropped <= 64, "{dropped} pages dropped");
    // What the cgroup's processes added less what left is what it holds.
    let held = added.saturating_sub(evicted + dropped);
    assert!(
        held.abs_diff(cache_left) <= 64,
        "added {added} - evicted {evicted} - dropped {dropped} = {held}, \
         but the cgroup's memory.stat holds {cache_left} pages"
    );
}

#[test]
fn pages_deleted_by_another_cgroups_process_count_as_dropped_against_the_cgroup_that_cached_them() {
    if !root_or_skip(
        "pages_deleted_by_another_cgroups_process_count_as_dropped_against_the_cgroup_that_cached_them",
    ) {
        return;
    }
    let _alone = pressure::exclusive();
    let bytes = 64 * MIB;
    let (dir, path) = cold_file(bytes);
    let pages = bytes / page_bytes();
    let (owner, remover) = (
        pressure::MemCgroup::new(1 << 30),
        pressure::MemCgroup::new(1 << 30),
    );
    // The owner caches the whole file, outside the recording.
    let t = testchild();
    let mut c = owner.command(&t);
    c.args(["readpass", &pages.to_string(), path_str(&path)]);
    let o = run_with_timeout(c, Duration::from_secs(120));
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    let cached = resident_pages(&path, bytes as usize);
    assert!(
        cached > pages * 99 / 100,
        "{cached} of {pages} pages cached"
    );
    // Recorded: a process of the owner's (so that the recording lists
    // it), then a process of the remover's that deletes the file.
    let procs = |cg: &pressure::MemCgroup| path_str(&cg.procs_file()).to_string();
    let script = format!(
        "sh -c 'echo $$ > {o} && exec cat /dev/null' && echo $$ > {r} && rm {f} && sleep 0.6",
        o = procs(&owner),
        r = procs(&remover),
        f = path_str(&path),
    );
    let (o, rec) = record_to(
        dir.path(),
        "drop",
        &["sh", "-c", &script],
        &[],
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    let r = row(&rec, &owner);
    assert_eq!(r["evicted_pages"], 0, "{r:#}");
    let dropped = r["dropped_pages"].as_u64().unwrap();
    assert!(
        dropped.abs_diff(cached) <= 16,
        "{dropped} pages dropped against the owner, {cached} cached before the deletion"
    );
    let other = row(&rec, &remover);
    assert_eq!(other["dropped_pages"], 0, "{other:#}");
}

#[test]
fn madv_pageout_of_a_mapped_file_counts_as_evictions_of_the_cgroup_that_cached_it() {
    if !root_or_skip(
        "madv_pageout_of_a_mapped_file_counts_as_evictions_of_the_cgroup_that_cached_it",
    ) {
        return;
    }
    let _alone = pressure::exclusive();
    let bytes = 32 * MIB;
    let (dir, path) = cold_file(bytes);
    let pages = bytes / page_bytes();
    let cg = pressure::MemCgroup::new(1 << 30);
    let t = testchild();
    let argv = [path_str(&t), "pageout", &pages.to_string(), path_str(&path)];
    let wrapped = cg.in_cgroup_argv(&argv);
    let (o, rec) = record_to(
        dir.path(),
        "pageout",
        &wrapped,
        &[],
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    let out = text(&o.stdout);
    let (before, after) = out
        .lines()
        .find_map(|l| {
            let mut w = l.strip_prefix("pageout ")?.split(' ');
            Some((
                w.next()?.parse::<u64>().ok()?,
                w.next()?.parse::<u64>().ok()?,
            ))
        })
        .unwrap_or_else(|| panic!("no pageout line in {out}"));
    // The child's own reclaim took the pages `mincore` saw leave: the
    // cgroup's evictions, not drops (vmstat's pgsteal_file does not count
    // MADV_PAGEOUT, so the cache's own residency is the truth here).
    assert!(
        before > pages * 99 / 100,
        "{before} of {pages} pages mapped"
    );
    let r = row(&rec, &cg);
    assert_eq!(r["evicted_pages"], before - after, "{r:#}");
    assert_eq!(r["dropped_pages"], 0, "{r:#}");
}

#[test]
fn without_the_removal_hook_evictions_are_unavailable_not_zero() {
    if !root_or_skip("without_the_removal_hook_evictions_are_unavailable_not_zero") {
        return;
    }
    let _alone = pressure::exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cg = pressure::MemCgroup::new(1 << 30);
    let wrapped = cg.in_cgroup_argv(&["cat", "/proc/self/status"]);
    let (o, rec) = record_to(
        dir.path(),
        "off",
        &wrapped,
        &[("VMSCOPE_DISABLE_PROBES", PROBE)],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    let probe = probe(&rec, PROBE);
    assert_eq!(probe["attached"], false, "{probe}");
    assert!(
        probe["reason"]
            .as_str()
            .is_some_and(|r| r.contains("disabled")),
        "{probe}"
    );
    assert!(
        rec["totals"]["counters"]
            .get("page_cache_evicted_pages")
            .is_none_or(serde_json::Value::is_null),
        "{:#}",
        rec["totals"]["counters"]
    );
    let leaf = cg.path().file_name().unwrap().to_str().unwrap().to_string();
    for c in rec["page_cache"]["cgroups"].as_array().unwrap() {
        if c["path"].as_str().is_some_and(|p| p.ends_with(&leaf)) {
            assert!(c["evicted_pages"].is_null(), "{c:#}");
        }
    }
}
