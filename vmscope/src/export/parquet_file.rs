//! One [`FlatTable`] as a Parquet file: every column optional (null is
//! "not known", never 0), one row group, Snappy-compressed.

use std::sync::Arc;

use anyhow::Context as _;
use parquet::{
    basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical},
    data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type},
    file::{properties::WriterProperties, writer::SerializedFileWriter},
    schema::types::Type as SchemaType,
};

use crate::export::flat::{ColumnKind, FlatTable, Scalar, converted};

/// The Parquet field of a column of this kind.
fn field(name: &str, kind: ColumnKind) -> parquet::errors::Result<SchemaType> {
    let (physical, logical) = match kind {
        ColumnKind::Bool => (Physical::BOOLEAN, None),
        ColumnKind::Int => (Physical::INT64, Some(LogicalType::integer(64, true))),
        ColumnKind::UInt => (Physical::INT64, Some(LogicalType::integer(64, false))),
        ColumnKind::Float => (Physical::DOUBLE, None),
        ColumnKind::Text => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
        ColumnKind::Json => (Physical::BYTE_ARRAY, Some(LogicalType::Json)),
        ColumnKind::Time => (
            Physical::INT64,
            Some(LogicalType::timestamp(true, TimeUnit::NANOS)),
        ),
    };
    SchemaType::primitive_type_builder(name, physical)
        .with_repetition(Repetition::OPTIONAL)
        .with_logical_type(logical)
        .build()
}

/// Writes `table` to `out` as one Parquet file.
pub fn write(table: &FlatTable, out: impl std::io::Write + Send) -> anyhow::Result<()> {
    let columns: Vec<_> = table.columns().collect();
    let fields = columns
        .iter()
        .map(|(name, kind, _)| {
            field(name, *kind)
                .map(Arc::new)
                .with_context(|| format!("column {name}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let schema = SchemaType::group_type_builder("vmscope")
        .with_fields(fields)
        .build()?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("vmscope {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut file = SerializedFileWriter::new(out, Arc::new(schema), Arc::new(props))?;
    let mut group = file.next_row_group()?;
    let mut todo = columns.iter();
    while let Some(mut w) = group.next_column()? {
        let (name, kind, cells) = todo
            .next()
            .context("more Parquet columns than the table's")?;
        let cells: Vec<Scalar> = cells.iter().map(|c| converted(*kind, c)).collect();
        let defs: Vec<i16> = cells
            .iter()
            .map(|c| i16::from(*c != Scalar::Null))
            .collect();
        let written = match kind {
            ColumnKind::Bool => {
                let v: Vec<bool> = cells.iter().filter_map(as_bool).collect();
                w.typed::<BoolType>().write_batch(&v, Some(&defs), None)
            }
            ColumnKind::Int | ColumnKind::UInt | ColumnKind::Time => {
                let v: Vec<i64> = cells.iter().filter_map(as_i64).collect();
                w.typed::<Int64Type>().write_batch(&v, Some(&defs), None)
            }
            ColumnKind::Float => {
                let v: Vec<f64> = cells.iter().filter_map(as_f64).collect();
                w.typed::<DoubleType>().write_batch(&v, Some(&defs), None)
            }
            ColumnKind::Text | ColumnKind::Json => {
                let v: Vec<ByteArray> = cells.iter().filter_map(as_bytes).collect();
                w.typed::<ByteArrayType>()
                    .write_batch(&v, Some(&defs), None)
            }
        };
        written.with_context(|| format!("column {name}"))?;
        w.close().with_context(|| format!("column {name}"))?;
    }
    group.close()?;
    file.close()?;
    Ok(())
}

fn as_bool(c: &Scalar) -> Option<bool> {
    match c {
        Scalar::Bool(b) => Some(*b),
        _ => None,
    }
}

/// Unsigned values keep their bits: Parquet's UINT_64 is stored so.
fn as_i64(c: &Scalar) -> Option<i64> {
    match c {
        Scalar::Int(i) | Scalar::Time(i) => Some(*i),
        Scalar::UInt(u) => Some(i64::from_ne_bytes(u.to_ne_bytes())),
        _ => None,
    }
}

fn as_f64(c: &Scalar) -> Option<f64> {
    match c {
        Scalar::Float(f) => Some(*f),
        _ => None,
    }
}

fn as_bytes(c: &Scalar) -> Option<ByteArray> {
    match c {
        Scalar::Text(s) | Scalar::Json(s) => Some(ByteArray::from(s.as_str())),
        _ => None,
    }
}
