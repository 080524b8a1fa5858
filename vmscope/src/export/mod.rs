//! `vmscope export RECORDING --parquet DIR`: a recording as Parquet files,
//! one table per level, for DuckDB, pandas and Polars. The directory
//! appears whole or not at all: it is filled under a temporary name
//! beside it and renamed at the end.

use std::path::Path;

use anyhow::Context as _;

use crate::{cli::ExportArgs, compare, document, exit, model::recording::Recording};

mod flat;
mod parquet_file;
mod tables;

#[cfg(test)]
mod tests;

/// The metadata file beside the tables: the recording without the parts
/// that are tables.
pub const META_FILE: &str = "recording.json";

pub fn run(args: &ExportArgs) -> anyhow::Result<u8> {
    let dir = &args.parquet;
    check_destination(dir)?;
    let text = compare::read_input(&args.file)?;
    if text.trim().is_empty() {
        return Err(compare::bad_input(format!(
            "{} is empty; give a recording made by vmscope record",
            args.file.display()
        )));
    }
    let rec = document::from_str(&text).map_err(|e| compare::not_a(&args.file, "recording", &e))?;
    let rows = write_parquet(&rec, dir)?;
    let summary: Vec<String> = rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
    eprintln!(
        "vmscope: wrote {} (rows: {})",
        dir.display(),
        summary.join(", ")
    );
    Ok(0)
}

fn destination_error(dir: &Path, why: &str) -> anyhow::Error {
    exit::failure(
        exit::FAILURE,
        format!("cannot write {}: {why}", dir.display()),
    )
}

/// Refuses, in one line, a destination that exists with files in it, is
/// not a directory, or whose parent is missing or not writable.
pub fn check_destination(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(destination_error(
                dir,
                "it is a symbolic link; remove it or choose another directory",
            ));
        }
        Ok(m) if !m.is_dir() => {
            return Err(destination_error(
                dir,
                "it exists and is not a directory; choose a new directory name",
            ));
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir)
                .map_err(|e| destination_error(dir, &format!("{e}; choose another directory")))?;
            if entries.next().is_some() {
                return Err(destination_error(
                    dir,
                    "it exists and is not empty; remove it or choose another directory",
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(destination_error(dir, &e.to_string())),
    }
    if dir.file_name().is_none() {
        return Err(destination_error(
            dir,
            "give a directory name that ends in a name",
        ));
    }
    let parent = parent_of(dir);
    if !parent.is_dir() {
        return Err(destination_error(
            dir,
            &format!(
                "directory {} does not exist; create it first",
                parent.display()
            ),
        ));
    }
    if rustix::fs::access(parent, rustix::fs::Access::WRITE_OK).is_err() {
        return Err(destination_error(
            dir,
            &format!(
                "directory {} is not writable; choose another place",
                parent.display()
            ),
        ));
    }
    Ok(())
}

fn parent_of(dir: &Path) -> &Path {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `rec` as Parquet tables and its metadata into `dir` (which must
/// pass [`check_destination`]): filled under a temporary name in the same
/// directory, then renamed, so no half-written directory is ever seen.
/// Returns each table's name and row count.
pub fn write_parquet(rec: &Recording, dir: &Path) -> anyhow::Result<Vec<(&'static str, usize)>> {
    use std::os::unix::fs::PermissionsExt as _;
    let set = tables::tables(rec)?;
    let name = dir.file_name().context("no directory name")?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let parent = parent_of(dir);
    let tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempdir_in(parent)
        .map_err(|e| {
            destination_error(
                dir,
                &format!(
                    "creating a temporary directory in {}: {e}",
                    parent.display()
                ),
            )
        })?;
    let owner = document::output_owner();
    let mut rows = Vec::new();
    let write =
        |file: &str,
         fill: &dyn Fn(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>| {
            let path = tmp.path().join(file);
            let f = std::fs::File::create(&path).with_context(|| format!("creating {file}"))?;
            let mut w = std::io::BufWriter::new(f);
            fill(&mut w).with_context(|| format!("writing {file}"))?;
            let f = w.into_inner().with_context(|| format!("writing {file}"))?;
            f.sync_all().with_context(|| format!("syncing {file}"))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::fchown(&f, Some(uid), Some(gid))
                    .with_context(|| format!("giving {file} to uid {uid} (SUDO_UID)"))?;
            }
            anyhow::Ok(())
        };
    for (table, t) in &set.tables {
        write(&format!("{table}.parquet"), &|w| parquet_file::write(t, w))?;
        rows.push((*table, t.rows()));
    }
    write(META_FILE, &|w| {
        serde_json::to_writer_pretty(&mut *w, &set.meta)?;
        std::io::Write::write_all(w, b"\n")?;
        Ok(())
    })?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))
        .context("setting the directory's permissions")?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(tmp.path(), Some(uid), Some(gid))
            .with_context(|| format!("giving {} to uid {uid} (SUDO_UID)", dir.display()))?;
    }
    // Renaming over an empty directory replaces it; one that gained files
    // meanwhile is refused, and the temporary one removed.
    std::fs::rename(tmp.path(), dir).map_err(|e| {
        destination_error(dir, &format!("{e}; remove it or choose another directory"))
    })?;
    let _ = tmp.keep();
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(rows)
}
