//! One process's figures, as sampled ([`ProcSample`], cumulative) and over a
//! recording ([`ProcessTotal`]). Their scalar counters are declared once,
//! in `vmscope_common::proc_counters!` (beside the kernel side's map value,
//! `ProcStats`, which the same list declares), and generated here from that
//! list: both structs, the copy from the map value, and a typed id per
//! counter ([`ProcCounter`]) by which views name one. A new per-process
//! counter is a line in that list and its increment on the eBPF side, then,
//! to show it, a row in its catalogue family's `PROC_FIELDS` (which `serve`
//! exports and `top` reads rates through; its `column` gives it a column in
//! `top`'s tables).

use serde::{Deserialize, Serialize};
use vmscope_common::{
    FAULT_CLASSES, ProcStats,
    madvise::{GROUP_NAMES, GROUPS},
};

use crate::model::{FaultTotals, ProcAvailability, fault_totals, probes::FaultSource};

/// Cumulative page-fault counters.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct FaultCounters {
    /// By class, in the order of `Recording::fault_classes`.
    pub user: [u64; FAULT_CLASSES],
    pub kernel: [u64; FAULT_CLASSES],
    /// From the perf fallback, which has no classes.
    pub unclassified: u64,
    /// Faults the kernel accounted (`min_flt + maj_flt`) beyond those the
    /// exception path saw: taken through get_user_pages (MAP_POPULATE,
    /// mlock, MADV_POPULATE_*, remote access). Per process from the
    /// kernel's per-task books (`min_flt + maj_flt`, read by the
    /// `sched:sched_switch` probe; 0 when it is unavailable, which the
    /// recording says); system-wide from /proc/vmstat `pgfault`.
    #[serde(default)]
    pub gup: u64,
}

impl FaultCounters {
    /// Adds the growth from `old` to `new`, counter by counter.
    pub fn add_growth(&mut self, new: &Self, old: &Self) {
        for (a, (n, o)) in self.user.iter_mut().zip(new.user.iter().zip(&old.user)) {
            *a += n.saturating_sub(*o);
        }
        for (a, (n, o)) in self
            .kernel
            .iter_mut()
            .zip(new.kernel.iter().zip(&old.kernel))
        {
            *a += n.saturating_sub(*o);
        }
        self.unclassified += new.unclassified.saturating_sub(old.unclassified);
        self.gup += new.gup.saturating_sub(old.gup);
    }

    /// Every fault counted, whatever its class, source or path.
    pub fn total(&self) -> u64 {
        self.exception() + self.gup
    }

    /// The faults seen on the exception path (tracepoints or perf event).
    pub fn exception(&self) -> u64 {
        self.user.iter().sum::<u64>() + self.kernel.iter().sum::<u64>() + self.unclassified
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// madvise and process_madvise calls by behaviour group (see
/// `vmscope_common::madvise::group`): DONTNEED (and DONTNEED_LOCKED),
/// FREE, COLD, PAGEOUT, WILLNEED, POPULATE_READ/WRITE, HUGEPAGE (with
/// NOHUGEPAGE and COLLAPSE) and every other behaviour. Zero groups are
/// left out of the JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MadviseByBehavior {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dontneed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub free: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cold: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pageout: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub willneed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub populate: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hugepage: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other: u64,
}

impl MadviseByBehavior {
    /// From the kernel side's array, in `madvise::GROUP_NAMES` order.
    pub fn from_groups(g: [u64; GROUPS]) -> Self {
        let [
            dontneed,
            free,
            cold,
            pageout,
            willneed,
            populate,
            hugepage,
            other,
        ] = g;
        Self {
            dontneed,
            free,
            cold,
            pageout,
            willneed,
            populate,
            hugepage,
            other,
        }
    }

    /// The counts in `madvise::GROUP_NAMES` order.
    pub fn groups(&self) -> [u64; GROUPS] {
        [
            self.dontneed,
            self.free,
            self.cold,
            self.pageout,
            self.willneed,
            self.populate,
            self.hugepage,
            self.other,
        ]
    }

