//! Rebuild the programs when bpf-linker changes: cargo cannot see that the
//! link step depends on it.
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
