//! Pages added to the page cache, per process and in the scope's counter,
//! against what the kernel's own residency count (`mincore`) says each step
//! brought in: each child writes a file, reads it with read() after
//! dropping it from the cache, and touches it through a mapping from 4
//! threads after dropping it again (checking with `mincore` that every page
//! was cached after each step and none before), two children at once.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use vmscope_tests::{pressure, *};

#[test]
fn page_cache_additions_count_every_page_each_process_brought_in() {
    if !root_or_skip("page_cache_additions_count_every_page_each_process_brought_in") {
        return;
    }
    // On the disk (the target directory), not a tmpfs: shmem pages never
    // pass the page cache's add tracepoint.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // The child's own binary cached first, so its exec adds nothing.
    std::fs::read(testchild()).unwrap();
    let t = testchild();
    let files = path_str(dir.path());
    let (big, small) = (8192u64, 2048u64);
    let script = format!(
        "{t} pagecache {big} {files} & {t} pagecache {small} {files} & wait %1 && wait %2",
        t = t.display()
    );
    let (o, rec) = record_to(
        dir.path(),
        "pagecache",
        &["sh", "-c", &script],
        &[],
        Duration::from_secs(120),
    );
    assert!(
        o.status.success(),
        "record: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let probe = rec["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == "filemap:mm_filemap_add_to_page_cache")
        .unwrap_or_else(|| panic!("no page cache probe in {:#}", rec["probes"]));
    assert_eq!(probe["attached"], true, "{probe}");
    let procs = rec["processes"].as_array().unwrap();
    let mut children: Vec<u64> = procs
        .iter()
        .filter(|p| p["comm"] == "vmscope-testchi")
        .map(|p| p["page_cache_added_pages"].as_u64().unwrap())
        .collect();
    children.sort_unstable();
    // Every page of its file, each of the 3 times it entered the cache
    // (mincore proved it did), and little more: what else a child adds is
    // its own binary's and libraries' pages, when memory pressure (another
    // test's) evicted them before its exec. Counting a step twice would add
    // 2048 pages or more, losing any page fails the first bound.
    const OTHER_FILES: u64 = 1024;
    for (got, want) in children.iter().zip([3 * small, 3 * big]) {
        assert!(
            (want..=want + OTHER_FILES).contains(got),
            "a child that brought {want} pages into the cache was counted {got}: {procs:#?}"
        );
    }
    assert_eq!(children.len(), 2, "{procs:#?}");
    let all: u64 = procs
        .iter()
        .map(|p| p["page_cache_added_pages"].as_u64().unwrap())
        .sum();
    assert_eq!(
        u64_at(&rec["totals"]["counters"], "/page_cache_added_pages"),
        all,
        "the scope's counter against its processes' sum: {procs:#?}"
    );
}

/// Swap traffic is not page-cache traffic: a child swaps 40,000 pages out
/// under a memcg limit and back in (and forks children that drop their
/// copies), with zram swap active. Swapped pages go through the swap cache,
/// never through the page cache's add tracepoint, so the tree adds next to
/// nothing to the page cache while /proc/vmstat's pswpin grows by
/// thousands.
#[test]
fn swap_traffic_is_not_counted_as_page_cache_additions() {
    if !root_or_skip("swap_traffic_is_not_counted_as_page_cache_additions") {
        return;
    }
    let _lock = pressure::exclusive();
    let _swap = pressure::ZramSwap::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    std::fs::read(testchild()).unwrap();
    let cg = pressure::MemCgroup::new(64 << 20);
    let child = testchild();
    let argv = [path_str(&child), "forkswap", "40000", "3", "exit"];
    let wrapped = cg.in_cgroup_argv(&argv);
    let before = pressure::vmstat();
    let (o, rec) = record_to(dir.path(), "swap", &wrapped, &[], Duration::from_secs(300));
    let after = pressure::vmstat();
    assert!(
        o.status.success(),
        "record: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let swapped_in = after["pswpin"] - before["pswpin"];
    assert!(swapped_in > 20_000, "too little swapped in: {swapped_in}");
    // What the tree may add: its binaries' and libraries' pages, re-read
    // if they were evicted (see the test above), far below the swap-ins.
    let added = u64_at(&rec["totals"]["counters"], "/page_cache_added_pages");
    eprintln!("swap: {swapped_in} pages swapped in, {added} page-cache additions");
    assert!(
        added < 1024,
        "{added} page-cache additions counted while {swapped_in} pages were swapped in"
    );
}
