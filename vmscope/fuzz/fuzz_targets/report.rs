//! `vmscope report` on files vmscope did not necessarily write: a
//! recording (JSON or jsonl), a bench file or compare's JSON, truncated,
//! edited, with any finite number in them; or, split at the first NUL byte
//! (which no JSON text holds), BASE and NEW as `report BASE NEW` takes
//! them. It goes through the CLI's path, the same parsing and drawing,
//! rendering to memory. Nothing may panic or hang (`cargo xtask fuzz` gives
//! each input a time limit; plotters loops forever on an infinite axis);
//! every refusal is one line; every plot id is a safe, unique file name.
//! Inputs that are not UTF-8 are skipped, as `report` refuses them before
//! parsing.

#![no_main]

use std::{collections::HashSet, path::Path};

use libfuzzer_sys::fuzz_target;
use vmscope::{exit, report};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let rendered = match text.split_once('\0') {
        None => report::render_text(Path::new("input.json"), text),
        Some((base, new)) => report::render_pair(
            (Path::new("base.json"), base),
            (Path::new("new.json"), new),
            5.0,
        ),
    };
    match rendered {
        Ok(r) => {
            let mut ids = HashSet::new();
            for p in &r.plots {
                assert!(report::is_safe_id(&p.id), "unsafe plot id {:?}", p.id);
                assert!(ids.insert(p.id.as_str()), "plot id {:?} twice", p.id);
                assert!(p.svg.starts_with("<svg"), "plot {} is no SVG", p.id);
            }
            assert!(r.html.contains(&format!("data-plots=\"{}\"", r.plots.len())));
        }
        Err(e) => {
            let message = exit::message_of(&e);
            assert!(!message.contains('\n'), "multi-line error: {message:?}");
        }
    }
});
