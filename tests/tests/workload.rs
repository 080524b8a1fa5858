//! Built-in workloads: `vmscope workload lat` prints every column with
//! plausible values and a final JSON line; `vmscope workload hotset` keeps
//! the hot set it says, changes it from stdin and stops on a signal.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use vmscope_tests::*;

#[test]
fn lat_prints_every_column_with_plausible_values() {
    let o = vmscope(&["workload", "lat", "--iterations", "200"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = out.lines().nth(1).unwrap();
    for col in [
        "0K Create",
        "0K Delete",
        "1K Create",
        "1K Delete",
        "4K Create",
        "4K Delete",
        "Mmap",
        "Prot Fault",
        "Page Fault",
    ] {
        assert!(header.contains(col), "{col} missing: {out}");
    }
    let json: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(json["workload"], "lat");
    let lat = json["latency"].as_object().unwrap();
    assert_eq!(lat.len(), 9, "{lat:?}");
    for (k, v) in lat {
        let us = v.as_f64().unwrap();
        assert!(us > 0.0 && us < 100_000.0, "{k} = {us} us");
    }
    let pf = lat["page_fault_us"].as_f64().unwrap();
    assert!(pf > 0.1 && pf < 1000.0, "page fault {pf} us");
    let prot = lat["prot_fault_us"].as_f64().unwrap();
    assert!(prot > 0.1 && prot < 1000.0, "protection fault {prot} us");
}

#[test]
fn lat_rejects_bad_sizes_with_one_line() {
    let o = vmscope(&["workload", "lat", "--iterations", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Reads /proc/PID/smaps_rollup's `KEY:` in bytes.
fn rollup_bytes(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text}"));
    kb * 1024
}

/// Kills `pid` after `limit` unless `done` is set first, so that a test
/// blocked reading a child's output fails rather than hangs.
fn watchdog(pid: u32, limit: std::time::Duration) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = std::sync::Arc::clone(&done);
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if d.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: signals the child this test started (not yet reaped: the
        // test waits for it only after setting `done`).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    });
    done
}

const MIB: u64 = 1 << 20;

/// The hot set is what it says: all of --size resident, the ready line's
/// hot set, a `hot 32M` line on stdin in force after a `hot` event, and a
/// final line with passes; the pages referenced within a period are the
/// hot set (plus the program's own few).
#[test]
fn hotset_keeps_its_hot_set_and_changes_it_from_stdin() {
    use std::io::{BufRead as _, Write as _};
    let mut child = std::process::Command::new(vmscope_bin())
        .args(["workload", "hotset", "--size", "64M", "--hot", "16M"])
        .args(["--seconds", "3"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = watchdog(pid, std::time::Duration::from_secs(60));
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> serde_json::Value {
        serde_json::from_str(&lines.next().expect("a line").unwrap()).unwrap()
    };
    let ready = next();
    assert_eq!(ready["event"], "ready", "{ready}");
    assert_eq!(ready["pid"], pid);
    assert_eq!(ready["hot_bytes"], 16 * MIB, "{ready}");
    assert_eq!(ready["size_bytes"], 64 * MIB, "{ready}");
    assert_eq!(ready["chunk_bytes"], 2 * MIB, "{ready}");
    let rss = rollup_bytes(pid, "Rss");
    assert!(rss >= 64 * MIB, "Rss {rss} while running");

    // The ground truth: referenced bits cleared, then within a few periods
    // the hot set's pages are referenced again and the cold ones are not.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "1").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let referenced = rollup_bytes(pid, "Referenced");
    assert!(
        (16 * MIB..=24 * MIB).contains(&referenced),
        "Referenced {referenced} for a 16 MiB hot set"
    );

    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hot 32M\n").unwrap();
    stdin.flush().unwrap();
    let hot = next();
    assert_eq!(hot["event"], "hot", "{hot}");
    assert_eq!(hot["hot_bytes"], 32 * MIB, "{hot}");
    assert!(hot["at_s"].as_f64().unwrap() > 0.0, "{hot}");
    drop(stdin);
    let last = next();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(last["workload"], "hotset", "{last}");
    assert_eq!(last["hot_bytes"], 32 * MIB, "{last}");
    assert_eq!(last["size_bytes"], 64 * MIB, "{last}");
    assert!(last["passes"].as_u64().unwrap() > 0, "{last}");
    assert!(last["overruns"].as_u64().is_some(), "{last}");
    let secs = last["seconds"].as_f64().unwrap();
    assert!((3.0..10.0).contains(&secs), "{last}");
}

/// SIGTERM stops it cleanly with its final line; a bad stdin line is one
/// error line and the run goes on.
#[test]
fn hotset_stops_on_sigterm_and_survives_bad_lines() {
    use std::io::{BufRead as _, Read as _, Write as _};
    let mut child = std::process::Command::new(vmscope_bin())
        .args(["workload", "hotset", "--size", "16M", "--hot", "3M"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = watchdog(pid, std::time::Duration::from_secs(60));
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> serde_json::Value {
        serde_json::from_str(&lines.next().expect("a line").unwrap()).unwrap()
    };
    let ready = next();
    // 3 MiB rounds up to two 2 MiB chunks.
    assert_eq!(ready["hot_bytes"], 4 * MIB, "{ready}");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"warm 1M\nhot 1G\nhot 8M\n").unwrap();
    stdin.flush().unwrap();
    let hot = next();
    assert_eq!(hot["hot_bytes"], 8 * MIB, "{hot}");
    // SAFETY: signals the child this test started and has not reaped.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let last = next();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(last["workload"], "hotset", "{last}");
    assert_eq!(last["ended_by"], "SIGTERM", "{last}");
    assert_eq!(last["hot_bytes"], 8 * MIB, "{last}");
    let bad: Vec<&str> = err.lines().filter(|l| l.contains("ignoring")).collect();
    assert_eq!(bad.len(), 2, "{err}");
    assert!(
        bad[0].contains("warm 1M") && bad[0].contains("hot SIZE"),
        "{err}"
    );
    assert!(
        bad[1].contains("hot 1G") && bad[1].contains("--size"),
        "{err}"
    );
}

#[test]
fn hotset_rejects_a_hot_set_larger_than_its_size_with_one_line() {
    let o = vmscope(&["workload", "hotset", "--size", "64M", "--hot", "128M"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--hot"), "{err}");
    assert!(o.stdout.is_empty());
}
