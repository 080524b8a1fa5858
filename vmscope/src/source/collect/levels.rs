//! The system's books read with each sample and reported only when they
//! changed: the swap tiers and the THP counts by size.

use super::Collector;

impl Collector {
    /// The swap tiers when they changed since the last report.
    pub(super) fn swap_tiers(&mut self) -> Option<crate::model::tiers::TierSample> {
        let now = crate::source::kernel::system::swap_tiers();
        if self.tiers.as_ref() == Some(&now) {
            return None;
        }
        self.tiers = Some(now.clone());
        Some(now)
    }

    /// The THP counts by size when they changed since the last report.
    pub(super) fn thp_sizes(&mut self) -> Option<crate::model::hugepages::ThpSizes> {
        let now = crate::source::kernel::system::thp_sizes()?;
        if self.thp_sizes.as_ref() == Some(&now) {
            return None;
        }
        self.thp_sizes = Some(now.clone());
        Some(now)
    }
}
