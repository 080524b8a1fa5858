//! `vmscope workload NAME`: built-in workloads whose work is fixed, so
//! their runs compare. Each prints its own figures and a final JSON line.

pub mod lat;
pub mod lazyfree;
pub mod rmap;

use anyhow::Context as _;

use crate::cli::Workload;

/// An anonymous private read-write mapping, unmapped on drop.
pub struct AnonMap {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the mapping is plain memory; its users hand it to one thread at a
// time.
unsafe impl Send for AnonMap {}

impl AnonMap {
    pub fn new(len: usize) -> anyhow::Result<Self> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mapping {len} bytes"));
        }
        Ok(Self { ptr: p.cast(), len })
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

pub fn run(w: &Workload) -> anyhow::Result<u8> {
    match w {
        Workload::Lat(a) => lat::run(a),
        Workload::Lazyfree(a) => lazyfree::run(a),
        Workload::Rmap(a) => rmap::run(a),
    }
}
