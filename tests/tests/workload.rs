//! Built-in workloads: `vmscope workload lat` prints every column with
//! plausible values and a final JSON line.
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
