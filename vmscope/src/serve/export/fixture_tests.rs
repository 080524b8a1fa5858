//! The exporter over a real recording (`tests/fixtures/churn.recording.json`):
//! its samples replayed into [`State`] as `serve` replays them, the text
//! agrees with the totals the recording itself computed.
//!
//! The exported counters are cumulative since the programs were loaded;
//! the recording's totals are its last sample less its first. So an eBPF
//! counter exported is the first sample's value plus the total, and a
//! /proc/vmstat counter (exported as growth since the first reading) is the
//! total itself.

use serde_json::Value;

use super::*;

const CHURN: &str = include_str!("../../../../tests/fixtures/churn.recording.json");

fn replayed() -> (State, crate::model::recording::Recording, Value) {
    let rec = crate::document::from_str(CHURN).expect("the fixture is a recording");
    let doc: Value = serde_json::from_str(CHURN).expect("the fixture is JSON");
    let mut state = State {
        probes: rec.header.probes.clone(),
        fault_source: Some(rec.header.fault_source),
        ..Default::default()
    };
    for s in rec.samples.iter().cloned() {
        state.apply(s);
    }
    (state, rec, doc)
}

/// The value of the series `name{labels}` (exactly), as an integer.
fn value(text: &str, series: &str) -> u64 {
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
        .parse()
        .unwrap_or_else(|e| panic!("{series}: not an integer: {e}"))
}

fn total(doc: &Value, pointer: &str) -> u64 {
    doc.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no {pointer} in the recording"))
}

#[test]
fn page_faults_are_the_first_sample_plus_the_recorded_totals() {
    let (state, rec, doc) = replayed();
    let text = render(&state, Format::Prometheus, 0);
    assert!(text.contains("# TYPE vmscope_page_faults_total counter"));
    let first = &rec.samples[0].faults;
    let mut user = 0;
    for k in 0..FAULT_CLASSES {
        let class = fault_class_name(k);
        for (mode, at_start) in [("user", first.user[k]), ("kernel", first.kernel[k])] {
            let got = value(
                &text,
                &format!("vmscope_page_faults_total{{mode=\"{mode}\",class=\"{class}\"}}"),
            );
            let want = at_start
                + total(
                    &doc,
                    &format!("/totals/system_faults/{mode}/by_class/{class}"),
                );
            assert_eq!(got, want, "{mode} {class}");
            if mode == "user" {
                user += got - at_start;
            }
        }
    }
    assert_eq!(user, total(&doc, "/totals/system_faults/user/total"));
    let gup = value(
        &text,
        "vmscope_page_faults_total{mode=\"gup\",class=\"unclassified\"}",
    );
    assert_eq!(gup, first.gup + total(&doc, "/totals/system_faults/gup"));
}

#[test]
fn vmstat_events_are_the_recorded_vmstat_totals() {
    let (state, _, doc) = replayed();
    let text = render(&state, Format::Prometheus, 0);
    let counters = doc
        .pointer("/totals/vmstat/counters")
        .and_then(Value::as_object)
        .expect("totals.vmstat.counters");
    assert!(counters.contains_key("pgfault"), "{counters:?}");
    for (name, v) in counters {
        let got = value(
            &text,
            &format!("vmscope_vmstat_events_total{{counter=\"{name}\"}}"),
        );
        assert_eq!(Some(got), v.as_u64(), "vmstat {name}");
    }
    // The kernel's own page-fault count agrees with the fault tracepoints'.
    let pgfault = value(&text, "vmscope_vmstat_events_total{counter=\"pgfault\"}");
    assert_eq!(pgfault, total(&doc, "/totals/system_faults/total"));
}

