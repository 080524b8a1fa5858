//! The inputs kept for the fuzz targets in vmscope/fuzz, run through the same
//! calls as the targets, so that a crash found once stays fixed without
//! nightly or cargo-fuzz.
//!
//! `tests/fuzz-regressions/<target>/` holds one input per file: minimized
//! crashes and a few hand-made tricky inputs (which `cargo xtask fuzz` also
//! uses as seeds). A file whose name starts with `ok-` must be accepted; every
//! other file must be rejected with an error. No input may panic.

use std::{
    fs,
    panic::{self, AssertUnwindSafe},
    path::PathBuf,
};

use vmscope::{document, source::kernel::format::EventFormat};

/// The same size sets as the `format_parser` target.
const SIZE_SETS: &[&[u32]] = &[&[], &[1], &[2], &[4], &[8], &[4, 8], &[0, u32::MAX]];

/// The kept inputs of `target` as (file name, text), sorted by name.
fn inputs(target: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut out: Vec<(String, String)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            let name = path
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            // The targets skip input that is not UTF-8, so a kept input is.
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (name, text)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no inputs in {}", dir.display());
    out
}

/// Runs `check` on every input of `target`, then fails listing each input
/// that panicked, or was accepted or rejected against its name.
fn run_all(target: &str, check: fn(&str) -> Result<(), String>) {
    let mut failures = Vec::new();
    for (name, text) in inputs(target) {
        let expect_ok = name.starts_with("ok-");
        match panic::catch_unwind(AssertUnwindSafe(|| check(&text))) {
            Err(_) => failures.push(format!("{name}: panicked")),
            Ok(Ok(())) if !expect_ok => failures.push(format!("{name}: accepted")),
            Ok(Err(e)) if expect_ok => failures.push(format!("{name}: rejected: {e}")),
            Ok(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{target}:\n  {}",
        failures.join("\n  ")
    );
}

/// What the `format_parser` target does with one input.
fn format_parser(text: &str) -> Result<(), String> {
    let format = match EventFormat::parse(text) {
        Ok(format) => format,
        Err(err) => {
            let message = err.to_string();
            assert!(!message.contains('\n'), "multi-line error: {message:?}");
            return Err(message);
        }
    };
    for field in &format.fields {
        assert!(field.offset.checked_add(field.size).is_some());
        for sizes in SIZE_SETS {
            match format.int_field(&field.name, sizes) {
                Ok(found) => {
                    assert!(sizes.contains(&found.size));
                    assert!(found.is_scalar());
                }
                Err(err) => {
                    let message = err.to_string();
                    assert!(!message.contains('\n'), "multi-line error: {message:?}");
                }
            }
        }
    }
    if let Err(err) = format.int_field("", &[8]) {
        let _ = err.to_string();
    }
    assert!(format.event_fields().count() <= format.fields.len());
    assert!(format.event_fields().all(|f| !f.is_common()));
    Ok(())
}

/// What the `recording_reader` target does with one input.
fn recording_reader(text: &str) -> Result<(), String> {
    match document::from_str(text) {
        Ok(rec) => {
            assert_eq!(
                rec.header.schema_version,
                vmscope::model::recording::SCHEMA_VERSION
            );
            Ok(())
        }
        Err(err) => Err(format!("{err:#}")),
    }
}

#[test]
fn format_parser_inputs() {
    run_all("format_parser", format_parser);
}

#[test]
fn recording_reader_inputs() {
    run_all("recording_reader", recording_reader);
}
