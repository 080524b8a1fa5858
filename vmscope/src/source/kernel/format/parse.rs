//! The parser proper: the format file's lines, each `field:` declaration
//! (type, name, array length) and its `offset:`/`size:`/`signed:`
//! attributes.

use std::collections::HashSet;

use super::errors::{FormatError, FormatErrorKind};
use super::{EventFormat, Field};

/// Text after which the rest of the file is ignored.
pub(super) const PRINT_FMT: &str = "print fmt:";

/// The lines of the header and field part of the file: 1-based number and the
/// trimmed text. Stops at `print fmt:`. CRLF and other surrounding whitespace
/// are removed.
pub(super) fn body_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, line)| (i.saturating_add(1), line.trim()))
        .take_while(|(_, line)| !line.starts_with(PRINT_FMT))
}

pub(super) fn parse_format(text: &str) -> Result<EventFormat, FormatError> {
    // Pass 1: the header, so that every later error can name the event.
    let mut name: Option<String> = None;
    let mut id: Option<u32> = None;
    let mut seen_id = false;
    for (lineno, line) in body_lines(text) {
        let err = |event: &Option<String>, kind| FormatError {
            event: event.clone(),
            line: Some(lineno),
            kind,
        };
        if let Some(value) = line.strip_prefix("name:") {
            if name.is_some() {
                return Err(err(&name, FormatErrorKind::DuplicateHeader { key: "name" }));
            }
            let value = value.trim();
            if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(err(
                    &None,
                    FormatErrorKind::BadName {
                        found: value.to_owned(),
                    },
                ));
            }
            name = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("ID:") {
            if seen_id {
                return Err(err(&name, FormatErrorKind::DuplicateHeader { key: "ID" }));
            }
            seen_id = true;
            let value = value.trim();
            match parse_u32(value) {
                Some(v) => id = Some(v),
                None => {
                    return Err(err(
                        &name,
                        FormatErrorKind::BadId {
                            found: value.to_owned(),
                        },
                    ));
                }
            }
        }
    }
    let Some(name) = name else {
        return Err(FormatError {
            event: None,
            line: None,
            kind: FormatErrorKind::MissingName,
        });
    };

    // Pass 2: the fields.
    let mut fields: Vec<Field> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (lineno, line) in body_lines(text) {
        let Some(rest) = line
            .strip_prefix("field:")
            .or_else(|| line.strip_prefix("field special:"))
        else {
            continue;
        };
        let field = parse_field(rest).map_err(|kind| FormatError {
            event: Some(name.clone()),
            line: Some(lineno),
            kind,
        })?;
        if !seen.insert(field.name.clone()) {
            return Err(FormatError {
                event: Some(name),
                line: Some(lineno),
                kind: FormatErrorKind::DuplicateField { field: field.name },
            });
        }
        fields.push(field);
    }
    if fields.is_empty() {
        return Err(FormatError {
            event: Some(name),
            line: None,
            kind: FormatErrorKind::NoFields,
        });
    }
    Ok(EventFormat { name, id, fields })
}

/// Strict decimal `u32`: ASCII digits only (no sign, no spaces), no overflow.
pub(super) fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// How the array length of a declaration was written.
pub(super) enum ArrayLen {
    /// Not an array.
    None,
    /// `[16]`
    Fixed(u32),
    /// `[]`: a flexible array member.
    Flexible,
    /// `[TASK_COMM_LEN]`: a symbolic length.
    Symbolic,
}

/// Parses what follows `field:` on a field line:
/// `<type> <name>;\toffset:N;\tsize:N;\tsigned:N;`.
pub(super) fn parse_field(rest: &str) -> Result<Field, FormatErrorKind> {
    let mut parts = rest.split(';');
    let decl = parts.next().unwrap_or_default().trim();
    let (c_type, name, array) = parse_decl(decl)?;
    let attrs = parse_attributes(&name, parts)?;

    let Some(offset) = attrs.offset else {
        return Err(FormatErrorKind::MissingAttribute {
            field: name,
            attribute: "offset",
        });
    };
    let Some(size) = attrs.size else {
        return Err(FormatErrorKind::MissingAttribute {
            field: name,
            attribute: "size",
        });
    };
    let flexible = matches!(array, ArrayLen::Flexible | ArrayLen::Fixed(0));
    if size == 0 && !flexible {
        return Err(FormatErrorKind::ZeroSize { field: name });
    }
    if offset.checked_add(size).is_none() {
        return Err(FormatErrorKind::OffsetOverflow {
            field: name,
            offset,
            size,
        });
    }
    let data_loc = is_dynamic(&c_type);
    let array_len = array_len(&array, &c_type, size);
    Ok(Field {
        name,
        c_type,
        offset,
        size,
        signed: attrs.signed.unwrap_or(false),
        array_len,
        data_loc,
    })
}

/// A field line's `key:value` attributes, each at most once.
#[derive(Default)]
pub(super) struct Attributes {
    pub(super) offset: Option<u32>,
    pub(super) size: Option<u32>,
    pub(super) signed: Option<bool>,
}

