//! Swap by tier against the kernel's own books: zswap in front of a swap
//! file on disk, a writer in a memory cgroup pushed past its limit.
//!
//! - zswap stores, device writes, zswap loads and device reads in the
//!   recording's `swap_tiers` within 1% of the `/proc/vmstat` deltas
//!   (`zswpout`, `pswpout`, `zswpin`, `pswpin`) the test reads around the
//!   run;
//! - with the pool limited and pages that do not compress, zswap writes
//!   pages back to the file: write-back within 1% of `zswpwb`;
//! - zram: the device's compressed/original ratio as the recording's last
//!   instant gives it, against `mm_stat` read right after;
//! - `serve`'s tier counters against vmstat since it started;
//! - each device is named with its medium, and the parameters are put
//!   back.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{path::Path, time::Duration};

use vmscope::experiments::pressure::{SwapFile, Zswap};
use vmscope_tests::{pressure, *};

/// Pages of the writer, in a cgroup of `LIMIT` bytes.
const PAGES: u64 = 76_800; // 300 MiB
const LIMIT: u64 = 100 << 20;

fn tmp(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

/// Records `mode PAGES` of the test child in a fresh memory cgroup; returns
/// the recording and the vmstat deltas around it.
fn run(
    dir: &Path,
    name: &str,
    mode: &str,
    pages: u64,
) -> (serde_json::Value, impl Fn(&str) -> u64 + use<>) {
    let cg = pressure::MemCgroup::new(LIMIT);
    let child = testchild();
    let n = pages.to_string();
    let argv = [path_str(&child), mode, n.as_str()];
    let wrapped = cg.in_cgroup_argv(&argv);
    let before = pressure::vmstat();
    let (o, rec) = record_to(dir, name, &wrapped, &[], Duration::from_secs(300));
    let after = pressure::vmstat();
    assert!(o.status.success(), "{name}: {}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("swap by tier: out "),
        "{name}: record said nothing of the tiers: {err}"
    );
    let delta =
        move |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
    (rec, delta)
}

/// Within 1%, or 16 pages for counts near 0 (other processes may swap a
/// page or two in the same seconds).
fn agree(what: &str, got: u64, want: u64) {
    let slack = (want as f64 * 0.01).max(16.0);
    assert!(
        got.abs_diff(want) as f64 <= slack,
        "{what}: {got} vs the kernel's {want}"
    );
}

#[test]
fn zswap_in_front_of_a_swap_file_is_split_by_tier() {
    const TEST: &str = "zswap_in_front_of_a_swap_file_is_split_by_tier";
    if !root_or_skip(TEST) {
        return;
    }
    let _alone = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let file = SwapFile::new(&tmp("swapfile"), 1 << 30).unwrap();
    let zswap = Zswap::enable(20).unwrap();

    // Compressible pages: zswap takes them all. serve watches too.
    let serve = serve_fixture::Serve::start(&["--listen", "127.0.0.1:0", "-i", "250ms"]);
    let serve_base = pressure::vmstat();
    let (rec, d) = run(dir.path(), "zswap", "rewrite", PAGES);
    let t = &rec["swap_tiers"];
    let g = |p: &str| u64_at(t, p);
    eprintln!(
        "{TEST}: out zswap {} vs zswpout {}, device {} vs pswpout {}; in zswap {} vs zswpin {}, \
         device {} vs pswpin {}",
        g("/out/zswap_stores"),
        d("zswpout"),
        g("/out/device_writes"),
        d("pswpout"),
        g("/in/zswap_loads"),
        d("zswpin"),
        g("/in/device_reads"),
        d("pswpin")
    );
    assert!(
        d("zswpout") > PAGES / 2,
        "zswap stored too little: {}",
        d("zswpout")
    );
    agree("zswap stores", g("/out/zswap_stores"), d("zswpout"));
    agree("device writes", g("/out/device_writes"), d("pswpout"));
    agree("zswap loads", g("/in/zswap_loads"), d("zswpin"));
    agree("device reads", g("/in/device_reads"), d("pswpin"));
    assert_eq!(t["end"]["zswap"]["enabled"], true, "{t:#}");
    let name = file.path().display().to_string();
    let dev = t["end"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} not among the devices: {t:#}"));
    assert_eq!(dev["medium"], "disk", "{dev}");
    assert_eq!(dev["kind"], "file", "{dev}");
    assert!(
        t["per_process"]
            .as_str()
            .unwrap()
            .contains("not per process")
    );
    // serve's tier counters grow from its start: against vmstat since then.
    std::thread::sleep(Duration::from_secs(1));
    let body = serve_fixture::get_from(std::net::Ipv4Addr::LOCALHOST, serve.addr, "/metrics")
        .unwrap()
        .body;
    let now = pressure::vmstat();
    for (direction, tier, key) in [
        ("out", "zswap", "zswpout"),
        ("out", "device", "pswpout"),
        ("in", "zswap", "zswpin"),
        ("in", "device", "pswpin"),
    ] {
        let series =
            format!("vmscope_swap_tier_pages_total{{direction=\"{direction}\",tier=\"{tier}\"}}");
        let got = serve_fixture::metric(&body, &series)
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{body}"));
        agree(&series, got as u64, now[key] - serve_base[key]);
    }
    assert_eq!(
        serve_fixture::metric(&body, "vmscope_zswap_enabled"),
        Some(1.0),
        "{body}"
    );
    drop(serve);

    // Pages that do not compress, in a pool of 1% of memory, more than it
    // holds: zswap writes the oldest back to the file.
    zswap.set_pool_percent(1).unwrap();
    zswap.set_shrinker(true).unwrap();
    let total: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    // Twice the pool's limit beyond the cgroup's, in pages.
    let pages = (total * 1024 / 100 * 2 + LIMIT) / 4096;
    // How much the shrinker writes back varies from run to run (from a few
    // dozen pages to thousands here): every run's figures must agree, and
    // at least one of up to three runs must have written back.
    let mut written_back = 0;
    for attempt in 1..=3 {
        let (rec, d) = run(
            dir.path(),
            &format!("writeback{attempt}"),
            "rewrite-random",
            pages,
        );
        let t = &rec["swap_tiers"];
        let g = |p: &str| u64_at(t, p);
        eprintln!(
            "{TEST}: {pages} random pages: write-back {} vs zswpwb {}; zswap {} vs zswpout {}; \
             device {} vs pswpout {}",
            g("/out/zswap_writeback"),
            d("zswpwb"),
            g("/out/zswap_stores"),
            d("zswpout"),
            g("/out/device_writes"),
            d("pswpout"),
        );
        agree("zswap write-back", g("/out/zswap_writeback"), d("zswpwb"));
        agree("zswap stores", g("/out/zswap_stores"), d("zswpout"));
        agree("device writes", g("/out/device_writes"), d("pswpout"));
        written_back = d("zswpwb");
        if written_back > 0 {
            break;
        }
    }
    assert!(written_back > 0, "zswap wrote nothing back in three runs");
    drop(zswap);
    drop(file);
}

#[test]
fn zram_is_named_compressed_ram_with_its_own_ratio() {
    const TEST: &str = "zram_is_named_compressed_ram_with_its_own_ratio";
    if !root_or_skip(TEST) {
        return;
    }
    let _alone = pressure::exclusive();
    let zram = pressure::ZramSwap::new(1 << 30);
    let cg = pressure::MemCgroup::new(LIMIT);
    // The writer holds its pages swapped out while vmscope records.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("writer");
    let (go, held) = (report.with_extension("go"), report.with_extension("held"));
    let child = testchild();
    let n = PAGES.to_string();
    let argv = [
        path_str(&child),
        "--report",
        path_str(&report),
        "hold",
        n.as_str(),
    ];
    let wrapped = cg.in_cgroup_argv(&argv);
    let mut writer = std::process::Command::new(&wrapped[0])
        .args(&wrapped[1..])
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !held.exists() && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(held.exists(), "the writer never held its pages");
    let out = dir.path().join("zram.json");
    let o = vmscope_within(
        &["record", "-i", "250ms", "-d", "1s", "-o", path_str(&out)],
        Duration::from_secs(60),
    );
    let mm = std::fs::read_to_string(format!(
        "/sys/block/{}/mm_stat",
        zram.device().file_name().unwrap().to_string_lossy()
    ))
    .unwrap();
    std::fs::write(&go, b"").unwrap();
    let _ = writer.wait();
    ok(&o, "record -d 1s");
    let rec = read_json(&out);
    let f: Vec<u64> = mm.split_whitespace().map(|v| v.parse().unwrap()).collect();
    let name = zram.device().display().to_string();
    let dev = rec["swap_tiers"]["end"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} not among the devices: {:#}", rec["swap_tiers"]))
        .clone();
    let z = &dev["zram"];
    let (orig, compr) = (
        u64_at(z, "/orig_data_bytes"),
        u64_at(z, "/compr_data_bytes"),
    );
    eprintln!(
        "{TEST}: {name} {orig}/{compr} bytes in the recording, {}/{} in mm_stat",
        f[0], f[1]
    );
    assert_eq!(dev["medium"], "zram", "{dev}");
    assert!(f[0] > 100 << 20, "too little in zram: {mm}");
    let (ratio, want) = (orig as f64 / compr as f64, f[0] as f64 / f[1] as f64);
    assert!(
        (ratio - want).abs() <= want * 0.01,
        "ratio {ratio:.3} vs mm_stat's {want:.3}"
    );
    drop(cg);
}
