//! Tables of typed cells, flattened from JSON: the shape every Parquet
//! file `export` writes has before it is encoded. Pure.

use std::collections::HashMap;

use serde_json::Value;

/// One cell. `Null` is a figure the recording does not have (unavailable,
/// unknown or absent there), never a 0.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    /// A value kept as JSON text (an array, or a column of mixed kinds).
    Json(String),
    /// Nanoseconds since the Unix epoch, UTC.
    Time(i64),
}

impl Scalar {
    /// The cell for a JSON scalar; arrays and objects become JSON text.
    pub fn of(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Self::UInt(u),
                (None, Some(i), _) => Self::Int(i),
                (None, None, Some(f)) => Self::Float(f),
                (None, None, None) => Self::Json(n.to_string()),
            },
            Value::String(s) => Self::Text(s.clone()),
            Value::Array(_) | Value::Object(_) => Self::Json(v.to_string()),
        }
    }

    /// The same value as JSON text (for a column of mixed kinds).
    fn json_text(&self) -> Option<String> {
        Some(match self {
            Self::Null => return None,
            Self::Bool(b) => b.to_string(),
            Self::Int(i) => i.to_string(),
            Self::UInt(u) => u.to_string(),
            Self::Float(f) => Value::from(*f).to_string(),
            Self::Text(s) => Value::from(s.as_str()).to_string(),
            Self::Json(j) => j.clone(),
            Self::Time(t) => t.to_string(),
        })
    }
}

/// How a column is stored: the one kind all its cells (and its hint) fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    Bool,
    /// Signed 64-bit integers (some value is negative).
    Int,
    /// Unsigned 64-bit integers: counters, and a column with no value at
    /// all (the kind of every unavailable counter).
    UInt,
    Float,
    Text,
    Json,
    Time,
}

impl ColumnKind {
    fn of_cell(c: &Scalar) -> Option<Self> {
        Some(match c {
            Scalar::Null => return None,
            Scalar::Bool(_) => Self::Bool,
            Scalar::Int(_) => Self::Int,
            Scalar::UInt(_) => Self::UInt,
            Scalar::Float(_) => Self::Float,
            Scalar::Text(_) => Self::Text,
            Scalar::Json(_) => Self::Json,
            Scalar::Time(_) => Self::Time,
        })
    }

    /// The kind of `cells`, seeded with `hint` (the column's kind in a
    /// template row, for columns that are null throughout).
    pub fn infer(hint: Option<Self>, cells: &[Scalar]) -> Self {
        let mut kind = hint;
        let mut big = false;
        for c in cells {
            if let Scalar::UInt(u) = c {
                big |= i64::try_from(*u).is_err();
            }
            let Some(k) = Self::of_cell(c) else { continue };
            kind = Some(match kind {
                None => k,
                Some(have) => Self::unify(have, k),
            });
        }
        match kind {
            // A counter past i64::MAX beside a negative value: no integer
            // type holds both.
            Some(Self::Int) if big => Self::Json,
            Some(k) => k,
            None => Self::UInt,
        }
    }

    fn unify(a: Self, b: Self) -> Self {
        use ColumnKind::*;
        match (a, b) {
            _ if a == b => a,
            (Int, UInt) | (UInt, Int) => Int,
            (Float, Int | UInt) | (Int | UInt, Float) => Float,
            _ => Json,
        }
    }
}

/// The cells of a column of this kind, converted where the kind is wider
/// than a cell's own (an integer in a float column, text in a JSON one).
pub fn converted(kind: ColumnKind, c: &Scalar) -> Scalar {
    match (kind, c) {
        (_, Scalar::Null) => Scalar::Null,
        (ColumnKind::Float, Scalar::Int(i)) => Scalar::Float(*i as f64),
        (ColumnKind::Float, Scalar::UInt(u)) => Scalar::Float(*u as f64),
        (ColumnKind::Int, Scalar::UInt(u)) => Scalar::Int(i64::try_from(*u).unwrap_or(i64::MAX)),
        (ColumnKind::Json, c) if !matches!(c, Scalar::Json(_)) => {
            c.json_text().map_or(Scalar::Null, Scalar::Json)
        }
        (_, c) => c.clone(),
    }
}

/// A table built row by row: a row may bring new columns (earlier rows are
/// null there) and leave some out (null in that row).
#[derive(Clone, Debug, Default)]
pub struct FlatTable {
    names: Vec<String>,
    at: HashMap<String, usize>,
    columns: Vec<Vec<Scalar>>,
    hints: Vec<Option<ColumnKind>>,
    rows: usize,
}

impl FlatTable {
    pub fn new() -> Self {
        Self::default()
    }