    /// (group name, count) for every group.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
        GROUP_NAMES.into_iter().zip(self.groups())
    }

    pub fn is_empty(&self) -> bool {
        self.groups().iter().all(|v| *v == 0)
    }

    /// Adds each group's growth from `old` to `new`.
    pub fn add_growth(&mut self, new: &Self, old: &Self) {
        let (mut sum, new, old) = (self.groups(), new.groups(), old.groups());
        for i in 0..GROUPS {
            sum[i] += new[i].saturating_sub(old[i]);
        }
        *self = Self::from_groups(sum);
    }
}

/// `u64` for a counter every kernel has; `Option<u64>` (null when a probe
/// is missing) for one that needs probes, named in brackets
/// (`model::probes::names`) and checked with [`ProcAvailability`].
macro_rules! total_type {
    (always) => { u64 };
    ([$($probe:ident),+]) => { Option<u64> };
}

macro_rules! total_value {
    (always, $avail:ident, $v:expr) => {
        $v
    };
    ([$($probe:ident),+], $avail:ident, $v:expr) => {
        $avail
            .has_all(&[$($crate::model::probes::names::$probe),+])
            .then_some($v)
    };
}

/// A total's value as an `Option` whatever its type.
macro_rules! total_option {
    (always, $v:expr) => {
        Some($v)
    };
    ([$($probe:ident),+], $v:expr) => {
        $v
    };
}

/// Copies a counter from the map value, unless it is tagged `derived`
/// (not a `ProcStats` field: the source computes it).
macro_rules! copy_counter {
    ($to:expr, $from:expr;) => {
        $to = $from
    };
    ($to:expr, $from:expr; derived $($rest:ident)*) => {};
    ($to:expr, $from:expr; $other:ident $($rest:ident)*) => {
        copy_counter!($to, $from; $($rest)*)
    };
}

/// A counter's value if it is tagged `event` (it counts events a process
/// took, as activity is ranked), else 0.
macro_rules! event_value {
    ($v:expr;) => {
        0
    };
    ($v:expr; event $($rest:ident)*) => {
        $v
    };
    ($v:expr; $other:ident $($rest:ident)*) => {
        event_value!($v; $($rest)*)
    };
}

