//! `vmscope report` of a recording with an OOM kill: the kill marked on
//! every plot over time and listed with the kernel's record, its lead-up
//! (system, the victim's cgroup, the victim) and the per-cgroup table,
//! each checked against the recording's own raw figures; a recording
//! without kills shows no OOM section; a field the kernel's record lacks
//! shows as "–", never 0. The fixture tests need no root; the last test
//! records a kill live, as root.
//!
//! `tests/fixtures/oom.recording.json` was made as root from the
//! workspace root, with CG a v1 memory cgroup `vmscope-test-oom` of 64 MiB
//! with `memory.swappiness` 0 (the recipe of `oom.rs`, the child idling a
//! second first so that the lead-up spans several samples):
//!
//! ```text
//! PATH=$PWD/target/release:$PATH vmscope record -i 200ms -o tests/fixtures/oom.recording.json -- \
//!     sh -c 'echo $$ > CG/cgroup.procs && vmscope-testchild idle 1000 && exec vmscope-testchild touch 65536'
//! ```
//!
//! It exited 137. The cgroup vmscope itself ran in is renamed `/session`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::Value;
use vmscope_tests::{
    ok, path_str, pressure, read_json, record_to, root_or_skip, testchild, text, vmscope,
};

const NULL: &str = "–";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// `vmscope report FILE -o OUT` into `dir`: the page.
fn report(file: &Path, dir: &Path) -> String {
    let out = dir.join("page.html");
    let o = vmscope(&["report", path_str(file), "-o", path_str(&out)]);
    ok(&o, &format!("report {}", file.display()));
    std::fs::read_to_string(&out).unwrap()
}

/// The text between `start` (inclusive) and the next `end` after it.
fn between<'a>(hay: &'a str, start: &str, end: &str) -> &'a str {
    let i = hay
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in the page"));
    let rest = &hay[i..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

/// The cells of a table row, tags stripped.
fn cells(row: &str) -> Vec<String> {
    row.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            c[..c.find("</td>").unwrap()].to_string()
        })
        .collect()
}

/// The lead-up table's row `what`: system, cgroup, victim.
fn lead_up_row(page: &str, what: &str) -> Vec<String> {
    let table = between(page, "<div class=\"oom-leadup\"", "</div>");
    let row = between(table, &format!("<th class=\"l\">{what}</th>"), "</tr>");
    cells(row)
}

/// Every plot over time of the page, as `(id, svg)`.
fn rate_plots(page: &str) -> Vec<(&str, &str)> {
    page.split("<figure class=\"plot\" id=\"")
        .skip(1)
        .filter(|f| f.starts_with("rate-"))
        .map(|f| {
            (
                &f[..f.find('"').unwrap()],
                &f[..f.find("</figure>").unwrap()],
            )
        })
        .collect()
}

/// What the page says a kill is called on the plots.
fn marker(kill: &Value) -> String {
    format!(
        "OOM kill: {} {}",
        kill["pid"],
        kill["comm"].as_str().unwrap_or(NULL)
    )
}

/// Checks the page of `rec` against `rec`: the kill's marker on every
/// plot over time, its row, the lead-up's victim figures, the cgroup row.
/// A duration as the page shows it (`0.46 ms`, `462.8 µs`, `1.2 s`), in ns.
fn shown_ns(text: &str) -> f64 {
    let (v, unit) = text.split_once(' ').unwrap_or((text, ""));
    let scale = match unit {
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => panic!("no duration: {text:?}"),
    };
    v.parse::<f64>().unwrap_or_else(|e| panic!("{text:?}: {e}")) * scale
}