    fn column(&mut self, name: &str) -> usize {
        if let Some(&i) = self.at.get(name) {
            return i;
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.at.insert(name.to_string(), i);
        self.columns.push(vec![Scalar::Null; self.rows]);
        self.hints.push(None);
        i
    }

    /// Declares columns (in this order) with the kinds of these cells
    /// (null cells declare the column without a kind), so that a table
    /// with no rows, or a column null in every row, is still typed.
    pub fn declare(&mut self, template: &[(String, Scalar)]) {
        for (name, cell) in template {
            let i = self.column(name);
            if let Some(k) = ColumnKind::of_cell(cell) {
                self.hints[i] = Some(k);
            }
        }
    }

    /// Adds a row. A name given twice in one row keeps its first value and
    /// puts the next under `NAME_2` (and so on).
    pub fn push(&mut self, cells: Vec<(String, Scalar)>) {
        let mut seen = std::collections::HashSet::new();
        for (mut name, cell) in cells {
            let base = name.clone();
            let mut n = 1;
            while !seen.insert(name.clone()) {
                n += 1;
                name = format!("{base}_{n}");
            }
            let i = self.column(&name);
            self.columns[i].push(cell);
        }
        self.rows += 1;
        for col in &mut self.columns {
            col.resize(self.rows, Scalar::Null);
        }
    }

    /// Sets the null cells of the columns `pick` names to 0, declaring
    /// those of `names` that no row brought: for counters the JSON leaves
    /// out when they are 0.
    pub fn zero_fill(&mut self, names: &[String], pick: impl Fn(&str) -> bool) {
        for n in names {
            let i = self.column(n);
            self.hints[i].get_or_insert(ColumnKind::UInt);
        }
        for (name, col) in self.names.iter().zip(&mut self.columns) {
            if pick(name) {
                for c in col.iter_mut().filter(|c| **c == Scalar::Null) {
                    *c = Scalar::UInt(0);
                }
            }
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Each column: its name, its kind and its cells.
    pub fn columns(&self) -> impl Iterator<Item = (&str, ColumnKind, &[Scalar])> {
        self.names
            .iter()
            .zip(&self.columns)
            .zip(&self.hints)
            .map(|((n, c), h)| (n.as_str(), ColumnKind::infer(*h, c), c.as_slice()))
    }
}

/// Flattens a JSON value into named cells: an object's members become
/// `PREFIX_KEY` (a member `total` takes the object's own name, and a
/// `by_class` object adds no name of its own, so `faults.user.total` is
/// `faults_user` and `faults.user.by_class.read_protection` is
/// `faults_user_read_protection`); an array is one cell of JSON text.
pub fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Scalar)>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let name = match (prefix, k.as_str()) {
                    ("", k) => k.to_string(),
                    (p, "total" | "by_class") => p.to_string(),
                    (p, k) => format!("{p}_{k}"),
                };
                flatten(&name, child, out);
            }
        }
        v => out.push((prefix.to_string(), Scalar::of(v))),
    }
}

/// The cells of one JSON object, flattened.
pub fn cells(v: &Value) -> Vec<(String, Scalar)> {
    let mut out = Vec::new();
    flatten("", v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parquet_cells_flatten_totals_to_their_parent_and_keep_nulls() {
        let v = serde_json::json!({
            "pid": 7,
            "faults": {"total": 5, "user": {"total": 4, "by_class": {"read": 4}}},
            "major_faults": null,
            "pids": [1, 2]
        });
        let got = cells(&v);
        let names: Vec<_> = got.iter().map(|(n, _)| n.as_str()).collect();
        // Members in key order, as serde_json keeps them.
        assert_eq!(
            names,
            [
                "faults",
                "faults_user_read",
                "faults_user",
                "major_faults",
                "pid",
                "pids"
            ]
        );
        assert_eq!(got[3].1, Scalar::Null);
        assert_eq!(got[5].1, Scalar::Json("[1,2]".into()));
    }

    #[test]
    fn parquet_column_kinds_follow_the_values_and_the_hint() {
        use ColumnKind as K;
        assert_eq!(K::infer(None, &[Scalar::UInt(1), Scalar::Null]), K::UInt);
        assert_eq!(K::infer(None, &[Scalar::UInt(1), Scalar::Int(-1)]), K::Int);
        assert_eq!(
            K::infer(None, &[Scalar::UInt(1), Scalar::Float(0.5)]),
            K::Float
        );
        assert_eq!(K::infer(Some(K::Text), &[Scalar::Null]), K::Text);
        assert_eq!(K::infer(None, &[Scalar::Null]), K::UInt);
        assert_eq!(
            K::infer(None, &[Scalar::UInt(1), Scalar::Text("a".into())]),
            K::Json
        );
        assert_eq!(
            K::infer(None, &[Scalar::UInt(u64::MAX), Scalar::Int(-1)]),
            K::Json
        );
    }

    #[test]
    fn parquet_rows_may_bring_and_leave_out_columns() {
        let mut t = FlatTable::new();
        t.push(vec![("a".into(), Scalar::UInt(1))]);
        t.push(vec![
            ("b".into(), Scalar::UInt(2)),
            ("b".into(), Scalar::UInt(3)),
        ]);
        let cols: Vec<_> = t
            .columns()
            .map(|(n, _, c)| (n.to_string(), c.to_vec()))
            .collect();
        assert_eq!(cols[0], ("a".into(), vec![Scalar::UInt(1), Scalar::Null]));
        assert_eq!(cols[1], ("b".into(), vec![Scalar::Null, Scalar::UInt(2)]));
        assert_eq!(cols[2], ("b_2".into(), vec![Scalar::Null, Scalar::UInt(3)]));
    }
}
