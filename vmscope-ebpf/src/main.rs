//! vmscope's eBPF programs. Each entry point is a thin wrapper around a
//! function in the module of its hook family; hot paths aggregate into maps
//! and never send per-event records to user space.
//!
//! Everything is compiled only for the bpf target; on the host (for
//! `cargo clippy --workspace`) this crate is an empty program. xtask lints
//! the real thing with `clippy --target bpfel-unknown-none`.
#![cfg_attr(target_arch = "bpf", no_std, no_main, feature(core_intrinsics))]
#![cfg_attr(
    target_arch = "bpf",
    allow(
        internal_features,
        reason = "atomic_xadd is the only atomic add the bpf target offers"
    )
)]

#[cfg(target_arch = "bpf")]
mod account;
#[cfg(target_arch = "bpf")]
mod cgroup;
#[cfg(target_arch = "bpf")]
mod compaction;
#[cfg(target_arch = "bpf")]
mod entry;
#[cfg(target_arch = "bpf")]
mod faults;
#[cfg(target_arch = "bpf")]
mod faulttime;
#[cfg(target_arch = "bpf")]
mod filter;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod mmaplock;
#[cfg(target_arch = "bpf")]
mod oom;
#[cfg(target_arch = "bpf")]
mod pagecache;
#[cfg(target_arch = "bpf")]
mod probes;
#[cfg(target_arch = "bpf")]
mod reclaim;
#[cfg(target_arch = "bpf")]
mod sample;
#[cfg(target_arch = "bpf")]
mod swap;
#[cfg(target_arch = "bpf")]
mod syscalls;
#[cfg(target_arch = "bpf")]
mod thp;
#[cfg(target_arch = "bpf")]
mod timing;
#[cfg(target_arch = "bpf")]
mod tlb;
#[cfg(target_arch = "bpf")]
mod writeback;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

#[cfg(not(target_arch = "bpf"))]
fn main() {}
