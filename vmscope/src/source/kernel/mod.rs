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

/// Has vmscope's threads allocate from two heaps, not one per thread. The
/// allocator's default gives each thread that allocates its own arena, and
/// what a thread frees there (the start-up parses, the sampling thread's
/// reads) stays resident for the whole session: `serve` held 8.7 MB
/// anonymous with them, 4.2 MB with one heap and 5.6 MB with two
/// ([`trim_heap`] returns the rest). Two, not one, because start-up parses
/// the kernel's BTF on two threads at once, and with one heap each waited
/// for the other's allocations: two heaps made the command start 14 ms
/// sooner (9 interleaved rounds, 0.153 s to 0.139 s to the end of loading).
/// Call before any thread starts.
pub fn few_heaps() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameter; no thread runs.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
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
