//! `document::read` loads a recording (one JSON document, or a `--format jsonl`
//! stream) from a file that vmscope did not necessarily write, and may be
//! truncated, edited or not a recording at all. `document::from_str` must reject
//! anything that is not a recording of this schema with an error and never
//! panic. Inputs that are not valid UTF-8 are skipped, as `document::read` fails
//! on them before parsing.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match vmscope::document::from_str(text) {
        Ok(rec) => assert_eq!(rec.header.schema_version, vmscope::model::recording::SCHEMA_VERSION),
        Err(err) => {
            let _ = format!("{err:#}");
        }
    }
});
