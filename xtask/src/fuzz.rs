//! `cargo xtask fuzz`: runs the fuzz targets in vmscope/fuzz with cargo-fuzz
//! on the nightly toolchain, each for a fixed time.
//!
//! Each input gets at most [`INPUT_SECS`] seconds (libFuzzer's `-timeout`):
//! one that takes longer, such as a plot whose axis never ends, is a crash.
//!
//! Before a target runs, its corpus (vmscope/fuzz/corpus/<target>, not
//! tracked) is seeded with the inputs kept in the tree: the tracefs format
//! fixtures for `format_parser`; for `compare` and `report` the accepted
//! recordings kept for `recording_reader` and the lab's bench and compare
//! files in tests/fixtures; and for every target the inputs under
//! vmscope/tests/fuzz-regressions/<target>, which the `fuzz_regressions`
//! test also runs. A crash leaves its input in
//! vmscope/fuzz/artifacts/<target>; the summary says how to minimize it and
//! where to keep it.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bootstrap,
    process::{self, Exit, say},
    workspace::Workspace,
};

/// The fuzz targets, in the order `fuzz` without a target runs them.
pub const TARGETS: &[&str] = &["format_parser", "recording_reader", "compare", "report"];

/// The longest one input may take, in seconds.
pub const INPUT_SECS: u64 = 10;

/// Recordings, bench and compare files kept for the end-to-end tests, which
/// seed `compare` and `report`.
const DOCUMENT_FIXTURES: &str = "tests/fixtures";

/// How long each target runs unless `--time` says otherwise.
pub const DEFAULT_SECS: u64 = 120;

/// The cargo-fuzz crate, relative to the workspace root.
const FUZZ_DIR: &str = "vmscope/fuzz";

/// Build flags for `cargo fuzz run` and `tmin`: with debug assertions an
/// integer overflow panics, so the fuzzer finds it.
const FUZZ_FLAGS: &str = "--debug-assertions";

/// Inputs kept in the tree, one directory per target.
const REGRESSIONS_DIR: &str = "vmscope/tests/fuzz-regressions";

/// Tracefs format fixtures, which seed `format_parser`.
const FORMAT_FIXTURES: &str = "vmscope/src/source/kernel/testdata/formats";

/// Runs `target`, or every target, for `secs` seconds each. A target that
/// fails (a crash, or a build error) does not stop the others; the run fails
/// if any did.
pub fn fuzz(ws: &Workspace, secs: u64, target: Option<&str>) -> Result<()> {
    let targets: Vec<&str> = match target {
        Some(t) if TARGETS.contains(&t) => vec![t],
        Some(t) => bail!(
            "no fuzz target `{t}`; the targets are {}",
            TARGETS.join(", ")
        ),
        None => TARGETS.to_vec(),
    };
    ensure_cargo_fuzz(ws)?;
    let mut failed = Vec::new();
    let mut crashed = Vec::new();
    for target in targets {
        let corpus = seed_corpus(ws, target)?;
        let artifacts = ws.root.join(FUZZ_DIR).join("artifacts").join(target);
        let before = files_under(&artifacts)?;
        let mut cmd =
            bootstrap::nightly_cargo(ws, ["fuzz", "run", "--fuzz-dir", FUZZ_DIR, FUZZ_FLAGS]);
        cmd.arg(target)
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={secs}"))
            .arg(format!("-timeout={INPUT_SECS}"))
            // The targets parse text; they never load eBPF programs, so the
            // build needs no bpf-linker.
            .env("AYA_BUILD_SKIP", "1");
        say!("fuzz: {target} for {secs} s: {}", process::show(&cmd));
        let st = process::status(&mut cmd)?;
        if !st.success() {
            say!("fuzz: {target} failed ({})", process::describe(st));
            failed.push(target);
        }
        for input in files_under(&artifacts)? {
            if !before.contains(&input) {
                crashed.push((target, input));
            }
        }
    }
    for (target, input) in &crashed {
        let input = input.strip_prefix(&ws.root).unwrap_or(input);
        say!(
            "fuzz: {target} crashed on {}; minimize it with `AYA_BUILD_SKIP=1 cargo +nightly \
             fuzz tmin --fuzz-dir {FUZZ_DIR} {FUZZ_FLAGS} {target} {}` and keep the result as \
             {REGRESSIONS_DIR}/{target}/<short-name>, which the fuzz_regressions test runs",
            input.display(),
            input.display()
        );
    }
    if failed.is_empty() {
        say!("fuzz: no target crashed");
        return Ok(());
    }
    say!("fuzz: failed target(s): {}", failed.join(", "));
    Err(Exit(1).into())
}