fn check_page(page: &str, rec: &Value, cgroup: &str) {
    let kill = &rec["oom_kills"][0];
    let pid = kill["pid"].as_u64().unwrap();
    let plots = rate_plots(page);
    assert!(plots.len() >= 2, "{} plots over time", plots.len());
    for (id, svg) in &plots {
        assert!(svg.contains(&marker(kill)), "{id}: no marker of the kill");
    }
    let row = cells(between(page, "<tr class=\"oom-kill\">", "</tr>"));
    assert_eq!(row[2], pid.to_string(), "{row:?}");
    assert_eq!(row[3], kill["comm"].as_str().unwrap(), "{row:?}");
    assert_eq!(row[4], cgroup, "{row:?}");
    assert_eq!(row[5], cgroup, "trigger cgroup: {row:?}");
    let limit = match (kill["constraint"].as_str(), kill["limit_cgroup"].as_str()) {
        (Some("memcg"), Some(l)) => l.to_string(),
        (Some("memcg"), None) => "a memory cgroup's (which one is unknown)".into(),
        (Some("global"), _) => "none (system-wide OOM)".into(),
        _ => NULL.into(),
    };
    assert_eq!(row[6], limit, "limit hit: {row:?}");
    assert_eq!(row[10], kill["oom_score_adj"].to_string(), "{row:?}");
    // The victim's memcg reclaim stall: its counter as last sampled.
    let victim = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("victim {pid} not among the processes"));
    let ns = victim["memcg_reclaim_ns"].as_u64().unwrap();
    assert!(
        ns > 0,
        "the victim never stalled in memcg reclaim: {victim}"
    );
    let reclaim = lead_up_row(page, "memcg reclaim stall");
    let shown = shown_ns(&reclaim[2]);
    assert!(
        (shown - ns as f64).abs() <= ns as f64 * 0.005 + 1.0,
        "{reclaim:?} vs {ns} ns"
    );
    let faults = lead_up_row(page, "page faults (vmscope's count)");
    let want = victim["faults"]["total"].as_u64().unwrap().to_string();
    assert_eq!(faults[2], want, "{faults:?}");
    for what in ["PSI memory some", "anon refaults", "swap-out", "swap-in"] {
        let r = lead_up_row(page, what);
        assert!(!r[0].is_empty(), "{what}: {r:?}");
    }
    // The per-cgroup table: the cgroup's faults and its own OOM count.
    let c = rec["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == cgroup)
        .unwrap_or_else(|| panic!("no cgroup {cgroup} in {:#}", rec["cgroups"]));
    let section = between(page, "<section id=\"cgroups\"", "</section>");
    let row = cells(between(
        section,
        &format!("<td class=\"l\">{cgroup}</td>"),
        "</tr>",
    ));
    assert_eq!(
        row[1],
        c["totals"]["faults"]["total"].to_string(),
        "{row:?}"
    );
    assert_eq!(
        row[9],
        c["books_last"]["events"]["oom_kill"].to_string(),
        "{row:?}"
    );
    assert_eq!(row[7], "64.0 MiB", "limit: {row:?}");
    eprintln!(
        "report: kill of {pid} marked on {} plots; victim memcg reclaim {}, faults {}; cgroup \
         {cgroup}: {} faults, {} OOM kills",
        plots.len(),
        reclaim[2],
        faults[2],
        row[1],
        row[9]
    );
}

#[test]
fn an_oom_kill_is_marked_listed_and_led_up_to() {
    let file = fixture("oom.recording.json");
    let rec = read_json(&file);
    let dir = tempfile::tempdir().unwrap();
    let page = report(&file, dir.path());
    check_page(&page, &rec, "/vmscope-test-oom");
    // The system's PSI over the window: the raw samples' growth (the
    // victim is never listed as ended, so the window ends at the last).
    let s = rec["samples"].as_array().unwrap();
    let us = |s: &Value| s["psi"]["some"]["total_us"].as_u64().unwrap();
    let stall = (us(s.last().unwrap()) - us(&s[0])) as f64;
    let psi = lead_up_row(&page, "PSI memory some");
    assert!(
        psi[0].starts_with(&format!("{:.2} ms (", stall / 1e3)),
        "{psi:?} vs {stall} µs"
    );
    // v1 has no memory.pressure: unavailable, not 0.
    assert!(psi[1].starts_with("unavailable: "), "{psi:?}");
    // The cgroup's books were first read inside the window.
    let kills = lead_up_row(&page, "OOM kills (the cgroup's books)");
    assert!(
        kills[1].starts_with("1 (since its first reading at"),
        "{kills:?}"
    );
}

