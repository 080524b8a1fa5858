//! Kernel and eBPF errors as one line each.

use std::fmt::Write as _;

/// Renders an error and its causes on one line.
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = summarize_verifier(&e.to_string());
    let mut src = e.source();
    while let Some(cause) = src {
        // A cause whose text the error already carries (aya repeats its
        // source's message) is not said twice.
        let c = summarize_verifier(&cause.to_string());
        if !s.contains(&c) {
            let _ = write!(s, ": {c}");
        }
        src = cause.source();
    }
    s
}

/// An error with a verifier log, on one line: the error, then the log line
/// that says why the program was refused. That is the last line before the
/// log's statistics, not its first line, which can be a harmless complaint
/// the verifier ignores (older kernels note that a main function's `void *`
/// context argument is "unsupported").
pub fn summarize_verifier(s: &str) -> String {
    let first = s.lines().next().unwrap_or_default();
    let Some((head, log)) = first
        .split_once("Verifier output:")
        .map(|(h, rest)| (h, std::iter::once(rest).chain(s.lines().skip(1))))
    else {
        return first.to_string();
    };
    let statistics = |l: &str| {
        l.starts_with("processed ")
            || l.starts_with("verification time")
            || l.starts_with("stack depth")
            || l.starts_with("-- END PROG LOAD LOG --")
    };
    let why = log
        .map(str::trim)
        .filter(|l| !l.is_empty() && !statistics(l))
        .last()
        .unwrap_or_default();
    if why.is_empty() {
        head.trim_end().to_string()
    } else {
        format!("{} verifier: {why}", head.trim_end())
    }
}
