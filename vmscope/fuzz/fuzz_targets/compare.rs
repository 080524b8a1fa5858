//! `vmscope compare BASE NEW` on files vmscope did not necessarily write:
//! recordings (JSON or jsonl) or bench files, truncated, edited, with any
//! finite number in them. The input is BASE and NEW split at the first NUL
//! byte (which no JSON text holds), or one document compared with itself.
//! It goes through the CLI's path: the same parsing, the comparison, every
//! output format, and the page `report` draws from compare's JSON. Nothing
//! may panic or hang (`cargo xtask fuzz` gives each input a time limit);
//! every refusal is one line. Inputs that are not UTF-8 are skipped, as
//! `compare` refuses them before parsing.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use vmscope::{compare, exit};

fn one_line(e: &anyhow::Error) {
    let message = exit::message_of(e);
    assert!(!message.contains('\n'), "multi-line error: {message:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (base, new) = text.split_once('\0').unwrap_or((text, text));
    let (bp, np) = (Path::new("base.json"), Path::new("new.json"));
    let sides = compare::parse(bp, base).and_then(|b| Ok((b, compare::parse(np, new)?)));
    let (b, n) = match sides {
        Ok(s) => s,
        Err(e) => return one_line(&e),
    };
    let report = match compare::build_report((bp, &b), (np, &n), &[], 5.0) {
        Ok(r) => r,
        Err(e) => return one_line(&e),
    };
    let _ = compare::table(&report);
    let _ = compare::markdown(&report);
    let json = compare::json(&report).expect("a comparison serializes");
    // What compare writes, report reads and draws.
    if let Err(e) = vmscope::report::render_text(Path::new("compare.json"), &json) {
        one_line(&e);
    }
});