/// Declares both structs from one list of counters: each is
/// `name: availability` (`always`, or the probes it needs in brackets), its tags (`, derived` when the source computes it
/// rather than copying the `ProcStats` field of that name; `, event` when
/// it counts events, which rank processes and cgroups by activity), its
/// doc comment for the sample, and in braces its doc comment for the total.
macro_rules! per_process_counters {
    ($(
        $(#[$sample_doc:meta])*
        $name:ident: $avail:tt $(, $tag:ident)* { $(#[$total_doc:meta])* }
    ),* $(,)?) => {
        /// A per-process counter, by name: a field of both [`ProcSample`] and
        /// [`ProcessTotal`] (the variants are the fields' names).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ProcCounter {
            $($name,)*
        }

        impl ProcCounter {
            /// Its value in a sample.
            pub fn get(self, p: &ProcSample) -> u64 {
                match self {
                    $(ProcCounter::$name => p.$name,)*
                }
            }

            /// Sets its value in a sample.
            pub fn set(self, p: &mut ProcSample, v: u64) {
                match self {
                    $(ProcCounter::$name => p.$name = v,)*
                }
            }

            /// Its value over a recording (`None`: its probe was missing).
            pub fn total(self, t: &ProcessTotal) -> Option<u64> {
                match self {
                    $(ProcCounter::$name => total_option!($avail, t.$name),)*
                }
            }
        }

        /// One process's cumulative counters. Zero scalar counters are left out of
        /// the JSON (an absent one is 0) to keep long recordings small.
        #[derive(
            Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
        )]
        pub struct ProcSample {
            pub pid: u32,
            pub comm: String,
            /// Its cgroup's id (see `cgroups`); absent when unknown.
            #[serde(default, skip_serializing_if = "is_zero")]
            pub cgroup: u64,
            pub faults: FaultCounters,
            /// `madvise_calls` by behaviour; absent when none.
            #[serde(default, skip_serializing_if = "MadviseByBehavior::is_empty")]
            pub madvise: MadviseByBehavior,
            $(
                $(#[$sample_doc])*
                #[serde(default, skip_serializing_if = "is_zero")]
                pub $name: u64,
            )*
        }

        /// One process over the whole recording.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        pub struct ProcessTotal {
            pub pid: u32,
            pub comm: String,
            /// Its cgroup's id when last seen (see `cgroups`); absent when unknown.
            #[serde(default, skip_serializing_if = "is_zero")]
            pub cgroup: u64,
            pub faults: FaultTotals,
            /// `madvise_calls` by behaviour; absent when none.
            #[serde(default, skip_serializing_if = "MadviseByBehavior::is_empty")]
            pub madvise: MadviseByBehavior,
            $(
                $(#[$total_doc])*
                pub $name: total_type!($avail),
            )*
        }

        impl ProcSample {
            /// Copies every counter the map value holds (all but the
            /// `derived` ones) from `st`.
            pub fn copy_counters(&mut self, st: &ProcStats) {
                $(copy_counter!(self.$name, st.$name; $($tag)*);)*
            }

            /// The events it took: its faults and every counter tagged
            /// `event` (how cgroups are ranked by activity).
            pub fn events(&self) -> u64 {
                self.faults.total() $(+ event_value!(self.$name; $($tag)*))*
            }

            /// Its last values as a total (per-process counters start at
            /// zero when the probes attach), null where `avail` says the
            /// kernel has no probe for a counter.
            pub fn total(&self, source: FaultSource, avail: &ProcAvailability) -> ProcessTotal {
                ProcessTotal {
                    pid: self.pid,
                    comm: self.comm.clone(),
                    cgroup: self.cgroup,
                    faults: fault_totals(source, avail.gup_faults(), Some(&self.faults)),
                    madvise: self.madvise.clone(),
                    $($name: total_value!($avail, avail, self.$name),)*
                }
            }

            /// Adds the growth from `old` (nothing: a new process) to `new`
            /// of every counter: how a cgroup's counts are folded.
            pub fn add_growth(&mut self, new: &ProcSample, old: Option<&ProcSample>) {
                let zero = ProcSample::default();
                let old = old.unwrap_or(&zero);
                self.faults.add_growth(&new.faults, &old.faults);
                self.madvise.add_growth(&new.madvise, &old.madvise);
                $(self.$name += new.$name.saturating_sub(old.$name);)*
            }
        }
    };
}

vmscope_common::proc_counters!(per_process_counters);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn madvise_groups_serialize_under_their_names() {
        let g = MadviseByBehavior::from_groups([1, 2, 3, 4, 5, 6, 7, 8]);
        let v = serde_json::to_value(&g).expect("serializes");
        for (name, n) in g.named() {
            assert_eq!(v[name].as_u64(), Some(n), "{name}: {v}");
        }
        let empty = serde_json::to_value(MadviseByBehavior::default()).expect("serializes");
        assert_eq!(empty, serde_json::json!({}));
    }

    #[test]
    fn madvise_growth_adds_per_group() {
        let mut sum = MadviseByBehavior::from_groups([10, 0, 0, 0, 0, 0, 0, 1]);
        let old = MadviseByBehavior::from_groups([5, 5, 0, 0, 0, 0, 0, 0]);
        let new = MadviseByBehavior::from_groups([7, 9, 0, 0, 0, 0, 0, 0]);
        sum.add_growth(&new, &old);
        assert_eq!(sum.groups(), [12, 4, 0, 0, 0, 0, 0, 1]);
    }
}
