//! Why a format file or a field was refused: [`FormatError`] (the file,
//! with its line) and [`FieldError`] (a field a probe needs), each said
//! in one line.

use std::error::Error;
use std::fmt;

/// Why a format file was rejected. See [`FormatError::kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatErrorKind {
    /// The file has no `name:` line (this covers empty and garbage input).
    MissingName,
    /// The `name:` value is empty or has whitespace or control characters.
    BadName { found: String },
    /// The `ID:` value is not a `u32`.
    BadId { found: String },
    /// A `name:` or `ID:` line appears twice.
    DuplicateHeader { key: &'static str },
    /// The file has a name but no `field:` lines.
    NoFields,
    /// A `field:` line whose declaration is not `<type> <name>`.
    MalformedField { found: String },
    /// A field line without a required attribute (`offset` or `size`).
    MissingAttribute {
        field: String,
        attribute: &'static str,
    },
    /// An attribute whose value is not a valid number, or (with an empty
    /// `attribute`) a piece of a field line that is not `key:value`.
    BadAttribute {
        field: String,
        attribute: String,
        found: String,
    },
    /// The same attribute appears twice on one field line.
    DuplicateAttribute { field: String, attribute: String },
    /// `size:0` on a field that is not a flexible array.
    ZeroSize { field: String },
    /// `offset + size` does not fit in a `u32`.
    OffsetOverflow {
        field: String,
        offset: u32,
        size: u32,
    },
    /// Two fields with the same name.
    DuplicateField { field: String },
}

/// A format file that could not be parsed. Its `Display` is one line naming
/// the event (when known), the line number and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub(super) event: Option<String>,
    pub(super) line: Option<usize>,
    pub(super) kind: FormatErrorKind,
}

impl FormatError {
    /// The event name, if the file's `name:` line could be read.
    pub fn event(&self) -> Option<&str> {
        self.event.as_deref()
    }

    /// 1-based line number of the offending line, when there is one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What went wrong.
    pub fn kind(&self) -> &FormatErrorKind {
        &self.kind
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.event {
            Some(event) => write!(f, "event {}: ", clip(event))?,
            None => f.write_str("event format file: ")?,
        }
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        match &self.kind {
            FormatErrorKind::MissingName => f.write_str("no `name:` line (not a format file?)"),
            FormatErrorKind::BadName { found } => write!(f, "bad event name {}", quote(found)),
            FormatErrorKind::BadId { found } => write!(f, "bad ID {}", quote(found)),
            FormatErrorKind::DuplicateHeader { key } => write!(f, "duplicate `{key}:` line"),
            FormatErrorKind::NoFields => f.write_str("no `field:` lines"),
            FormatErrorKind::MalformedField { found } => {
                write!(f, "malformed field declaration {}", quote(found))
            }
            FormatErrorKind::MissingAttribute { field, attribute } => {
                write!(f, "field {}: missing `{attribute}:`", clip(field))
            }
            FormatErrorKind::BadAttribute {
                field,
                attribute,
                found,
            } if attribute.is_empty() => write!(
                f,
                "field {}: unexpected text {} (expected `key:value`)",
                clip(field),
                quote(found)
            ),
            FormatErrorKind::BadAttribute {
                field,
                attribute,
                found,
            } => write!(
                f,
                "field {}: bad `{}` value {}",
                clip(field),
                clip(attribute),
                quote(found)
            ),
            FormatErrorKind::DuplicateAttribute { field, attribute } => {
                write!(f, "field {}: duplicate `{}:`", clip(field), clip(attribute))
            }
            FormatErrorKind::ZeroSize { field } => {
                write!(
                    f,
                    "field {}: size 0 on a field that is not an array",
                    clip(field)
                )
            }
            FormatErrorKind::OffsetOverflow {
                field,
                offset,
                size,
            } => write!(
                f,
                "field {}: offset {offset} + size {size} overflows u32",
                clip(field)
            ),
            FormatErrorKind::DuplicateField { field } => {
                write!(f, "field {} appears twice", clip(field))
            }
        }
    }
}

impl Error for FormatError {}

/// Why [`EventFormat::int_field`] refused a field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// No field has that name. `available` lists the event's non-common
    /// fields.
    NotFound { available: Vec<String> },
    /// The field is a fixed array (`char comm[16]`), not an integer.
    Array { c_type: String, len: u32 },
    /// The field is a `__data_loc` dynamic field, not an integer.
    DataLoc { c_type: String },
    /// The field is an integer of a size the caller does not accept.
    WrongSize { size: u32, expected: Vec<u32> },
}

/// A required field is missing or has an unexpected shape. Its `Display` is
/// one line naming the event and the field, e.g.
/// `event rss_stat: field size has size 4, expected one of [8]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub(super) event: String,
    pub(super) field: String,
    pub(super) kind: FieldErrorKind,
}

impl FieldError {
    /// The event whose format was searched.
    pub fn event(&self) -> &str {
        &self.event
    }

    /// The field that was asked for.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What was wrong with it.
    pub fn kind(&self) -> &FieldErrorKind {
        &self.kind
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event {}: field {} ",
            clip(&self.event),
            clip(&self.field)
        )?;
        match &self.kind {
            FieldErrorKind::NotFound { available } => {
                f.write_str("not found (fields: ")?;
                if available.is_empty() {
                    f.write_str("none")?;
                }
                for (i, name) in available.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(&clip(name))?;
                }
                f.write_str(")")
            }
            FieldErrorKind::Array { c_type, len } => write!(
                f,
                "is an array ({}[{len}]), expected an integer",
                clip(c_type)
            ),
            FieldErrorKind::DataLoc { c_type } => write!(
                f,
                "is a dynamic field ({}), expected an integer",
                clip(c_type)
            ),
            FieldErrorKind::WrongSize { size, expected } => {
                write!(f, "has size {size}, expected one of {expected:?}")
            }
        }
    }
}

impl Error for FieldError {}

/// Longest piece of input text quoted in an error message, in characters.
pub(super) const MAX_QUOTED: usize = 60;

/// Input-derived text for an error message. Control characters and newlines
/// are escaped so the message stays on one line, and the text is cut to
/// `MAX_QUOTED` characters.
pub(super) fn clip(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX_QUOTED {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Like [`clip`], in double quotes.
pub(super) fn quote(s: &str) -> String {
    format!("\"{}\"", clip(s))
}
