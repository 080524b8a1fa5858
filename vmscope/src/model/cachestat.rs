//! Page-cache residency of given files (`record --cachestat PATH`): the
//! kernel's `cachestat(2)` (6.5 and later) over the whole file, at the
//! start and the end of the recording.
//!
//! Pure types; the syscall is made by `source::kernel::cachestat`.

use serde::{Deserialize, Serialize};

/// One `cachestat(2)` answer, in pages.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CachestatCounts {
    /// Pages of the file in the page cache.
    pub cached_pages: u64,
    /// Of those, dirty.
    pub dirty_pages: u64,
    /// Of those, under write-back.
    pub writeback_pages: u64,
    /// Pages evicted from the cache (the shadow entries the kernel keeps).
    pub evicted_pages: u64,
    /// Of those, evicted recently enough that reading them again would be
    /// a refault (the file's working set did not fit).
    pub recently_evicted_pages: u64,
}

/// One file's residency over the recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CachestatFile {
    /// As given on the command line.
    pub path: String,
    /// Its size at the end (at the start when it could not be read then).
    pub size_bytes: u64,
    pub start: Option<CachestatCounts>,
    pub end: Option<CachestatCounts>,
    /// Why `start` or `end` is null (no cachestat(2) before 6.5, the file
    /// gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl CachestatFile {
    /// One line for people.
    pub fn summary(&self) -> String {
        let (Some(start), Some(end)) = (self.start, self.end) else {
            return format!(
                "cachestat {}: {}",
                self.path,
                self.unavailable.as_deref().unwrap_or("unavailable")
            );
        };
        format!(
            "cachestat {}: {} of {} pages cached at the end ({} at the start); {} dirty, {} \
             under write-back; {} evicted, {} recently",
            self.path,
            end.cached_pages,
            self.size_bytes.div_ceil(rustix::param::page_size() as u64),
            start.cached_pages,
            end.dirty_pages,
            end.writeback_pages,
            end.evicted_pages,
            end.recently_evicted_pages
        )
    }

    /// Cached pages at the end over the file's pages.
    pub fn resident_share(&self, page_size: u64) -> Option<f64> {
        let pages = self.size_bytes.div_ceil(page_size.max(1));
        (pages > 0).then(|| self.end.map(|e| e.cached_pages as f64 / pages as f64))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_share_of_the_whole_file() {
        let mut f = CachestatFile {
            size_bytes: 10 * 4096 - 1,
            end: Some(CachestatCounts {
                cached_pages: 5,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(f.resident_share(4096), Some(0.5));
        f.end = None;
        assert_eq!(f.resident_share(4096), None);
        f.size_bytes = 0;
        assert_eq!(f.resident_share(4096), None);
    }
}
