//! Figures in their units, compactly, as every view prints them.

pub fn fmt_ns(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.1}s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}us", n as f64 / 1e3),
        n => format!("{n}ns"),
    }
}

/// A value in its unit, compactly.
pub fn fmt_value(v: f64, unit: &str) -> String {
    let num = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{v:.0}")
        } else if v.abs() >= 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.3}")
        }
    };
    if v == 0.0 {
        return "0".into();
    }
    match unit {
        "s" if v.abs() < 1.0 => format!("{:.2} ms", v * 1e3),
        "s" => format!("{v:.3} s"),
        "ms" => format!("{v:.2} ms"),
        "%" => format!("{v:.1}%"),
        "µs" => fmt_value(v * 1e3, "ns"),
        "ns" if v.abs() >= 1e9 => format!("{:.2} s", v / 1e9),
        "ns" if v.abs() >= 1e6 => format!("{:.2} ms", v / 1e6),
        "ns" if v.abs() >= 1e3 => format!("{:.1} µs", v / 1e3),
        "ns" => format!("{} ns", num(v)),
        "bytes" if v.abs() >= 1024.0 * 1024.0 => format!("{:.1} MiB", v / 1024.0 / 1024.0),
        "bytes" if v.abs() >= 1024.0 => format!("{:.1} KiB", v / 1024.0),
        "bytes" => format!("{} B", num(v)),
        _ => num(v),
    }
}