#[test]
fn madvise_tlb_and_latency_families_match_the_recording() {
    let (state, rec, doc) = replayed();
    let text = render(&state, Format::Prometheus, 0);
    let first = &rec.samples[0];
    let madvise = doc
        .pointer("/totals/madvise")
        .and_then(Value::as_object)
        .expect("totals.madvise");
    assert!(madvise.contains_key("dontneed"), "{madvise:?}");
    for (behavior, t) in madvise {
        let at_start = first
            .madvise
            .iter()
            .find(|m| &m.behavior == behavior)
            .map_or(0, |m| m.calls);
        let got = value(
            &text,
            &format!("vmscope_madvise_calls_total{{behavior=\"{behavior}\"}}"),
        );
        assert_eq!(
            got,
            at_start + t["calls"].as_u64().expect("calls"),
            "madvise {behavior}"
        );
        // Its latency histogram counts the same calls.
        let name = format!("madvise_{behavior}");
        let hist_start = first
            .hists
            .iter()
            .find(|h| h.name == name)
            .map_or(0, |h| h.buckets.iter().map(|b| b[1]).sum::<u64>());
        let count = value(
            &text,
            &format!("vmscope_madvise_duration_seconds_count{{behavior=\"{behavior}\"}}"),
        );
        assert_eq!(
            count,
            hist_start + total(&doc, &format!("/totals/histograms/{name}/count")),
            "{name} count"
        );
    }
    let ipis = value(
        &text,
        "vmscope_tlb_flushes_total{reason=\"remote_send_ipi\"}",
    );
    assert_eq!(
        ipis,
        first.counters["tlb_remote_send_ipi"] + total(&doc, "/totals/counters/tlb_remote_send_ipi")
    );
    // Every probe the recording lists has its availability, as recorded.
    for p in &rec.header.probes {
        let got = value(
            &text,
            &format!("vmscope_probe_available{{probe=\"{}\"}}", p.probe),
        );
        assert_eq!(got, u64::from(p.usable()), "{}", p.probe);
    }
}

#[test]
fn per_process_series_of_the_recording_are_bounded() {
    let (state, _, _) = replayed();
    assert!(
        state.now.procs.len() > 2,
        "the recording has {} processes",
        state.now.procs.len()
    );
    let text = render(&state, Format::OpenMetrics, 2);
    let series = text
        .lines()
        .filter(|l| l.starts_with("vmscope_process_page_faults_total{"))
        .count();
    assert_eq!(series, 2, "{text}");
    assert!(text.ends_with("# EOF\n"));
}

/// Whether `help` is valid HELP text of `format`: in OpenMetrics an
/// escaped string (`\\`, `\n`, `\"`, no bare quote), in Prometheus 0.0.4
/// text where a backslash starts `\\` or `\n`.
fn help_is_valid(format: Format, help: &str) -> bool {
    let escapes: &[char] = match format {
        Format::OpenMetrics => &['\\', 'n', '"'],
        Format::Prometheus => &['\\', 'n'],
    };
    let mut chars = help.chars();
    while let Some(c) = chars.next() {
        match c {
            // An escape consumes the character after the backslash.
            '\\' if !chars.next().is_some_and(|n| escapes.contains(&n)) => return false,
            '"' if format == Format::OpenMetrics => return false,
            '\n' => return false,
            _ => {}
        }
    }
    true
}

