//! The Parquet files of real recordings read back with the Parquet
//! reader: the rows, values and nulls of the JSON.

use std::path::Path;

use parquet::{
    file::reader::{FileReader as _, SerializedFileReader},
    record::Field,
};

use super::*;

fn fixture(name: &str) -> Recording {
    let text = match name {
        "oom" => include_str!("../../../tests/fixtures/oom.recording.json"),
        _ => include_str!("../../../tests/fixtures/churn.recording.json"),
    };
    document::from_str(text).expect("the fixture is a recording")
}

/// Every row of a Parquet file, as (column, value) lists.
fn read(path: &Path) -> Vec<Vec<(String, Field)>> {
    let reader = SerializedFileReader::try_from(path).expect("a Parquet file");
    let rows = reader.get_row_iter(None).expect("rows");
    rows.map(|r| {
        r.expect("a row")
            .get_column_iter()
            .map(|(n, f)| (n.clone(), f.clone()))
            .collect()
    })
    .collect()
}

fn value<'a>(row: &'a [(String, Field)], column: &str) -> &'a Field {
    &row.iter()
        .find(|(n, _)| n == column)
        .unwrap_or_else(|| panic!("no column {column}"))
        .1
}

fn exported(rec: &Recording) -> (tempfile::TempDir, std::path::PathBuf) {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let dir = parent.path().join("out");
    check_destination(&dir).expect("a new directory is a fine destination");
    write_parquet(rec, &dir).expect("exported");
    (parent, dir)
}

#[test]
fn parquet_tables_hold_the_recordings_rows_and_faults() {
    for name in ["oom", "churn"] {
        let rec = fixture(name);
        let (_keep, dir) = exported(&rec);
        let procs = read(&dir.join("processes.parquet"));
        assert_eq!(procs.len(), rec.processes.len(), "{name}");
        let sum: u64 = procs
            .iter()
            .map(|r| match value(r, "faults") {
                Field::ULong(n) => *n,
                other => panic!("faults is {other:?}"),
            })
            .sum();
        let want: u64 = rec.processes.iter().filter_map(|p| p.faults.total).sum();
        assert_eq!(sum, want, "{name}");
        assert_eq!(read(&dir.join("samples.parquet")).len(), rec.samples.len());
        assert_eq!(
            read(&dir.join("series.parquet")).len(),
            rec.series.end_ns.len()
        );
        assert_eq!(read(&dir.join("cgroups.parquet")).len(), rec.cgroups.len());
        assert_eq!(
            read(&dir.join("oom_kills.parquet")).len(),
            rec.oom_kills.len()
        );
        let changed: usize = rec.samples.iter().map(|s| s.procs.len()).sum();
        assert_eq!(read(&dir.join("sample_processes.parquet")).len(), changed);
        let hists = read(&dir.join("histograms.parquet"));
        assert_eq!(hists.len(), rec.totals.vm.histograms.len());
        assert!(dir.join(META_FILE).is_file());
    }
}

#[test]
fn parquet_nulls_stay_null_and_values_keep_their_types() {
    let rec = fixture("oom");
    let (_keep, dir) = exported(&rec);
    let procs = read(&dir.join("processes.parquet"));
    // Not counted when this recording was made: null in the JSON.
    assert!(rec.processes[0].mmap_read_waits.is_none());
    assert_eq!(value(&procs[0], "mmap_read_waits"), &Field::Null);
    assert_eq!(
        value(&procs[0], "comm"),
        &Field::Str(rec.processes[0].comm.clone())
    );
    let kills = read(&dir.join("oom_kills.parquet"));
    let k = &rec.oom_kills[0];
    assert_eq!(
        value(&kills[0], "rss_anon_bytes"),
        &Field::ULong(k.rss_anon_bytes.expect("known"))
    );
    assert_eq!(
        value(&kills[0], "oom_score_adj"),
        &Field::Long(i64::from(k.oom_score_adj.expect("known")))
    );
    assert_eq!(value(&kills[0], "limit_cgroup"), &Field::Null);
    assert_ne!(
        value(&kills[0], "time"),
        &Field::Null,
        "the timestamp parsed"
    );
    let series = read(&dir.join("series.parquet"));
    for (metric, col) in &rec.series.metrics {
        for (row, v) in series.iter().zip(col) {
            let want = v.map_or(Field::Null, Field::ULong);
            assert_eq!(value(row, metric), &want, "{metric}");
        }
    }
}

#[test]
fn parquet_sample_processes_have_every_counter_zero_not_null() {
    let rec = fixture("churn");
    let (_keep, dir) = exported(&rec);
    let rows = read(&dir.join("sample_processes.parquet"));
    let first = &rec
        .samples
        .iter()
        .find(|s| !s.procs.is_empty())
        .expect("a process")
        .procs[0];
    let row = rows
        .iter()
        .find(|r| value(r, "pid") == &Field::ULong(first.pid.into()))
        .expect("its row");
    assert_eq!(value(row, "faults"), &Field::ULong(first.faults.total()));
    assert_eq!(
        value(row, "swap_in_pages"),
        &Field::ULong(first.swap_in_pages)
    );
    assert_eq!(
        value(row, "madvise_free"),
        &Field::ULong(first.madvise.free)
    );
}

#[test]
fn parquet_export_refuses_a_directory_with_files_and_leaves_it_alone() {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let dir = parent.path().join("out");
    std::fs::create_dir(&dir).expect("created");
    check_destination(&dir).expect("an empty directory is fine");
    std::fs::write(dir.join("mine"), "x").expect("written");
    let e = check_destination(&dir).expect_err("refused");
    assert_eq!(exit::code_of(&e, 0), exit::FAILURE);
    assert!(exit::message_of(&e).contains("not empty"), "{e:#}");
    let e = check_destination(&parent.path().join("no/such/out")).expect_err("refused");
    assert!(exit::message_of(&e).contains("does not exist"), "{e:#}");
    // Written into the empty directory, which it replaces whole.
    std::fs::remove_file(dir.join("mine")).expect("removed");
    write_parquet(&fixture("oom"), &dir).expect("exported");
    let left: Vec<_> = std::fs::read_dir(parent.path())
        .expect("listed")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("out")], "no temporary left");
}