/// Installs cargo-fuzz when `cargo fuzz` is not there.
fn ensure_cargo_fuzz(ws: &Workspace) -> Result<()> {
    if process::stdout(&mut ws.cargo(["fuzz", "--version"])).is_ok() {
        return Ok(());
    }
    let mut cmd = ws.cargo(["install", "cargo-fuzz", "--locked"]);
    say!(
        "fuzz: cargo-fuzz is not installed; installing it: {}",
        process::show(&cmd)
    );
    process::run(&mut cmd)
}

/// Creates the target's corpus directory and copies the kept inputs into it
/// (those already there are left alone). Returns the directory, relative to
/// the workspace root.
fn seed_corpus(ws: &Workspace, target: &str) -> Result<PathBuf> {
    let rel = Path::new(FUZZ_DIR).join("corpus").join(target);
    let corpus = ws.root.join(&rel);
    fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let mut seeds = files_under(&ws.root.join(REGRESSIONS_DIR).join(target))?;
    if target == "format_parser" {
        seeds.extend(
            files_under(&ws.root.join(FORMAT_FIXTURES))?
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "format")),
        );
    }
    if target == "compare" || target == "report" {
        seeds.extend(
            files_under(&ws.root.join(REGRESSIONS_DIR).join("recording_reader"))?
                .into_iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("ok-"))
                }),
        );
        seeds.extend(
            files_under(&ws.root.join(DOCUMENT_FIXTURES))?
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl")),
        );
    }
    for seed in seeds {
        let dest = corpus.join(seed_name(&ws.root, &seed));
        if !dest.exists() {
            fs::copy(&seed, &dest)
                .with_context(|| format!("copying {} to {}", seed.display(), dest.display()))?;
        }
    }
    Ok(rel)
}

/// A flat corpus file name for `seed`: its path under `root`, with
/// `/` replaced, so that fixtures of the same name from different kernels
/// stay apart.
fn seed_name(root: &Path, seed: &Path) -> String {
    let rel = seed.strip_prefix(root).unwrap_or(seed);
    format!("seed-{}", rel.to_string_lossy().replace('/', "-"))
}

/// The regular files under `dir`, recursively, sorted; none when `dir` does
/// not exist.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry
                .with_context(|| format!("reading {}", d.display()))?
                .path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_names_are_flat_and_distinct() {
        let root = Path::new("/w");
        let a = seed_name(
            root,
            Path::new("/w/vmscope/src/source/kernel/testdata/formats/5.15-x86_64/rss_stat.format"),
        );
        let b = seed_name(
            root,
            Path::new("/w/vmscope/src/source/kernel/testdata/formats/6.18-x86_64/rss_stat.format"),
        );
        assert!(!a.contains('/'));
        assert_ne!(a, b);
    }

    #[test]
    fn every_target_has_a_source_file() {
        let ws = Workspace::new().expect("workspace");
        for target in TARGETS {
            let src = ws
                .root
                .join(FUZZ_DIR)
                .join("fuzz_targets")
                .join(format!("{target}.rs"));
            assert!(src.is_file(), "{} is missing", src.display());
        }
    }
}
