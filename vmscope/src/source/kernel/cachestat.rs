//! `cachestat(2)`: a file's page-cache residency, from the kernel (6.5+).

use std::os::fd::AsRawFd as _;

use crate::model::cachestat::CachestatCounts;

/// The syscall's number (one number on every architecture: it is newer
/// than the unified table).
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct Range {
    off: u64,
    /// 0: to the end of the file.
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Stat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The whole file's residency; an error says why (ENOSYS: the kernel is
/// older than 6.5).
pub fn cachestat(file: &std::fs::File) -> Result<CachestatCounts, String> {
    let range = Range { off: 0, len: 0 };
    let mut st = Stat::default();
    // SAFETY: both structs are laid out as the kernel's and outlive the
    // call; flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &raw const range,
            &raw mut st,
            0u32,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::ENOSYS) {
            "this kernel has no cachestat(2) (6.5+)".to_string()
        } else {
            format!("cachestat(2): {e}")
        });
    }
    Ok(CachestatCounts {
        cached_pages: st.nr_cache,
        dirty_pages: st.nr_dirty,
        writeback_pages: st.nr_writeback,
        evicted_pages: st.nr_evicted,
        recently_evicted_pages: st.nr_recently_evicted,
    })
}

/// A file's size, or a block device's (whose metadata says 0).
fn size(f: &std::fs::File) -> u64 {
    use std::io::Seek as _;
    match f.metadata() {
        Ok(m) if m.is_file() => m.len(),
        _ => {
            let mut f = f;
            f.seek(std::io::SeekFrom::End(0)).unwrap_or(0)
        }
    }
}

/// The files given to `record --cachestat`, open from the start, with
/// their first reading.
pub struct Watch {
    files: Vec<(String, std::fs::File, Result<CachestatCounts, String>)>,
}

impl Watch {
    /// Opens every path (a path that cannot be opened as a regular file or
    /// a block device, whose cache is the device's, is an error naming it)
    /// and reads each once.
    pub fn start(paths: &[std::path::PathBuf]) -> Result<Watch, String> {
        let mut files = Vec::new();
        for p in paths {
            let shown = p.display().to_string();
            let f = std::fs::File::open(p).map_err(|e| format!("--cachestat {shown}: {e}"))?;
            let meta = f
                .metadata()
                .map_err(|e| format!("--cachestat {shown}: {e}"))?;
            use std::os::unix::fs::FileTypeExt as _;
            if !meta.is_file() && !meta.file_type().is_block_device() {
                return Err(format!(
                    "--cachestat {shown}: not a regular file or a block device"
                ));
            }
            let first = cachestat(&f);
            files.push((shown, f, first));
        }
        Ok(Watch { files })
    }

    /// Reads each file again: its residency over the run.
    pub fn finish(self) -> Vec<crate::model::cachestat::CachestatFile> {
        self.files
            .into_iter()
            .map(|(path, f, start)| {
                let end = cachestat(&f);
                let unavailable = start.as_ref().err().or(end.as_ref().err()).cloned();
                crate::model::cachestat::CachestatFile {
                    path,
                    size_bytes: size(&f),
                    start: start.ok(),
                    end: end.ok(),
                    unavailable,
                }
            })
            .collect()
    }
}
