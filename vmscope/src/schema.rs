//! The published JSON Schemas (`vmscope/schema/`): one per document vmscope
//! writes, generated from the types that write it, and `vmscope schema`.

use std::io::Write as _;

use anyhow::Context as _;

use crate::cli::SchemaArgs;

/// A document with a published schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    /// A whole recording (`record`, `--format json`).
    Recording,
    /// One `record --format jsonl` line.
    JsonlLine,
    /// A `bench` file.
    Bench,
    /// The `compare --format json` object.
    Compare,
}

impl Document {
    pub const ALL: [Self; 4] = [Self::Recording, Self::JsonlLine, Self::Bench, Self::Compare];

    /// The document `vmscope schema` prints for these flags.
    pub fn of(args: &SchemaArgs) -> Self {
        if args.jsonl {
            Self::JsonlLine
        } else if args.bench {
            Self::Bench
        } else if args.compare {
            Self::Compare
        } else {
            Self::Recording
        }
    }

    /// Its file in `vmscope/schema/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Recording => "recording.schema.json",
            Self::JsonlLine => "jsonl-line.schema.json",
            Self::Bench => "bench.schema.json",
            Self::Compare => "compare.schema.json",
        }
    }

    /// The `vmscope schema` flag that prints it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Recording => "",
            Self::JsonlLine => " --jsonl",
            Self::Bench => " --bench",
            Self::Compare => " --compare",
        }
    }

    /// The schema, generated from the current types.
    pub fn schema(self) -> serde_json::Value {
        match self {
            Self::Recording => crate::document::recording_schema(),
            Self::JsonlLine => crate::document::line_schema(),
            Self::Bench => crate::model::bench::bench_schema(),
            Self::Compare => crate::compare::compare_schema(),
        }
    }
}

/// `vmscope schema`.
pub fn print(args: &SchemaArgs) -> anyhow::Result<u8> {
    let s = Document::of(args).schema();
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &s)
        .and_then(|()| writeln!(out).map_err(serde_json::Error::io))
        .context("writing the schema to stdout")?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, path::PathBuf};

    use super::*;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema")
    }

    #[test]
    fn published_schemas_are_current() {
        for d in Document::ALL {
            let path = dir().join(d.file_name());
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let published: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
            assert!(
                published == d.schema(),
                "vmscope/schema/{0} is stale; regenerate it with \
                 `vmscope schema{1} > vmscope/schema/{0}`",
                d.file_name(),
                d.flag(),
            );
        }
    }

    #[test]
    fn every_published_file_is_generated() {
        let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
            .expect("vmscope/schema")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        let generated: BTreeSet<String> = Document::ALL
            .iter()
            .map(|d| d.file_name().to_owned())
            .collect();
        assert_eq!(
            on_disk, generated,
            "a file in vmscope/schema/ no type generates"
        );
    }

    #[test]
    fn the_flags_pick_each_document() {
        let args = |jsonl, bench, compare| SchemaArgs {
            jsonl,
            bench,
            compare,
        };
        assert_eq!(
            Document::of(&args(false, false, false)),
            Document::Recording
        );
        assert_eq!(Document::of(&args(true, false, false)), Document::JsonlLine);
        assert_eq!(Document::of(&args(false, true, false)), Document::Bench);
        assert_eq!(Document::of(&args(false, false, true)), Document::Compare);
    }

    #[test]
    fn documents_are_told_apart_by_their_kind() {
        let kind = |d: Document| d.schema()["properties"]["kind"]["const"].clone();
        assert_eq!(kind(Document::Bench), crate::model::bench::BENCH_KIND);
        assert_eq!(kind(Document::Compare), crate::compare::COMPARE_KIND);
    }
}
