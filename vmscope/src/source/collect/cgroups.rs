//! The cgroups a sample lists: names kept current from the kernel's
//! reports of cgroups made and removed, each listed cgroup's books, and
//! its page-cache removals from the eBPF map.

use std::{collections::HashMap, time::Instant};

use vmscope_common::{CacheRemovals, CgroupEvent, cgroup_event};

use super::{CGROUP_MKDIR, CGROUP_RMDIR, Collector, WALK_REPORTED, WALK_UNREPORTED};
use crate::{
    model::{cgroup::CgroupSample, process::ProcSample},
    source::{kernel::cgroupfs, loader::Loaded},
};

impl Collector {
    /// Takes in the cgroups created and removed since the last read (a
    /// walk of the hierarchy stands in, less often, where the kernel does
    /// not report them or some reports were lost), and returns those that
    /// samples listed and are now gone. The limit watcher forgets the
    /// removed ones.
    pub(super) fn cgroup_upkeep(&mut self, probes: &mut Loaded, lost: u64) -> Vec<u64> {
        let Some(names) = self.names.as_mut() else {
            return Vec::new();
        };
        let reported = crate::model::probes::probe_usable(&probes.probes, CGROUP_MKDIR)
            && crate::model::probes::probe_usable(&probes.probes, CGROUP_RMDIR);
        if let Some(ring) = probes.cgroup_events.as_mut() {
            while let Some(item) = ring.next() {
                if item.len() < std::mem::size_of::<CgroupEvent>() {
                    continue;
                }
                // SAFETY: a whole record; `CgroupEvent` is plain integers
                // and bytes, any bit pattern valid, read unaligned.
                let e = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<CgroupEvent>()) };
                match e.kind {
                    cgroup_event::CREATED if e.len > 0 => {
                        let len = (e.len as usize).min(e.path.len());
                        names.created(e.id, String::from_utf8_lossy(&e.path[..len]).into_owned());
                    }
                    cgroup_event::REMOVED => names.removed(e.id),
                    _ => {}
                }
            }
        }
        let missed = !reported || lost != self.cgroup_events_lost;
        self.cgroup_events_lost = lost;
        names.refresh(if missed {
            WALK_UNREPORTED
        } else {
            WALK_REPORTED
        });
        for (id, path) in names.take_removed() {
            self.limits.forget(&path);
            // Its count was last reported in the sample that listed it.
            let _ = probes.cache_removals.remove(&id);
            self.cache_removed.remove(&id);
        }
        let mut gone: Vec<u64> = self
            .listed
            .iter()
            .filter(|(id, since)| names.gone_since(**id, **since))
            .map(|(&id, _)| id)
            .collect();
        gone.sort_unstable();
        for id in &gone {
            self.listed.remove(id);
        }
        gone
    }

    /// Each memory cgroup's page-cache removals, read whole, and the ids
    /// samples listed before whose count grew since the last read; `None`
    /// when the hook is not attached. Past half the map's room, the
    /// entries of cgroups no sample listed (which none reports, such as
    /// removed cgroups whose pages the kernel still holds) are deleted, so
    /// that the cgroups listed keep finding room.
    pub(super) fn cache_removals(
        &mut self,
        probes: &mut Loaded,
    ) -> Option<(HashMap<u64, CacheRemovals>, Vec<u64>)> {
        if !crate::model::probes::probe_usable(
            &probes.probes,
            crate::model::probes::names::PAGE_CACHE_REMOVE,
        ) {
            return None;
        }
        let now: HashMap<u64, CacheRemovals> = probes
            .cache_removals
            .iter()
            .filter_map(Result::ok)
            .collect();
        let grew = now
            .iter()
            .filter(|(id, v)| self.cache_removed.get(id) != Some(v))
            .map(|(id, _)| *id)
            .filter(|id| self.listed.contains_key(id))
            .collect();
        let room = vmscope_common::CACHE_CGROUPS as usize;
        for id in unreported(now.keys(), room, |id| self.listed.contains_key(id)) {
            let _ = probes.cache_removals.remove(&id);
        }
        self.cache_removed.clone_from(&now);
        Some((now, grew))
    }

    /// The cgroups of `procs` (those that changed), and those listed before
    /// whose page-cache removals grew, with their books; one already gone
    /// is added to `gone`.
    pub(super) fn cgroups(
        &mut self,
        procs: &[ProcSample],
        removed: Option<&(HashMap<u64, CacheRemovals>, Vec<u64>)>,
        gone: &mut Vec<u64>,
    ) -> Vec<CgroupSample> {
        let Some(names) = self.names.as_mut() else {
            return Vec::new();
        };
        let grew = removed.iter().flat_map(|(_, grew)| grew);
        let ids: std::collections::BTreeSet<u64> = procs
            .iter()
            .map(|p| p.cgroup)
            .filter(|c| *c != 0)
            .chain(grew.copied())
            .collect();
        let now = Instant::now();
        ids.into_iter()
            .map(|id| {
                let path = names.path(id);
                if !self.listed.contains_key(&id) && !gone.contains(&id) {
                    if names.gone_since(id, now) {
                        gone.push(id);
                    } else {
                        self.listed.insert(id, now);
                    }
                }
                let books = path
                    .as_deref()
                    .and_then(|p| cgroupfs::books(names.hierarchy(), p));
                let container_name = path
                    .as_deref()
                    .and_then(crate::model::identity::Identity::from_path)
                    .and_then(|w| {
                        self.containers
                            .name(w.runtime.as_deref(), w.container.as_deref()?)
                    });
                let page_cache_removed = removed.map(|(counts, _)| {
                    let c = counts.get(&id).copied().unwrap_or_default();
                    crate::model::cgroup::CacheRemovals {
                        evicted_pages: c.evicted,
                        dropped_pages: c.dropped,
                    }
                });
                CgroupSample {
                    id,
                    path,
                    books,
                    container_name,
                    page_cache_removed,
                }
            })
            .collect()
    }

    /// The name of the container `w` is, from its runtime's state.
    pub(super) fn container_name(
        &mut self,
        w: &crate::model::identity::Identity,
    ) -> Option<String> {
        let id = w.container.as_deref()?;
        self.containers.name(w.runtime.as_deref(), id)
    }
}

/// The per-cgroup removal counts to delete from a map of `room` entries
/// holding `ids`: once it is past half full, those of cgroups no sample
/// listed.
fn unreported<'a>(
    ids: impl ExactSizeIterator<Item = &'a u64>,
    room: usize,
    listed: impl Fn(&u64) -> bool,
) -> Vec<u64> {
    if ids.len() <= room / 2 {
        return Vec::new();
    }
    ids.filter(|id| !listed(id)).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::unreported;

    /// Up to half full nothing goes; past it, the cgroups never listed go
    /// and the listed ones stay.
    #[test]
    fn past_half_the_room_the_unlisted_cgroups_counts_go() {
        let listed = |id: &u64| id.is_multiple_of(2);
        let ids: Vec<u64> = (1..=5).collect();
        assert!(unreported(ids.iter(), 10, listed).is_empty());
        let mut gone = unreported(ids.iter(), 8, listed);
        gone.sort_unstable();
        assert_eq!(gone, [1, 3, 5]);
    }
}