/// Reads the attributes of field `name` from the `;`-separated parts
/// after its declaration.
pub(super) fn parse_attributes<'a>(
    name: &str,
    parts: impl Iterator<Item = &'a str>,
) -> Result<Attributes, FormatErrorKind> {
    let mut attrs = Attributes::default();
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let Some((key, value)) = part.split_once(':') else {
            return Err(FormatErrorKind::BadAttribute {
                field: name.to_owned(),
                attribute: String::new(),
                found: part.to_owned(),
            });
        };
        let (key, value) = (key.trim(), value.trim());
        let bad = || FormatErrorKind::BadAttribute {
            field: name.to_owned(),
            attribute: key.to_owned(),
            found: value.to_owned(),
        };
        let duplicate = || FormatErrorKind::DuplicateAttribute {
            field: name.to_owned(),
            attribute: key.to_owned(),
        };
        match key {
            "offset" | "size" => {
                let slot = if key == "offset" {
                    &mut attrs.offset
                } else {
                    &mut attrs.size
                };
                if slot.is_some() {
                    return Err(duplicate());
                }
                *slot = Some(parse_u32(value).ok_or_else(bad)?);
            }
            "signed" => {
                if attrs.signed.is_some() {
                    return Err(duplicate());
                }
                attrs.signed = Some(match value {
                    "0" => false,
                    "1" => true,
                    _ => return Err(bad()),
                });
            }
            // Attributes a future kernel might add do not matter here.
            _ => {}
        }
    }
    Ok(attrs)
}

/// The element count a field reports: 0 for a flexible array, and for a
/// symbolic length what the size implies (0 when it cannot be told).
pub(super) fn array_len(array: &ArrayLen, c_type: &str, size: u32) -> Option<u32> {
    match *array {
        ArrayLen::None => None,
        ArrayLen::Fixed(n) => Some(n),
        ArrayLen::Flexible => Some(0),
        ArrayLen::Symbolic => Some(
            element_size(c_type)
                .filter(|&elem| size.is_multiple_of(elem))
                .map_or(0, |elem| size / elem),
        ),
    }
}

/// Splits a declaration such as `unsigned long address`, `char comm[16]`,
/// `struct mm_struct * mm` or `__data_loc char[] parent_comm` into
/// (type, name, array length).
pub(super) fn parse_decl(decl: &str) -> Result<(String, String, ArrayLen), FormatErrorKind> {
    let malformed = || FormatErrorKind::MalformedField {
        found: decl.to_owned(),
    };
    let (head, array) = match decl.strip_suffix(']') {
        Some(without) => {
            let open = without.rfind('[').ok_or_else(malformed)?;
            let len_text = without
                .get(open.saturating_add(1)..)
                .unwrap_or_default()
                .trim();
            let head = without.get(..open).unwrap_or_default().trim_end();
            let array = if len_text.is_empty() {
                ArrayLen::Flexible
            } else if let Some(n) = parse_u32(len_text) {
                ArrayLen::Fixed(n)
            } else if is_identifier(len_text) {
                ArrayLen::Symbolic
            } else {
                return Err(malformed());
            };
            (head, array)
        }
        None => (decl, ArrayLen::None),
    };
    let split = head
        .rfind(|c: char| c.is_whitespace() || c == '*')
        .ok_or_else(malformed)?;
    // Split after the whitespace or '*', so that `char *p` keeps the star with
    // the type. Both are single-byte characters, so `split + 1` is a char
    // boundary.
    let name = head.get(split.saturating_add(1)..).unwrap_or_default();
    let c_type = head
        .get(..split.saturating_add(1))
        .unwrap_or_default()
        .trim();
    if !is_identifier(name) || c_type.is_empty() || c_type.chars().any(char::is_control) {
        return Err(malformed());
    }
    Ok((c_type.to_owned(), name.to_owned(), array))
}

/// `[A-Za-z_][A-Za-z0-9_]*`
pub(super) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `__data_loc` (offset from record start) and `__rel_loc` (offset from the
/// field) fields hold a 32-bit offset/length word, not the value itself.
pub(super) fn is_dynamic(c_type: &str) -> bool {
    let first = c_type.split_whitespace().next().unwrap_or_default();
    first == "__data_loc" || first == "__rel_loc"
}

/// Size of one element of a fixed-width C type, for arrays whose length was
/// printed symbolically. `None` when the size depends on the architecture
/// (`long`, pointers) or the type is unknown.
pub(super) fn element_size(c_type: &str) -> Option<u32> {
    let words: Vec<&str> = c_type
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "signed" | "unsigned"))
        .collect();
    match words.as_slice() {
        ["char" | "u8" | "s8" | "__u8" | "__s8" | "bool" | "_Bool" | "uint8_t" | "int8_t"] => {
            Some(1)
        }
        ["short" | "u16" | "s16" | "__u16" | "__s16" | "uint16_t" | "int16_t"]
        | ["short", "int"] => Some(2),
        // `[]`: a plain `unsigned` or `signed` is an int.
        [] | ["int" | "u32" | "s32" | "__u32" | "__s32" | "uint32_t" | "int32_t" | "pid_t"] => {
            Some(4)
        }
        ["u64" | "s64" | "__u64" | "__s64" | "uint64_t" | "int64_t"]
        | ["long", "long"]
        | ["long", "long", "int"] => Some(8),
        _ => None,
    }
}
