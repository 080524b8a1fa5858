//! One process's figures, as sampled ([`ProcSample`], cumulative) and over a
//! recording ([`ProcessTotal`]). Their scalar counters are declared once,
//! below, and both structs generated: a new per-process counter is a line
//! there, besides its probe, the source's copy from the map value and its
//! `catalogue::PROC_FIELDS` row (which `serve` exports and `top` reads
//! rates through; a new `top` column also needs its `ProcRow` field).

use serde::{Deserialize, Serialize};

use crate::model::{
    FaultTotals, ProcAvailability, fault_totals, probes::FaultSource, sample::FaultCounters,
};

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// `u64` for a counter every kernel has; `Option<u64>` (null when the
/// probe is missing) for one that needs a [`ProcAvailability`] flag.
macro_rules! total_type {
    (always) => { u64 };
    ($flag:ident) => { Option<u64> };
}

macro_rules! total_value {
    (always, $avail:ident, $v:expr) => {
        $v
    };
    ($flag:ident, $avail:ident, $v:expr) => {
        $avail.$flag.then_some($v)
    };
}

/// Declares both structs from one list of counters: each is
/// `name: availability`, its doc comment for the sample, and in braces its
/// doc comment for the total.
macro_rules! per_process_counters {
    ($(
        $(#[$sample_doc:meta])*
        $name:ident: $avail:ident { $(#[$total_doc:meta])* }
    ),* $(,)?) => {
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
            $(
                $(#[$total_doc])*
                pub $name: total_type!($avail),
            )*
        }

        impl ProcSample {
            /// Its last values as a total (per-process counters start at
            /// zero when the probes attach), null where `avail` says the
            /// kernel has no probe for a counter.
            pub fn total(&self, source: FaultSource, avail: ProcAvailability) -> ProcessTotal {
                ProcessTotal {
                    pid: self.pid,
                    comm: self.comm.clone(),
                    cgroup: self.cgroup,
                    faults: fault_totals(source, avail.gup_faults, Some(&self.faults)),
                    $($name: total_value!($avail, avail, self.$name),)*
                }
            }

            /// Adds the growth from `old` (nothing: a new process) to `new`
            /// of every counter: how a cgroup's counts are folded.
            pub fn add_growth(&mut self, new: &ProcSample, old: Option<&ProcSample>) {
                let zero = ProcSample::default();
                let old = old.unwrap_or(&zero);
                self.faults.add_growth(&new.faults, &old.faults);
                $(self.$name += new.$name.saturating_sub(old.$name);)*
            }
        }
    };
}

per_process_counters! {
    direct_reclaim_ns: always {},
    direct_reclaims: always {},
    memcg_reclaim_ns: always {},
    memcg_reclaims: always {},
    madvise_calls: always {},
    tlb_shootdowns: always {
        /// TLB shootdown IPIs this process sent.
    },
    major_faults: major_faults {
        /// Null when the major-fault probe is unavailable (see `unavailable`).
    },
    /// Pages of this process's memory swapped out, whoever ran reclaim.
    swap_out_pages: swap {
        /// Pages of this process swapped out, whoever ran reclaim; null when
        /// `kmem:rss_stat` is unavailable.
    },
    /// Pages this process faulted back in from swap.
    swap_in_pages: swap {
        /// Pages this process faulted back in from swap; null likewise.
    },
}
