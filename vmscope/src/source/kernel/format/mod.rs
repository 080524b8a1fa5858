//! Parser for tracefs event `format` files
//! (`/sys/kernel/tracing/events/<system>/<event>/format`).
//!
//! Tracepoint record layouts change between kernel versions and architectures.
//! Fields get added, renamed or moved, and `long` is 4 bytes on 32-bit kernels.
//! vmscope therefore reads field offsets from these files at load time instead
//! of hard-coding them. A format file looks like this:
//!
//! ```text
//! name: page_fault_user
//! ID: 190
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!
//!     field:unsigned long address;    offset:8;    size:8;    signed:0;
//!
//! print fmt: "address=%ps ...", ...
//! ```
//!
//! (The real file uses tabs where this example shows four spaces.)
//!
//! What the parser accepts:
//! - `name:` is required. `ID:` is optional.
//! - Each field line is `field:<type> <name>;` followed by `key:value;`
//!   attributes. `offset:` and `size:` are required. `signed:` is optional
//!   (very old kernels do not print it) and defaults to false. Unknown
//!   attributes are ignored. Old ftrace-internal events spell the prefix
//!   `field special:`, which is also accepted.
//! - Types can be several words or pointers (`struct mm_struct * mm`), fixed
//!   arrays (`char comm[16]`, or `char comm[TASK_COMM_LEN]` on kernels that
//!   printed the length symbolically), flexible arrays (`char buf[]`, the only
//!   fields allowed `size:0`), and dynamic strings and arrays (`__data_loc
//!   char[] name`; `__rel_loc` too).
//! - Blank lines and unknown lines are ignored, line ends may be CRLF, and
//!   everything from `print fmt:` to the end of the file is ignored.
//! - A file that is malformed anywhere else is rejected with a one-line
//!   [`FormatError`], and `parse` never panics. A misread offset would make the
//!   eBPF side read the wrong bytes, so doubtful input is an error, not a guess.
//!   This includes a field line it cannot parse, a number that does not fit in
//!   a `u32`, a zero size, an `offset + size` that overflows, and a duplicate
//!   field.
//!
//! Here: the parsed [`EventFormat`] and its [`Field`]s; the line parser is
//! in `parse`, the one-line errors in `errors`, the tests (against every
//! kernel's files in `testdata/formats/`) in `tests`.

mod errors;
mod parse;

pub use errors::{FieldError, FieldErrorKind, FormatError, FormatErrorKind};
use parse::parse_format;

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field name, e.g. `address` or `common_pid`.
    pub name: String,
    /// The C type as tracefs prints it, without any array suffix on the name.
    /// For example `unsigned long`, `struct mm_struct *`, `char` (for
    /// `char comm[16]`), or `__data_loc char[]`.
    pub c_type: String,
    /// Byte offset of the field in the raw record.
    pub offset: u32,
    /// Size in bytes. For arrays this is the whole array, for `__data_loc` it
    /// is the 4-byte offset/length word.
    pub size: u32,
    /// The `signed:` attribute. False when the kernel did not print it.
    pub signed: bool,
    /// `Some(n)` for a fixed array such as `char comm[16]`. When the length was
    /// printed symbolically (`[TASK_COMM_LEN]`), it is worked out from `size`
    /// and the element type. It is `Some(0)` when that is not possible and for
    /// flexible arrays (`buf[]`). `None` for anything that is not an array.
    pub array_len: Option<u32>,
    /// True for dynamic fields (`__data_loc` or `__rel_loc`). These hold an
    /// offset/length word, not the data itself.
    pub data_loc: bool,
}

impl Field {
    /// True for the `common_*` header fields every event has.
    #[must_use]
    pub fn is_common(&self) -> bool {
        self.name.starts_with("common_")
    }

    /// True for a plain scalar: not an array and not `__data_loc`.
    #[must_use]
    pub fn is_scalar(&self) -> bool {
        self.array_len.is_none() && !self.data_loc
    }

    /// One past the last byte of the field. Cannot overflow, because `parse`
    /// checked it.
    #[must_use]
    pub fn end(&self) -> u32 {
        self.offset.saturating_add(self.size)
    }
}

/// The values a format file's print format names symbolically for `field`
/// (`__print_symbolic(REC->field, {1, "skipped"}, ...)`), as (value, name)
/// pairs; empty when it prints the field otherwise. Never panics.
#[must_use]
pub fn print_symbols(text: &str, field: &str) -> Vec<(i64, String)> {
    let Some(fmt) = text.split_once("print fmt:").map(|(_, f)| f) else {
        return Vec::new();
    };
    let head = format!("__print_symbolic(REC->{field},");
    let Some(start) = fmt.find(&head) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = &fmt[start + head.len()..];
    // Each entry is `{value, "name"}`; the list ends at the closing paren.
    while let Some(open) = rest.find(['{', ')']) {
        if rest.as_bytes()[open] == b')' {
            break;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let entry = &rest[open + 1..open + close];
        if let Some((v, name)) = entry.split_once(',') {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => i64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            };
            if let Some(v) = parsed {
                out.push((v, name.trim().trim_matches('"').to_string()));
            }
        }
        rest = &rest[open + close + 1..];
    }
    out
}

/// A parsed tracefs event `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// The event name from the `name:` line, e.g. `page_fault_user`.
    pub name: String,
    /// The numeric event ID from the `ID:` line, if present.
    pub id: Option<u32>,
    /// All fields in file order, `common_*` header fields included.
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// Parses the text of a format file. Never panics.
    ///
    /// # Errors
    ///
    /// Returns a [`FormatError`] for malformed input (empty, binary,
    /// truncated, garbage), a file without a `name:` line or without fields,
    /// and for fields with bad, zero or overflowing offsets or sizes.
    pub fn parse(text: &str) -> Result<EventFormat, FormatError> {
        parse_format(text)
    }

    /// The field called `name`, if there is one.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The event's own fields, without the `common_*` header fields.
    pub fn event_fields(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| !f.is_common())
    }

    /// The field `name`, checked to be an integer (no array, no `__data_loc`)
    /// whose size is one of `sizes`. Use its `offset` to read it. A pointer
    /// counts as an integer.
    ///
    /// # Errors
    ///
    /// Returns a [`FieldError`] naming the event and the field when the field
    /// does not exist, is an array or a `__data_loc` field, or has another
    /// size.
    pub fn int_field(&self, name: &str, sizes: &[u32]) -> Result<&Field, FieldError> {
        let err = |kind| FieldError {
            event: self.name.clone(),
            field: name.to_owned(),
            kind,
        };
        let Some(field) = self.field(name) else {
            return Err(err(FieldErrorKind::NotFound {
                available: self.event_fields().map(|f| f.name.clone()).collect(),
            }));
        };
        if field.data_loc {
            return Err(err(FieldErrorKind::DataLoc {
                c_type: field.c_type.clone(),
            }));
        }
        if let Some(len) = field.array_len {
            return Err(err(FieldErrorKind::Array {
                c_type: field.c_type.clone(),
                len,
            }));
        }
        if !sizes.contains(&field.size) {
            return Err(err(FieldErrorKind::WrongSize {
                size: field.size,
                expected: sizes.to_vec(),
            }));
        }
        Ok(field)
    }
}

#[cfg(test)]
mod tests;
