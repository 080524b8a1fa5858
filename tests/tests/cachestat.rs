//! `record --cachestat FILE`: a file's page-cache residency at the start
//! and the end, against another of the kernel's books, `mincore(2)` on the
//! file mapped: a 64 MiB file dropped from the cache, then read whole by
//! the recorded command.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::{io::Write as _, os::fd::AsRawFd as _, path::Path, time::Duration};

use vmscope_tests::*;

const SIZE: usize = 64 << 20;

#[test]
fn residency_at_the_end_agrees_with_mincore() {
    const TEST: &str = "residency_at_the_end_agrees_with_mincore";
    if !root_or_skip(TEST) {
        return;
    }
    let path =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cachestat-{}", std::process::id()));
    let _gone = Gone(path.clone());
    {
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        for _ in 0..SIZE >> 20 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
        // SAFETY: advice on an open file.
        let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0);
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let cmd = format!("cat {} > /dev/null", path.display());
    let o = vmscope_within(
        &[
            "record",
            "-i",
            "250ms",
            "--cachestat",
            path_str(&path),
            "-o",
            path_str(&out),
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        Duration::from_secs(120),
    );
    ok(&o, "record --cachestat");
    let truth = resident_pages(&path, SIZE);
    let rec = read_json(&out);
    let f = &rec["cachestat"][0];
    let pages = (SIZE / 4096) as u64;
    let (start, end) = (
        u64_at(f, "/start/cached_pages"),
        u64_at(f, "/end/cached_pages"),
    );
    eprintln!("{TEST}: {start} cached at the start, {end} at the end; mincore {truth} of {pages}");
    assert_eq!(f["path"], path_str(&path));
    assert_eq!(u64_at(f, "/size_bytes"), SIZE as u64);
    assert!(
        start <= pages / 20,
        "the file was dropped: {start} cached at the start"
    );
    assert!(
        truth >= pages * 95 / 100,
        "cat read it all: mincore {truth} of {pages}"
    );
    assert_within_pct("cached at the end vs mincore", end, truth, 5.0);
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "cachestat {}: {end} of {pages} pages cached",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn a_path_that_is_not_a_file_or_a_block_device_is_refused_before_anything_runs() {
    const TEST: &str =
        "a_path_that_is_not_a_file_or_a_block_device_is_refused_before_anything_runs";
    if !root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    for (path, why) in [
        ("/nonexistent/file", "No such file"),
        ("/dev/null", "not a regular file or a block device"),
    ] {
        let o = vmscope(&[
            "record",
            "--cachestat",
            path,
            "-o",
            path_str(&out),
            "--",
            "true",
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{path}: {err}");
        assert_eq!(err.lines().count(), 1, "{path}: {err}");
        assert!(err.contains(&format!("--cachestat {path}: {why}")), "{err}");
        assert!(!out.exists(), "{path}: a recording was written");
    }
}

/// Removes the file when dropped.
struct Gone(std::path::PathBuf);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