#[test]
fn a_recording_without_kills_has_no_oom_section() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["churn.recording.json", "bench/touch.recording.json"] {
        let file = fixture(name);
        assert_eq!(
            read_json(&file)["oom_kills"].as_array().map_or(0, Vec::len),
            0
        );
        let page = report(&file, dir.path());
        for absent in ["oom-kills", "OOM kill", "oom-leadup", "#C80000"] {
            assert!(!page.contains(absent), "{name}: {absent} in the page");
        }
        assert!(page.contains("<h2>Rates and latency</h2>"), "{name}");
    }
}

#[test]
fn null_fields_of_a_kill_show_as_a_dash_not_zero() {
    let mut rec = read_json(&fixture("oom.recording.json"));
    let kill = &mut rec["oom_kills"][0];
    for field in [
        "comm",
        "cgroup",
        "trigger_cgroup",
        "rss_file_bytes",
        "rss_shmem_bytes",
        "oom_score_adj",
    ] {
        kill[field] = Value::Null;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nulls.json");
    std::fs::write(&file, serde_json::to_vec(&rec).unwrap()).unwrap();
    let page = report(&file, dir.path());
    let row = cells(between(&page, "<tr class=\"oom-kill\">", "</tr>"));
    assert_eq!(row[2], rec["oom_kills"][0]["pid"].to_string(), "{row:?}");
    // comm, cgroup, trigger cgroup, the limit hit (the fixture predates
    // it), file and shmem RSS, oom_score_adj.
    for i in [3, 4, 5, 6, 8, 9, 10] {
        assert_eq!(row[i], NULL, "column {i}: {row:?}");
    }
    assert_ne!(row[7], NULL, "anon RSS is known: {row:?}");
    // The marker and the lead-up name the unknown comm the same way, and
    // the victim's cgroup is still found through its process.
    assert!(page.contains(&format!("OOM kill: {} {NULL}", row[2])));
    let reclaim = lead_up_row(&page, "memcg reclaim stall");
    assert!(reclaim[1].ends_with(" ms"), "{reclaim:?}");
}

#[test]
fn a_live_oom_kill_is_reported() {
    if !root_or_skip("a_live_oom_kill_is_reported") {
        return;
    }
    let _lock = pressure::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let cg = pressure::MemCgroup::no_swap(64 << 20);
    let child = testchild();
    // SAFETY: sysconf has no preconditions.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let pages = ((256u64 << 20) / page_size).to_string();
    // As the fixture was made: an idle second first, so that the window
    // holds several samples (the source reads little while the child
    // thrashes against its limit).
    let procs = cg.path().join("cgroup.procs");
    let argv = [
        "sh".to_string(),
        "-c".into(),
        format!(
            "echo $$ > '{}' && \"$0\" idle 1000 && exec \"$0\" touch {pages}",
            path_str(&procs)
        ),
        path_str(&child).into(),
    ];
    let (o, rec) = record_to(dir.path(), "oom", &argv, &[], Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(137), "record: {}", text(&o.stderr));
    let name = cg.path().file_name().unwrap().to_str().unwrap().to_string();
    drop(cg);
    let kills = rec["oom_kills"].as_array().unwrap();
    assert!(!kills.is_empty(), "no kill listed: {:#}", rec["probes"]);
    let cgroup = kills[0]["cgroup"]
        .as_str()
        .unwrap_or_else(|| panic!("the kill names no cgroup: {}", kills[0]))
        .to_string();
    assert!(cgroup.ends_with(&format!("/{name}")), "{cgroup} vs {name}");
    let page = report(&dir.path().join("oom.json"), dir.path());
    check_page(&page, &rec, &cgroup);
}
