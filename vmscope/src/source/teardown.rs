//! Detaching without making the user wait. Releasing the perf event of a
//! classic tracepoint waits for an RCU grace period (the kernel's
//! `tracepoint_synchronize_unregister`, under a global mutex, so one event
//! after another): about 2 s for vmscope's two dozen syscall and vmscan
//! events, every time `record`, `top` or `serve` ends.
//!
//! `release` hands that wait to a short-lived child process. The child
//! inherits every descriptor, closes all but the eBPF and perf ones (so it
//! holds no pipe, terminal, socket or file of ours), and waits until this
//! process has dropped its own copies; its exit then drops the last
//! references, and the kernel waits there. Our copies close at once, since
//! they are not the last. The probes stay attached for those ~2 s, counting
//! into maps that nobody reads.

use std::os::fd::RawFd;

/// Drops `held` (the loaded programs and their maps) without waiting for
/// the kernel to detach them. Falls back to a plain drop when the child
/// cannot be made.
pub fn release<T>(held: T) {
    let Some(keep) = kernel_object_fds() else {
        drop(held);
        return;
    };
    let mut fds = [0 as RawFd; 2];
    // SAFETY: a plain pipe2 call into a two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        drop(held);
        return;
    }
    let [read_end, write_end] = fds;
    let close: Vec<RawFd> = open_fds()
        .into_iter()
        .filter(|fd| *fd != read_end && !keep.contains(fd))
        .collect();
    // SAFETY: the child only makes async-signal-safe calls (close, read,
    // _exit) on memory allocated before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            for &fd in &close {
                libc::close(fd);
            }
            let mut b = 0u8;
            // Returns 0 (end of file) once the parent has closed the write
            // end, which it does after dropping its copies.
            while libc::read(read_end, (&raw mut b).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            libc::_exit(0);
        }
    }
    drop(held);
    // SAFETY: our own descriptors, closed once.
    unsafe {
        libc::close(read_end);
        libc::close(write_end);
    }
    if pid < 0 {
        log::debug!("detaching in the background: fork failed; detached in place");
    }
}

/// This process's open descriptors.
fn open_fds() -> Vec<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The descriptors of eBPF programs, maps and links and of perf events
/// (anonymous inodes), or `None` when /proc cannot tell.
fn kernel_object_fds() -> Option<Vec<RawFd>> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(
        dir.filter_map(|e| {
            let e = e.ok()?;
            let fd: RawFd = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            let t = target.to_string_lossy();
            (t.starts_with("anon_inode:bpf") || t.starts_with("anon_inode:[perf_event]"))
                .then_some(fd)
        })
        .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_value_is_dropped_in_this_process() {
        struct Flag<'a>(&'a std::cell::Cell<bool>);
        impl Drop for Flag<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let dropped = std::cell::Cell::new(false);
        release(Flag(&dropped));
        assert!(dropped.get());
    }
}
