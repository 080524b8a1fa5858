//! What the running kernel offers: privileges, tracefs, BTF, the hook
//! catalogue.

pub mod btf;
pub mod cachestat;
pub mod caps;
pub mod cgroupfs;
pub mod errors;
pub mod format;
pub mod hooks;
pub mod kmsg;
pub mod limits;
pub mod privdrop;
pub mod system;
pub mod tracefs;

/// The kernel function the fentry, fexit and kprobe probes attach to: one
/// every kernel has, that returns (the verifier refuses fexit on a
/// `__noreturn` function such as `do_exit`, which says nothing about fexit
/// elsewhere).
pub const PROBE_FUNCTION: &str = "vfs_read";

/// Returns the allocator's free heap pages to the kernel: after start-up's
/// large parses are dropped, the allocator would otherwise keep them
/// resident for the whole session.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
