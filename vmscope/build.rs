//! Builds the eBPF programs (vmscope-ebpf) with the nightly toolchain and
//! bpf-linker, and leaves the object in OUT_DIR for `include_bytes_aligned!`.
//! `AYA_BUILD_SKIP=1` skips that step (for `cargo check`/clippy without
//! bpf-linker); the binary then refuses to load programs and says why.
use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").context("OUT_DIR")?);
    let skip =
        std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        // Leave an empty object so include_bytes! still compiles.
        std::fs::write(out_dir.join("vmscope"), []).context("writing stub eBPF object")?;
    }
    let cargo_metadata::Metadata { packages, .. } = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = packages
        .into_iter()
        .find(|p| p.name.as_str() == "vmscope-ebpf")
        .ok_or_else(|| anyhow!("vmscope-ebpf package not found in the workspace"))?;
    let root = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", ebpf.manifest_path))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: ebpf.name.as_str(),
            root_dir: root.as_str(),
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .context(
        "building the eBPF programs failed; run `cargo xtask bootstrap` to install \
         the nightly rust-src, LLVM and bpf-linker they need",
    )
}
