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

/// Has every thread allocate from the one main heap. The allocator's
/// default gives each thread that allocates its own arena, and what a
/// thread frees there (the start-up parses, the sampling thread's reads)
/// stays resident for the whole session: `serve` held 8.7 MB anonymous
/// with them, 4.2 MB with one heap ([`trim_heap`] returns all of it). The
/// few threads vmscope runs rarely allocate at once. Call before any thread
/// starts.
pub fn one_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameter; no thread runs.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

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