/// Every family the exporter writes, over the fixture with per-process
/// series and an OOM kill by cgroup: its HELP is valid in both formats,
/// quotes and backslashes included.
#[test]
fn every_help_line_is_valid_in_both_formats() {
    let (mut state, _, _) = replayed();
    let kill = |cg: &str| crate::model::oom::OomKill {
        cgroup: Some(cg.to_string()),
        ..Default::default()
    };
    state.cgroups.count_kills(&[kill("/a"), kill("/b")], 1);
    let oom = crate::model::catalogue::probe::OOM_VICTIM;
    state.probes.retain(|p| p.probe != oom);
    state.probes.push(ProbeStatus::tracepoint(oom, true));
    for format in [Format::OpenMetrics, Format::Prometheus] {
        let text = render(&state, format, 5);
        let helps: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .collect();
        let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(helps.len(), types, "a HELP for every family:\n{text}");
        assert!(
            helps.len() >= 30,
            "the fixture exports most families:\n{text}"
        );
        for h in &helps {
            let (_, help) = h.split_once(' ').expect("HELP NAME TEXT");
            assert!(help_is_valid(format, help), "{format:?}: {h}");
        }
        // The families whose help quotes a label value.
        let quoted = match format {
            Format::OpenMetrics => "mode=\\\"gup\\\"",
            Format::Prometheus => "mode=\"gup\"",
        };
        assert!(
            helps
                .iter()
                .any(|h| h.starts_with("vmscope_page_faults") && h.contains(quoted)),
            "{format:?}: {helps:#?}"
        );
        let unknown = match format {
            Format::OpenMetrics => "\\\"unknown\\\"",
            Format::Prometheus => "\"unknown\"",
        };
        assert!(
            helps
                .iter()
                .any(|h| h.starts_with("vmscope_cgroup_oom_kills") && h.contains(unknown)),
            "{format:?}: {helps:#?}"
        );
    }
}

#[test]
fn help_escapes_backslash_newline_and_quote() {
    assert_eq!(
        help_text(Format::OpenMetrics, "a \"b\" c\\d\ne"),
        "a \\\"b\\\" c\\\\d\\ne"
    );
    assert_eq!(
        help_text(Format::Prometheus, "a \"b\" c\\d\ne"),
        "a \"b\" c\\\\d\\ne"
    );
}

/// The fixture as `serve --per-process 5 --per-cgroup 5` with every probe
/// attached would export it: one cgroup with all of the kernel's books, an
/// OOM kill by cgroup, PSI with its `full` line.
fn representative() -> State {
    use crate::model::{
        catalogue::probe,
        cgroup::{CgroupBooks, CgroupState},
    };
    let (mut state, _, _) = replayed();
    for p in &mut state.probes {
        p.attached = true;
    }
    for name in [
        probe::OOM_VICTIM,
        probe::DIRTY_THROTTLE,
        probe::COMPACT_END,
        probe::MMAP_LOCK,
        probe::MAJOR_FAULTS,
        probe::SWAP,
        probe::TLB_FLUSH,
        probe::MADVISE,
        probe::PAGE_CACHE_REMOVE,
    ] {
        state.probes.push(ProbeStatus::tracepoint(name, true));
    }
    for (k, v) in [("zswpout", 30), ("zswpin", 20), ("zswpwb", 5)] {
        state.now.vmstat.0.insert(k.to_string(), v);
    }
    state.now.tiers = Some(tiers());
    state.wss_edges_ns = Some(vec![1_000_000_000, 10_000_000_000]);
    state.now.wss = Some(crate::model::wss::WssSample {
        procs: vec![crate::model::wss::WssProc {
            pid: 1,
            comm: "init".into(),
            cgroup: Some("/a".into()),
            working_set_bytes: 8192,
            rss_bytes: 16384,
            anon_huge_bytes: 0,
            shmem_huge_bytes: 0,
            referenced_by_edge: vec![4096, 8192],
        }],
        ..Default::default()
    });
    let full = crate::procstat::PsiLine::default();
    state.now.psi.get_or_insert_with(Default::default).full = Some(full);
    let mut counts = ProcSample::default();
    counts.madvise.free = 1;
    let books = CgroupBooks {
        usage_bytes: Some(4096),
        limit_bytes: Some(1 << 20),
        events: [("under_oom".to_string(), 0), ("oom_kill".to_string(), 1)].into(),
        stat: [
            ("zswpout", 3),
            ("zswpin", 2),
            ("zswpwb", 1),
            ("zswap", 4096),
            ("zswapped", 12288),
            ("workingset_refault_file", 77),
            ("file", 8192),
            ("file_dirty", 4096),
            ("writeback", 999),
            ("anon_thp", 2 << 20),
            ("rss_huge", 4 << 20),
            ("thp_fault_alloc", 3),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into(),
        psi: Some(crate::procstat::Psi {
            some: full,
            full: Some(full),
        }),
        ..Default::default()
    };
    let cgroup = CgroupState {
        path: Some("/work".into()),
        books: Some(books),
        page_cache_removed: Some(crate::model::cgroup::CacheRemovals {
            evicted_pages: 5,
            dropped_pages: 2,
        }),
        counts,
        live: 1,
        ..Default::default()
    };
    state.now.cgroups.insert(7, cgroup);
    state.now.cgroups.insert(8, container_cgroup());
    state.cgroups.top = 5;
    state.cgroups.exported = vec![7, 8];
    let kill = crate::model::oom::OomKill {
        cgroup: Some("/work".into()),
        ..Default::default()
    };
    state.cgroups.count_kills(&[kill], 1);
    state
}

/// A zswap pool and a zram device.
fn tiers() -> crate::model::tiers::TierSample {
    crate::model::tiers::TierSample {
        zswap: Some(crate::model::tiers::ZswapPool {
            enabled: true,
            pool_bytes: Some(1 << 20),
            stored_bytes: Some(3 << 20),
            ..Default::default()
        }),
        devices: vec![crate::model::tiers::TierDevice {
            name: "/dev/zram0".into(),
            kind: "partition".into(),
            medium: "zram".into(),
            zram: Some(crate::model::tiers::ZramStat::default()),
            ..Default::default()
        }],
    }
}

/// A container's cgroup, whose path names its workload.
fn container_cgroup() -> crate::model::cgroup::CgroupState {
    crate::model::cgroup::CgroupState {
        path: Some(format!("/system.slice/docker-{}.scope", "ab".repeat(32))),
        container_name: Some("web".into()),
        live: 1,
        ..Default::default()
    }
}

/// A container's cgroup is named by its info series, the name from its
/// runtime included; a cgroup whose path names nothing has none.
#[test]
fn the_info_series_names_the_container_and_its_name() {
    let text = render(&representative(), Format::Prometheus, 5);
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("vmscope_cgroup_info{"))
        .collect();
    let id = "ab".repeat(32);
    assert_eq!(
        info,
        [format!(
            "vmscope_cgroup_info{{cgroup=\"/system.slice/docker-{id}.scope\",unit=\"\",\
             runtime=\"docker\",container=\"{id}\",pod_uid=\"\",qos=\"\",container_name=\"web\"}} 1"
        )],
        "{text}"
    );
}

