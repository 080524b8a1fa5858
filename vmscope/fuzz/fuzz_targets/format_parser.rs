//! Tracefs event `format` files are read from the running kernel at load time;
//! `EventFormat::parse` must reject anything malformed with an error and never
//! panic. The input bytes are used only when they are valid UTF-8, as the
//! loader reads the files as strings and rejects other bytes before parsing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vmscope::source::kernel::format::EventFormat;

/// Size sets the loader asks `int_field` for: exact sizes, either word size,
/// none at all, and an absurd one.
const SIZE_SETS: &[&[u32]] = &[&[], &[1], &[2], &[4], &[8], &[4, 8], &[0, u32::MAX]];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let format = match EventFormat::parse(text) {
        Ok(format) => format,
        Err(err) => {
            // The error message is shown to users: building it must not panic
            // either, and it stays on one line.
            let message = err.to_string();
            assert!(!message.contains('\n'), "multi-line error: {message:?}");
            return;
        }
    };
    for field in &format.fields {
        // `end` is documented not to overflow for a parsed field.
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
    // A name no field has.
    if let Err(err) = format.int_field("", &[8]) {
        let _ = err.to_string();
    }
    let own = format.event_fields().count();
    assert!(own <= format.fields.len());
    assert!(format.event_fields().all(|f| !f.is_common()));
});