/// Every family the exporter writes is in `docs/metrics.md`, with the
/// labels its declaration gives; the exporter's own families (written by
/// the server, after these) by their declarations.
#[test]
fn every_exported_family_is_documented() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
    let docs = std::fs::read_to_string(path).expect("docs/metrics.md");
    let documented = |name: &str| docs.contains(&format!("| `{name}` |"));
    let text = render(&representative(), Format::Prometheus, 5);
    let served = served_families();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, _) = family.split_once(' ').expect("TYPE NAME KIND");
        assert!(
            documented(name),
            "{name} is exported but not in docs/metrics.md: \
             VMSCOPE_BLESS=1 cargo test -p vmscope --lib catalogue"
        );
    }
    for f in &served {
        assert!(documented(f.name), "{} is not in docs/metrics.md", f.name);
        if f.scope == Scope::Exporter {
            continue;
        }
        assert!(
            text.contains(&format!("# TYPE {} {}\n", f.name, f.kind.name())),
            "the representative state exports {}:\n{text}",
            f.name
        );
        let prefix = format!("{}{{", f.name);
        for series in text.lines().filter_map(|l| l.strip_prefix(prefix.as_str())) {
            let names: Vec<&str> = series
                .split("\",")
                .filter_map(|pair| pair.split_once("=\"").map(|(k, _)| k))
                .collect();
            assert_eq!(names, f.labels, "{}{{{series}", f.name);
        }
        if f.labels.is_empty() {
            assert!(!text.contains(&prefix), "{}: labels not declared", f.name);
        }
    }
}

/// Every per-process figure the catalogue gives a per-cgroup family is
/// exported summed by cgroup when its probe is attached: the family comes
/// from the catalogue row, not from a list here.
#[test]
fn every_cgroup_family_of_the_catalogue_is_exported() {
    let mut state = representative();
    for f in crate::model::catalogue::PROC_FIELDS {
        state.probes.push(ProbeStatus::tracepoint(f.probe, true));
    }
    let text = render(&state, Format::Prometheus, 5);
    let families: Vec<&str> = crate::model::catalogue::PROC_FIELDS
        .iter()
        .filter_map(|f| Some(f.cgroup.as_ref()?.name))
        .collect();
    assert!(families.contains(&"vmscope_cgroup_page_cache_added_pages_total"));
    for name in families {
        assert!(
            text.contains(&format!("# TYPE {name} counter\n"))
                && text.contains(&format!("{name}{{cgroup=\"/work\"}}")),
            "{name} is declared but not exported"
        );
    }
}

/// Swap by tier: each tier from its own vmstat counter, the pool and the
/// zram device from the last reading, a cgroup's zswap from its
/// memory.stat; nothing of zswap on a kernel without it.
#[test]
fn swap_tiers_come_from_their_own_counters() {
    let text = render(&representative(), Format::Prometheus, 5);
    for line in [
        "vmscope_swap_tier_pages_total{direction=\"out\",tier=\"zswap\"} 30",
        "vmscope_swap_tier_pages_total{direction=\"in\",tier=\"zswap\"} 20",
        "vmscope_zswap_written_back_pages_total 5",
        "vmscope_zswap_enabled 1",
        "vmscope_zswap_pool_bytes 1048576",
        "vmscope_zswap_stored_bytes 3145728",
        "vmscope_swap_device_used_bytes{device=\"/dev/zram0\",medium=\"zram\"} 0",
        "vmscope_cgroup_zswap_pages_total{cgroup=\"/work\",direction=\"written_back\"} 1",
        "vmscope_cgroup_zswapped_bytes{cgroup=\"/work\"} 12288",
        "vmscope_cgroup_page_cache_refaults_total{cgroup=\"/work\"} 77",
        "vmscope_cgroup_page_cache_bytes{cgroup=\"/work\",state=\"cached\"} 8192",
        "vmscope_cgroup_page_cache_bytes{cgroup=\"/work\",state=\"dirty\"} 4096",
        // v1's key where v2's is absent.
        "vmscope_cgroup_page_cache_bytes{cgroup=\"/work\",state=\"writeback\"} 999",
        // v2's key where both are present.
        "vmscope_cgroup_thp_bytes{cgroup=\"/work\",kind=\"anon\"} 2097152",
        "vmscope_cgroup_thp_events_total{cgroup=\"/work\",event=\"fault_alloc\"} 3",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    for (direction, key) in [("out", "pswpout"), ("in", "pswpin")] {
        let device = value(
            &text,
            &format!("vmscope_swap_tier_pages_total{{direction=\"{direction}\",tier=\"device\"}}"),
        );
        let events = value(
            &text,
            &format!("vmscope_vmstat_events_total{{counter=\"{key}\"}}"),
        );
        assert_eq!(device, events, "{direction}");
    }
    let mut bare = representative();
    for k in ["zswpout", "zswpin", "zswpwb"] {
        bare.now.vmstat.0.remove(k);
    }
    if let Some(t) = bare.now.tiers.as_mut() {
        t.zswap = None;
    }
    let text = render(&bare, Format::Prometheus, 5);
    let series = |l: &&str| !l.starts_with('#');
    assert!(
        !text
            .lines()
            .filter(series)
            .any(|l| l.contains("tier=\"zswap\"") || l.starts_with("vmscope_zswap_")),
        "{text}"
    );
    assert!(text.contains("tier=\"device\"}"), "{text}");
}
